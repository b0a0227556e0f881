"""The service's commands: users, tokens, tasks, `runs register --server`, and `serve` itself."""

from __future__ import annotations

import gzip
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from evalstore.cli import app
from evalstore.services import access
from tests.cli.usage import usage_message
from tests.conftest import Templates, migrated_copy
from tests.http.conftest import SAMPLE, LiveServer, World, run_text


def cli(url: str, *args: str, input: str | None = None):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(app, ["--database-url", url, *args], input=input)


@pytest.fixture
def url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, templates: Templates) -> str:
    monkeypatch.setenv("EVALSTORE_HOME", str(tmp_path))
    monkeypatch.setenv("EVALSTORE_MLFLOW", "off")
    database = migrated_copy(templates, "sqlite", tmp_path)  # as `db upgrade` leaves it
    assert cli(database, "qrels", "import", str(SAMPLE / "qrels.test"), "--name", "sample").exit_code == 0
    return database


def test_users_tokens_and_tasks_from_the_command_line(url: str) -> None:
    added = cli(
        url,
        "users",
        "add",
        "ada",
        "--role",
        "participant",
        "--team",
        "red",
        "--password-stdin",
        input="a long password\n",
    )
    assert (added.exit_code, added.stderr) == (0, "added participant 'ada' of team 'red'\n")
    no_team = cli(url, "users", "add", "bea", "--role", "participant")
    assert (no_team.exit_code, no_team.stderr) == (1, "Error: A participant belongs to a team. Give --team TEAM.\n")
    token = cli(url, "tokens", "create", "--user", "ada", "--expires", "7")
    assert token.exit_code == 0
    assert token.stdout.startswith("es_1_") and token.stdout.count("\n") == 1  # only the token on stdout
    assert "shown once" in token.stderr
    listed = cli(url, "tokens", "list", "--format", "json")
    assert token.stdout.strip().split("_", 2)[2] not in listed.stdout  # the secret may hold "_" itself
    assert cli(url, "tokens", "revoke", "1").exit_code == 0

    created = cli(
        url,
        "tasks",
        "create",
        "t",
        "--qrels",
        "sample",
        "--hidden",
        "--closes",
        "2030-01-01T00:00Z",
        "--max-runs-per-team",
        "2",
        "--measure",
        "AP",
        "--measure",
        "P@10",
    )
    assert (created.exit_code, created.stderr) == (0, "created task 't' on qrels 'sample' (hidden)\n")
    shown = cli(url, "tasks", "show", "t", "--format", "json")
    task = json.loads(shown.stdout)[0]
    assert (task["closes_at"], task["measures"], task["hidden"]) == ("2030-01-01T00:00:00+00:00", ["AP", "P@10"], True)
    released = cli(url, "tasks", "release", "t")
    assert (released.exit_code, released.stderr) == (0, "released task 't': its scores are visible\n")
    bad_time = cli(url, "tasks", "create", "u", "--qrels", "sample", "--opens", "tomorrow")
    assert bad_time.exit_code == 2
    assert "'tomorrow' is not a time; write e.g. 2026-12-01T12:00Z" in usage_message(bad_time.stderr)


def test_a_task_split_and_official_measure_from_the_command_line(url: str) -> None:
    args = ("tasks", "create", "s", "--qrels", "sample", "--measure", "AP", "--measure", "P@10")
    created = cli(url, *args, "--official-measure", "P_10", "--private-topics", "0.34", "--split-seed", "5")
    assert created.exit_code == 0, created.output
    assert created.stderr.splitlines()[1].startswith("1 private topic (seed 5): 30")
    task = json.loads(cli(url, "tasks", "show", "s", "--format", "json").stdout)[0]
    assert (task["official_measure"], task["private_topics"], task["split_seed"]) == ("P@10", 1, 5)
    assert task["private_topic_ids"] in ("301", "302", "303")  # the organisers' command line lists them
    redrawn = cli(url, "tasks", "update", "s", "--private-topics", "0.67", "--split-seed", "5")
    assert redrawn.exit_code == 0 and "2 private topics (seed 5)" in redrawn.stderr
    official = cli(url, "tasks", "update", "s", "--official-measure", "AP")
    assert official.exit_code == 0 and "official measure AP" in official.stderr
    assert json.loads(cli(url, "tasks", "show", "s", "--format", "json").stdout)[0]["private_topics"] == 2
    removed = cli(url, "tasks", "update", "s", "--private-topics", "0")
    assert removed.exit_code == 0 and "no public/private split" in removed.stderr
    lonely_seed = cli(url, "tasks", "update", "s", "--split-seed", "5")
    assert lonely_seed.exit_code == 2 and "give --private-topics too" in usage_message(lonely_seed.stderr)


