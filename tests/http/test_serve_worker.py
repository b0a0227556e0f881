"""The embedded default evaluates what is submitted with only `evalstore serve` running, pages say
when no worker is alive, and `users set-password` gives a user a password for the pages."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from evalstore.cli import app
from evalstore.services import access, jobs
from tests.conftest import Templates, migrated_copy
from tests.helpers.servers import free_port
from tests.http.conftest import PASSWORD, SAMPLE, World, client_for, run_text

pytestmark = pytest.mark.both_databases

NO_WORKER = "No evaluation worker is running, so queued runs wait."


# seconds a server process may take to answer its first request: it only ends a test whose server
# would never answer (as tests/helpers/servers.py's start_server; at a load average of 35-40 a
# server took over 60 s)
STARTING = 300


def _wait_for_health(url: str) -> None:
    """Until ``url`` answers (an `evalstore serve` starting), probing through one client:
    httpx.get makes a client, and a TLS context with it, each time (~50 ms of CPU a probe, every
    0.1 s for the seconds a loaded machine takes to start the server)."""
    deadline = time.monotonic() + STARTING
    with httpx.Client() as http:
        while True:
            try:
                http.get(url, timeout=1)
                return
            except httpx.TransportError:
                assert time.monotonic() < deadline, f"evalstore serve did not answer within {STARTING} s"
                time.sleep(0.1)


def cli(url: str, *args: str, input: str | None = None):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(app, ["--database-url", url, *args], input=input)


def test_serve_on_sqlite_evaluates_a_submitted_run_by_itself(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'alone.db'}"
    env = {**os.environ, "EVALSTORE_DATABASE_URL": url, "EVALSTORE_HOME": str(tmp_path), "EVALSTORE_MLFLOW": "off"}
    evalstore = str(Path(sys.executable).parent / "evalstore")
    for command in (
        ["db", "upgrade"],
        ["qrels", "import", str(SAMPLE / "qrels.test"), "--name", "sample"],
        ["users", "add", "ada", "--role", "participant", "--team", "red"],
        ["tasks", "create", "t", "--qrels", "sample"],
    ):
        subprocess.run([evalstore, *command], env=env, check=True, capture_output=True, timeout=60)
    token = subprocess.run(
        [evalstore, "tokens", "create", "--user", "ada", "--expires", "1"],
        env=env,
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout.strip()
    port = free_port()
    server = subprocess.Popen([evalstore, "serve", "--port", str(port)], env=env, stderr=subprocess.PIPE, text=True)
    base, headers = f"http://127.0.0.1:{port}/api/v1", {"Authorization": f"Bearer {token}"}
    try:
        _wait_for_health(f"{base}/health")
        run = tmp_path / "mine.txt"
        run.write_text(run_text(tag="mine"))
        submitted = subprocess.run(
            [
                evalstore,
                "runs",
                "register",
                str(run),
                "--server",
                f"http://127.0.0.1:{port}",
                "--task",
                "t",
                "--token",
                token,
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert submitted.returncode == 0, submitted.stderr
        deadline = time.monotonic() + 60
        with httpx.Client() as http:  # one client for the polls (httpx.get: a TLS context each)
            while True:  # no `evalstore worker` runs: the server's own worker evaluates the run
                state = http.get(f"{base}/runs/mine", headers=headers, timeout=5).json()["state"]
                if state == "done":
                    break
                assert state in ("queued", "running"), state
                assert time.monotonic() < deadline, f"the run is still {state} after 60 s"
                time.sleep(0.2)
        board = httpx.get(f"{base}/tasks/t/leaderboard", headers=headers, timeout=5).json()
        assert [row["run"] for row in board["rows"]] == ["mine"]
    finally:
        server.send_signal(signal.SIGTERM)
        _, stderr = server.communicate(timeout=60)
    assert server.returncode == 0, stderr
    assert "evaluating submitted runs in this process" in stderr


def test_serve_without_its_worker_leaves_runs_queued(tmp_path: Path, templates: Templates) -> None:
    url = migrated_copy(templates, "sqlite", tmp_path)  # as `db upgrade` leaves it
    env = {**os.environ, "EVALSTORE_DATABASE_URL": url, "EVALSTORE_HOME": str(tmp_path), "EVALSTORE_MLFLOW": "off"}
    port = free_port()
    evalstore = str(Path(sys.executable).parent / "evalstore")
    server = subprocess.Popen(
        [evalstore, "serve", "--port", str(port), "--no-worker"], env=env, stderr=subprocess.PIPE, text=True
    )
    try:
        _wait_for_health(f"http://127.0.0.1:{port}/api/v1/health")
    finally:
        server.send_signal(signal.SIGTERM)
        _, stderr = server.communicate(timeout=60)
    assert "evaluating submitted runs in this process" not in stderr
    assert server.returncode == 0


def _page(client: TestClient, world: World, path: str, caller: str = "admin") -> str:
    response = client.get(path, headers=world.headers(caller))
    assert response.status_code == 200, response.text
    return response.text


def test_pages_say_when_no_worker_is_alive(world: World) -> None:
    world.submit("open", "waiting", evaluate=False)
    with client_for(world.engine) as client:
        queue = _page(client, world, "/queue")
        assert NO_WORKER in queue and "evalstore worker" in queue  # an admin is told the command
        run = _page(client, world, "/runs/waiting", "red")
        assert NO_WORKER in run and "evalstore worker" not in run  # a participant, in browser words
        assert NO_WORKER not in _page(client, world, "/runs/red-open", "red")  # nothing of its waits
        jobs.register_worker(world.engine, "w-alive")
        assert NO_WORKER not in _page(client, world, "/queue")
        assert NO_WORKER not in _page(client, world, "/runs/waiting", "red")


def test_users_set_password(world: World) -> None:
    url = world.engine.url.render_as_string(hide_password=False)
    before = access.sign_in(world.engine, "red", PASSWORD)
    changed = cli(url, "users", "set-password", "red", input="a brand new secret\n")
    assert (changed.exit_code, changed.stderr) == (0, "set the password of participant 'red'\n")
    with pytest.raises(access.AuthenticationError):
        access.sign_in(world.engine, "red", PASSWORD)
    with pytest.raises(access.AuthenticationError):  # a session signed in before the change ends
        access.authenticate(world.engine, before.token, purpose="session")
    access.sign_in(world.engine, "red", "a brand new secret")
    given = cli(url, "users", "set-password", "assessor", input="judge's own secret\n")  # one who had none
    assert given.exit_code == 0
    access.sign_in(world.engine, "assessor", "judge's own secret")
    short = cli(url, "users", "set-password", "red", input="short\n")
    assert (short.exit_code, short.stderr) == (1, "Error: A password needs at least 8 characters.\n")
    nobody = cli(url, "users", "set-password", "nobody", input="long enough secret\n")
    assert (nobody.exit_code, nobody.stderr) == (1, "Error: No user named 'nobody'. See 'evalstore users list'.\n")
