"""`evalstore tasks create --nuggets` and `tasks evaluate`: the organiser's command line for a task
that takes generated answers."""

from __future__ import annotations

import json

import pytest

from evalstore.db.engine import make_engine
from evalstore.services import access, tasks
from tests.cli.usage import usage_message
from tests.conftest import Cli, shared_path


def test_an_organiser_creates_and_evaluates_an_answer_task(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVALSTORE_MLFLOW", "off")
    cli.upgrade()
    assert (
        cli("nuggets", "import", str(shared_path("rag24", "nuggets.example.jsonl")), "--name", "rag24").exit_code == 0
    )
    both = cli("tasks", "create", "x", "--qrels", "q", "--nuggets", "rag24")
    assert both.exit_code == 2
    assert (
        usage_message(both.stderr) == "Give --qrels (a task of runs) or --nuggets (a task of answers), one of the two."
    )
    made = cli("tasks", "create", "rag", "--nuggets", "rag24", "--hidden", "--official-measure", "weighted_score")
    assert made.exit_code == 0, made.stderr
    assert "created task 'rag' on nugget bank 'rag24' (answers) (hidden)" in made.stderr
    shown = json.loads(cli("tasks", "show", "rag", "--format", "json").stdout)[0]
    assert (shown["nuggets"], shown["qrels"], shown["takes"], shown["official_measure"]) == (
        "rag24",
        None,
        "answers",
        "W",
    )
    split = cli("tasks", "update", "rag", "--private-topics", "0.5")
    assert split.exit_code == 1 and "Task 'rag' takes answers on a nugget bank; it keeps no private topics." in (
        split.stderr
    )

    engine = make_engine(cli.url)
    try:
        access.add_user(engine, "pat", role="participant", team="uni-a")
        pat = access.authenticate(engine, access.create_token(engine, "pat").token)
        answers = shared_path("rag24", "answers", "baseline_rag24.test_gpt-4o_top20.jsonl")
        submitted = tasks.submit_answers(engine, pat, "rag", answers, name="uni-a-gpt")
        assert submitted.job is None and submitted.answers is not None and submitted.answers.topics == 301
    finally:
        engine.dispose()
    waiting = cli("tasks", "evaluate", "rag", "--format", "json")
    assert waiting.exit_code == 0, waiting.stderr
    assert json.loads(waiting.stdout) == []
    assert "waiting: uni-a-gpt: no human assignment on nugget bank 'rag24' yet" in waiting.stderr
    nist = shared_path("rag24", "nugget_assignment.example.jsonl")
    assert cli("nuggets", "import", str(nist), "--name", "rag24").exit_code == 0
    done = cli("tasks", "evaluate", "rag", "--wait", "--format", "json")
    assert done.exit_code == 0, done.stderr
    ((row),) = json.loads(done.stdout)
    assert (row["run"], row["state"], row["error"]) == ("uni-a-gpt", "done", None)
    board = cli("leaderboard", "--nuggets", "rag24", "--measure", "W", "--format", "json")
    rows = {r["answers"]: r for r in json.loads(board.stdout)}
    assert rows["uni-a-gpt"]["W"] == pytest.approx(0.4737, abs=5e-5)
