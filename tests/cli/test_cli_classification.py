"""`evalstore labels|predictions|clusters`, and evaluate/leaderboard/compare with --labels, as a user types them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.usage import usage_message
from tests.db.test_classification import FRUIT_GOLD, FRUIT_PRED


@pytest.fixture
def cli(synthetic_cli, tmp_path: Path):  # type: ignore[no-untyped-def]
    invoke = synthetic_cli([])
    (tmp_path / "gold.csv").write_text(FRUIT_GOLD)
    (tmp_path / "p.csv").write_text(FRUIT_PRED)
    (tmp_path / "right.csv").write_text(
        FRUIT_GOLD.replace(",u1", "")
        .replace(",u2", "")
        .replace(",u3", "")
        .replace("item_id,label,group", "item_id,label")
    )
    return invoke


def test_classification_from_the_command_line(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    imported = cli("labels", "import", str(tmp_path / "gold.csv"), "--name", "fruit")
    assert imported.exit_code == 0 and imported.stderr == "labels 'fruit' stored: 9 items, 3 classes, 3 groups\n"
    for name, path in (("p", "p.csv"), ("oracle", "right.csv")):
        done = cli("predictions", "register", str(tmp_path / path), "--name", name, "--labels", "fruit")
        assert done.exit_code == 0, done.stderr
    evaluated = cli("evaluate", "--labels", "fruit", "--wait", "--format", "json")
    assert evaluated.exit_code == 0, evaluated.stderr
    rows = {r["predictions"]: r for r in json.loads(evaluated.stdout)}
    assert rows["oracle"]["accuracy"] == 1.0 and rows["p"]["accuracy"] == pytest.approx(4 / 9)
    [job] = [j for j in json.loads(cli("jobs", "list", "--format", "json").stdout) if j["run"] == "p"]
    shown = json.loads(cli("jobs", "show", str(job["id"]), "--format", "json").stdout)[0]
    assert (shown["kind"], shown["predictions"], shown["labels"]) == ("classifier", "p", "fruit")
    assert "run" not in shown and "qrels" not in shown and "measures" not in shown
    # results show of a prediction set: every aggregate, per group with --per-query, any stored name
    summary = json.loads(cli("results", "show", "--labels", "fruit", "--predictions", "p", "--format", "json").stdout)
    values = {row["measure"]: row["value"] for row in summary}
    assert values["accuracy"] == pytest.approx(4 / 9) and values["precision.lemon"] == pytest.approx(1 / 3)
    groups = json.loads(
        cli(
            "results",
            "show",
            "--labels",
            "fruit",
            "--predictions",
            "p",
            "--measure",
            "accuracy",
            "--per-query",
            "--format",
            "json",
        ).stdout
    )
    assert [row["group"] for row in groups][-1] == "all" and len(groups) == 4
    assert groups[-1]["accuracy"] == pytest.approx(4 / 9)
    unknown = cli("results", "show", "--labels", "fruit", "--predictions", "p", "--measure", "precision.kiwi")
    assert unknown.exit_code == 1 and unknown.stderr.startswith(
        "Error: No stored value of 'precision.kiwi' in evaluation "
    )
    per_class = cli("leaderboard", "--labels", "fruit", "--measure", "recall.orange", "--format", "csv")
    assert per_class.exit_code == 0 and per_class.stdout.splitlines()[0] == "predictions,system,kind,recall.orange"
    board = cli("leaderboard", "--labels", "fruit", "--measure", "precision_macro", "--format", "csv")
    assert board.stdout.splitlines() == [
        "predictions,system,kind,precision_macro",
        "oracle,,classifier,1.0",
        "p,,classifier,0.5777777777777778",
    ]  # full precision, as JSON
    compared = cli("compare", "--labels", "fruit", "p", "oracle", "--test", "mcnemar", "--format", "json")
    assert compared.exit_code == 0, compared.stderr
    [pair] = json.loads(compared.stdout)
    assert pair["only first right"] == 0 and pair["only second right"] == 5
    by_group = cli(
        "compare",
        "--labels",
        "fruit",
        "p",
        "oracle",
        "--test",
        "randomization",
        "--measure",
        "accuracy",
        "--seed",
        "3",
        "--format",
        "json",
    )
    assert by_group.exit_code == 0 and json.loads(by_group.stdout)[0]["groups"] == 3
    assert by_group.stderr.endswith("only 3 groups: with fewer than 10, intervals and p-values mean little\n")
    # first minus second, as ranking compare reports it: p is worse than the oracle
    row = json.loads(by_group.stdout)[0]
    assert row["difference"] == pytest.approx(row["mean first"] - row["mean second"]) and row["difference"] < 0


def test_bad_input_gives_exit_code_1_and_a_wrong_mix_exit_code_2(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    assert cli("labels", "import", str(tmp_path / "gold.csv"), "--name", "fruit").exit_code == 0
    (tmp_path / "bad.csv").write_text(FRUIT_PRED.replace("9,apple", "9,banana"))
    bad = cli("predictions", "register", str(tmp_path / "bad.csv"), "--name", "b", "--labels", "fruit")
    assert bad.exit_code == 1
    assert bad.stderr == (f"{tmp_path / 'bad.csv'}:10: label 'banana' is not a gold class (apple, lemon, orange)\n")
    mixed = cli("evaluate", "--labels", "fruit", "--qrels", "q")
    assert mixed.exit_code == 2 and mixed.stderr.startswith("Usage: evalstore evaluate [OPTIONS]\n")
    assert usage_message(mixed.stderr) == (
        "--labels evaluates predictions; --qrels, --run and --all-runs are for ranking runs. Give one or the other."
    )
    neither = cli("evaluate", "--all-runs")
    assert neither.exit_code == 2
    assert usage_message(neither.stderr) == "Give --qrels NAME (ranking runs) or --labels NAME (predictions)."
    nothing = cli("evaluate", "--labels", "fruit")
    assert nothing.exit_code == 1 and nothing.stderr.startswith("Error: No predictions are registered for 'fruit'.")


def test_prediction_jobs_go_through_the_queue_and_the_worker(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    assert cli("labels", "import", str(tmp_path / "gold.csv"), "--name", "fruit").exit_code == 0
    assert cli("predictions", "register", str(tmp_path / "p.csv"), "--name", "p", "--labels", "fruit").exit_code == 0
    queued = cli("evaluate", "--labels", "fruit", "--predictions", "p", "--format", "json")
    assert queued.exit_code == 0 and queued.stderr == "job 1: predictions 'p' on 'fruit': queued\n"
    [job] = json.loads(queued.stdout)
    assert (job["kind"], job["run"], job["qrels"], job["state"]) == ("classifier", "p", "fruit", "queued")
    listed = json.loads(cli("jobs", "list", "--qrels", "fruit", "--format", "json").stdout)
    assert [(j["id"], j["kind"], j["state"]) for j in listed] == [(1, "classifier", "queued")]
    worked = cli("worker", "--until-empty", "--no-mlflow", "--nice", "0")
    assert worked.exit_code == 0 and worked.stderr.endswith("worker stopped: 1 jobs done\n")
    again = cli("evaluate", "--labels", "fruit", "--wait", "--format", "json")
    assert again.stderr.startswith("job 1: predictions 'p' on 'fruit': reused\n")
    [row] = json.loads(again.stdout)
    assert row["evaluation"] == 1 and row["accuracy"] == pytest.approx(4 / 9)
    cancelled = cli("evaluate", "--labels", "fruit", "--threshold", "best-f1")
    assert cancelled.exit_code == 0
    assert cli("jobs", "cancel", "2").stderr == "job 2 cancelled (predictions 'p' on 'fruit')\n"
