"""The commands: judges add/list/show/run/probe, qrels build/versions, judgments compare/provenance
(output on stdout, diagnostics on stderr, exit 1 with the message on bad input)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from sqlalchemy import Engine
from typer.testing import CliRunner

from evalstore.cli import app
from tests.judges.fake_llm import Script


@pytest.fixture
def cli(sqlite_world: Engine, monkeypatch: pytest.MonkeyPatch, tmp_path) -> Any:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("EVALSTORE_HOME", str(tmp_path))
    monkeypatch.setenv("EVALSTORE_MLFLOW", "off")
    url = sqlite_world.url.render_as_string(hide_password=False)
    runner = CliRunner()
    return lambda *args: runner.invoke(app, ["--database-url", url, *args])


def test_the_loop_pool_judge_version_compare(cli: Any, endpoint: str, script: Script) -> None:
    added = cli("judges", "add", "fake", "--endpoint", endpoint, "--model", "m", "--seed", "1", "--format", "json")
    assert added.exit_code == 0, added.output
    assert json.loads(added.stdout)[0]["seed"] == 1
    ran = cli("judges", "run", "fake", "--pool", "p", "--format", "json")
    assert ran.exit_code == 0, ran.output
    ledger = ("input_tokens", "output_tokens", "seconds", "cost_usd", "failed", "skipped", "budget_usd")
    assert (json.loads(ran.stdout)[0]["repeats"], json.loads(ran.stdout)[0]["self_consistency"]) == (1, None)
    ledger += ("repeats", "self_consistency")
    ran_json = json.loads(ran.stdout)[0]
    assert {k: ran_json[k] for k in ledger} | {"input_tokens": 0, "output_tokens": 0, "seconds": 0} == {
        "input_tokens": 0,
        "output_tokens": 0,
        "seconds": 0,
        "cost_usd": None,  # no prices declared
        "failed": [],
        "skipped": [],
        "budget_usd": None,
        "repeats": 1,
        "self_consistency": None,
    }
    assert {k: v for k, v in ran_json.items() if k not in ledger} | {"config_hash": "-"} == {
        "judge": "fake",
        "pool": "p",
        "config_hash": "-",
        "pooled": 9,
        "reused": 0,
        "judged": 9,
        "rated": 9,
        "unrateable": 0,
        "reasons": {},
    }
    listed = cli("judges", "list", "--format", "csv")
    assert listed.stdout.splitlines()[1] == f"fake,m,{endpoint},umbrela,0.0,1,p,9"
    built = cli("qrels", "build", "llm", "--pool", "p", "--from", "judge:fake", "--format", "json")
    assert built.exit_code == 0, built.output
    assert json.loads(built.stdout)[0]["qrels"] == "llm@v1"
    versions = cli("qrels", "versions", "llm", "--format", "csv")
    assert versions.stdout.splitlines()[0] == "version,qrels,pool,from,counts,hash,parent,created_at,probe"
    assert versions.stdout.splitlines()[1].startswith('1,llm@v1,p,judge:fake,"{""judge"": 9, ""unjudged"": 0}",')
    compared = cli("judgments", "compare", "--qrels", "human", "--qrels", "llm@v1", "--format", "json")
    assert compared.exit_code == 0, compared.output
    report = json.loads(compared.stdout)
    # the fake grades d1 3 (human 3), d2 1 (1), d7 0 (0), d3 3 (2), d4 1 (0), d5 3 (3), d6 1 (1)
    assert report["documents"] == {"first": 7, "second": 9, "both": 7}
    assert report["labels"]["confusion"] == [[1, 1, 0, 0], [0, 2, 0, 0], [0, 0, 0, 1], [0, 0, 0, 2]]
    assert report["labels"]["mean_difference"] == pytest.approx(2 / 7)
    assert report["systems"]["nDCG@10"]["kendall_tau"] == 1.0
    table = cli("judgments", "compare", "--qrels", "human", "--qrels", "llm@v1", "--measure", "AP")
    assert table.exit_code == 0, table.output
    for word in ("Cohen's kappa", "Krippendorff's alpha", "Kendall's tau-b", "tau_AP_b", "share kept", "per topic"):
        assert word in table.stdout
    assert report["circular"] == {}
    provenance = cli("judgments", "provenance", "--pool", "p", "--doc", "d3", "--format", "json")
    [row] = json.loads(provenance.stdout)
    assert (row["by"], row["who"], row["relevance"], row["provenance"]["model"]) == ("judge", "fake", 3, "m")


def test_runs_that_declare_the_judges_model_are_marked(cli: Any, endpoint: str, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from tests.judges.conftest import run_text

    (tmp_path / "self.txt").write_text(run_text("good").replace(" good", " self"))
    assert (
        cli(
            "runs", "register", str(tmp_path / "self.txt"), "--name", "self", "--meta", "models=monot5, Fake-Model"
        ).exit_code
        == 0
    )
    assert cli("judges", "add", "fake", "--endpoint", endpoint, "--model", "fake-model").exit_code == 0
    assert cli("judges", "run", "fake", "--pool", "p").exit_code == 0
    assert cli("qrels", "build", "llm", "--pool", "p", "--from", "judge:fake").exit_code == 0
    result = cli("judgments", "compare", "--qrels", "human", "--qrels", "llm@v1", "--measure", "AP")
    assert result.exit_code == 0, result.output
    assert (
        "circularity: run 'self' declares fake-model, the model that made the labels of 'llm@v1'; its scores "
        "there favour it\n"
    ) in result.stderr
    report = json.loads(cli("judgments", "compare", "--qrels", "human", "--qrels", "llm@v1", "--format", "json").stdout)
    assert report["circular"] == {"llm@v1": {"self": ["fake-model"]}}


def test_bad_input_exits_1_with_the_message(cli: Any) -> None:
    result = cli("judges", "add", "x", "--endpoint", "localhost:8000", "--model", "m")
    assert result.exit_code == 1
    assert result.stderr == (
        "Error: A judge's endpoint is the http(s) URL of an OpenAI-compatible API, e.g. http://127.0.0.1:8000/v1; "
        "not 'localhost:8000'. Set it with --endpoint.\n"
    )
    result = cli("qrels", "build", "v", "--pool", "p", "--from", "human")
    assert result.exit_code == 1
    assert result.stderr == (
        "Error: Pool 'p' has no human labels yet. "
        "Judge it first ('evalstore judges run NAME --pool p', or 'evalstore judgments import').\n"
    )
    result = cli("judgments", "compare", "--qrels", "human")
    assert result.exit_code == 2 and "give --qrels twice" in result.stderr


def test_probe_counts_labels_raised_by_inserted_words_and_instructions(cli: Any, endpoint: str) -> None:
    assert cli("judges", "add", "fake", "--endpoint", endpoint, "--model", "m").exit_code == 0
    result = cli("judges", "probe", "fake", "--collection", "c", "--qrels", "human", "--limit", "4", "--format", "json")
    assert result.exit_code == 0, result.output
    probe = json.loads(result.stdout)
    assert probe["documents"] == 4
    # the four lowest human labels: the fake gives them 0 or 1; query words lift every one to 3, and so
    # does the instruction
    assert probe["query_words"]["rose"] == 4 and probe["instruction"]["rose"] == 4
    shown = json.loads(cli("judges", "show", "fake", "--format", "json").stdout)[0]
    assert shown["probes"][0]["instruction"]["share_rose"] == 1.0
    table = cli("judges", "show", "fake")
    assert table.exit_code == 0 and "config_hash" in table.stdout and "query_words" in table.stdout
