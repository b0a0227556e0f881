"""A judge's cost ledger against the fake endpoint (its tokens are words): every call's tokens are
stored with the label and summed by `judges show` with money and time; `judges run --dry-run`
estimates before anything is sent; `--max-cost` stops sending at a budget and lists what it left;
failed items are counted and listed."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import Engine, select
from typer.testing import CliRunner

from evalstore.cli import app
from evalstore.db.models import JudgeLabel
from evalstore.db.session import read_only
from evalstore.errors import InvalidParameterError
from evalstore.services.judges import costs, registry, running
from tests.judges.fake_llm import Script


def _stored_tokens(engine: Engine) -> tuple[int, int]:
    with read_only(engine) as session:
        rows = session.execute(select(JudgeLabel.input_tokens, JudgeLabel.output_tokens)).all()
    return sum(r[0] for r in rows), sum(r[1] for r in rows)


def _fake_usage(script: Script) -> tuple[int, int]:
    """What the fake endpoint reported, from its own requests: prompt words in, answer words out."""
    tokens_in = sum(len(body["messages"][-1]["content"].split()) for body in script.requests)
    return tokens_in, 0  # the answers' words are summed from the labels below


def test_every_call_is_in_the_ledger_with_money_and_time(world: Engine, endpoint: str, script: Script) -> None:
    registry.add_judge(world, "fake", endpoint=endpoint, model="m", price_in=2.0, price_out=8.0)
    result = running.run_judge(world, "fake", pool_name="p")
    tokens_in, tokens_out = _stored_tokens(world)
    assert tokens_in == _fake_usage(script)[0] and tokens_out > 0
    assert (result.input_tokens, result.output_tokens) == (tokens_in, tokens_out)
    assert result.cost_usd == pytest.approx((tokens_in * 2.0 + tokens_out * 8.0) / 1e6)
    ledger = registry.show_judge(world, "fake").costs
    assert ledger | {"seconds": 0} == {
        "labels": 9,
        "repeats": 0,
        "preferences": 0,
        "attempts": 9,
        "input_tokens": tokens_in,
        "output_tokens": tokens_out,
        "labels_without_tokens": 0,
        "seconds": 0,
        "cost_usd": pytest.approx(result.cost_usd),
        "unrateable": 0,
        "unrateable_listed": [],
        "answer_calls": {},  # no answer assessed (nuggets assign, support assess, nuggets create)
    }
    assert ledger["seconds"] == pytest.approx(result.seconds)


def test_a_dry_run_estimates_and_sends_nothing(world: Engine, endpoint: str, script: Script) -> None:
    registry.add_judge(world, "fake", endpoint=endpoint, model="m", price_in=1.0, price_out=4.0, max_tokens=50)
    estimate = running.estimate_run(world, "fake", pool_name="p", topics=["1", "2"])
    assert script.requests == []  # nothing sent
    found = estimate.estimate
    assert (found.items, estimate.reused, estimate.unaskable) == (6, 0, 0)
    assert found.output_tokens == 6 * 50  # answers at their longest
    assert found.cost_usd == pytest.approx((found.input_tokens * 1.0 + 300 * 4.0) / 1e6)
    assert found.seconds is None and found.basis.startswith("prompt length")
    running.run_judge(world, "fake", pool_name="p", topics=["1"])
    learned = running.estimate_run(world, "fake", pool_name="p").estimate  # topics 2 and 3 left, from topic 1's calls
    assert learned.items == 6 and learned.basis.startswith("this judge's past calls")
    assert learned.output_tokens < 6 * 50 and learned.seconds is not None


def test_a_budget_stops_sending_cleanly_and_lists_what_it_left(world: Engine, endpoint: str, script: Script) -> None:
    # a call's worst case is its answer at 10 tokens, 0.01 USD; an answer is ~7 words
    registry.add_judge(
        world, "fake", endpoint=endpoint, model="m", price_in=0.0, price_out=1000.0, max_tokens=10, max_concurrency=1
    )
    result = running.run_judge(world, "fake", pool_name="p", max_cost=0.035)
    assert result.judged == len(script.requests) and 0 < result.judged < 9
    assert result.judged + len(result.skipped) == 9 and result.budget_usd == 0.035
    assert result.cost_usd is not None and result.cost_usd <= 0.035
    assert result.cost_usd + 0.01 > 0.035  # the next call's worst case did not fit
    assert result.skipped[0]["reason"] == "skipped: the budget of 0.035 USD was reached"
    with read_only(world) as session:
        stored = session.scalars(select(JudgeLabel.doc)).all()
    assert len(stored) == result.judged  # a skipped document is not a label: the next run asks it
    again = running.run_judge(world, "fake", pool_name="p")
    assert (again.reused, again.judged, again.skipped) == (result.judged, len(result.skipped), [])


def test_a_budget_needs_prices_and_failures_are_listed(world: Engine, endpoint: str, script: Script) -> None:
    registry.add_judge(world, "fake", endpoint=endpoint, model="m", structured="none")
    with pytest.raises(InvalidParameterError, match="declares no prices, so a budget cannot be kept"):
        running.run_judge(world, "fake", pool_name="p", max_cost=1.0)
    with pytest.raises(InvalidParameterError, match="two: per million input tokens"):
        registry.add_judge(world, "half", endpoint=endpoint, model="m", price_in=1.0)
    script.garbled = {"hover"}  # d5
    result = running.run_judge(world, "fake", pool_name="p", topics=["3"])
    assert result.failed == [{"topic": "3", "doc": "d5", "reason": "unparseable answer: 'I cannot decide.'"}]
    ledger = registry.show_judge(world, "fake").costs
    assert ledger["cost_usd"] is None  # no prices, no money; tokens and time still summed
    assert ledger["unrateable"] == 1 and ledger["unrateable_listed"] == [
        {"pool": "p", "topic": "3", "doc": "d5", "reason": "unparseable answer: 'I cannot decide.'"}
    ]
    assert costs.prices(_judge(world)) is None


def _judge(engine: Engine):  # type: ignore[no-untyped-def]
    with read_only(engine) as session:
        judge = registry.get_judge(session, "fake")
        session.expunge(judge)
        return judge


def test_the_commands(world: Engine, endpoint: str, script: Script, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVALSTORE_MLFLOW", "off")
    url = world.url.render_as_string(hide_password=False)
    runner = CliRunner()

    def cli(*args: str):  # type: ignore[no-untyped-def]
        return runner.invoke(app, ["--database-url", url, *args])

    added = cli("judges", "add", "fake", "--endpoint", endpoint, "--model", "m", "--price-in", "3", "--price-out", "15")
    assert added.exit_code == 0, added.output
    dry = cli("judges", "run", "fake", "--pool", "p", "--dry-run", "--format", "json")
    assert dry.exit_code == 0, dry.output
    assert json.loads(dry.stdout)[0]["items"] == 9 and script.requests == []
    ran = cli("judges", "run", "fake", "--pool", "p", "--max-cost", "0.01", "--format", "json")
    assert ran.exit_code == 0, ran.output
    report = json.loads(ran.stdout)[0]
    assert report["judged"] + len(report["skipped"]) == 9 and report["cost_usd"] <= 0.01
    shown = json.loads(cli("judges", "show", "fake", "--format", "json").stdout)[0]
    assert shown["costs"]["labels"] == report["judged"] and shown["price_in"] == 3.0
    refused = cli("judges", "run", "fake", "--pool", "p", "--max-cost", "0")
    assert refused.exit_code == 1 and "The budget must be above 0 dollars; not 0." in refused.stderr
