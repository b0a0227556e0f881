"""A CLI on a fresh SQLite store holding synthetic qrels 'q' and a few runs (compare and pool tests)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from evalstore.cli import app
from tests.db.test_compare import _qrels_text, _run_text


@pytest.fixture
def synthetic_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[[list[str]], Callable[..., Any]]:
    """synthetic_cli(run_names) -> invoke(*args): the CLI on a store with qrels 'q' and those runs."""
    monkeypatch.setenv("EVALSTORE_HOME", str(tmp_path))
    monkeypatch.setenv("EVALSTORE_MLFLOW", "off")
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    runner = CliRunner()

    def invoke(*args: str) -> Any:
        return runner.invoke(app, ["--database-url", url, *args])

    def make(run_names: list[str]) -> Callable[..., Any]:
        (tmp_path / "qrels").write_text(_qrels_text())
        assert invoke("db", "upgrade").exit_code == 0
        assert invoke("qrels", "import", str(tmp_path / "qrels"), "--name", "q").exit_code == 0
        for seed, name in enumerate(run_names):
            (tmp_path / name).write_text(_run_text(seed, name))
            assert invoke("runs", "register", str(tmp_path / name), "--name", name).exit_code == 0
        return invoke

    return make
