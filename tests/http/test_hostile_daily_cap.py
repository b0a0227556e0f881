"""Each team's runs per task per UTC day (EvalAI's daily limit): the task's own cap, set over the
API, the command line or the organiser's console, else the server's; counted as the quota counts
(a withdrawn evaluated run keeps its slot, a cancelled one gives it back) within the UTC day."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select, update
from typer.testing import CliRunner

from evalstore.cli import app
from evalstore.db.models import Submission, Task
from evalstore.db.session import unit_of_work
from evalstore.services import access, organising, tasks
from evalstore.services.orchestration import work_on
from tests.cli.usage import usage_message
from tests.http.conftest import PASSWORD, World, as_principal, client_for, run_text
from tests.http.test_pages import csrf_of, sign_in

pytestmark = pytest.mark.both_databases


def _submit(client: TestClient, world: World, caller: str, task: str, name: str) -> Any:
    return client.post(
        f"/api/v1/tasks/{task}/runs",
        headers=world.headers(caller),
        data={"name": name},
        files={"file": ("run.txt", run_text(tag=name).encode())},
    )


def _refusal(team: str, cap: int, task: str, whose: str) -> str:
    tomorrow = (datetime.now(UTC) + timedelta(days=1)).date().isoformat()
    return (
        f"Team '{team}' has used today's {cap} runs for task '{task}' ({whose} daily cap; evaluated runs "
        "count, and withdrawn ones whose scores the team could read; failed, cancelled and other withdrawn "
        "ones do not). The cap resets at "
        f"{tomorrow}T00:00:00+00:00 (midnight UTC)."
    )


def _to_yesterday(world: World, task: str) -> None:
    """The task's submissions as if made a day ago."""
    with unit_of_work(world.engine) as session:
        task_id = session.scalar(select(Task.id).where(Task.name == task))
        session.execute(
            update(Submission)
            .where(Submission.task_id == task_id)
            .values(created_at=datetime.now(UTC) - timedelta(days=1))
        )


def test_a_tasks_daily_cap_counts_each_teams_runs_of_the_utc_day(world: World, client: TestClient) -> None:
    created = client.post(
        "/api/v1/tasks", headers=world.headers("owner"), json={"name": "daily", "qrels": "sample", "daily_cap": 2}
    )
    assert created.status_code == 201 and created.json()["daily_cap"] == 2

    first = _submit(client, world, "red", "daily", "d-1")
    work_on(world.engine, [first.json()["job"]["id"]], mlflow=False)
    assert client.delete("/api/v1/runs/d-1", headers=world.headers("red")).status_code == 204
    second = _submit(client, world, "red", "daily", "d-2")
    assert second.status_code == 201
    refused = _submit(client, world, "red", "daily", "d-3")  # the withdrawn evaluated run kept its slot
    assert (refused.status_code, refused.json()) == (409, {"error": _refusal("red", 2, "daily", "the task's")})
    assert _submit(client, world, "blue", "daily", "b-1").status_code == 201  # per team

    # a cancelled run gives its slot back
    organising.cancel_job(world.engine, as_principal(world.engine, "owner"), "daily", second.json()["job"]["id"])
    assert _submit(client, world, "red", "daily", "d-4").status_code == 201
    assert _submit(client, world, "red", "daily", "d-5").status_code == 409

    # yesterday's runs count no more (d-1, withdrawn, counts on the day it was submitted: today)
    _to_yesterday(world, "daily")
    assert _submit(client, world, "red", "daily", "d-6").status_code == 201
    assert _submit(client, world, "red", "daily", "d-7").status_code == 409


