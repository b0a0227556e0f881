"""Options that conflict, or neither of two when one is needed: exit code 2 with the command's
usage line and a message naming the fix, before anything is read or written."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from evalstore.cli import app
from tests.cli.usage import usage_message

CASES = [
    (
        ["evaluate", "--labels", "l", "--run", "r"],
        "--labels evaluates predictions; --qrels, --run and --all-runs are for ranking runs. Give one or the other.",
    ),
    (["evaluate", "--run", "r"], "Give --qrels NAME (ranking runs) or --labels NAME (predictions)."),
    (["evaluate", "--qrels", "q"], "Name runs with --run NAME (repeatable) or pass --all-runs, not both."),
    (
        ["evaluate", "--qrels", "q", "--run", "r", "--all-runs"],
        "Name runs with --run NAME (repeatable) or pass --all-runs, not both.",
    ),
    (
        ["leaderboard", "--qrels", "q", "--labels", "l"],
        "Give one of --qrels (ranking runs), --labels (predictions) or --nuggets (answer runs).",
    ),
    (
        ["leaderboard", "--qrels", "q", "--nuggets", "b"],
        "Give one of --qrels (ranking runs), --labels (predictions) or --nuggets (answer runs).",
    ),
    (
        ["evaluate", "--nuggets", "b", "--qrels", "q", "--all-answers"],
        "--nuggets evaluates answer runs; --qrels, --labels, --run and --all-runs are for the others.",
    ),
    (
        ["evaluate", "--nuggets", "b"],
        "Name answer runs with --answers NAME (repeatable) or pass --all-answers.",
    ),
    (["nuggets", "import", "f", "--name", "b", "--run-alias", "x"], "--run-alias takes FILE_RUN=REGISTERED, not 'x'."),
    (
        ["leaderboard"],
        "Give --qrels NAME (ranking runs), --labels NAME (predictions) or --nuggets NAME (answer runs).",
    ),
    (
        ["compare", "a", "b", "--qrels", "q", "--labels", "l"],
        "Give --qrels (ranking runs) or --labels (predictions), not both.",
    ),
    (
        ["compare", "a", "b", "--qrels", "q"],
        "Give --qrels NAME and --measure M (ranking runs), --nuggets BANK (answer runs), or --labels NAME "
        "(predictions).",
    ),
    (
        ["correlate", "--qrels", "q", "--qrels", "r", "--measure", "AP", "--measure", "P@10"],
        "Give one --qrels and two --measure, or two --qrels and one --measure.",
    ),
    (["pool", "build", "--name", "p"], "Name runs with --run NAME (repeatable) or pass --all-runs, not both."),
]


@pytest.mark.parametrize(("args", "message"), CASES, ids=[" ".join(args) for args, _ in CASES])
def test_conflicting_options_exit_2_with_the_usage_line(args: list[str], message: str, tmp_path) -> None:  # type: ignore[no-untyped-def]
    url = f"sqlite:///{tmp_path / 'never-created.db'}"
    result = CliRunner().invoke(app, ["--database-url", url, *args])
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith(f"Usage: evalstore {args[0]}")
    assert usage_message(result.stderr) == message
    assert not (tmp_path / "never-created.db").exists()  # refused before the database was opened
