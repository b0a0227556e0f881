"""The answer and nugget readers: both TREC RAG layouts, and every refusal at file:line."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from evalstore.errors import InputFormatError, LimitExceeded
from evalstore.io.answers import AnswerLimits, read_answers
from evalstore.io.nuggets import read_nuggets
from tests.conftest import shared_path


def _answer(**changes: Any) -> dict[str, Any]:
    record: dict[str, Any] = {
        "run_id": "r1",
        "topic_id": "t1",
        "topic": "what is it",
        "references": ["s0", "s1"],
        "response_length": 4,
        "answer": [{"text": "One two.", "citations": [1, 0]}, {"text": "Three four.", "citations": []}],
    }
    record.update(changes)
    return record


def _write(path: Path, *records: Any) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records), encoding="utf-8")
    return path


def test_the_2024_layout_reads_sentences_citations_and_references(tmp_path: Path) -> None:
    runs = read_answers(_write(tmp_path / "a.jsonl", _answer(), _answer(topic_id="t2"), _answer(run_id="r2")))
    assert [(r.name, r.layout, [a.topic for a in r.answers]) for r in runs] == [
        ("r1", "rag24", ["t1", "t2"]),
        ("r2", "rag24", ["t1"]),
    ]
    answer = runs[0].answers[0]
    assert answer.references == ("s0", "s1")
    assert [s.citations for s in answer.sentences] == [(1, 0), ()]
    assert answer.text == "One two. Three four."
    assert answer.response_length == 4 and answer.line == 1


def test_the_2025_layout_with_metadata_and_scored_citations(tmp_path: Path) -> None:
    record = {
        "metadata": {"team_id": "team", "run_id": "r25", "topic_id": "t1", "narrative_id": "n"},
        "references": ["s0", "s1", "s2"],
        "answer": [{"text": "A.", "citations": {"s2": 0.9, "s0": 0.1}}, {"text": "B.", "citations": [1]}],
    }
    (run,) = read_answers(_write(tmp_path / "a.jsonl", record))
    assert (run.name, run.team, run.layout) == ("r25", "team", "rag25")
    first, second = run.answers[0].sentences
    assert first.citations == (2, 0) and first.scores == (0.9, 0.1)  # the dict's order: the first citation first
    assert second.citations == (1,) and second.scores is None


def test_gzip_is_read_like_the_plain_file(tmp_path: Path) -> None:
    plain = _write(tmp_path / "a.jsonl", _answer())
    packed = tmp_path / "a.jsonl.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    assert read_answers(packed)[0].answers == read_answers(plain)[0].answers


@pytest.mark.parametrize(
    ("second_line", "problem"),
    [
        ('{"run_id": "r1", ', "not valid JSON"),
        ("[1, 2]", "not a JSON object"),
        (_answer(topic_id="t2", answer=[{"text": "x"}]), "sentence 1 has no 'citations'"),
        (
            _answer(topic_id="t2", answer=[{"text": "x", "citations": [2]}]),
            "sentence 1 cites reference 2, but 'references' has 2 (indexes 0 to 1)",
        ),
        (_answer(topic_id="t2", answer=[{"text": "x", "citations": [-1]}]), "cites reference -1"),
        (_answer(topic_id="t2", answer=[]), "the answer is empty"),
        (_answer(topic_id="t2", answer=[{"text": "  ", "citations": []}]), "the answer is empty"),
        (
            _answer(topic_id="t2", answer=[{"text": "x", "citations": []}] * 10_000),
            "the answer has 10000 sentences; an answer may have at most 1000",
        ),
        (_answer(), "run r1 answers topic t1 twice (also at line 1)"),
        (_answer(topic_id="t2", references=["s0", "s0"]), "segment s0 is listed twice"),
        (_answer(topic_id="t2", answer=[{"text": "x", "citations": ["0"]}]), 'citation "0" is not an index'),
        ({"topic_id": "t2", "references": [], "answer": []}, "the line has no 'run_id'"),
        (
            {"metadata": {"run_id": "r"}, "references": [], "answer": [{"text": "x", "citations": []}]},
            "'metadata' has no 'topic_id'",
        ),
        (
            {
                "metadata": {"run_id": "r", "topic_id": "t"},
                "references": ["a"],
                "answer": [{"text": "x", "citations": {"b": 1}}],
            },
            "cites segment b, which is not in 'references'",
        ),
        (
            _answer(topic_id="t2", references=[f"s{i}" for i in range(101)]),
            "101 references; an answer may list at most",
        ),
        (_answer(topic_id="t 2"), "topic_id holds white space"),
    ],
)
def test_a_bad_answer_is_refused_at_its_line(tmp_path: Path, second_line: Any, problem: str) -> None:
    path = _write(tmp_path / "bad.jsonl", _answer(), second_line)
    with pytest.raises(InputFormatError) as raised:
        read_answers(path)
    assert raised.value.line == 2
    assert problem in raised.value.problem
    assert str(raised.value).startswith(f"{path}:2: ")


def test_a_topic_outside_the_topic_set_and_over_long_sentences_are_refused(tmp_path: Path) -> None:
    path = _write(tmp_path / "a.jsonl", _answer(), _answer(topic_id="t9"))
    with pytest.raises(InputFormatError, match=r":2: topic t9 is not in the topic set"):
        read_answers(path, topics={"t1", "t2"})
    with pytest.raises(InputFormatError, match=r":1: sentence 1 is 8 characters; a sentence may have at most 5"):
        read_answers(path, limits=AnswerLimits(max_sentence_chars=5))


def test_a_line_past_the_byte_bound_is_refused_before_it_is_parsed(tmp_path: Path) -> None:
    path = _write(tmp_path / "a.jsonl", _answer(), _answer(topic_id="t2", topic="x" * 5000))
    with pytest.raises(InputFormatError, match=r":2: a line is longer than this server's limit of 4096 bytes"):
        read_answers(path, limits=AnswerLimits(max_line_bytes=4096))
    bomb = tmp_path / "bomb.jsonl.gz"
    bomb.write_bytes(gzip.compress(b"\n" * 2_000_000))
    with pytest.raises(LimitExceeded, match="inflates to more than"):
        read_answers(bomb, limits=AnswerLimits(max_bytes=2**20))


def test_the_real_baselines_read_whole() -> None:
    for model, sentences in (("gpt-4o", 30), ("command-r-plus", 28), ("l31_70b_instruct", 18)):
        (run,) = read_answers(shared_path("rag24", "answers", f"baseline_rag24.test_{model}_top20.jsonl"))
        assert run.name == f"baseline_rag24.test_{model}_top20"
        assert len(run.answers) == 301
        assert max(len(a.sentences) for a in run.answers) == sentences


def test_a_bank_and_nists_assignment_file() -> None:
    bank = read_nuggets(shared_path("rag24", "nuggets.example.jsonl"))
    assert bank.assessments == ()
    (topic,) = bank.topics
    assert (topic.topic, len(topic.nuggets)) == ("2024-105741", 16)
    assert [n.importance for n in topic.nuggets].count("vital") == 3
    assessed = read_nuggets(shared_path("rag24", "nugget_assignment.example.jsonl"))
    assert assessed.topics[0].nuggets == topic.nuggets
    assert [a.run for a in assessed.assessments] == [
        "baseline_frag_rag24.test_command-r-plus_top20",
        "baseline_frag_rag24.test_gpt-4o_top20",
        "baseline_rag24.test_l31_70b_instruct_top20",
    ]
    assert assessed.assessments[0].labels[:3] == ("partial_support", "support", "not_support")
    assert assessed.assessments[0].answer_text is not None


def _bank_line(**changes: Any) -> dict[str, Any]:
    record: dict[str, Any] = {
        "qid": "t1",
        "query": "q",
        "nuggets": [{"text": "a", "importance": "vital"}, {"text": "b", "importance": "okay"}],
    }
    record.update(changes)
    return record


@pytest.mark.parametrize(
    ("second_line", "problem"),
    [
        (_bank_line(), "topic t1 is given twice (also at line 1)"),
        (_bank_line(qid="t2", nuggets=[{"text": "a", "importance": "high"}]), "importance must be vital or okay"),
        (_bank_line(qid="t2", nuggets=[]), "'nuggets' must be a non-empty list"),
        (_bank_line(qid="t2", nuggets=[{"importance": "okay"}]), "nugget 1 has no 'text'"),
        (
            _bank_line(run_id="r", nuggets=[{"text": "a", "importance": "vital", "assignment": "support"}]),
            "the nuggets of topic t1 differ from those at line 1",
        ),
        (
            _bank_line(
                qid="t2",
                run_id="r",
                nuggets=[{"text": "a", "importance": "vital", "assignment": "yes"}],
            ),
            "assignment must be support, partial_support, not_support",
        ),
        (
            _bank_line(qid="t2", run_id="r", nuggets=[{"text": "a", "importance": "vital"}]),
            "nugget 1 of run r has no 'assignment'",
        ),
        ("not json", "not valid JSON"),
    ],
)
def test_a_bad_nugget_line_is_refused_at_its_line(tmp_path: Path, second_line: Any, problem: str) -> None:
    path = _write(tmp_path / "bank.jsonl", _bank_line(), second_line)
    with pytest.raises(InputFormatError) as raised:
        read_nuggets(path)
    assert raised.value.line == 2
    assert problem in raised.value.problem
