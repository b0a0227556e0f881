"""The organiser's console in the browser: an organiser edits their task's settings (a bad value's
message inline, the form kept), releases it, exports its qrels, retries a failed run and cancels a
queued one, builds a pool from the task's runs and assigns an assessor to it; another organiser is
refused on every one of these; the leaderboard's measure picker offers computed measures only."""

from __future__ import annotations

import re

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from evalstore.db.models import HealthReportRow
from evalstore.db.session import read_only
from evalstore.errors import EvaluationError, Remedy
from evalstore.services import access, health, jobs, organising, pools, tasks
from evalstore.services.worker import Worker, WorkerSettings
from tests.http.conftest import PASSWORD, World, as_principal, client_for, run_text
from tests.http.test_pages import csrf_of, sign_in


def _failed(world: World, task: str, name: str, error: str) -> int:
    """A submitted run whose evaluation a worker gave up on with ``error``."""
    job_id = world.submit(task, name, evaluate=False)
    claimed = jobs.claim(world.engine, "test-worker", only=[job_id])
    assert claimed is not None
    assert jobs.fail(world.engine, claimed, error, retryable=False) == "failed"
    return job_id


@pytest.fixture
def owner(world: World) -> TestClient:
    access.set_password(world.engine, "owner", PASSWORD)
    with client_for(world.engine) as client:
        assert sign_in(client, "owner").status_code == 303
        yield client


def test_an_organiser_edits_the_settings_a_bad_value_inline_and_the_form_kept(world: World, owner: TestClient) -> None:
    page = owner.get("/tasks/open/manage")
    assert page.status_code == 200 and "organiser&#39;s console" in page.text.replace("'", "&#39;")
    bad = owner.post(
        "/tasks/open/settings",
        data={
            "csrf": csrf_of(page.text),
            "opens": "2026-12-01T09:00",
            "closes": "2026-11-30T09:00",
            "max_runs_per_team": "3",
            "measures": "AP, nDCG@10",
            "description": "Rank <b>news</b> articles.",
        },
    )
    assert bad.status_code == 422
    assert "The window must close (2026-11-30T09:00:00+00:00) after it opens (2026-12-01T09:00:00+00:00)." in bad.text
    assert 'value="2026-11-30T09:00"' in bad.text and 'value="AP, nDCG@10"' in bad.text  # the form is kept
    assert ">Rank &lt;b&gt;news&lt;/b&gt; articles.</textarea>" in bad.text  # escaped, kept
    assert tasks.show_task(world.engine, "open").max_runs_per_team is None  # nothing changed

    unknown = owner.post("/tasks/open/settings", data={"csrf": csrf_of(page.text), "measures": "AP, nope@3"})
    assert unknown.status_code == 422 and 'value="AP, nope@3"' in unknown.text

    saved = owner.post(
        "/tasks/open/settings",
        follow_redirects=False,
        data={
            "csrf": csrf_of(page.text),
            "opens": "2026-11-01T09:00",
            "closes": "2026-12-31T18:30",
            "max_runs_per_team": "3",
            "measures": "AP nDCG@10",
            "description": "Rank news articles.\nThree runs.",
        },
    )
    assert saved.status_code == 303 and saved.headers["location"] == "/tasks/open/manage?saved=settings#settings"
    shown = tasks.show_task(world.engine, "open")
    assert (
        shown.opens_at is not None
        and shown.opens_at.isoformat().startswith("2026-11-01T09:00")
        and shown.closes_at is not None
        and shown.closes_at.isoformat().startswith("2026-12-31T18:30")
    )
    assert shown.max_runs_per_team == 3 and shown.measures == ["AP", "nDCG@10"]
    assert shown.description == "Rank news articles.\nThree runs."
    again = owner.get("/tasks/open/manage?saved=settings")
    assert "Settings saved." in again.text and 'value="2026-12-31T18:30"' in again.text
    # participants read the description on the task's pages
    board = owner.get("/tasks/open", headers=world.headers("red"))
    assert "<p>Rank news articles.<br>\nThree runs.</p>" in board.text  # Markdown, a line break kept


