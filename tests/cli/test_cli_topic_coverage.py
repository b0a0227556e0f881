"""`evaluate --all-runs` skips the runs that share no topic with the qrels (they would score 0 on
every topic and be logged to MLflow as poor systems), with one stderr line each and how many;
the server's setting turns the skipping off."""

from __future__ import annotations

import json

import pytest

from tests.conftest import Cli
from tests.factories import synthetic_run_text


def _with_foreign_runs(synthetic_cli) -> Cli:  # type: ignore[no-untyped-def]
    cli = synthetic_cli(["alpha", "beta"])
    for seed, name in enumerate(["other-1", "other-2"]):
        (cli.folder / name).write_text(synthetic_run_text(seed, name, topics=["901", "902"]))
        assert cli("runs", "register", str(cli.folder / name), "--name", name).exit_code == 0
    return cli


def test_all_runs_skips_the_runs_sharing_no_topic(synthetic_cli) -> None:  # type: ignore[no-untyped-def]
    cli = _with_foreign_runs(synthetic_cli)
    done = cli("evaluate", "--qrels", "q", "--all-runs", "--measures", "AP", "--wait", "--format", "json")
    assert done.exit_code == 0, done.stderr
    assert sorted(row["run"] for row in json.loads(done.stdout)) == ["alpha", "beta"]
    said = [line for line in done.stderr.splitlines() if "skipped" in line]
    assert said == [
        "warning: skipped run 'other-1': it shares no topic with qrels 'q' and would score 0 on every topic",
        "warning: skipped run 'other-2': it shares no topic with qrels 'q' and would score 0 on every topic",
        "2 of the runs skipped: they share no topic with qrels 'q' (EVALSTORE_REFUSE_NO_SHARED_TOPIC=off evaluates them)",
    ]
    named = cli("evaluate", "--qrels", "q", "--run", "other-1", "--measures", "AP", "--wait", "--format", "json")
    assert named.exit_code == 0 and json.loads(named.stdout)[0]["AP"] == 0.0  # named: as asked


def test_the_setting_off_evaluates_them(synthetic_cli, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    cli = _with_foreign_runs(synthetic_cli)
    monkeypatch.setenv("EVALSTORE_REFUSE_NO_SHARED_TOPIC", "off")
    done = cli("evaluate", "--qrels", "q", "--all-runs", "--measures", "AP", "--wait", "--format", "json")
    assert done.exit_code == 0, done.stderr
    assert sorted(row["run"] for row in json.loads(done.stdout)) == ["alpha", "beta", "other-1", "other-2"]
    assert "skipped" not in done.stderr
