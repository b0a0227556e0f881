"""Quotas count what was evaluated, pools and qrels have owners: the probing a participant or
another organiser tried in issue 36, each refused."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import update
from typer.testing import CliRunner

from evalstore.cli import app
from evalstore.db.models import Submission
from evalstore.db.session import unit_of_work
from evalstore.errors import AccessDenied, InvalidParameterError, LimitExceeded
from evalstore.services import access, pools, store, tasks
from evalstore.services.orchestration import work_on
from tests.http.conftest import PASSWORD, SAMPLE, World, as_principal, client_for, run_text
from tests.http.test_hostile_daily_cap import _refusal
from tests.http.test_pages import csrf_of, sign_in

pytestmark = pytest.mark.both_databases


def test_a_withdrawn_evaluated_run_keeps_its_quota_slot(world: World) -> None:
    tasks.create_task(world.engine, "capped", qrels_name="sample", max_runs_per_team=2, owner="owner")
    world.submit("capped", "probe-1")
    tasks.withdraw_run(world.engine, as_principal(world.engine, "red"), "probe-1")
    world.submit("capped", "probe-2", evaluate=False)
    with pytest.raises(
        LimitExceeded,
        match=r"^Team 'red' has used its 2 runs for task 'capped' \(evaluated runs count, and withdrawn "
        r"ones whose scores the team could read; failed, cancelled and other withdrawn ones do not\).$",
    ):
        world.submit("capped", "probe-3")
    # a run withdrawn before its evaluation finished gives its slot back
    tasks.withdraw_run(world.engine, as_principal(world.engine, "red"), "probe-2")
    world.submit("capped", "probe-4")


def test_on_a_hidden_task_a_withdrawn_run_gives_its_slot_back_until_the_release(world: World) -> None:
    """No score of a hidden task's run is shown before its release: no submit-read-withdraw loop
    to guard against, so withdrawing frees the slot; after the release it keeps it again."""
    tasks.create_task(world.engine, "sealed", qrels_name="sample", max_runs_per_team=1, owner="owner", hidden=True)
    red = as_principal(world.engine, "red")
    world.submit("sealed", "sealed-1")
    assert tasks.quota_used(world.engine, red, "sealed") == 1
    assert not tasks.withdrawal_keeps_slot(world.engine, red, "sealed-1")
    tasks.withdraw_run(world.engine, red, "sealed-1")
    assert tasks.quota_used(world.engine, red, "sealed") == 0
    world.submit("sealed", "sealed-2")  # the slot, back

    with client_for(world.engine) as client:
        sign_in(client, "red")
        page = client.get("/tasks/sealed/submit")
        assert page.status_code == 200
        assert (
            '<small class="muted" id="quota-rule">Withdrawing a run gives its slot back: no score is shown before the '
            "release. Failed and cancelled runs take no slot.</small>"
        ) in page.text
        asked = client.post("/runs/sealed-2/withdraw", data={"csrf": csrf_of(page.text), "task": "sealed"})
        assert asked.status_code == 200 and "<li>Its place in team red&#39;s quota is free again.</li>" in asked.text

        tasks.release_task(world.engine, "sealed")
        assert tasks.withdrawal_keeps_slot(world.engine, red, "sealed-2")
        page = client.get("/tasks/sealed/submit")
        assert (
            '<small class="muted" id="quota-rule">Withdrawing a run gives its slot back, unless it was evaluated (its '
            "scores could be read). Failed and cancelled runs take no slot.</small>"
        ) in page.text
        tasks.withdraw_run(world.engine, red, "sealed-2")
    assert tasks.quota_used(world.engine, red, "sealed") == 1  # its scores were shown: it keeps its slot


def test_a_pooled_run_cannot_be_withdrawn(world: World, client: TestClient) -> None:
    response = client.delete("/api/v1/runs/red-open", headers=world.headers("red"))
    assert response.status_code == 409
    assert response.json()["error"] == (
        "Run 'red-open' is in the judging pool(s) pool; a pooled run cannot be "
        "withdrawn (the pool's judgments and review rest on it). Ask the task's "
        "organiser."
    )
    assert client.get("/pools/pool/review", headers=world.headers("owner")).status_code == 200


def test_another_organiser_cannot_reach_a_pool(world: World, client: TestClient) -> None:
    review = client.get("/pools/pool/review", headers=world.headers("organiser"))
    assert review.status_code == 404 and "No pool named &#39;pool&#39; of yours." in review.text
    assign = client.post("/api/v1/pools/pool/assessors", json={"user": "assessor"}, headers=world.headers("organiser"))
    assert (assign.status_code, assign.json()) == (404, {"error": "No pool named 'pool' of yours."})
    # a pool of runs no task holds is the admins'
    path = world.tmp / "loose.txt"
    path.write_text(run_text(tag="loose"))
    store.register_run(world.engine, path, name="loose")
    pools.build_pool(world.engine, name="loose-pool", run_names=["loose"], depth=5)
    assert client.get("/pools/loose-pool/review", headers=world.headers("owner")).status_code == 404
    assert client.get("/pools/loose-pool/review", headers=world.headers("admin")).status_code == 200


def test_an_organiser_cannot_claim_unclaimed_qrels(world: World, client: TestClient) -> None:
    store.import_qrels(world.engine, SAMPLE / "qrels.test", name="unclaimed")
    with pytest.raises(
        AccessDenied,
        match=r"^Qrels 'unclaimed' belong to no task yet; an admin creates the first "
        r"task over them, naming its organiser\.$",
    ):
        tasks.create_task(world.engine, "grab", qrels_name="unclaimed", by=as_principal(world.engine, "organiser"))
    response = client.get("/api/v1/qrels/unclaimed/export", headers=world.headers("organiser"))
    assert response.status_code == 404
    tasks.create_task(
        world.engine, "given", qrels_name="unclaimed", owner="organiser", by=as_principal(world.engine, "admin")
    )
    assert client.get("/api/v1/qrels/unclaimed/export", headers=world.headers("organiser")).status_code == 200


def test_probing_a_visible_task_runs_out_of_slots(world: World) -> None:
    """The issue's attack: submit, read, withdraw, again; with a quota of 3 it stops at 3."""
    tasks.create_task(world.engine, "probed", qrels_name="sample", max_runs_per_team=3, owner="owner")
    red = as_principal(world.engine, "red")
    done = 0
    with pytest.raises(LimitExceeded):
        for i in range(10):
            path = world.tmp / f"p{i}.txt"
            path.write_text(run_text(tag=f"p{i}", shift=i))
            job = tasks.submit_run(world.engine, red, "probed", path, name=f"probe-{i}").job.evaluation_id
            work_on(world.engine, [job], mlflow=False)
            tasks.withdraw_run(world.engine, red, f"probe-{i}")
            done += 1
    assert done == 3


