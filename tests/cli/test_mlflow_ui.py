"""`evalstore mlflow ui`: MLflow's own UI on the store evalstore logs to, from the environment the
README creates (evalstore logs with mlflow-skinny, which has no UI: the same MLflow release runs
through uv in an environment of its own)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from importlib.metadata import version
from pathlib import Path

import httpx
import pytest

from tests.conftest import Cli

SAMPLE = Path(__file__).resolve().parents[2] / "evalstore" / "sample_data"


def test_the_ui_runs_the_same_mlflow_release_through_uv_on_evalstores_store(cli: Cli) -> None:
    result = cli("mlflow", "ui", "--port", "5055", "--print")
    assert result.exit_code == 0, result.output
    release = version("mlflow-skinny")
    store = cli.folder / "mlflow.db"
    assert result.stdout.strip() == (
        f"MLFLOW_SERVER_ENABLE_JOB_EXECUTION=false {Path(sys.executable).parent / 'uv'} tool run --from mlflow=={release} mlflow ui "
        f"--backend-store-uri sqlite:///{store} --host 127.0.0.1 --port 5055 "
        f"--workers 1 --default-artifact-root {cli.folder / 'mlartifacts'}"
    )


def test_a_tracking_server_is_not_opened_again(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://mlflow.example:5000")
    result = cli("mlflow", "ui")
    assert result.exit_code == 1
    assert result.stderr.strip() == (
        "Error: MLflow's tracking URI is http://mlflow.example:5000: open that address in a browser; "
        "its server serves the UI."
    )


def test_the_ui_shows_what_evalstore_logged(cli: Cli, tmp_path: Path, mlflow_store: str) -> None:
    # the MLflow store in EVALSTORE_HOME (the test's folder) has its schema already (mlflow_store):
    # creating one is tests/db/test_workers.py's to check, and its migrations cost seconds of CPU
    assert mlflow_store == f"sqlite:///{cli.folder / 'mlflow.db'}"
    cli.upgrade()
    assert cli("qrels", "import", str(SAMPLE / "qrels.test"), "--name", "sample").exit_code == 0
    assert cli("runs", "register", str(SAMPLE / "results.test"), "--name", "STANDARD").exit_code == 0
    done = cli("evaluate", "--qrels", "sample", "--all-runs", "--wait", "--wait-mlflow")
    assert done.exit_code == 0, done.output
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    log = (tmp_path / "ui.log").open("wb")
    ui = subprocess.Popen(
        [str(Path(sys.executable).parent / "evalstore"), "mlflow", "ui", "--port", str(port)],
        env={**os.environ, "EVALSTORE_HOME": str(cli.folder)},
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    api = f"http://127.0.0.1:{port}/api/2.0/mlflow"
    try:
        deadline = time.monotonic() + 300  # the first time on a machine, uv fetches the release
        with httpx.Client() as http:  # one client for the probes (httpx.get: a TLS context, ~50 ms of CPU, each)
            while True:
                assert ui.poll() is None, (tmp_path / "ui.log").read_text()
                try:
                    answer = http.get(f"{api}/experiments/search", params={"max_results": 10}, timeout=5)
                    if answer.status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                assert time.monotonic() < deadline, (tmp_path / "ui.log").read_text()
                time.sleep(0.1)  # a probe is one local request: a second's step only added to the wait
        experiments = {e["name"]: e["experiment_id"] for e in answer.json()["experiments"]}
        assert "evalstore/sample" in experiments, experiments
        runs = httpx.post(
            f"{api}/runs/search", json={"experiment_ids": [experiments["evalstore/sample"]]}, timeout=30
        ).json()["runs"]
        assert len(runs) == 1
        assert httpx.get(f"http://127.0.0.1:{port}/", timeout=30).status_code == 200  # the UI's page itself
        # MLflow's GenAI job runner and Huey consumer are not started (evalstore's runs need neither)
        started = _commands_in_session(ui.pid)
        assert any("mlflow" in command for command in started), started
        assert not [c for c in started if "huey" in c or "job_runner" in c], started
    finally:
        os.killpg(ui.pid, 15)
        try:
            ui.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(ui.pid, 9)
            ui.wait()
        log.close()


def _commands_in_session(session: int) -> list[str]:
    """The command lines of the live processes in ``session`` (a process started with
    ``start_new_session`` leads its own)."""
    commands = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            # after the command's name in parentheses: state, parent, process group, session
            if int(stat.read_text().rsplit(")", 1)[1].split()[3]) == session:
                commands.append((stat.parent / "cmdline").read_bytes().replace(b"\0", b" ").decode())
        except (OSError, ValueError, IndexError):  # gone meanwhile
            continue
    return commands
