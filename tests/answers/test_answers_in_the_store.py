"""Answer runs and nugget banks through the command line, on SQLite and PostgreSQL: TREC RAG
2024's three baselines and NIST's example assignments end to end (the leaderboard equal to the
track's formulas worked out here from the files), refusals that store nothing, and how an
assessed run is matched to a registered one."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine
from typer.testing import CliRunner

from evalstore.cli import app
from tests.conftest import shared_path

BASELINES = ("command-r-plus", "gpt-4o", "l31_70b_instruct")
# NIST's names for the baselines (PROVENANCE.md: two carry "frag_")
NIST_NAMES = {
    "baseline_frag_rag24.test_command-r-plus_top20": "baseline_rag24.test_command-r-plus_top20",
    "baseline_frag_rag24.test_gpt-4o_top20": "baseline_rag24.test_gpt-4o_top20",
    "baseline_rag24.test_l31_70b_instruct_top20": "baseline_rag24.test_l31_70b_instruct_top20",
}


@pytest.fixture
def evalstore(engine: Engine, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Any:
    monkeypatch.setenv("EVALSTORE_MLFLOW", "off")
    monkeypatch.setenv("EVALSTORE_HOME", str(tmp_path))
    url = engine.url.render_as_string(hide_password=False)
    runner = CliRunner()

    def invoke(*args: str) -> Any:
        return runner.invoke(app, ["--database-url", url, *args])

    return invoke


def _csv(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


def _expected_scores() -> dict[str, dict[str, float]]:
    """V_strict, A_strict, V, A, W of each run on the example topic, from NIST's file."""
    out = {}
    for line in shared_path("rag24", "nugget_assignment.example.jsonl").read_text().splitlines():
        record = json.loads(line)
        value = {"support": 1.0, "partial_support": 0.5, "not_support": 0.0}
        vital = [value[n["assignment"]] for n in record["nuggets"] if n["importance"] == "vital"]
        okay = [value[n["assignment"]] for n in record["nuggets"] if n["importance"] == "okay"]
        every = vital + okay
        out[NIST_NAMES[record["run_id"]]] = {
            "V_strict": sum(v == 1.0 for v in vital) / len(vital),
            "A_strict": sum(v == 1.0 for v in every) / len(every),
            "V": sum(vital) / len(vital),
            "A": sum(every) / len(every),
            "W": (sum(vital) + 0.5 * sum(okay)) / (len(vital) + 0.5 * len(okay)),
        }
    return out


def test_the_rag24_baselines_and_nists_assignments_end_to_end(evalstore: Any) -> None:
    for model in BASELINES:
        done = evalstore(
            "answers", "register", str(shared_path("rag24", "answers", f"baseline_rag24.test_{model}_top20.jsonl"))
        )
        assert done.exit_code == 0, done.stderr
    listed = json.loads(evalstore("answers", "list", "--format", "json").stdout)
    assert [(r["name"], r["topics"], r["ranking_run"]) for r in listed] == [
        (name, 301, name) for name in sorted(NIST_NAMES.values())
    ]
    bank = evalstore("nuggets", "import", str(shared_path("rag24", "nuggets.example.jsonl")), "--name", "rag24")
    assert bank.exit_code == 0, bank.stderr  # the bank first, then NIST's assignments on it
    imported = evalstore(
        "nuggets",
        "import",
        str(shared_path("rag24", "nugget_assignment.example.jsonl")),
        "--name",
        "rag24",
        "--format",
        "csv",
    )
    assert imported.exit_code == 0, imported.stderr
    assert "stored 48 human assignments" in imported.stderr
    assert {(r["assessed run"], r["stored for"], r["matched by"]) for r in _csv(imported.stdout)} == {
        ("baseline_frag_rag24.test_command-r-plus_top20", "baseline_rag24.test_command-r-plus_top20", "answer text"),
        ("baseline_frag_rag24.test_gpt-4o_top20", "baseline_rag24.test_gpt-4o_top20", "answer text"),
        ("baseline_rag24.test_l31_70b_instruct_top20", "baseline_rag24.test_l31_70b_instruct_top20", "name"),
    }
    evaluated = evalstore("evaluate", "--nuggets", "rag24", "--all-answers", "--wait")
    assert evaluated.exit_code == 0, evaluated.stderr
    board = evalstore("leaderboard", "--nuggets", "rag24", "--format", "csv")
    assert board.exit_code == 0, board.stderr
    rows = _csv(board.stdout)
    expected = _expected_scores()
    assert [r["answers"] for r in rows] == sorted(expected, key=lambda n: (-expected[n]["V_strict"], n))
    for row in rows:
        for measure, value in expected[row["answers"]].items():
            assert float(row[measure]) == pytest.approx(value, abs=1e-12), (row["answers"], measure)
            assert row[f"{measure}_topics"] == "1"
    # nuggetizer's names are accepted, and shown under the canonical one
    named = _csv(
        evalstore("leaderboard", "--nuggets", "rag24", "--measure", "weighted_score", "--format", "csv").stdout
    )
    assert [float(r["W"]) for r in named] == sorted((e["W"] for e in expected.values()), reverse=True)
    shown = evalstore(
        "answers", "show", "baseline_rag24.test_gpt-4o_top20", "--topic", "2024-105741", "--format", "json"
    )
    sentences = json.loads(shown.stdout)
    assert sentences[1]["citations"] == (
        "[0] msmarco_v2.1_doc_11_1429319552#2_3022858430; [1] msmarco_v2.1_doc_11_1429319552#1_3022856821"
    )
    # the same evaluation asked again is reused, not computed twice
    again = evalstore("evaluate", "--nuggets", "rag24", "--all-answers")
    assert again.stderr.count(": reused") == 3