def test_the_tasks_cap_overrides_the_servers_and_the_api_changes_it(world: World) -> None:
    with client_for(world.engine, runs_per_day=1) as client:
        tasks.create_task(world.engine, "loose", qrels_name="sample", owner="owner")
        assert _submit(client, world, "red", "loose", "l-1").status_code == 201
        refused = _submit(client, world, "red", "loose", "l-2")
        assert (refused.status_code, refused.json()) == (409, {"error": _refusal("red", 1, "loose", "this server's")})
        page = client.get("/tasks/loose/submit", headers=world.headers("red"))
        assert "<dt>Per day</dt><dd>1 of 1 runs used today by team red (UTC days" in page.text

        changed = client.patch("/api/v1/tasks/loose", headers=world.headers("owner"), json={"daily_cap": 2})
        assert changed.status_code == 200 and changed.json()["daily_cap"] == 2
        assert changed.json()["max_runs_per_team"] is None  # what the body does not name stays
        assert _submit(client, world, "red", "loose", "l-2").status_code == 201
        assert _submit(client, world, "red", "loose", "l-3").status_code == 409

        cleared = client.patch("/api/v1/tasks/loose", headers=world.headers("owner"), json={"daily_cap": None})
        assert cleared.json()["daily_cap"] is None
        assert _submit(client, world, "red", "loose", "l-3").status_code == 409  # the server's 1 again
        bad = client.patch("/api/v1/tasks/loose", headers=world.headers("owner"), json={"daily_cap": 0})
        assert bad.status_code == 422
        other = client.patch("/api/v1/tasks/loose", headers=world.headers("organiser"), json={"daily_cap": 9})
        assert other.status_code == 403


def test_the_command_line_sets_and_clears_the_daily_cap(world: World, monkeypatch: Any) -> None:
    monkeypatch.setenv("EVALSTORE_HOME", str(world.tmp))
    monkeypatch.setenv("EVALSTORE_MLFLOW", "off")
    url = world.engine.url.render_as_string(hide_password=False)

    def cli(*args: str) -> Any:
        return CliRunner().invoke(app, ["--database-url", url, *args])

    def cap() -> Any:
        return json.loads(cli("tasks", "show", "cli-task", "--format", "json").stdout)[0]["daily_cap"]

    created = cli("tasks", "create", "cli-task", "--qrels", "sample", "--daily-cap", "3")
    assert created.exit_code == 0, created.stderr
    assert cap() == 3
    updated = cli("tasks", "update", "cli-task", "--daily-cap", "5", "--max-runs-per-team", "9", "--format", "json")
    assert updated.exit_code == 0, updated.stderr
    assert (json.loads(updated.stdout)[0]["daily_cap"], json.loads(updated.stdout)[0]["max_runs_per_team"]) == (5, 9)
    assert cli("tasks", "update", "cli-task", "--no-daily-cap").exit_code == 0
    assert cap() is None and tasks.show_task(world.engine, "cli-task").max_runs_per_team == 9
    assert cli("tasks", "update", "cli-task", "--daily-cap", "0").exit_code == 2
    both = cli("tasks", "update", "cli-task", "--daily-cap", "2", "--no-daily-cap")
    assert both.exit_code == 2 and "not both" in usage_message(both.stderr)
    assert cli("tasks", "update", "nope", "--daily-cap", "2").exit_code == 1


def test_the_organisers_console_sets_the_daily_cap(world: World) -> None:
    access.set_password(world.engine, "owner", PASSWORD)
    with client_for(world.engine, runs_per_day=4) as owner:
        assert sign_in(owner, "owner").status_code == 303
        page = owner.get("/tasks/open/manage")
        assert "empty: the server's limit, 4)" in page.text
        bad = owner.post("/tasks/open/settings", data={"csrf": csrf_of(page.text), "daily_cap": "many"})
        assert bad.status_code == 422
        assert (
            "The runs per team per day is a whole number of runs (empty: the server&#39;s limit); got &#39;many&#39;."
            in bad.text
        )
        saved = owner.post(
            "/tasks/open/settings", data={"csrf": csrf_of(page.text), "daily_cap": "2"}, follow_redirects=False
        )
        assert saved.status_code == 303
        assert tasks.show_task(world.engine, "open").daily_cap == 2
        assert 'id="daily_cap" name="daily_cap" inputmode="numeric" value="2"' in owner.get("/tasks/open/manage").text
