"""Prediction-powered means and intervals (Oosterhuis et al. 2024): the formula by hand, its
coverage by simulation (over many seeded data sets the interval covers the true mean at its
nominal rate, within sampling error), and `judgments compare` giving them per run."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import Phase, given, settings
from hypothesis import strategies as st
from scipy import stats
from sqlalchemy import Engine
from typer.testing import CliRunner

from evalstore.cli import app
from evalstore.services.judges import compare, registry, running, versions
from evalstore.statistics.prediction_powered import prediction_powered


def test_the_formula_by_hand() -> None:
    llm_all = np.array([[0.2, 0.4, 0.6, 0.8, 0.5, 0.3]])
    human = np.array([[0.5, 0.9, 0.4]])
    llm_on_human = llm_all[:, [1, 2, 4]]
    [got] = prediction_powered(llm_all, human, llm_on_human, confidence=0.9)
    delta = human[0] - llm_on_human[0]
    theta = llm_all.mean() + delta.mean()
    independent = np.var(llm_all, ddof=1) / 6 + np.var(delta, ddof=1) / 3
    covariance = np.cov(llm_on_human[0], delta)[0, 1]
    half = stats.norm.ppf(0.95) * np.sqrt(independent + 2 * covariance / 6)
    assert (got.mean, got.half_width, got.low, got.high) == pytest.approx((theta, half, theta - half, theta + half))
    assert got.half_width_independent == pytest.approx(stats.norm.ppf(0.95) * np.sqrt(independent))
    assert (got.llm_mean, got.correction, got.human_mean) == pytest.approx((llm_all.mean(), delta.mean(), 0.6))
    assert got.human_half_width == pytest.approx(stats.norm.ppf(0.95) * np.std(human, ddof=1) / np.sqrt(3))
    assert (got.llm_topics, got.human_topics, got.confidence) == (6, 3, 0.9)
    with pytest.raises(ValueError, match="2 or more topics"):
        prediction_powered(llm_all, human[:, :1], llm_on_human[:, :1])


TRUE_MEAN = 2 / 7  # the mean of Beta(2, 5), the human scores' distribution below
REPLICATES = 2000  # data sets per example, one a row (prediction_powered is vectorised over rows)


@given(
    seed=st.integers(0, 2**32 - 1),
    topics=st.integers(100, 400),
    judged=st.integers(20, 60),
    bias=st.floats(0.05, 0.2) | st.floats(-0.2, -0.05),
    slope=st.floats(0.5, 1.2),
    noise=st.floats(0.02, 0.25),
)
@settings(max_examples=12, deadline=None, derandomize=True, phases=(Phase.explicit, Phase.generate))
def test_the_interval_covers_the_true_mean_at_its_nominal_rate(
    seed: int, topics: int, judged: int, bias: float, slope: float, noise: float
) -> None:
    """Each data set: ``topics`` topics scored by people (Beta(2, 5)) and by a biased, noisy LLM,
    people's scores known on a random ``judged`` of them. The share of data sets whose 95% interval
    holds the true mean is 0.95 within 4 standard errors of a binomial share, and 2 points more
    below: a normal interval from 20 topics covers a little less than its nominal rate. (Without
    the covariance of the shared topics, cases with a judge that compresses the scale cover
    0.87-0.91 and fail here.)"""
    rng = np.random.default_rng(seed)
    human = rng.beta(2, 5, (REPLICATES, topics))
    llm = np.clip(slope * human + bias + rng.normal(0, noise, human.shape), 0, 1)
    sample = np.argsort(rng.random(human.shape), axis=1)[:, :judged]
    intervals = prediction_powered(
        llm, np.take_along_axis(human, sample, 1), np.take_along_axis(llm, sample, 1), confidence=0.95
    )
    covered = np.mean([i.low <= TRUE_MEAN <= i.high for i in intervals])
    error = np.sqrt(0.95 * 0.05 / REPLICATES)
    assert 0.95 - 4 * error - 0.02 <= covered <= 0.95 + 4 * error, covered
    # the corrected mean is unbiased, whatever the judge's bias (here its expected error on a topic)
    assert abs(np.mean([i.mean for i in intervals]) - TRUE_MEAN) < 0.01


def test_compare_gives_each_runs_prediction_powered_mean(world: Engine, endpoint: str) -> None:
    registry.add_judge(world, "fake", endpoint=endpoint, model="m")
    running.run_judge(world, "fake", pool_name="p")
    versions.build_version(world, "llm", pool_name="p", source="judge:fake")
    report = compare.compare(world, "human", "llm", measures=["AP"], confidence=0.9)
    assert report["ppi_topics"] == {"llm": 3, "human": 3}
    ppi = report["ppi"]["AP"]
    assert set(ppi) == {"good", "fair", "poor"}
    for run, (human_mean, llm_mean) in report["systems"]["AP"]["scores"].items():
        # on the same topics, the LLM's mean plus people's correction is people's mean
        assert ppi[run]["mean"] == pytest.approx(human_mean) and ppi[run]["llm_mean"] == pytest.approx(llm_mean)
        assert ppi[run]["confidence"] == 0.9 and ppi[run]["low"] <= ppi[run]["mean"] <= ppi[run]["high"]


def test_compare_on_fewer_human_topics(world: Engine, endpoint: str, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """People judged 2 of the LLM's 3 topics: the LLM's mean is over 3, the correction over 2."""
    from evalstore.services import store

    registry.add_judge(world, "fake", endpoint=endpoint, model="m")
    running.run_judge(world, "fake", pool_name="p")
    versions.build_version(world, "llm", pool_name="p", source="judge:fake")
    (tmp_path / "two.txt").write_text("1 0 d1 3\n1 0 d2 1\n1 0 d7 0\n2 0 d3 2\n2 0 d4 0\n")
    store.import_qrels(world, tmp_path / "two.txt", name="two")
    report = compare.compare(world, "two", "llm", measures=["AP"])
    assert report["ppi_topics"] == {"llm": 3, "human": 2}
    whole = compare.compare(world, "llm", "llm", measures=["AP"])  # the LLM's scores on all 3 topics
    part = report["systems"]["AP"]["scores"]
    for run, interval in report["ppi"]["AP"].items():
        llm_all = whole["systems"]["AP"]["scores"][run][0]
        human_on_2, llm_on_2 = part[run]
        assert interval["llm_mean"] == pytest.approx(llm_all)
        assert interval["correction"] == pytest.approx(human_on_2 - llm_on_2)
        assert interval["mean"] == pytest.approx(llm_all + human_on_2 - llm_on_2)
    url = world.url.render_as_string(hide_password=False)
    table = CliRunner().invoke(
        app, ["--database-url", url, "judgments", "compare", "--qrels", "two", "--qrels", "llm", "--measure", "AP"]
    )
    assert table.exit_code == 0, table.output
    assert "AP: prediction-powered means, 95% intervals (B on 3 topics, corrected by A on 2)" in " ".join(
        table.stdout.split()
    )
    as_json = CliRunner().invoke(
        app,
        [
            "--database-url",
            url,
            "judgments",
            "compare",
            "--qrels",
            "two",
            "--qrels",
            "llm",
            "--measure",
            "AP",
            "--format",
            "json",
        ],
    )
    assert json.loads(as_json.stdout)["ppi"]["AP"]["good"]["human_topics"] == 2


def test_a_hybrid_versions_board_has_prediction_powered_intervals_and_tiers(
    world: Engine,
    endpoint: str,
    tmp_path,  # type: ignore[no-untyped-def]
) -> None:
    """People judged topics 1 and 2 completely and topic 3 in part; the judge judged all three.
    The board equals `judgments compare`'s intervals of the same labels stored as qrels."""
    from evalstore.services import pools, store
    from evalstore.services.judges import ppi_board

    registry.add_judge(world, "fake", endpoint=endpoint, model="m")
    running.run_judge(world, "fake", pool_name="p")
    people = "1 0 d1 3\n1 0 d2 1\n1 0 d7 0\n2 0 d3 2\n2 0 d4 0\n2 0 d7 0\n"
    (tmp_path / "sheet.txt").write_text(people + "3 0 d5 3\n")
    pools.import_judgments(world, tmp_path / "sheet.txt", pool_name="p", assessor="ann")
    versions.build_version(world, "hyb", pool_name="p", source="hybrid:fake")
    versions.build_version(world, "llm", pool_name="p", source="judge:fake")
    (tmp_path / "people.txt").write_text(people)
    store.import_qrels(world, tmp_path / "people.txt", name="people")

    board = ppi_board.ppi_board(world, "hyb", measure="AP")
    assert (board.qrels, board.llm_topics, board.human_topics, board.partly_judged_topics) == (
        "hyb@v1",
        3,
        2,
        ["3"],
    )
    expected = compare.compare(world, "people", "llm", measures=["AP"])["ppi"]["AP"]
    assert [row.run for row in board.rows] == sorted(expected, key=lambda r: -expected[r]["mean"])
    for row in board.rows:
        assert row.mean == pytest.approx(expected[row.run]["mean"])
        assert row.half_width == pytest.approx(expected[row.run]["half_width"])
    tiers = [row.tier for row in board.rows]
    assert tiers[0] == 1 and tiers == sorted(tiers)
    for above, below in zip(board.rows, board.rows[1:], strict=False):
        if below.tier > above.tier:  # a new tier: wholly below the interval that opened the last
            opener = next(r for r in board.rows if r.tier == above.tier)
            assert below.high < opener.low

    url = world.url.render_as_string(hide_password=False)
    shown = CliRunner().invoke(
        app, ["--database-url", url, "leaderboard", "--qrels", "hyb", "--ppi", "--measure", "AP"]
    )
    assert shown.exit_code == 0, shown.output
    assert "AP on hyb@v1: prediction-powered means, 95% intervals (judge fake on 3 topics, corrected by people's" in (
        " ".join(shown.stdout.split())
    )
    assert "topics people judged in part are left out of the correction: 3" in shown.stderr
    refused = CliRunner().invoke(app, ["--database-url", url, "leaderboard", "--qrels", "llm", "--ppi"])
    assert refused.exit_code == 1
    assert "'llm@v1' is not a hybrid qrels version" in " ".join(refused.stderr.split())
