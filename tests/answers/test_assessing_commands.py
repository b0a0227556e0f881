"""`nuggets configure` and `nuggets assessors`: how a bank is assessed in the browser, set on the
command line, on SQLite and PostgreSQL; each refusal with its exact message and nothing changed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine
from typer.testing import CliRunner

from evalstore.cli import app
from evalstore.services import access


@pytest.fixture
def evalstore(engine: Engine, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Any:
    monkeypatch.setenv("EVALSTORE_MLFLOW", "off")
    monkeypatch.setenv("EVALSTORE_HOME", str(tmp_path))
    url = engine.url.render_as_string(hide_password=False)
    runner = CliRunner()
    bank = tmp_path / "bank.jsonl"
    bank.write_text(
        json.dumps({"qid": "t1", "query": "q", "nuggets": [{"text": "a fact", "importance": "vital"}]}) + "\n"
    )
    assert runner.invoke(app, ["--database-url", url, "nuggets", "import", str(bank), "--name", "b"]).exit_code == 0
    for name, role in (("olga", "organiser"), ("ann", "assessor"), ("pat", "participant")):
        access.add_user(engine, name, role=role, team="t" if role == "participant" else None)
    return lambda *args: runner.invoke(app, ["--database-url", url, *args])


def test_a_bank_gets_its_organiser_share_and_assessors(evalstore: Any) -> None:
    done = evalstore(
        "nuggets", "configure", "b", "--organiser", "olga", "--double-share", "0.25", "--seed", "7", "--format", "json"
    )
    assert done.exit_code == 0, done.stderr
    (settings,) = json.loads(done.stdout)
    assert settings == {
        "bank": "b",
        "organiser": "olga",
        "collection": None,
        "double_share": 0.25,
        "double_seed": 7,
        "assessors": "",
    }
    added = evalstore("nuggets", "assessors", "b", "--assessor", "ann")
    assert added.exit_code == 0 and "assessor 'ann' assesses answers by nugget bank 'b'" in added.stderr
    drawn = json.loads(evalstore("nuggets", "configure", "b", "--double-share", "0.5", "--format", "json").stdout)[0]
    assert drawn["assessors"] == "ann" and drawn["organiser"] == "olga" and isinstance(drawn["double_seed"], int)


def test_refusals_say_why(evalstore: Any) -> None:
    participant = evalstore("nuggets", "configure", "b", "--organiser", "pat")
    assert participant.exit_code == 1
    assert "User 'pat' is a participant; a bank is organised by an organiser." in participant.stderr
    organiser = evalstore("nuggets", "assessors", "b", "--assessor", "olga")
    assert organiser.exit_code == 1
    assert "User 'olga' is an organiser; answers are assessed by assessors." in organiser.stderr
    missing = evalstore("nuggets", "configure", "nope", "--organiser", "olga")
    assert missing.exit_code == 1 and "No nugget bank named 'nope'." in missing.stderr
    (settings,) = json.loads(evalstore("nuggets", "configure", "b", "--format", "json").stdout)
    assert settings["organiser"] is None and settings["assessors"] == ""
