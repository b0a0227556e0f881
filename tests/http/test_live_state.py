"""Live state: the pages that show queued and running evaluations (a team's runs, the task's
leaderboard, the queue) follow them through ``/jobs/live``: each caller gets only the jobs they
may see, an error as they may read it, the queue place counted in one query; the pages carry the
markup live.js follows and still show the state without it."""

from __future__ import annotations

import re

from sqlalchemy import event, update

from evalstore.db.models import Evaluation
from evalstore.db.session import unit_of_work
from evalstore.services import tasks
from evalstore.services.orchestration import work_on
from tests.http.conftest import World, as_principal, client_for


def _three_queued(world: World) -> dict[str, int]:
    return {
        name: world.submit("open", name, team_user=user, evaluate=False)
        for name, user in (("red-a", "red"), ("blue-x", "blue"), ("red-b", "red"))
    }


def test_a_team_follows_its_own_queued_runs_until_they_are_done(world: World) -> None:
    jobs = _three_queued(world)
    asked = "&".join(f"job={j}" for j in jobs.values())
    with client_for(world.engine) as client:
        red = client.get(f"/jobs/live?{asked}", headers=world.headers("red"))
        assert red.status_code == 200 and red.headers["cache-control"] == "private, no-store"
        assert red.json() == {
            "jobs": [
                {"id": jobs["red-a"], "state": "queued", "queue_position": 1, "error": None},
                {"id": jobs["red-b"], "state": "queued", "queue_position": 3, "error": None},
            ],
            "pending": 2,
        }  # blue's job is not there for red: neither its state nor its place
        work_on(world.engine, [jobs["red-a"]], mlflow=False)
        after = client.get(f"/jobs/live?{asked}", headers=world.headers("red")).json()
        assert after == {
            "jobs": [
                {"id": jobs["red-a"], "state": "done", "queue_position": None, "error": None},
                {"id": jobs["red-b"], "state": "queued", "queue_position": 2, "error": None},
            ],
            "pending": 1,
        }
        owner = client.get(f"/jobs/live?{asked}", headers=world.headers("owner")).json()
        assert [j["id"] for j in owner["jobs"]] == sorted(jobs.values()) and owner["pending"] == 2
        admin = client.get(f"/jobs/live?{asked}", headers=world.headers("admin")).json()
        assert [j["id"] for j in admin["jobs"]] == sorted(jobs.values())
        other = client.get(f"/jobs/live?{asked}", headers=world.headers("organiser")).json()
        assert other == {"jobs": [], "pending": 0}  # another organiser's task


def test_a_hidden_tasks_error_stays_hidden_from_the_team(world: World) -> None:
    with unit_of_work(world.engine) as session:
        session.execute(
            update(Evaluation)
            .where(Evaluation.id == world.jobs["secret"])
            .values(state="failed", error="topic 301 has 3 relevant documents")
        )
    asked = f"/jobs/live?job={world.jobs['secret']}"
    with client_for(world.engine) as client:
        red = client.get(asked, headers=world.headers("red")).json()["jobs"]
        owner = client.get(asked, headers=world.headers("owner")).json()["jobs"]
    assert [(j["state"], j["error"]) for j in red] == [("failed", tasks.HIDDEN)]
    assert [(j["state"], j["error"]) for j in owner] == [("failed", "topic 301 has 3 relevant documents")]


def test_a_poll_is_bounded_and_refused_in_words(world: World) -> None:
    with client_for(world.engine) as client:
        many = client.get("/jobs/live?" + "&".join(f"job={i}" for i in range(101)), headers=world.headers("red"))
        assert many.status_code == 422
        assert "Follow at most 100 jobs at once; this asked for 101." in many.text
        assert client.get("/jobs/live?job=1", headers=world.headers("viewer")).status_code == 403
        assert client.get("/jobs/live?job=x", headers=world.headers("red")).status_code == 422
        assert client.get("/jobs/live", headers=world.headers("red")).json() == {"jobs": [], "pending": 0}


def test_a_poll_is_one_query_whatever_the_number_of_jobs(world: World) -> None:
    jobs = list(_three_queued(world).values()) + [world.jobs["open"], world.jobs["secret"]]
    owner = as_principal(world.engine, "owner")
    selects: list[str] = []

    def count(_conn: object, _cursor: object, statement: str, *_args: object) -> None:
        if statement.lstrip().upper().startswith("SELECT"):
            selects.append(statement)

    event.listen(world.engine, "before_cursor_execute", count)
    try:
        found = tasks.live_jobs(world.engine, owner, jobs)
    finally:
        event.remove(world.engine, "before_cursor_execute", count)
    assert len(found) == 5 and len(selects) == 1


def test_the_pages_carry_what_live_updates_follow_and_say_it_without_them(world: World) -> None:
    jobs = _three_queued(world)
    with client_for(world.engine) as client:
        runs = client.get("/tasks/open/submit", headers=world.headers("red")).text
        row = re.search(
            rf'<tr data-live-job="{jobs["red-b"]}" data-state="queued" data-live-name="red-b">.*?</tr>', runs, re.S
        )
        assert row is not None and '<span class="state-queued" data-live="state">queued</span>' in row.group(0)
        assert '<script src="/static/live.js" defer></script>' in runs
        board = client.get("/tasks/open", headers=world.headers("red")).text
        assert "Being evaluated" in board and "red-a" in board and "red-b" in board and "blue-x" not in board
        assert '<script src="/static/live.js" defer></script>' in board
        for viewer in ("viewer", None):  # nothing of anyone's runs: no section, no script
            page = client.get("/tasks/open", headers=world.headers(viewer) if viewer else {}).text
            assert "Being evaluated" not in page and "live.js" not in page
        queue = client.get("/queue", headers=world.headers("owner")).text
        assert queue.count("data-live-job=") == 3 and '<script src="/static/live.js" defer></script>' in queue
        script = client.get("/static/live.js")
        assert script.status_code == 200 and "/jobs/live?" in script.text
