"""Quotas count what was evaluated, pools and qrels have owners: the probing a participant or
another organiser tried in issue 36, each refused."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from evalstore.errors import AccessDenied, LimitExceeded
from evalstore.services import pools, store, tasks
from evalstore.services.orchestration import work_on
from tests.http.conftest import SAMPLE, World, as_principal, client_for, run_text
from tests.http.test_hostile_daily_cap import _refusal


def test_a_withdrawn_evaluated_run_keeps_its_quota_slot(world: World) -> None:
    tasks.create_task(world.engine, "capped", qrels_name="sample", max_runs_per_team=2, owner="owner")
    world.submit("capped", "probe-1")
    tasks.withdraw_run(world.engine, as_principal(world.engine, "red"), "probe-1")
    world.submit("capped", "probe-2", evaluate=False)
    with pytest.raises(
        LimitExceeded,
        match=r"^Team 'red' has used its 2 runs for task 'capped' \(evaluated runs "
        r"count, withdrawn or not; failed and cancelled ones do not\).$",
    ):
        world.submit("capped", "probe-3")
    # a run withdrawn before its evaluation finished gives its slot back
    tasks.withdraw_run(world.engine, as_principal(world.engine, "red"), "probe-2")
    world.submit("capped", "probe-4")


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
        r"task over them, naming its organiser \(--owner\).$",
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

    with client_for(world.engine, runs_per_day=2) as client:
        # red-open was submitted today already (the world's): one more fits, then none
        assert submit(client, "daily-1").status_code == 201
        refused = submit(client, "daily-2")
    assert refused.status_code == 409
    assert refused.json()["error"] == _refusal("red", 2, "open", "this server's")
