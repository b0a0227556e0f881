"""`nuggets create`: an LLM judge (the deterministic stub of fake_llm.py) drafts a bank from runs'
answers under the nuggetizer's rules (what breaks them is rejected and listed), stored as its
draft, which is not scored on until a person accepts it. On SQLite and PostgreSQL."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, select
from typer.testing import CliRunner

from evalstore.cli import app
from evalstore.db.models import Nugget, NuggetBank
from evalstore.db.session import read_only
from evalstore.services.judges.nugget_drafts import PROMPT_HASH, nuggets_of
from tests.judges.fake_llm import Script

LONG = "This sentence has far more than twelve words in it so it must be rejected here"
# the stub drafts each sentence of the answers: vital when two answers hold it, okay otherwise
ANSWERS = {
    "a": ["Rotor noise is loud.", "Wings flutter at speed."],
    "b": ["Rotor noise is loud.", f"{LONG}."],
}


@pytest.fixture
def cli(engine: Engine, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Any:
    monkeypatch.setenv("EVALSTORE_MLFLOW", "off")
    monkeypatch.setenv("EVALSTORE_HOME", str(tmp_path))
    url = engine.url.render_as_string(hide_password=False)
    runner = CliRunner()
    return lambda *args: runner.invoke(app, ["--database-url", url, *args])


def test_a_judge_drafts_a_bank_that_is_scored_on_once_accepted(
    cli: Any, engine: Engine, tmp_path: Path, endpoint: str, script: Script
) -> None:
    for run, sentences in ANSWERS.items():
        record = {
            "run_id": run,
            "topic_id": "t1",
            "topic": "why are helicopters loud",
            "references": ["s0"],
            "answer": [{"text": s, "citations": [0]} for s in sentences],
        }
        (tmp_path / f"{run}.jsonl").write_text(json.dumps(record) + "\n")
        assert cli("answers", "register", str(tmp_path / f"{run}.jsonl")).exit_code == 0
    assert cli("judges", "add", "j", "--endpoint", endpoint, "--model", "m").exit_code == 0
    dry = cli("nuggets", "create", "D", "--topics", "t1", "--from-runs", "a", "--judge", "j", "--dry-run")
    assert dry.exit_code == 0 and script.requests == []  # an estimate: nothing sent, nothing stored
    assert "the judge declares no prices: no money estimated" in dry.stderr
    done = cli(
        "nuggets",
        "create",
        "D",
        "--topics",
        "t1",
        "--from-runs",
        "a",
        "--from-runs",
        "b",
        "--judge",
        "j",
        "--format",
        "json",
    )
    assert done.exit_code == 0, done.stderr
    (report,) = json.loads(done.stdout)
    assert (report["topics"], report["nuggets"], report["failed"]) == (1, 2, [])
    assert report["rejected"] == [{"topic": "t1", "text": LONG, "reason": "a nugget is 1 to 12 words"}]
    # its one call (a topic) is in the judge's cost ledger, with the tokens the endpoint reported
    ledger = json.loads(cli("judges", "show", "j", "--format", "json").stdout)[0]["costs"]
    drafted = ledger["answer_calls"]["nuggets create"]
    assert (drafted["calls"], drafted["labelled"], drafted["input_tokens"]) == (1, 1, report["input_tokens"])
    assert report["input_tokens"] > 0 and ledger["input_tokens"] == report["input_tokens"]
    assert "'D' is a draft: review its nuggets, then 'evalstore nuggets accept D' to score on it." in done.stderr
    prompt = script.requests[-1]["messages"][0]["content"]
    assert "Search Query: why are helicopters loud\n" in prompt
    assert prompt.count("<document>\n") == 2  # each run's answer delimited
    with read_only(engine) as session:
        bank = session.scalars(select(NuggetBank).where(NuggetBank.name == "D")).one()
        stored = session.execute(
            select(Nugget.topic, Nugget.text, Nugget.importance)
            .where(Nugget.bank_id == bank.id)
            .order_by(Nugget.position)
        ).all()
        assert (bank.drafted_by, bank.accepted_at, json.loads(bank.source or "{}")["prompt_hash"]) == (
            "judge:j",
            None,
            PROMPT_HASH,
        )
    assert [tuple(r) for r in stored] == [
        ("t1", "Rotor noise is loud", "vital"),
        ("t1", "Wings flutter at speed", "okay"),
    ]

    # a draft is assigned on, but not scored on until accepted
    assert cli("nuggets", "assign", "D", "--all-answers", "--judge", "j").exit_code == 0
    refused = cli("evaluate", "--nuggets", "D", "--all-answers", "--assessor", "judge:j", "--wait")
    assert refused.exit_code == 1
    assert (
        "Nugget bank 'D' is a draft by judge:j, not reviewed yet: it is scored on once a person has reviewed and "
        "accepted it. Review its nuggets and accept it with 'evalstore nuggets accept D'." in refused.stderr
    )
    unreviewed = cli("nuggets", "accept", "D")  # no nugget was reviewed on the bank's page
    assert unreviewed.exit_code == 1
    assert unreviewed.stderr == (
        "2 nuggets of bank 'D' are not reviewed yet: accept, edit or reject each on the bank's page, or, if you "
        "reviewed the whole draft elsewhere, 'evalstore nuggets accept D --reviewed'.\n"
    )
    with read_only(engine) as session:
        assert session.scalars(select(NuggetBank.accepted_at).where(NuggetBank.name == "D")).one() is None
    accepted = cli("nuggets", "accept", "D", "--reviewed")
    assert accepted.exit_code == 0, accepted.stderr
    assert "accepted nugget bank 'D' (drafted by judge:j)" in accepted.stderr
    with read_only(engine) as session:
        reviewers = session.scalars(select(Nugget.reviewed_by).join(NuggetBank).where(NuggetBank.name == "D")).all()
        assert reviewers == ["command line", "command line"]
    scored = cli("evaluate", "--nuggets", "D", "--all-answers", "--assessor", "judge:j", "--wait")
    assert scored.exit_code == 0, scored.stderr
    again = cli("nuggets", "create", "D", "--topics", "t1", "--from-runs", "a", "--judge", "j")
    assert again.exit_code == 1
    assert "A nugget bank named 'D' exists; choose another name." in again.stderr


def test_the_nuggetizer_rules_are_kept() -> None:
    given = {
        "nuggets": [
            {"text": "a  vital   fact", "importance": "vital"},
            {"text": "A vital fact", "importance": "okay"},
            {"text": "", "importance": "okay"},
            {"text": "maybe", "importance": "high"},
            *({"text": f"fact {i}", "importance": "okay"} for i in range(31)),
        ]
    }
    kept, rejected = nuggets_of(json.dumps(given), "t")
    assert len(kept) == 30
    assert kept[0].text == "a vital fact" and kept[0].importance == "vital"
    assert [r["reason"] for r in rejected] == [
        "a repeat",
        "a nugget is 1 to 12 words",
        "a nugget is vital or okay",
        "past the 30th nugget",
        "past the 30th nugget",
    ]