def test_an_organiser_releases_the_task_and_exports_its_qrels(world: World, owner: TestClient) -> None:
    page = owner.get("/tasks/to-release/manage")
    assert "Release the scores" in page.text
    released = owner.post(
        "/tasks/to-release/release", data={"csrf": csrf_of(page.text), "confirm": "yes"}, follow_redirects=False
    )
    assert released.status_code == 303 and released.headers["location"] == "/tasks/to-release/manage"
    assert tasks.show_task(world.engine, "to-release").released_at is not None
    assert "Release the scores" not in owner.get("/tasks/to-release/manage").text

    exported = owner.get("/tasks/open/qrels")
    assert exported.status_code == 200
    assert exported.headers["content-disposition"] == "attachment; filename=\"open.qrels\"; filename*=UTF-8''open.qrels"
    lines = exported.text.splitlines()
    assert lines and all(len(line.split()) == 4 for line in lines)  # topic 0 doc grade


def test_an_organiser_sees_failures_with_their_reason_retries_and_cancels(world: World, owner: TestClient) -> None:
    failed = _failed(world, "open", "red-broken", "worker ran out of memory")
    queued = world.submit("open", "blue-waiting", team_user="blue", evaluate=False)
    page = owner.get("/tasks/open/manage")
    assert "red-broken" in page.text and "blue-waiting" in page.text  # every team's submissions
    assert '<small class="reason">worker ran out of memory</small>' in page.text
    assert f'action="/tasks/open/jobs/{failed}/retry"' in page.text
    assert f'action="/tasks/open/jobs/{queued}/cancel"' in page.text

    retried = owner.post(f"/tasks/open/jobs/{failed}/retry", data={"csrf": csrf_of(page.text)}, follow_redirects=False)
    assert retried.status_code == 303 and retried.headers["location"] == "/tasks/open/manage#submissions"
    assert jobs.show_job(world.engine, failed).state == "queued"

    cancelled = owner.post(
        f"/tasks/open/jobs/{queued}/cancel", data={"csrf": csrf_of(page.text), "confirm": "yes"}, follow_redirects=False
    )
    assert cancelled.status_code == 303
    assert jobs.show_job(world.engine, queued).state == "cancelled"

    twice = owner.post(f"/tasks/open/jobs/{queued}/cancel", data={"csrf": csrf_of(page.text), "confirm": "yes"})
    assert twice.status_code == 409
    assert f"Job {queued} is already cancelled; only queued or running jobs can be cancelled." in twice.text
    # a job of another task is not this task's to touch
    other = owner.post(f"/tasks/open/jobs/{world.jobs['secret']}/retry", data={"csrf": csrf_of(page.text)})
    assert other.status_code == 404
    assert f"No job {world.jobs['secret']} among the submissions of task &#39;open&#39;." in other.text


def test_an_organiser_builds_a_pool_and_assigns_an_assessor(world: World, owner: TestClient) -> None:
    world.submit("open", "blue-open", team_user="blue")
    page = owner.get("/tasks/open/manage")
    bad = owner.post(
        "/tasks/open/pools", data={"csrf": csrf_of(page.text), "pool": "open-pool", "depth": "0", "topics": "301"}
    )
    assert bad.status_code == 422
    assert "The depth is the number of top documents pooled from each run, 1 to 1000; got 0." in bad.text
    assert 'value="open-pool"' in bad.text and 'value="301"' in bad.text
    nothing = owner.post(
        "/tasks/open/pools", data={"csrf": csrf_of(page.text), "pool": "open-pool", "depth": "5", "topics": "999"}
    )
    assert nothing.status_code == 400 and 'value="999"' in nothing.text
    # the fact, and what to do in the form: not the CLI's option
    assert (
        "The runs retrieve nothing for the chosen topics. Check the topics, or leave them empty to pool every one."
        in nothing.text
    )
    assert "--topics" not in nothing.text

    built = owner.post(
        "/tasks/open/pools",
        data={"csrf": csrf_of(page.text), "pool": "open-pool", "depth": "5", "topics": "301, 302"},
        follow_redirects=False,
    )
    assert built.status_code == 303 and built.headers["location"] == "/tasks/open/manage#pools"
    pool = pools.show_pool(world.engine, "open:open-pool")  # named after its task
    assert sorted(pool.runs) == ["blue-open", "red-open"] and pool.params["task"] == "open" and pool.topics == 2
    assert pool.params["depth"] == 5

    taken = owner.post("/tasks/open/pools", data={"csrf": csrf_of(page.text), "pool": "open-pool", "depth": "5"})
    assert taken.status_code == 409 and 'value="open-pool"' in taken.text
    assert "This task has a pool named &#39;open:open-pool&#39; already; choose another name." in taken.text
    colon = owner.post("/tasks/open/pools", data={"csrf": csrf_of(page.text), "pool": "a:b", "depth": "5"})
    assert colon.status_code == 422 and (
        "A pool&#39;s name has no &#39;:&#39;: it is kept for the pools of a task, named "
        "&#39;&lt;task&gt;:&lt;name&gt;&#39;; got &#39;a:b&#39;." in colon.text
    )

    assigned = owner.post(
        "/tasks/open/pools/open:open-pool/assessors",
        data={"csrf": csrf_of(page.text), "user": "assessor"},
        follow_redirects=False,
    )
    assert assigned.status_code == 303
    pools_of_assessor = [
        p["name"] for p in organising.judging.assessor_pools(world.engine, as_principal(world.engine, "assessor"))
    ]
    assert "open:open-pool" in pools_of_assessor
    not_an_assessor = owner.post(
        "/tasks/open/pools/open:open-pool/assessors", data={"csrf": csrf_of(page.text), "user": "red"}
    )
    assert not_an_assessor.status_code == 422
    assert "User &#39;red&#39; is a participant; pools are judged by assessors." in not_an_assessor.text
    # a pool not built from the task's runs is not on its console
    other = owner.post("/tasks/open/pools/pool/assessors", data={"csrf": csrf_of(page.text), "user": "assessor"})
    assert other.status_code == 404


