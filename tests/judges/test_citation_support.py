"""`support assess`: an LLM judge (the deterministic stub of fake_llm.py) grades each cited
sentence's first citation against the segment's text; the grades are stored by judge:NAME and
give support_precision and support_recall as the definitions say; a segment without text is
skipped and listed; what was labelled is reused. On SQLite and PostgreSQL."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, select
from typer.testing import CliRunner

from evalstore.cli import app
from evalstore.db.models import CitationSupport, JudgeAnswerCall
from evalstore.db.session import read_only
from evalstore.services.judges import citation_support
from tests.judges.fake_llm import Script

# the stub grades 2 when the segment holds every word of 4 letters or more of the sentence, 1 when
# some, 0 when none
ANSWER = {
    "run_id": "r",
    "topic_id": "t1",
    "references": ["s0", "s1", "s2"],
    "answer": [
        {"text": "Supersonic flutter damages wings.", "citations": [1, 0]},  # first s1: 2 of 4 words -> 1
        {"text": "Rotor noise is loud.", "citations": [0]},  # s0 holds all -> 2
        {"text": "Uncited sentence.", "citations": []},
        {"text": "Gliders are quiet.", "citations": [2]},  # s2 has no text: skipped
        {"text": "Heat transfer matters.", "citations": [0]},  # none -> 0
    ],
}
SEGMENTS = {"s0": "the rotor noise of a helicopter is loud", "s1": "supersonic flutter"}


@pytest.fixture
def cli(engine: Engine, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Any:
    monkeypatch.setenv("EVALSTORE_MLFLOW", "off")
    monkeypatch.setenv("EVALSTORE_HOME", str(tmp_path))
    url = engine.url.render_as_string(hide_password=False)
    runner = CliRunner()
    return lambda *args: runner.invoke(app, ["--database-url", url, *args])


def _stored(engine: Engine) -> dict[int, tuple[str, int]]:
    with read_only(engine) as session:
        rows = session.execute(
            select(CitationSupport.sentence, CitationSupport.segment, CitationSupport.label).where(
                CitationSupport.assessor == "judge:j"
            )
        ).all()
    return {sentence + 1: (segment, label) for sentence, segment, label in rows}


def test_a_judge_grades_first_citations_against_the_segments_text(
    cli: Any, engine: Engine, tmp_path: Path, endpoint: str, script: Script
) -> None:
    (tmp_path / "r.jsonl").write_text(json.dumps(ANSWER) + "\n")
    assert cli("answers", "register", str(tmp_path / "r.jsonl")).exit_code == 0
    (tmp_path / "segs.jsonl").write_text(
        "".join(json.dumps({"doc_id": d, "text": t}) + "\n" for d, t in SEGMENTS.items())
    )
    assert cli("documents", "import", str(tmp_path / "segs.jsonl"), "--collection", "segs").exit_code == 0
    assert cli("judges", "add", "j", "--endpoint", endpoint, "--model", "m").exit_code == 0

    done = cli("support", "assess", "--runs", "r", "--judge", "j", "--collection", "segs", "--format", "json")
    assert done.exit_code == 0, done.stderr
    (report,) = json.loads(done.stdout)
    assert (report["cited"], report["reused"], report["asked"], report["labelled"]) == (4, 0, 3, 3)
    assert report["labels"] == {"0": 1, "1": 1, "2": 1}
    assert "skipped: run r, topic t1, sentence 4: collection 'segs' lacks segment s2" in done.stderr
    assert _stored(engine) == {1: ("s1", 1), 2: ("s0", 2), 5: ("s0", 0)}
    # each label keeps its provenance, as a relevance label does, naming its call in the cost ledger
    with read_only(engine) as session:
        sources = [json.loads(s) for s in session.scalars(select(CitationSupport.source))]
        calls = session.execute(
            select(JudgeAnswerCall.id, JudgeAnswerCall.item, JudgeAnswerCall.input_tokens).where(
                JudgeAnswerCall.purpose == "support assess"
            )
        ).all()
    assert {(s["judge"], s["model"], s["prompt"], s["prompt_hash"]) for s in sources} == {
        ("j", "m", "trec-rag-support", citation_support.PROMPT_HASH)
    }
    assert sorted(s["call"] for s in sources) == sorted(c.id for c in calls)
    assert sorted(c.item for c in calls) == ["r t1 sentence 1", "r t1 sentence 2", "r t1 sentence 5"]
    assert all(c.input_tokens for c in calls)  # the stub reports its usage
    assert report["input_tokens"] == sum(c.input_tokens for c in calls)
    # the first citation's segment is what the judge reads, delimited
    prompts = [r["messages"][0]["content"] for r in script.requests]
    assert any(
        "Statement: Supersonic flutter damages wings.\n" in p and "<document>\nsupersonic flutter\n" in p
        for p in prompts
    )

    # asked again: reused; the segment's text imported, only its sentence is asked
    asked = len(script.requests)
    again = cli("support", "assess", "--runs", "r", "--judge", "j", "--collection", "segs", "--format", "json")
    assert (json.loads(again.stdout)[0]["reused"], json.loads(again.stdout)[0]["asked"]) == (3, 0)
    assert len(script.requests) == asked
    (tmp_path / "more.jsonl").write_text(json.dumps({"doc_id": "s2", "text": "gliders are quiet"}) + "\n")
    assert cli("documents", "import", str(tmp_path / "more.jsonl"), "--collection", "segs", "--append").exit_code == 0
    last = cli("support", "assess", "--runs", "r", "--judge", "j", "--collection", "segs", "--format", "json")
    assert (json.loads(last.stdout)[0]["reused"], json.loads(last.stdout)[0]["asked"]) == (3, 1)
    assert _stored(engine)[4] == ("s2", 2)

    # support precision and recall on the judge's grades, beside its nugget assignments
    bank = {"qid": "t1", "query": "q", "nuggets": [{"text": "rotor noise", "importance": "vital"}]}
    (tmp_path / "bank.jsonl").write_text(json.dumps(bank) + "\n")
    assert cli("nuggets", "import", str(tmp_path / "bank.jsonl"), "--name", "b").exit_code == 0
    assert cli("nuggets", "assign", "b", "--runs", "r", "--judge", "j").exit_code == 0
    evaluated = cli("evaluate", "--nuggets", "b", "--all-answers", "--assessor", "judge:j", "--wait")
    assert evaluated.exit_code == 0, evaluated.stderr
    board = cli(
        "leaderboard",
        "--nuggets",
        "b",
        "--assessor",
        "judge:j",
        "--measure",
        "support_precision",
        "--measure",
        "support_recall",
        "--format",
        "csv",
    )
    (row,) = list(csv.DictReader(io.StringIO(board.stdout)))
    assert float(row["support_precision"]) == pytest.approx((0.5 + 1 + 1 + 0) / 4)
    assert float(row["support_recall"]) == pytest.approx((0.5 + 1 + 1 + 0) / 5)


def test_refusals_name_what_is_wrong(cli: Any, tmp_path: Path, endpoint: str) -> None:
    (tmp_path / "r.jsonl").write_text(json.dumps(ANSWER) + "\n")
    assert cli("answers", "register", str(tmp_path / "r.jsonl")).exit_code == 0
    assert cli("judges", "add", "j", "--endpoint", endpoint, "--model", "m").exit_code == 0
    nothing = cli("support", "assess", "--runs", "r", "--judge", "j", "--collection", "nope")
    assert nothing.exit_code == 1
    assert "No collection named 'nope'. Import the segments' texts with 'documents import'." in nothing.stderr
    norun = cli("support", "assess", "--judge", "j", "--collection", "nope")
    assert norun.exit_code == 2
    assert "Traceback" not in nothing.stderr + norun.stderr