def _answer(run: str, topic: str, sentences: list[str], references: list[str] | None = None) -> str:
    refs = references if references is not None else ["s0", "s1"]
    return json.dumps(
        {
            "run_id": run,
            "topic_id": topic,
            "references": refs,
            "answer": [{"text": text, "citations": [0] if refs else []} for text in sentences],
        }
    )


def test_a_bad_answer_file_is_refused_at_its_line_and_stores_nothing(evalstore: Any, tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    past = json.dumps(
        {"run_id": "r", "topic_id": "t3", "references": ["s0"], "answer": [{"text": "x", "citations": [1]}]}
    )
    bad.write_text("\n".join([_answer("r", "t1", ["a."]), _answer("r", "t2", ["b."]), past]) + "\n")
    done = evalstore("answers", "register", str(bad))
    assert done.exit_code == 1
    assert done.stderr.strip() == (f"{bad}:3: sentence 1 cites reference 1, but 'references' has 1 (indexes 0 to 0)")
    assert "Traceback" not in done.stderr + done.stdout
    assert json.loads(evalstore("answers", "list", "--format", "json").stdout) == []
    assert json.loads(evalstore("runs", "list", "--format", "json").stdout) == []


def _assignments(path: Path, run: str, answer_text: str, labels: list[str]) -> Path:
    nuggets = [
        {"text": f"n{i}", "importance": "vital" if i == 0 else "okay", "assignment": label}
        for i, label in enumerate(labels)
    ]
    path.write_text(
        json.dumps({"qid": "t1", "query": "q", "nuggets": nuggets, "run_id": run, "answer_text": answer_text}) + "\n"
    )
    return path


def test_an_assessed_run_is_matched_by_alias_and_refused_when_its_answer_differs(
    evalstore: Any, tmp_path: Path
) -> None:
    answers = tmp_path / "answers.jsonl"
    answers.write_text(_answer("ours", "t1", ["One.", "Two."]) + "\n" + _answer("other", "t1", ["Else."]) + "\n")
    assert evalstore("answers", "register", str(answers)).exit_code == 0
    nist = _assignments(tmp_path / "a.jsonl", "theirs", "One. Two.", ["support", "not_support"])
    wrong = evalstore("nuggets", "import", str(nist), "--name", "b", "--run-alias", "theirs=other")
    assert wrong.exit_code == 1
    assert (
        f"{nist}:1: the answer of theirs assessed on topic t1 is not the answer of registered run 'other'"
        in wrong.stderr
    )
    assert json.loads(evalstore("nuggets", "list", "--format", "json").stdout) == []  # nothing stored
    right = evalstore("nuggets", "import", str(nist), "--name", "b", "--run-alias", "theirs=ours", "--format", "json")
    assert right.exit_code == 0, right.stderr
    assert json.loads(right.stdout) == [{"assessed run": "theirs", "stored for": "ours", "matched by": "alias"}]
    unknown = evalstore("nuggets", "import", str(nist), "--name", "b", "--run-alias", "nobody=ours")
    assert unknown.exit_code == 1 and "No run named nobody is assessed in" in unknown.stderr


def test_an_unregistered_assessed_run_is_registered_from_its_answer_text(evalstore: Any, tmp_path: Path) -> None:
    nist = _assignments(tmp_path / "a.jsonl", "new", "Only text.", ["partial_support", "support"])
    done = evalstore("nuggets", "import", str(nist), "--name", "b", "--format", "json")
    assert done.exit_code == 0, done.stderr
    assert json.loads(done.stdout) == [
        {"assessed run": "new", "stored for": "new", "matched by": "registered from the answer text"}
    ]
    listed = json.loads(evalstore("answers", "list", "--format", "json").stdout)
    assert [(r["name"], r["layout"], r["ranking_run"]) for r in listed] == [("new", "assessed", None)]
    assert evalstore("evaluate", "--nuggets", "b", "--answers", "new", "--wait").exit_code == 0
    (job,) = json.loads(evalstore("jobs", "show", "1", "--format", "json").stdout)
    assert (job["kind"], job["answers"], job["nuggets"], job["state"]) == ("answers", "new", "b", "done")
    (row,) = _csv(
        evalstore("leaderboard", "--nuggets", "b", "--measure", "V", "--measure", "W", "--format", "csv").stdout
    )
    assert float(row["V"]) == 0.5  # the vital nugget partly supported
    assert float(row["W"]) == pytest.approx((0.5 + 0.5 * 1) / (1 + 0.5))


def test_citation_support_labels_give_support_precision_and_recall(evalstore: Any, tmp_path: Path) -> None:
    answers = tmp_path / "answers.jsonl"
    record = {
        "run_id": "r",
        "topic_id": "t1",
        "references": ["s0", "s1"],
        "answer": [
            {"text": "Full.", "citations": [1, 0]},
            {"text": "Partly.", "citations": [0]},
            {"text": "Not.", "citations": [1]},
            {"text": "Uncited.", "citations": []},
            {"text": "Unjudged.", "citations": [0]},
        ],
    }
    answers.write_text(json.dumps(record) + "\n")
    assert evalstore("answers", "register", str(answers)).exit_code == 0
    nist = _assignments(tmp_path / "a.jsonl", "r", "Full. Partly. Not. Uncited. Unjudged.", ["support", "not_support"])
    assert evalstore("nuggets", "import", str(nist), "--name", "b").exit_code == 0
    labels = tmp_path / "support.jsonl"

    def write(*lines: dict[str, Any]) -> Path:
        labels.write_text("".join(json.dumps({"run_id": "r", "topic_id": "t1", **line}) + "\n" for line in lines))
        return labels

    judged = [
        {"sentence": 1, "support": 2, "segment": "s1"},  # the first citation: s1, not s0
        {"sentence": 2, "support": 1},
        {"sentence": 3, "support": 0},
    ]
    for bad, problem in (
        ({"sentence": 4, "support": 2}, "sentence 4 of run r on topic t1 does not exist or cites nothing"),
        ({"sentence": 5, "support": 2, "segment": "s1"}, "sentence 5 of run r on topic t1 first cites s0, not s1"),
        ({"sentence": 2, "support": 3}, "'support' must be 2 (full), 1 (partial) or 0 (none)"),
        ({"sentence": 2, "support": 1}, "sentence 2 of run r on topic t1 is labelled twice (also at line 2)"),
    ):
        refused = evalstore("support", "import", str(write(*judged, bad)))
        assert refused.exit_code == 1
        assert f"{labels}:4: {problem}" in refused.stderr
    done = evalstore("support", "import", str(write(*judged)))
    assert done.exit_code == 0, done.stderr
    assert "stored 3 human citation-support labels of 1 answer runs" in done.stderr
    assert evalstore("evaluate", "--nuggets", "b", "--all-answers", "--wait").exit_code == 0
    board = evalstore(
        "leaderboard",
        "--nuggets",
        "b",
        "--measure",
        "support_precision",
        "--measure",
        "support_recall",
        "--format",
        "csv",
    )
    (row,) = _csv(board.stdout)
    assert float(row["support_precision"]) == pytest.approx(1.5 / 3)  # three judged cited sentences
    assert float(row["support_recall"]) == pytest.approx(1.5 / 4)  # and the uncited one


def test_a_topic_labelled_in_part_is_refused_with_the_count(engine: Engine, evalstore: Any, tmp_path: Path) -> None:
    from evalstore.db.models import NuggetAssignment
    from evalstore.db.session import unit_of_work

    nist = _assignments(tmp_path / "a.jsonl", "new", "Text.", ["support", "support", "not_support"])
    assert evalstore("nuggets", "import", str(nist), "--name", "b").exit_code == 0
    with unit_of_work(engine) as session:
        first = session.query(NuggetAssignment).order_by(NuggetAssignment.nugget_id).first()
        session.delete(first)
    done = evalstore("evaluate", "--nuggets", "b", "--all-answers", "--wait")
    assert done.exit_code == 1
    assert (
        "Answer run 'new' has human labels for 2 of the 3 nuggets of topic t1 in bank 'b'; "
        "label them all (or none) before evaluating." in done.stderr
    )


def test_an_answer_evaluation_is_logged_to_mlflow(
    cli: Any, mlflow_store: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from mlflow import MlflowClient

    monkeypatch.delenv("EVALSTORE_MLFLOW", raising=False)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", mlflow_store)
    cli.upgrade()
    nist = _assignments(tmp_path / "a.jsonl", "new", "Only text.", ["partial_support", "support"])
    assert cli("nuggets", "import", str(nist), "--name", "b").exit_code == 0
    done = cli("evaluate", "--nuggets", "b", "--all-answers", "--wait", "--wait-mlflow")
    assert done.exit_code == 0, done.stderr
    client = MlflowClient(mlflow_store)
    experiment = client.get_experiment_by_name("evalstore/b")
    assert experiment is not None
    (run,) = client.search_runs([experiment.experiment_id])
    assert run.data.tags["evalstore.kind"] == "answers"
    assert run.data.tags["evalstore.answers"] == "new"
    assert run.data.metrics["V"] == 0.5
    assert run.data.metrics["W"] == pytest.approx((0.5 + 0.5 * 1) / 1.5)


def test_nuggets_compare_reports_label_agreement_and_run_order(evalstore: Any, tmp_path: Path) -> None:
    from scipy.stats import kendalltau
    from sklearn.metrics import cohen_kappa_score

    order = {"not_support": 0, "partial_support": 1, "support": 2}
    human, judge = [], []
    people, machine = [], []
    scores: dict[str, list[float]] = {"human": [], "judge": []}
    value = {"support": 1.0, "partial_support": 0.5, "not_support": 0.0}
    base = ["support", "partial_support", "not_support", "support", "not_support", "support"]
    # the human labels rank a > b > c; the judge turns the first `flips` supports down, and puts c above b
    for run, supported, flips in (("a", 6, 3), ("b", 4, 2), ("c", 2, 0)):
        labels = ["support" if i >= 6 - supported and i % 2 == 0 else label for i, label in enumerate(base)]
        judged = ["not_support" if i < flips and label == "support" else label for i, label in enumerate(labels)]
        for side, given in (("human", labels), ("judge", judged)):
            nuggets = [
                {"text": f"n{i}", "importance": "vital" if i < 2 else "okay", "assignment": label}
                for i, label in enumerate(given)
            ]
            line = json.dumps({"qid": "t1", "nuggets": nuggets, "run_id": run, "answer_text": f"answer {run}"})
            (human if side == "human" else judge).append(line)
            vital, okay = [value[x] for x in given[:2]], [value[x] for x in given[2:]]
            scores[side].append((sum(vital) + 0.5 * sum(okay)) / (2 + 0.5 * 4))
        people += [order[x] for x in labels]
        machine += [order[x] for x in judged]
    (tmp_path / "human.jsonl").write_text("\n".join(human) + "\n")
    (tmp_path / "judge.jsonl").write_text("\n".join(judge) + "\n")
    assert evalstore("nuggets", "import", str(tmp_path / "human.jsonl"), "--name", "b").exit_code == 0
    judged_import = evalstore(
        "nuggets", "import", str(tmp_path / "judge.jsonl"), "--name", "b", "--assessor", "judge:x"
    )
    assert judged_import.exit_code == 0, judged_import.stderr
    done = evalstore(
        "nuggets", "compare", "b", "--assignments", "human", "--assignments", "judge:x", "--format", "json"
    )
    assert done.exit_code == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["pairs"] == {"first": 18, "second": 18, "both": 18}
    assert report["labels"]["kappa"] == pytest.approx(cohen_kappa_score(people, machine))
    assert report["labels"]["weighted_kappa"] == pytest.approx(cohen_kappa_score(people, machine, weights="linear"))
    tau = kendalltau(scores["human"], scores["judge"]).statistic
    assert -1 < tau < 1  # the orders differ, and not entirely
    assert report["systems"]["kendall_tau"] == pytest.approx(tau)
    assert report["systems"]["scores"]["c"] == pytest.approx([scores["human"][2], scores["judge"][2]])
    wrong = evalstore("nuggets", "compare", "b", "--assignments", "human", "--assignments", "judge:nobody")
    assert wrong.exit_code == 1
    assert "'judge:nobody' assigned none of the nuggets of bank 'b'." in wrong.stderr


def test_the_longest_ids_and_texts_the_readers_accept_are_stored(evalstore: Any, tmp_path: Path) -> None:
    run, topic, segment = "r" * 200, "t" * 200, "é" * 400  # characters, not bytes
    sentence = "word " * 4000  # 20,000 characters
    answers = tmp_path / "answers.jsonl"
    answers.write_text(
        json.dumps(
            {
                "run_id": run,
                "topic_id": topic,
                "references": [segment],
                "answer": [{"text": sentence, "citations": [0]}],
            }
        )
        + "\n"
    )
    done = evalstore("answers", "register", str(answers))
    assert done.exit_code == 0, done.stderr
    nuggets = [{"text": "n" * 5000, "importance": "vital", "assignment": "support"}]
    bank = tmp_path / "bank.jsonl"
    bank.write_text(json.dumps({"qid": topic, "nuggets": nuggets, "run_id": run, "answer_text": sentence}) + "\n")
    imported = evalstore("nuggets", "import", str(bank), "--name", "b" * 200, "--assessor", "judge:" + "j" * 194)
    assert imported.exit_code == 0, imported.stderr
    (shown,) = json.loads(evalstore("answers", "show", run, "--format", "json").stdout)
    assert (shown["topic"], shown["text"], shown["citations"]) == (topic, sentence, f"[0] {segment}")
    too_long = tmp_path / "long.jsonl"
    too_long.write_text(answers.read_text().replace(topic, topic + "t"))
    refused = evalstore("answers", "register", str(too_long))
    assert refused.exit_code == 1
    assert f"{too_long}:1: topic_id is 201 characters long; the limit is 200" in refused.stderr


def test_assignments_on_a_stored_bank_must_carry_its_nuggets(evalstore: Any, tmp_path: Path) -> None:
    bank = tmp_path / "bank.jsonl"
    lines = [
        {"qid": t, "nuggets": [{"text": f"{t} fact", "importance": "vital"}, {"text": "other", "importance": "okay"}]}
        for t in ("t1", "t2")
    ]
    bank.write_text("".join(json.dumps(line) + "\n" for line in lines))
    assert evalstore("nuggets", "import", str(bank), "--name", "b").exit_code == 0
    one_topic = _assignments(tmp_path / "a.jsonl", "new", "Text.", ["support", "not_support"])
    record = json.loads(one_topic.read_text())
    record["nuggets"][0]["text"] = "t1 fact"
    record["nuggets"][1]["text"] = "other"
    one_topic.write_text(json.dumps(record) + "\n")
    done = evalstore("nuggets", "import", str(one_topic), "--name", "b")
    assert done.exit_code == 0, done.stderr  # one topic of the bank's two
    record["nuggets"][1]["importance"] = "vital"
    one_topic.write_text(json.dumps(record) + "\n")
    changed = evalstore("nuggets", "import", str(one_topic), "--name", "b")
    assert changed.exit_code == 1
    assert f"{one_topic}:1: topic t1 has other nuggets than it has in nugget bank 'b'" in changed.stderr


def test_a_name_taken_by_a_ranking_run_refuses_the_whole_file(evalstore: Any, tmp_path: Path) -> None:
    ranking = tmp_path / "ranking.run"
    ranking.write_text("t1 Q0 d1 1 1.0 tag\n")
    assert evalstore("runs", "register", str(ranking), "--name", "second").exit_code == 0
    answers = tmp_path / "answers.jsonl"
    answers.write_text(_answer("first", "t1", ["A."]) + "\n" + _answer("second", "t1", ["B."]) + "\n")
    done = evalstore("answers", "register", str(answers))
    assert done.exit_code == 1
    assert "A ranking run named 'second' is registered already" in done.stderr
    assert json.loads(evalstore("answers", "list", "--format", "json").stdout) == []
    assert [r["name"] for r in json.loads(evalstore("runs", "list", "--format", "json").stdout)] == ["second"]
