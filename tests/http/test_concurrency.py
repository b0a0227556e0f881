"""Many teams submitting at once, over real sockets: every run is stored once, evaluated once, and
no team gets past its quota."""

from __future__ import annotations

from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from sqlalchemy import text

from evalstore.services import access, tasks
from evalstore.services.worker import Worker, WorkerSettings
from tests.http.conftest import LiveServer, World, run_text

pytestmark = pytest.mark.both_databases

TEAMS = 5
RUNS_PER_TEAM = 4
QUOTA = 3


def test_twenty_concurrent_submissions_from_five_teams_hold_the_quota(world: World, live_server: LiveServer) -> None:
    tasks.create_task(world.engine, "busy", qrels_name="sample", owner="owner", max_runs_per_team=QUOTA)
    tokens = {}
    for team in range(TEAMS):
        access.add_user(world.engine, f"member{team}", role="participant", team=f"team{team}")
        tokens[f"team{team}"] = access.create_token(world.engine, f"member{team}").token
    files = {
        f"team{team}-{i}": run_text(tag=f"t{team}{i}", shift=team * RUNS_PER_TEAM + i).encode()
        for team in range(TEAMS)
        for i in range(RUNS_PER_TEAM)
    }

    def submit(name: str) -> tuple[str, int, str]:
        team = name.split("-")[0]
        response = client.post(
            f"{live_server.url}/api/v1/tasks/busy/runs",
            headers={"Authorization": f"Bearer {tokens[team]}"},
            files={"file": (f"{name}.txt", files[name])},
            data={"name": name},
        )
        return team, response.status_code, response.text

    # one client for the twenty threads, each request on its own connection (httpx.post makes a
    # client, and so a TLS context, ~24 ms of CPU, a request)
    with httpx.Client(timeout=120) as client, ThreadPoolExecutor(max_workers=len(files)) as pool:
        answers = list(pool.map(submit, files))

    accepted = Counter(team for team, status, _ in answers if status == 201)
    refused = Counter(team for team, status, _ in answers if status == 409)
    assert accepted == {f"team{t}": QUOTA for t in range(TEAMS)}, answers
    assert refused == {f"team{t}": RUNS_PER_TEAM - QUOTA for t in range(TEAMS)}, answers
    with world.engine.connect() as connection:
        stored = connection.execute(
            text(
                "SELECT s.team, count(*), count(DISTINCT s.evaluation_id) FROM submissions s JOIN tasks t ON t.id = "
                "s.task_id WHERE t.name = 'busy' GROUP BY s.team"
            )
        ).all()
    assert sorted(stored) == [(f"team{t}", QUOTA, QUOTA) for t in range(TEAMS)]

    worker = Worker(world.engine, WorkerSettings(until_empty=True, poll_interval=0.05))
    worker.run()
    with world.engine.connect() as connection:
        evaluated = connection.execute(
            text(
                "SELECT e.state, e.attempts FROM evaluations e JOIN submissions s ON s.evaluation_id = e.id "
                "JOIN tasks t ON t.id = s.task_id WHERE t.name = 'busy'"
            )
        ).all()
    assert sorted(evaluated) == [("done", 1)] * (TEAMS * QUOTA)
