"""Pairwise preferences: the Bradley-Terry fit equals Hunter's MM algorithm and the two-system
closed form; a pair is decided only when both orders name the same winner; the bootstrap is
reproducible from its recorded seed; and, against the stub endpoint (fake_llm.py, which prefers
the text holding more of the query's words, top lines counting most), `judges prefer` asks every
pair in both orders, stores the answers with provenance and cost, resumes, keeps a budget, and
`judgments preferences` reports ratings, intervals, the rate table and the position bias. Storage
on SQLite and PostgreSQL."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy.optimize import minimize
from sqlalchemy import Engine, select
from typer.testing import CliRunner

from evalstore.cli import app
from evalstore.db.models import JudgePreference
from evalstore.db.session import read_only
from evalstore.errors import InvalidParameterError, NotFoundError
from evalstore.services.judges import preferences, registry
from evalstore.statistics import bradley_terry
from tests.judges.fake_llm import Script

# hand-made outcomes: wins[i, j] = times i beat j (a tie is half a win each way); every system has
# won and lost, so the plain maximum likelihood is finite
WINS = np.array(
    [
        [0.0, 3.0, 2.0, 4.0],
        [1.0, 0.0, 2.5, 3.0],
        [2.0, 1.5, 0.0, 1.0],
        [0.0, 1.0, 3.0, 0.0],
    ]
)


def _hunter_mm(wins: np.ndarray, iterations: int = 20_000) -> np.ndarray:
    """Hunter (2004), Ann. Statist. 32(1), eq. (3): gamma_i <- W_i / sum_j n_ij / (gamma_i + gamma_j)."""
    games = wins + wins.T
    gamma = np.ones(len(wins))
    for _ in range(iterations):
        gamma = wins.sum(axis=1) / (games / (gamma[:, None] + gamma[None, :])).sum(axis=1)
        gamma /= np.exp(np.log(gamma).mean())
    return np.log(gamma) - np.log(gamma).mean()


def test_the_fit_is_hunters_mm_and_the_two_system_closed_form() -> None:
    assert bradley_terry.fit(WINS, alpha=0) == pytest.approx(_hunter_mm(WINS), abs=1e-6)
    # two systems, 3 wins to 1: P(a beats b) = 3/4, so s_a - s_b = log 3, centred
    two = bradley_terry.fit(np.array([[0.0, 3.0], [1.0, 0.0]]), alpha=0)
    assert two == pytest.approx([np.log(3) / 2, -np.log(3) / 2], abs=1e-6)
    # choix 0.4.1's opt_pairwise on the same outcomes (each count doubled into (winner, loser) pairs,
    # a tie one win each way; alpha 0.01) gives these ratings to 1e-9; choix is not a dependency
    # (it takes no weights), so its figures are kept here
    assert bradley_terry.fit(WINS) == pytest.approx([0.83692069, 0.12698508, -0.41222103, -0.55168474], abs=1e-7)


def test_the_prior_is_the_penalised_likelihood_minimised_directly() -> None:
    def penalised(s: np.ndarray) -> float:
        return float(
            sum(WINS[i, j] * np.log1p(np.exp(-(s[i] - s[j]))) for i in range(4) for j in range(4)) + 0.5 / 2 * s @ s
        )

    direct = minimize(penalised, np.zeros(4), method="Nelder-Mead", options={"xatol": 1e-10, "fatol": 1e-12}).x
    assert bradley_terry.fit(WINS, alpha=0.5) == pytest.approx(direct - direct.mean(), abs=1e-5)
    # an undefeated system gets a finite rating under the prior
    assert np.all(np.isfinite(bradley_terry.fit(np.array([[0.0, 2.0], [0.0, 0.0]]))))


@pytest.mark.parametrize(
    ("a_first", "b_first", "winner", "consistent", "biased", "stated"),
    [
        (1, 2, "A", True, False, False),  # A shown first and chosen; A shown second and chosen
        (2, 1, "B", True, False, False),
        (1, 1, None, False, True, False),  # the first shown both times: position, not content
        (2, 2, None, False, True, False),
        (0, 0, None, True, False, True),  # equal both times
        (1, 0, None, False, False, False),  # a winner one way, a tie the other
    ],
)
def test_a_pair_is_won_only_when_both_orders_agree(
    a_first: int, b_first: int, winner: str | None, consistent: bool, biased: bool, stated: bool
) -> None:
    found = preferences.outcome("1", "A", "B", a_first, b_first)
    assert (found.winner, found.consistent, found.position_biased, found.stated_tie) == (
        winner,
        consistent,
        biased,
        stated,
    )


def test_the_bootstrap_is_reproducible_from_its_seed() -> None:
    rng = np.random.default_rng(1)
    per_topic = rng.integers(0, 3, size=(12, 3, 3)).astype(float)
    for t in range(12):
        np.fill_diagonal(per_topic[t], 0)
    one = bradley_terry.bootstrap(per_topic, samples=200, seed=7)
    again = bradley_terry.bootstrap(per_topic, samples=200, seed=7)
    other = bradley_terry.bootstrap(per_topic, samples=200, seed=8)
    assert np.array_equal(one.low, again.low) and np.array_equal(one.high, again.high)
    assert not np.array_equal(one.low, other.low)
    assert (one.samples, one.seed, one.confidence) == (200, 7, 0.95)
    point = bradley_terry.fit(per_topic.sum(axis=0))
    assert np.all(one.low <= point) and np.all(point <= one.high)


def _stored(engine: Engine) -> list[tuple[str, str, str, int | None]]:
    with read_only(engine) as session:
        rows = session.execute(
            select(JudgePreference.topic, JudgePreference.first, JudgePreference.second, JudgePreference.preferred)
        ).all()
    return sorted((t, f, s, p) for t, f, s, p in rows)


def test_a_judge_prefers_in_both_orders_stores_and_resumes(world: Engine, endpoint: str, script: Script) -> None:
    registry.add_judge(world, "fake", endpoint=endpoint, model="m", seed=3, price_in=1.0, price_out=2.0)
    done = preferences.prefer(world, "fake", ["good", "fair", "poor"], collection="c", depth=3)
    assert (done.topics, done.pairs, done.asked, done.answered, done.reused) == (3, 9, 18, 18, 0)
    assert len(script.requests) == 18 and done.failed == [] and done.skipped == []
    stored = _stored(world)
    assert len(stored) == 18
    # good's ranking puts the document with every query word first: chosen in either position
    assert ("1", "good", "poor", 1) in stored and ("1", "poor", "good", 2) in stored
    with read_only(world) as session:
        row = session.scalars(select(JudgePreference).where(JudgePreference.first == "good")).first()
        assert row is not None
        assert row.provenance["model"] == "m" and row.provenance["seed"] == 3
        assert row.provenance["prompt_hash"] == preferences.PROMPT_HASH and row.explanation
        assert row.input_tokens and row.output_tokens and row.attempts == 1
    prompt = script.requests[0]["messages"][0]["content"]
    assert "Ranking 1:\n<document>\n[1] d" in prompt and "##preferred: N" in prompt
    ledger = registry.show_judge(world, "fake").costs
    assert ledger["preferences"] == 18 and ledger["input_tokens"] == done.input_tokens
    assert ledger["cost_usd"] == pytest.approx(done.cost_usd)

    again = preferences.prefer(world, "fake", ["good", "fair", "poor"], collection="c", depth=3)
    assert (again.asked, again.reused) == (0, 18) and len(script.requests) == 18

    report = preferences.preference_report(world, "fake", depth=3, samples=300, seed=11)
    assert report.runs == ["good", "fair", "poor"]
    assert (report.compared, report.consistent, report.inconsistent, report.position_biased) == (9, 9, 0, 0)
    assert report.position_bias_rate == 0.0 and report.first_chosen_rate == 0.5
    assert (report.samples, report.seed, report.prior) == (300, 11, bradley_terry.PRIOR)
    first = report.table[0]
    assert (first.row, first.column, first.compared, first.wins, first.ties, first.losses, first.share) == (
        "good",
        "fair",
        3,
        3,
        0,
        0,
        1.0,
    )
    good = report.ratings[0]
    assert (good.run, good.wins, good.ties, good.losses) == ("good", 6, 0, 0)
    assert good.low <= good.rating <= good.high
    # equal to an independent fit of the outcomes: good beat both on 3 topics, fair beat poor on 3
    wins = np.array([[0.0, 3, 3], [0, 0, 3], [0, 0, 0]])
    assert [r.rating for r in report.ratings] == pytest.approx(list(bradley_terry.fit(wins)), abs=1e-9)
    assert preferences.preference_report(world, "fake", depth=3, samples=300, seed=11) == report


def test_a_judge_that_always_picks_the_first_shown_decides_nothing(
    world: Engine, endpoint: str, script: Script
) -> None:
    script.first_always = True
    registry.add_judge(world, "fake", endpoint=endpoint, model="m")
    preferences.prefer(world, "fake", ["good", "poor"], collection="c", depth=3)
    report = preferences.preference_report(world, "fake", depth=3, samples=50)
    assert (report.compared, report.position_biased, report.position_bias_rate, report.first_chosen_rate) == (
        3,
        3,
        1.0,
        1.0,
    )
    assert [(r.wins, r.ties, r.losses) for r in report.ratings] == [(0, 3, 0), (0, 3, 0)]
    assert [r.rating for r in report.ratings] == pytest.approx([0.0, 0.0], abs=1e-9)
    assert report.table[0].share == 0.5


def test_a_dry_run_sends_nothing_and_a_budget_stops_cleanly(world: Engine, endpoint: str, script: Script) -> None:
    registry.add_judge(
        world, "fake", endpoint=endpoint, model="m", price_in=0.0, price_out=1000.0, max_tokens=10, max_concurrency=1
    )
    estimate = preferences.estimate_preferences(world, "fake", ["good", "fair", "poor"], collection="c", depth=3)
    assert script.requests == []
    found = estimate.estimate
    assert (found.items, estimate.pairs, estimate.reused, found.output_tokens) == (18, 9, 0, 180)
    assert found.cost_usd == pytest.approx(180 * 1000.0 / 1e6)
    # a call's worst case is 10 tokens out, 0.01 USD
    run = preferences.prefer(world, "fake", ["good", "fair", "poor"], collection="c", depth=3, max_cost=0.035)
    assert run.asked == len(script.requests) and 0 < run.asked < 18
    assert run.asked + len(run.skipped) == 18 and run.budget_usd == 0.035
    assert run.cost_usd is not None and run.cost_usd <= 0.035
    assert run.skipped[0]["reason"] == "skipped: the budget of 0.035 USD was reached"
    assert len(_stored(world)) == run.asked  # what was not sent is stored as nothing
    rest = preferences.prefer(world, "fake", ["good", "fair", "poor"], collection="c", depth=3)
    assert (rest.reused, rest.asked) == (run.asked, 18 - run.asked)


def test_refusals_say_what_is_wrong(world: Engine, endpoint: str) -> None:
    registry.add_judge(world, "fake", endpoint=endpoint, model="m")
    with pytest.raises(InvalidParameterError, match=r"^Compare 2 to 20 runs; 1 named\.$"):
        preferences.prefer(world, "fake", ["good", "good"], collection="c")
    with pytest.raises(InvalidParameterError, match=r"^A ranking is compared on its top 1 to 20 documents; not 0\.$"):
        preferences.prefer(world, "fake", ["good", "fair"], collection="c", depth=0)
    with pytest.raises(InvalidParameterError, match=r"^Name the collection whose texts the judge reads"):
        preferences.prefer(world, "fake", ["good", "fair"])
    with pytest.raises(InvalidParameterError, match=r"^Judge 'fake' declares no prices, so a budget cannot be kept"):
        preferences.prefer(world, "fake", ["good", "fair"], collection="c", max_cost=1.0)
    with pytest.raises(NotFoundError, match=r"^Judge 'fake' has no ranking \(top 10\) preference answered in both"):
        preferences.preference_report(world, "fake")
    with pytest.raises(InvalidParameterError, match=r"^The bootstrap draws 1 to 10000 samples; not 0\.$"):
        preferences.preference_report(world, "fake", samples=0)


@pytest.fixture
def cli(world: Engine, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Any:
    monkeypatch.setenv("EVALSTORE_MLFLOW", "off")
    monkeypatch.setenv("EVALSTORE_HOME", str(tmp_path))
    url = world.url.render_as_string(hide_password=False)
    runner = CliRunner()
    return lambda *args: runner.invoke(app, ["--database-url", url, *args])


def test_the_commands(cli: Any, endpoint: str, script: Script) -> None:
    assert cli("judges", "add", "fake", "--endpoint", endpoint, "--model", "m").exit_code == 0
    dry = cli(
        "judges",
        "prefer",
        "fake",
        "--runs",
        "good,fair",
        "--runs",
        "poor",
        "--collection",
        "c",
        "--dry-run",
        "--top-k",
        "3",
        "--format",
        "json",
    )
    assert dry.exit_code == 0, dry.stderr
    assert json.loads(dry.stdout)[0]["items"] == 18 and script.requests == []
    done = cli("judges", "prefer", "fake", "--runs", "good,fair,poor", "--collection", "c", "--top-k", "3")
    assert done.exit_code == 0, done.stderr
    table = cli("judgments", "preferences", "fake", "--top-k", "3", "--bootstrap", "100", "--seed", "4")
    assert table.exit_code == 0, table.stderr
    assert "seed 4" in table.stdout and "1.00 (3/0/0)" in table.stdout
    assert "position bias: 0 of 9 pairs (0.0%) got the same position both times" in table.stderr
    as_csv = cli("judgments", "preferences", "fake", "--top-k", "3", "--bootstrap", "100", "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(as_csv.stdout)))
    assert [r["run"] for r in rows] == ["good", "fair", "poor"]
    assert (rows[0]["fair"], rows[0]["good"], rows[2]["good"]) == ("1.0000", "", "0.0000")
    as_json = json.loads(cli("judgments", "preferences", "fake", "--top-k", "3", "--format", "json").stdout)
    assert (as_json["samples"], as_json["seed"], as_json["position_bias_rate"]) == (1000, 0, 0.0)
    missing = cli("judges", "prefer", "fake", "--runs", "good,fair")
    assert missing.exit_code == 2 and "name the collection whose texts the judge" in " ".join(missing.stderr.split())
    alone = cli("judges", "prefer", "fake", "--runs", "good", "--collection", "c")
    assert alone.exit_code != 0 and "Compare 2 to 20 runs; 1 named." in alone.stderr


def _answer(run: str, topic: str, text: str) -> str:
    sentence = {"text": text, "citations": []}
    record = {
        "run_id": run,
        "topic_id": topic,
        "topic": "helicopter rotor noise",
        "references": [],
        "answer": [sentence],
    }
    return json.dumps(record) + "\n"


def test_answer_runs_are_compared_on_their_answers(cli: Any, world: Engine, tmp_path: Path, endpoint: str) -> None:
    texts = {"full": "Helicopter rotor noise comes from the blades.", "thin": "Aircraft are loud."}
    for run, text in texts.items():
        (tmp_path / f"{run}.jsonl").write_text(_answer(run, "t1", text) + _answer(run, "t2", text))
        assert cli("answers", "register", str(tmp_path / f"{run}.jsonl")).exit_code == 0
    registry.add_judge(world, "fake", endpoint=endpoint, model="m")
    done = preferences.prefer(world, "fake", ["full", "thin"], kind="answers")
    assert (done.depth, done.topics, done.pairs, done.answered) == (0, 2, 2, 4)
    report = preferences.preference_report(world, "fake", kind="answers", samples=50)
    assert report.runs == ["full", "thin"] and report.ratings[0].wins == 2
    with pytest.raises(NotFoundError, match=r"^No answer run named 'nope'\."):
        preferences.prefer(world, "fake", ["full", "nope"], kind="answers")
