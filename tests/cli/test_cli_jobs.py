"""The queue from the command line: evaluate, worker, jobs, results show, mlflow sync."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from evalstore.cli import app
from evalstore.cli._context import CliState
from tests.conftest import Cli
from tests.factories import SAMPLE


@pytest.fixture
def cli(cli: Cli) -> Cli:
    """The shared ``cli`` with trec_eval's sample stored: qrels 'test', run 'std'."""
    cli.upgrade()
    assert cli("qrels", "import", str(SAMPLE / "qrels.test"), "--name", "test").exit_code == 0
    assert cli("runs", "register", str(SAMPLE / "results.test"), "--name", "std").exit_code == 0
    return cli


def test_queue_then_work_then_read_back(cli, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("EVALSTORE_MLFLOW", "off")
    queued = cli("evaluate", "--qrels", "test", "--run", "std", "--measures", "AP,P@10", "--format", "json")
    assert queued.exit_code == 0, queued.stderr
    assert queued.stderr == "job 1: run 'std' on 'test': queued\n"
    assert [(j["id"], j["state"]) for j in json.loads(queued.stdout)] == [(1, "queued")]
    again = cli("evaluate", "--qrels", "test", "--run", "std", "--measures", "map,P_10", "--format", "json")
    assert again.stderr == "job 1: run 'std' on 'test': already queued\n"

    missing = cli("results", "show", "--qrels", "test", "--run", "std")
    assert missing.exit_code == 1
    assert missing.stderr == (
        "Error: No finished evaluation of run 'std' on qrels 'test'. "
        "Run 'evalstore evaluate --qrels test --run std --wait'.\n"
    )

    # in this process: a worker's default --nice would lower the test process's own priority for good
    worked = cli("worker", "--until-empty", "--no-mlflow", "--nice", "0")
    assert worked.exit_code == 0, worked.stderr
    assert worked.stderr.endswith("worker stopped: 1 jobs done\n")
    listed = json.loads(cli("jobs", "list", "--format", "json").stdout)
    assert [(j["id"], j["state"], j["attempts"], j["mlflow_state"]) for j in listed] == [(1, "done", 1, "pending")]

    shown = cli("results", "show", "--qrels", "test", "--run", "std", "--per-query", "--format", "csv")
    # full precision in CSV (trec_eval's out.test.aq prints these to 4 decimals)
    assert shown.stdout == (
        "query,AP,P@10\n301,0.03242534480374725,0.2\n302,0.4174542400168801,0.7\n"
        "303,0.08575559636908103,0.0\nall,0.17854506039656948,0.3\n"
    )
    absent = cli("results", "show", "--qrels", "test", "--run", "std", "--measure", "nDCG@10")
    assert absent.exit_code == 1
    assert absent.stderr == (
        "Error: Measure 'nDCG@10' is not in evaluation 1. Evaluate it with 'evalstore "
        "evaluate --qrels test --run std --measures nDCG@10 --wait'.\n"
    )

    refused = cli("jobs", "cancel", "1")
    assert refused.exit_code == 1
    assert refused.stderr == "Error: Job 1 is already done; only queued or running jobs can be cancelled.\n"
    refused = cli("jobs", "retry", "1")
    assert refused.exit_code == 1
    assert refused.stderr == (
        "Error: Job 1 is done; only failed or cancelled jobs can be retried. To recompute "
        "a done one: 'evalstore evaluate ... --force'.\n"
    )
    off = cli("mlflow", "sync")
    assert off.exit_code == 1
    assert off.stderr.endswith("Error: MLflow logging is off (EVALSTORE_MLFLOW=off); unset it to sync.\n")


def test_cancel_and_retry(cli) -> None:  # type: ignore[no-untyped-def]
    cli("evaluate", "--qrels", "test", "--run", "std", "--measures", "AP")
    cancelled = cli("jobs", "cancel", "1")
    assert (cancelled.exit_code, cancelled.stderr) == (0, "job 1 cancelled (run 'std' on 'test')\n")
    assert json.loads(cli("jobs", "show", "1", "--format", "json").stdout)[0]["state"] == "cancelled"
    assert cli("worker", "--until-empty", "--no-mlflow", "--nice", "0").stderr.endswith("worker stopped: 0 jobs done\n")
    retried = cli("jobs", "retry", "1")
    assert (retried.exit_code, retried.stderr) == (0, "job 1 queued again (run 'std' on 'test')\n")
    assert json.loads(cli("jobs", "list", "--state", "queued", "--format", "json").stdout)[0]["id"] == 1
    unknown = cli("jobs", "list", "--state", "lost")
    assert (unknown.exit_code, unknown.stderr) == (
        1,
        "Error: Unknown job state 'lost'; use one of queued, running, done, failed, cancelled.\n",
    )


def test_wait_computes_in_process_logs_to_mlflow_and_reads_back_as_trec_eval(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    done = cli(
        "evaluate",
        "--qrels",
        "test",
        "--run",
        "std",
        "--measures",
        "all_trec",
        "--wait",
        "--wait-mlflow",
        "--format",
        "json",
    )
    assert done.exit_code == 0, done.stderr
    [job] = json.loads(done.stdout)
    assert (job["state"], job["mlflow_state"]) == ("done", "logged")
    assert job["AP"] == pytest.approx(0.1785, abs=5e-5) and job["P@10"] == pytest.approx(
        0.3
    )  # trec_eval: 0.1785, 0.3000
    assert (tmp_path / "mlflow.db").exists() and (tmp_path / "mlartifacts").is_dir()
    stored = cli("results", "show", "--qrels", "test", "--run", "std", "--per-query", "--format", "trec").stdout
    direct = (
        CliRunner()
        .invoke(
            app, ["trec-eval", "-q", "-c", "-m", "all_trec", str(SAMPLE / "qrels.test"), str(SAMPLE / "results.test")]
        )
        .stdout
    )
    assert stored == direct
    summary = cli("results", "show", "--qrels", "test", "--run", "std", "--measure", "map", "--format", "trec")
    assert summary.stdout == "map                   \tall\t0.1785\n"
    status = cli("mlflow", "status")
    assert status.stdout == f"tracking uri: sqlite:///{tmp_path / 'mlflow.db'}\npending: 0\n"


def test_wait_prints_the_scores_and_hands_mlflow_to_a_background_process(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A person at the terminal waits for the numbers, not for MLflow: `evaluate --wait` returns
    with the job done and MLflow pending; a detached `evalstore mlflow sync` logs it."""
    state = CliState(cli.url)
    done = cli("evaluate", "--qrels", "test", "--run", "std", "--measures", "AP,P@10,nDCG@10", "--wait", obj=state)
    assert done.exit_code == 0, done.stderr
    assert "0.1785" in done.stdout and "pending" in done.stdout  # AP, and MLflow not waited for
    [table_job] = json.loads(cli("jobs", "list", "--format", "json").stdout)
    assert table_job["mlflow_state"] in ("pending", "logging", "logged")
    assert state.context().wait_for_background() == [0]
    [job] = json.loads(cli("jobs", "list", "--format", "json").stdout)
    assert job["mlflow_state"] == "logged"
    assert cli("mlflow", "status").stdout.endswith("pending: 0\n")
    assert "logged 1 evaluations" in (tmp_path / "logs" / "mlflow-sync.log").read_text()