def _stored_reports(world: World) -> list[tuple[str, str | None]]:
    with read_only(world.engine) as session:
        return list(session.execute(select(HealthReportRow.key, HealthReportRow.error).order_by(HealthReportRow.key)))


def test_the_health_report_is_the_workers_stored_one_and_the_page_says_when_it_is_behind(
    world: World, owner: TestClient
) -> None:
    alone = owner.get("/tasks/open/health")
    assert alone.status_code == 200
    assert (
        "The health report compares the task&#39;s runs: it needs two or more evaluated, and 1 is so far." in alone.text
    )
    world.submit("open", "blue-open", team_user="blue", text=None)  # evaluated here, by no worker
    none_yet = owner.get("/tasks/open/health")
    assert none_yet.status_code == 200
    assert (
        "No report yet: a worker computes it once its queue is empty, after the runs&#39; evaluations, and this "
        "page shows it then. To see one now: <code>evalstore health --qrels sample</code> (over every run "
        "evaluated on the qrels)." in none_yet.text
    )
    assert "Discriminative power" not in none_yet.text and _stored_reports(world) == []  # a GET computes nothing

    # a worker, once its queue is empty, stores the report of every task with two runs evaluated
    worker = Worker(world.engine, WorkerSettings(until_empty=True, reports=(health.refresh_reports,)))
    assert worker.run() == 0
    stored = _stored_reports(world)
    assert len(stored) == 1 and stored[0][1] is None  # "open" alone: "secret" has one run
    page = owner.get("/tasks/open/health")
    assert page.status_code == 200 and "Discriminative power" in page.text
    assert "seed 0." in page.text and "Computed by a worker <time datetime=" in page.text
    assert "being brought up to date" not in page.text
    direct = health.health(
        world.engine,
        qrels_name="sample",
        measures=list(health.HEALTH_MEASURES),
        seed=health.STORED_SEED,
        only_runs=["blue-open", "red-open"],
        **health.STORED_PARAMETERS,
    )
    shown = organising.task_health(world.engine, as_principal(world.engine, "owner"), "open")
    assert shown is not None and shown.current and shown.report == direct  # the same numbers, the same seed
    for d in direct.discriminative_power:
        assert f'<td>{d.measure}</td><td class="num">{d.pairs}</td><td class="num">{d.significant}</td>' in page.text
    for run, share in direct.judged_at_10.items():
        assert share is not None and f'<td>{run}</td><td class="num">{share:.2f}</td>' in page.text

    # over every topic of the qrels, a split task's private ones too: its organiser's and admins' alone
    with client_for(world.engine) as participant:
        refused = participant.get("/tasks/open/health", headers={"Authorization": f"Bearer {world.tokens['red']}"})
    assert refused.status_code == 403
    assert "Your role (participant) may not do this; it is for: admin, organiser." in refused.text
    assert "Discriminative power" not in refused.text

    other_seed = owner.get("/tasks/open/health?seed=7")
    assert other_seed.status_code == 200 and "Discriminative power" in other_seed.text
    assert (
        "The stored report is drawn with seed 0; this page does not compute one. For seed 7: "
        "<code>evalstore health --qrels sample --seed 7</code>." in other_seed.text
    )

    # a new run evaluated (by no worker): the page shows the stored report, and says it is behind
    world.submit("open", "green-open", team_user="blue", text=run_text(tag="green", shift=3))
    behind = owner.get("/tasks/open/health")
    assert behind.status_code == 200
    assert (
        "The report is being brought up to date: the task&#39;s runs, their evaluations or its measures have "
        "changed since this one was computed (<time datetime=" in behind.text
    )
    assert "). A worker computes the new one once its queue is empty.</p>" in behind.text
    assert "Discriminative power" in behind.text and "2 runs evaluated on them" in behind.text
    assert _stored_reports(world) == stored  # still computed by no GET

    # the worker that evaluates the next run refreshes the reports on the qrels it touched
    queued = world.submit("open", "gold-open", team_user="blue", text=run_text(tag="gold", shift=1), evaluate=False)
    again = Worker(world.engine, WorkerSettings(reports=(health.refresh_reports,)))
    assert again.refresh_boards() == 1  # the first time the queue is empty: every qrels' reports
    assert again.refresh_boards() == 0  # nothing new since
    assert again.process_one() and queued in again.done
    assert again.refresh_boards() >= 1
    assert len(_stored_reports(world)) == 3
    fresh = owner.get("/tasks/open/health")
    assert "being brought up to date" not in fresh.text and "4 runs evaluated on them" in fresh.text

    # the task's measures changed: behind too, and an idle worker's next look at every task mends it
    tasks.update_task(
        world.engine,
        "open",
        tasks.TaskSettings(opens=None, closes=None, max_runs_per_team=None, measures=["AP", "P@10"], description=None),
    )
    assert "being brought up to date" in owner.get("/tasks/open/health").text
    idle = Worker(world.engine, WorkerSettings(reports=(health.refresh_reports,), reports_interval=0.0))
    assert idle.refresh_boards() == 1
    assert idle.refresh_boards() == 0  # looked at again: nothing changed
    mended = owner.get("/tasks/open/health")
    assert "being brought up to date" not in mended.text and "<td>nDCG@10</td>" not in mended.text
    assert "<td>P@10</td>" in mended.text


