"""A CLI on a fresh SQLite store holding synthetic qrels 'q' and a few runs (compare and pool tests)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.conftest import Cli
from tests.factories import synthetic_qrels_text, synthetic_run_text


@pytest.fixture
def synthetic_cli(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> Callable[[list[str]], Cli]:
    """synthetic_cli(run_names) -> cli: the CLI on a store with qrels 'q' and those runs."""
    monkeypatch.setenv("EVALSTORE_MLFLOW", "off")

    def make(run_names: list[str]) -> Cli:
        (cli.folder / "qrels").write_text(synthetic_qrels_text())
        cli.upgrade()
        assert cli("qrels", "import", str(cli.folder / "qrels"), "--name", "q").exit_code == 0
        for seed, name in enumerate(run_names):
            (cli.folder / name).write_text(synthetic_run_text(seed, name))
            assert cli("runs", "register", str(cli.folder / name), "--name", name).exit_code == 0
        return cli

    return make
