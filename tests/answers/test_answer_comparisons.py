"""`evalstore compare --nuggets BANK`: answer runs compared topic by topic on their nugget scores
with the ranking runs' paired tests (equal to scipy's on the per-topic values worked out here from
the labels), Tukey's HSD, a recorded seed for the random ones, and a topic one run was not
assessed on refused or scored 0; on SQLite and PostgreSQL."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy import stats
from sqlalchemy import Engine
from typer.testing import CliRunner

from evalstore.cli import app

VALUE = {"support": 1.0, "partial_support": 0.5, "not_support": 0.0}
# per run, per topic: the labels of (vital, okay)
LABELS = {
    "ra": {
        "t1": ("support", "support"),
        "t2": ("partial_support", "not_support"),
        "t3": ("support", "partial_support"),
        "t4": ("not_support", "support"),
        "t5": ("support", "not_support"),
    },
    "rb": {
        "t1": ("not_support", "support"),
        "t2": ("not_support", "not_support"),
        "t3": ("partial_support", "partial_support"),
        "t4": ("not_support", "not_support"),
        "t5": ("support", "support"),
    },
}


def weighted(run: str) -> np.ndarray:
    """W per topic: (a(vital) + 0.5 a(okay)) / (1 + 0.5)."""
    return np.array([(VALUE[v] + 0.5 * VALUE[o]) / 1.5 for v, o in LABELS[run].values()])


@pytest.fixture
def evalstore(engine: Engine, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Any:
    monkeypatch.setenv("EVALSTORE_MLFLOW", "off")
    monkeypatch.setenv("EVALSTORE_HOME", str(tmp_path))
    url = engine.url.render_as_string(hide_password=False)
    runner = CliRunner()

    def invoke(*args: str) -> Any:
        return runner.invoke(app, ["--database-url", url, *args])

    return invoke


def _assessed(evalstore: Any, tmp_path: Path, labels: dict[str, dict[str, tuple[str, str]]]) -> None:
    answers, assessments = [], []
    for run, topics in labels.items():
        for topic, (vital, okay) in topics.items():
            text = f"{run} answers {topic}."
            answers.append(
                {"run_id": run, "topic_id": topic, "references": ["s1"], "answer": [{"text": text, "citations": [0]}]}
            )
            nuggets = [
                {"text": f"{topic} vital", "importance": "vital", "assignment": vital},
                {"text": f"{topic} okay", "importance": "okay", "assignment": okay},
            ]
            assessments.append({"qid": topic, "query": "q", "nuggets": nuggets, "run_id": run, "answer_text": text})
    (tmp_path / "answers.jsonl").write_text("".join(json.dumps(a) + "\n" for a in answers))
    (tmp_path / "assessed.jsonl").write_text("".join(json.dumps(a) + "\n" for a in assessments))
    assert evalstore("answers", "register", str(tmp_path / "answers.jsonl")).exit_code == 0
    done = evalstore("nuggets", "import", str(tmp_path / "assessed.jsonl"), "--name", "b")
    assert done.exit_code == 0, done.stderr
    assert evalstore("evaluate", "--nuggets", "b", "--all-answers", "--wait").exit_code == 0


def test_answer_runs_are_compared_with_the_paired_t_test_on_their_per_topic_w(evalstore: Any, tmp_path: Path) -> None:
    _assessed(evalstore, tmp_path, LABELS)
    done = evalstore("compare", "--nuggets", "b", "ra", "rb", "--format", "json")
    assert done.exit_code == 0, done.stderr
    result = json.loads(done.stdout)
    (pair,) = result["comparisons"]
    a, b = weighted("ra"), weighted("rb")
    expected = stats.ttest_rel(a, b)
    assert (pair["measure"], pair["run"], pair["versus"], pair["topics"]) == ("W", "ra", "rb", 5)
    assert pair["mean_run"] == pytest.approx(a.mean(), abs=1e-12)
    assert pair["difference"] == pytest.approx((a - b).mean(), abs=1e-12)
    assert pair["statistic"] == pytest.approx(expected.statistic, abs=1e-10)
    assert pair["p_value"] == pytest.approx(expected.pvalue, abs=1e-10)
    low, high = stats.t.interval(0.95, 4, loc=(a - b).mean(), scale=stats.sem(a - b))
    assert (pair["ci_low"], pair["ci_high"]) == (pytest.approx(low, abs=1e-10), pytest.approx(high, abs=1e-10))
    assert (pair["wins"], pair["ties"], pair["losses"]) == (4, 0, 1)
    assert result["settings"]["qrels"] == "b" and result["settings"]["evaluation_options"] == {"assessor": "human"}

    # nuggetizer's names, several measures at once; a random test records its seed
    random = evalstore(
        "compare",
        "--nuggets",
        "b",
        "ra",
        "rb",
        "--measure",
        "vital_score",
        "--test",
        "randomization",
        "--format",
        "json",
    )
    assert random.exit_code == 0, random.stderr
    settings = json.loads(random.stdout)["settings"]
    assert settings["measures"] == ["V"] and isinstance(settings["seed"], int)
    assert f"seed {settings['seed']} (pass --seed {settings['seed']} to reproduce)" in random.stderr
    tukey = evalstore("compare", "--nuggets", "b", "ra", "rb", "--multi", "tukey", "--format", "json")
    assert tukey.exit_code == 0 and json.loads(tukey.stdout)["settings"]["test"] == "tukey"


def test_a_topic_one_run_was_not_assessed_on_is_refused_or_scored_zero(evalstore: Any, tmp_path: Path) -> None:
    labels = {"ra": LABELS["ra"], "rb": {t: v for t, v in LABELS["rb"].items() if t != "t5"}}
    _assessed(evalstore, tmp_path, labels)
    refused = evalstore("compare", "--nuggets", "b", "ra", "rb")
    assert refused.exit_code == 1
    assert (
        "Error: Answer run 'rb' has no W on 1 topic(s) the other runs have (t5): it is not assessed there. Assess "
        "it, or pass --missing zero to score them 0.\n"
    ) == refused.stderr
    zero = evalstore("compare", "--nuggets", "b", "ra", "rb", "--missing", "zero", "--format", "json")
    assert zero.exit_code == 0, zero.stderr
    result = json.loads(zero.stdout)
    assert result["zero_filled_topics"] == {"rb": ["t5"]}
    b = np.append(weighted("rb")[:4], 0.0)
    assert result["comparisons"][0]["p_value"] == pytest.approx(stats.ttest_rel(weighted("ra"), b).pvalue, abs=1e-10)
    unknown = evalstore("compare", "--nuggets", "b", "ra", "nobody")
    assert unknown.exit_code == 1
    assert unknown.stderr == (
        "Error: Answer run 'nobody' has no evaluation on nugget bank 'b' with human labels. "
        "Evaluate it first ('evalstore evaluate --nuggets b --answers nobody --wait').\n"
    )
    both = evalstore("compare", "--nuggets", "b", "--qrels", "q", "ra", "rb")
    assert both.exit_code == 2 and "Give --qrels (ranking runs) or --nuggets (answer runs), not both." in both.stderr