def test_another_organiser_is_refused_on_every_action(world: World) -> None:
    failed = _failed(world, "open", "red-broken", "boom")
    access.set_password(world.engine, "organiser", PASSWORD)
    with client_for(world.engine) as client:
        assert sign_in(client, "organiser").status_code == 303
        csrf = csrf_of(client.get("/profile").text)
        refused = "Task &#39;open&#39; is managed by its organiser; you may not change it."
        for method, path, data in [
            ("GET", "/tasks/open/manage", None),
            ("GET", "/tasks/open/qrels", None),
            ("GET", "/tasks/open/health", None),
            ("POST", "/tasks/open/settings", {"max_runs_per_team": "1"}),
            ("POST", "/tasks/open/release", {}),
            ("POST", "/tasks/open/release", {"confirm": "yes"}),
            ("POST", f"/tasks/open/jobs/{failed}/retry", {}),
            ("POST", f"/tasks/open/jobs/{world.jobs['open']}/cancel", {}),
            ("POST", f"/tasks/open/jobs/{world.jobs['open']}/cancel", {"confirm": "yes"}),
            ("POST", "/tasks/open/pools", {"pool": "stolen", "depth": "5"}),
            ("POST", "/tasks/open/pools/pool/assessors", {"user": "assessor"}),
        ]:
            response = client.request(method, path, data={**data, "csrf": csrf} if data is not None else None)
            assert response.status_code == 403, (method, path, response.status_code)
            assert refused in response.text, path
    assert tasks.show_task(world.engine, "open").max_runs_per_team is None
    assert jobs.show_job(world.engine, failed).state == "failed"
    assert "stolen" not in [p.name for p in pools.list_pools(world.engine)]