def test_a_server_may_cap_each_teams_runs_per_day(world: World) -> None:
    def submit(client: TestClient, name: str) -> Any:
        return client.post(
            "/api/v1/tasks/open/runs",
            headers=world.headers("red"),
            data={"name": name},
            files={"file": ("run.txt", run_text(tag=name).encode())},
        )

    with unit_of_work(world.engine) as session:  # the world's template may be from before midnight
        session.execute(update(Submission).values(created_at=datetime.now(UTC)))
    with client_for(world.engine, runs_per_day=2) as client:
        # red-open was submitted today already (the world's): one more fits, then none
        assert submit(client, "daily-1").status_code == 201
        refused = submit(client, "daily-2")
    assert refused.status_code == 409
    assert refused.json()["error"] == _refusal("red", 2, "open", "this server's")


def _console_build(world: World, organiser: str, task: str, name: str) -> Any:
    access.set_password(world.engine, organiser, PASSWORD)
    with client_for(world.engine, raise_errors=False) as client:
        assert sign_in(client, organiser).status_code == 303
        page = client.get(f"/tasks/{task}/manage")
        return client.post(
            f"/tasks/{task}/pools",
            data={"csrf": csrf_of(page.text), "pool": name, "depth": "5"},
            follow_redirects=False,
        )


def test_two_organisers_each_build_a_pool_p_and_neither_learns_of_the_other(world: World, client: TestClient) -> None:
    """Pool names are per task (so per organiser): the second 'p' is built as the first was, and
    another organiser's pool answers every route as a pool that does not exist."""
    tasks.create_task(world.engine, "theirs", qrels_name="sample", owner="organiser")
    world.submit("theirs", "blue-theirs", team_user="blue")
    mine = _console_build(world, "owner", "open", "p")
    theirs = _console_build(world, "organiser", "theirs", "p")
    assert (mine.status_code, mine.headers["location"]) == (303, "/tasks/open/manage#pools")
    assert (theirs.status_code, theirs.headers["location"]) == (303, "/tasks/theirs/manage#pools")
    assert [p.name for p in pools.list_pools(world.engine) if p.name.endswith(":p")] == ["open:p", "theirs:p"]

    def answers(name: str) -> list[tuple[int, str]]:
        asked = world.headers("organiser")
        review = client.get(f"/pools/{name}/review", headers=asked)
        api = client.post(f"/api/v1/pools/{name}/assessors", json={"user": "assessor"}, headers=asked)
        entries = client.get(f"/api/v1/pools/{name}/entries", headers=world.headers("assessor"))
        judge = client.get(f"/judge/{name}", headers=world.headers("assessor"))
        return [
            (review.status_code, review.text.replace(name, "NAME")),
            (api.status_code, api.text.replace(name, "NAME")),
            (entries.status_code, entries.text.replace(name, "NAME")),
            (judge.status_code, judge.text.replace(name, "NAME")),
        ]

    assert answers("open:p") == answers("open:nothing")
    assert [status for status, _ in answers("open:p")] == [404, 404, 404, 404]
    with client_for(world.engine, raise_errors=False) as console:
        access.set_password(world.engine, "organiser", PASSWORD)
        assert sign_in(console, "organiser").status_code == 303
        csrf = csrf_of(console.get("/tasks/theirs/manage").text)
        other, none = (
            console.post(f"/tasks/theirs/pools/{name}/assessors", data={"csrf": csrf, "user": "assessor"})
            for name in ("open:p", "open:nothing")
        )
    assert (other.status_code, other.text.replace("open:p", "NAME")) == (
        none.status_code,
        none.text.replace("open:nothing", "NAME"),
    )
    assert other.status_code == 404
    # the command line reaches both, by their whole names
    url = world.engine.url.render_as_string(hide_password=False)
    for name in ("open:p", "theirs:p"):
        shown = CliRunner().invoke(app, ["--database-url", url, "pool", "show", name], env={"EVALSTORE_MLFLOW": "off"})
        assert shown.exit_code == 0 and name in shown.output, shown.output
    # a pool outside a task is named without the task's separator, so it is never in a task's way
    with pytest.raises(InvalidParameterError, match="^A pool's name has no ':'"):
        pools.build_pool(world.engine, name="open:q", run_names=["red-open"], depth=5)