def test_sending_a_run_needs_server_and_token(url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("EVALSTORE_TOKEN", raising=False)
    run = tmp_path / "r.txt"
    run.write_text(run_text())
    result = cli(url, "runs", "register", str(run), "--server", "http://127.0.0.1:9", "--task", "t")
    assert result.exit_code == 2
    assert usage_message(result.stderr) == (
        "Sending a run to a server needs --server and --token; --token is "
        "missing (--token may come from $EVALSTORE_TOKEN)."
    )
    without_server = cli(url, "runs", "register", str(run), "--task", "t", "--token", "x")
    assert without_server.exit_code == 2
    assert usage_message(without_server.stderr).startswith(
        "Sending a run to a server needs --server and --token; --server is missing"
    )


def test_runs_register_submits_to_a_server(world: World, live_server: LiveServer, tmp_path: Path) -> None:
    url = world.engine.url.render_as_string(hide_password=False)
    run = tmp_path / "input.mine.gz"
    run.write_bytes(gzip.compress(run_text(tag="mine").encode()))
    result = cli(
        url, "runs", "register", str(run), "--server", live_server.url, "--task", "open", "--token", world.tokens["red"]
    )
    assert result.exit_code == 0, result.stderr
    assert result.stderr.startswith(
        "submitted run 'mine' to task 'open' for team 'red': 1500 rows, 3 topics; evaluation job "
    )
    bad = tmp_path / "bad.txt"
    bad.write_text("301 Q0 a 1 1.0 x\n301 Q0 b 2 0.5\n")
    refused = cli(
        url, "runs", "register", str(bad), "--server", live_server.url, "--task", "open", "--token", world.tokens["red"]
    )
    assert (refused.exit_code, refused.stderr) == (
        1,
        "bad.txt:2: expected 6 columns (qid Q0 docno rank score tag), found 5\n",
    )
    outside = cli(
        url,
        "runs",
        "register",
        str(run),
        "--name",
        "admins",
        "--server",
        live_server.url,
        "--token",
        world.tokens["admin"],
    )
    assert (outside.exit_code, outside.stderr) == (
        0,
        f"registered run 'admins' on {live_server.url}: 1500 rows, 3 topics\n",
    )
    not_admin = cli(
        url, "runs", "register", str(run), "--name", "own", "--server", live_server.url, "--token", world.tokens["red"]
    )
    assert (not_admin.exit_code, not_admin.stderr) == (
        1,
        "Error: Your role (participant) may not do this; it is for: admin.\n",
    )
    denied = cli(
        url,
        "runs",
        "register",
        str(run),
        "--name",
        "v",
        "--server",
        live_server.url,
        "--task",
        "open",
        "--token",
        world.tokens["viewer"],
    )
    assert (denied.exit_code, denied.stderr) == (
        1,
        "Error: Your role (viewer) may not do this; it is for: admin, organiser, participant.\n",
    )


def test_runs_register_says_when_the_server_is_not_there(url: str, tmp_path: Path) -> None:
    run = tmp_path / "r.txt"
    run.write_text(run_text())
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    result = cli(
        url, "runs", "register", str(run), "--server", f"http://127.0.0.1:{port}", "--task", "t", "--token", "es_1_x"
    )
    assert result.exit_code == 1
    assert result.stderr.startswith(f"Error: Could not reach the server at http://127.0.0.1:{port}: ")
    assert result.stderr.endswith("Is 'evalstore serve' running there?\n")


def test_serve_answers_as_deployed_and_refuses_an_old_schema(url: str, tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    evalstore = str(Path(sys.executable).parent / "evalstore")
    env = {**os.environ, "EVALSTORE_DATABASE_URL": url}
    server = subprocess.Popen([evalstore, "serve", "--port", str(port)], env=env, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        with httpx.Client() as http:  # one client for the probes (httpx.get: a TLS context, ~50 ms of CPU, each)
            while True:
                try:
                    health = http.get(f"http://127.0.0.1:{port}/api/v1/health", timeout=1)
                    break
                except httpx.TransportError:
                    assert time.monotonic() < deadline, "evalstore serve did not answer within 30 s"
                    time.sleep(0.1)
        assert health.json()["status"] == "ok"
        spec = httpx.get(f"http://127.0.0.1:{port}/api/v1/openapi.json").json()
        assert "/api/v1/tasks/{task}/runs" in spec["paths"]
    finally:
        server.terminate()
        server.wait(timeout=20)
    old = f"sqlite:///{tmp_path / 'empty.db'}"
    refused = subprocess.run(
        [evalstore, "--database-url", old, "serve", "--port", str(port)], capture_output=True, text=True, timeout=60
    )
    assert refused.returncode == 1
    assert "has no evalstore schema. Run 'evalstore db upgrade' to create it." in refused.stderr


def test_tokens_expire(world: World) -> None:
    issued = access.create_token(world.engine, "red", expires_days=1e-9)
    time.sleep(0.01)
    with pytest.raises(access.AuthenticationError):
        access.authenticate(world.engine, issued.token)


def test_the_served_app_imports_the_statistics_a_compare_page_may_need_before_it_listens(url: str) -> None:
    """A compare page that tests on the request needs scipy.stats (~0.7 s to import): a served
    process imports it before it listens, a library app leaves it alone."""
    script = (
        "import sys\n"
        "from evalstore.web.app import create_app, create_served_app\n"
        "from evalstore.web.settings import ServerSettings\n"
        "create_app(ServerSettings(database_url=sys.argv[1]))\n"
        "print('scipy.stats' in sys.modules)\n"
        "create_served_app()\n"
        "print('scipy.stats' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, url],
        env={**os.environ, "EVALSTORE_DATABASE_URL": url},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "True"]


def test_the_served_app_prepares_its_routes_and_freezes_its_start_before_it_listens(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`evalstore serve` runs create_served_app: the API description made (every route built on
    the way, not on each page group's first request) and the start-up's objects frozen out of
    the collector's full collections; the library's create_app leaves both to the first request."""
    import gc

    from evalstore.web.app import create_app, create_served_app
    from evalstore.web.settings import ServerSettings

    monkeypatch.setenv("EVALSTORE_DATABASE_URL", url)
    assert create_app(ServerSettings(database_url=url)).openapi_schema is None
    gc.unfreeze()
    try:
        served = create_served_app()
        assert served.openapi_schema is not None
        assert "/api/v1/tasks/{task}/runs" in served.openapi_schema["paths"]
        assert gc.get_freeze_count() > 100_000
    finally:
        gc.unfreeze()