def test_the_leaderboard_offers_only_computed_measures(world: World) -> None:
    tasks.create_task(world.engine, "narrow", qrels_name="sample", owner="owner", measures=["AP", "P@10"])
    world.submit("narrow", "red-narrow")
    assert tasks.computed_measures(world.engine, "narrow") == ["AP", "P@10"]
    with client_for(world.engine) as client:
        page = client.get("/tasks/narrow", headers=world.headers("red"))
        # the fixed list offered nDCG@20, Bpref, R@1000...: each a dead end on this task
        assert re.findall(r'name="measure" value="([^"]+)"', page.text) == ["AP", "P@10"]
        for shown in ("AP", "P@10"):  # neither is a dead end
            assert (
                client.get("/tasks/narrow", params={"measure": shown}, headers=world.headers("red")).status_code == 200
            )
        # the default evaluation's many measures are all offered on a task that names none
        board = client.get("/tasks/open", headers=world.headers("red"))
        offered = set(re.findall(r'name="measure" value="([^"]+)"', board.text))
        assert offered == set(tasks.computed_measures(world.engine, "open")) and "nDCG@20" in offered


def test_the_settings_take_the_official_measure_and_local_times_with_their_offset(
    world: World, owner: TestClient
) -> None:
    page = owner.get("/tasks/open/manage")
    assert 'data-offset="opens_offset"' in page.text and 'id="official_measure"' in page.text
    form = {
        "csrf": csrf_of(page.text),
        "opens": "2026-12-01T09:00",
        "opens_offset": "60",  # what the page's script sends from a browser in Central European Time
        "closes": "2026-12-20T18:00+05:30",  # typed with its own offset: taken as typed
        "closes_offset": "60",
        "measures": "AP, nDCG@10",
        "official_measure": "ndcg_cut_10",
    }
    assert owner.post("/tasks/open/settings", data=form, follow_redirects=False).status_code == 303
    shown = tasks.show_task(world.engine, "open").as_dict()
    assert (shown["opens_at"], shown["closes_at"]) == ("2026-12-01T08:00:00+00:00", "2026-12-20T12:30:00+00:00")
    assert shown["official_measure"] == "nDCG@10"
    console = owner.get("/tasks/open/manage").text
    assert 'value="2026-12-01T08:00"' in console and 'value="nDCG@10"' in console  # UTC, which the script shows locally
    board = owner.get("/tasks/open").text
    assert "official measure <strong>nDCG@10</strong>" in board
    assert '<time datetime="2026-12-20T12:30:00+00:00">2026-12-20 12:30 UTC</time>' in board
    assert re.search(r'<th scope="col" class="num"[^>]*><a [^>]*>nDCG@10', board)  # it leads the board

    without_script = owner.post("/tasks/open/settings", data={**form, "opens_offset": ""}, follow_redirects=False)
    assert without_script.status_code == 303
    assert tasks.show_task(world.engine, "open").as_dict()["opens_at"] == "2026-12-01T09:00:00+00:00"

    bad = owner.post("/tasks/open/settings", data={**form, "official_measure": "P@10"})
    assert bad.status_code == 422
    assert "The official measure P@10 is not one the task evaluates (AP, nDCG@10)" in bad.text
    assert 'value="P@10"' in bad.text and 'value="60"' in bad.text  # the form is kept, with the offsets
    assert tasks.show_task(world.engine, "open").official_measure == "nDCG@10"


def test_a_stored_health_report_that_failed_keeps_why_and_what_to_do(
    world: World, owner: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    world.submit("open", "blue-open", team_user="blue", text=None)

    def refused(*args: object, **kwargs: object) -> None:
        raise EvaluationError(
            "Qrels 'sample' have fewer than two runs evaluated with AP.",
            remedy=Remedy(
                cli="Evaluate them first: 'evalstore evaluate --qrels sample --all-runs --measures AP --wait'."
            ),
        )

    monkeypatch.setattr(health, "health", refused)
    assert health.refresh_reports(world.engine) == 1
    said = (
        "Qrels &#39;sample&#39; have fewer than two runs evaluated with AP. Evaluate them first: &#39;evalstore "
        "evaluate --qrels sample --all-runs --measures AP --wait&#39;."
    )
    page = owner.get("/tasks/open/health")
    assert page.status_code == 200 and said in page.text
