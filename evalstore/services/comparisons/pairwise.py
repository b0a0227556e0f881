"""Runs compared on the same topics: paired tests with their p-values corrected within each
measure's family, or Tukey's HSD over all runs at once; wins, ties, losses and effect sizes."""

from __future__ import annotations

import secrets
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from sqlalchemy import Engine

from evalstore.errors import InvalidParameterError, Remedy
from evalstore.services.comparisons.matrix import ScoreMatrix, answer_matrix, score_matrix
from evalstore.services.comparisons.predictions import few_units_note
from evalstore.services.kinds.ranking import StoredPairs, TopicFilter
from evalstore.statistics import significance


@dataclass(frozen=True)
class ComparisonSettings:
    qrels: str
    runs: list[str]
    measures: list[str]
    baseline: str | None
    test: str  # a paired test, or the multi-system procedure ("tukey", "randomized-tukey")
    correction: str  # "tukey" when the procedure controls the family-wise error itself
    alpha: float
    resamples: int | None
    seed: int | None  # None: nothing random was drawn
    missing: str
    evaluation_options: dict[str, Any]


@dataclass(frozen=True)
class PairComparison:
    measure: str
    run: str
    versus: str
    mean_run: float
    mean_versus: float
    difference: float  # mean of run - versus over the topics
    ci_low: float
    ci_high: float
    statistic: float
    p_value: float
    p_corrected: float
    significant: bool
    effect_size: float  # paired standardised difference (Cohen's d_z)
    wins: int
    ties: int
    losses: int
    topics: int

    def as_dict(self) -> dict[str, Any]:
        return {k: (_json_number(v) if isinstance(v, float) else v) for k, v in asdict(self).items()}


@dataclass(frozen=True)
class Comparison:
    settings: ComparisonSettings
    pairs: list[PairComparison]
    matrix: ScoreMatrix
    prepared: bool = False  # the tests read from what a worker stored, not computed now

    @property
    def notes(self) -> list[str]:
        """What the reader should know before trusting the numbers."""
        return few_units_note(len(self.matrix.topics), "topics")

    def as_dict(self) -> dict[str, Any]:
        return {
            "settings": asdict(self.settings),
            "zero_filled_topics": self.matrix.zero_filled,
            "evaluation_ids": self.matrix.evaluation_ids,
            "comparisons": [p.as_dict() for p in self.pairs],
        }

    def differences(self, pair: PairComparison) -> np.ndarray:
        """Per-topic ``run - versus`` values of one pair, in ``matrix.topics`` order."""
        scores = self.matrix.scores[pair.measure]
        return scores[self.matrix.runs.index(pair.run)] - scores[self.matrix.runs.index(pair.versus)]


def _json_number(value: float) -> float | str:
    return value if np.isfinite(value) else ("inf" if value > 0 else "-inf" if value < 0 else "nan")


def pairs_for(runs: list[str], baseline: str | None) -> list[tuple[int, int]]:
    """(run, versus) indexes: each run against the baseline, or every pair in the order given."""
    if baseline is None:
        return [(i, j) for i in range(len(runs)) for j in range(i + 1, len(runs))]
    b = runs.index(baseline)
    return [(i, b) for i in range(len(runs)) if i != b]


def compare(
    engine: Engine,
    *,
    qrels_name: str,
    run_names: list[str],
    measures: list[str],
    baseline: str | None = None,
    test: str = "t",
    correction: str = "holm",
    alpha: float = 0.05,
    resamples: int = 10_000,
    seed: int | None = None,
    missing: str = "error",
    multi: str | None = None,
    evaluate_missing: bool = True,
    topic_filter: TopicFilter | None = None,
    stored: Callable[[ScoreMatrix], StoredPairs | None] | None = None,
) -> Comparison:
    """Paired comparison of runs on each measure, p-values corrected within each measure's family
    (the comparisons with the baseline, or all pairs); or, with ``multi``, Tukey's HSD over all
    runs at once (the family is every pair of runs, whichever pairs are reported). ``stored``:
    the tests a worker stored for the matrix read (a page's), used instead of computing them when
    it has them for this very test, alpha and seed (every pair, no baseline)."""
    if baseline is not None and baseline not in run_names:
        run_names = [baseline, *run_names]
    _check(run_names, test, multi, correction, alpha, resamples)
    matrix = score_matrix(
        engine,
        qrels_name=qrels_name,
        run_names=run_names,
        measures=measures,
        missing=missing,
        evaluate_missing=evaluate_missing,
        topic_filter=topic_filter,
    )
    found = stored(matrix) if stored is not None and len(matrix.measures) == 1 else None
    if found is not None and (multi, baseline, test, alpha, seed) == (None, None, found.test, found.alpha, found.seed):
        return stored_comparison(matrix, found, test=test, correction=correction, alpha=alpha, missing=missing)
    return compare_matrix(
        matrix,
        baseline=baseline,
        test=test,
        correction=correction,
        alpha=alpha,
        resamples=resamples,
        seed=seed,
        missing=missing,
        multi=multi,
    )


def compare_answers(
    engine: Engine,
    *,
    bank_name: str,
    answer_names: list[str],
    measures: list[str],
    assessor: str = "human",
    evaluation_ids: Mapping[str, int] | None = None,
    baseline: str | None = None,
    test: str = "t",
    correction: str = "holm",
    alpha: float = 0.05,
    resamples: int = 10_000,
    seed: int | None = None,
    missing: str = "error",
    multi: str | None = None,
) -> Comparison:
    """:func:`compare` for answer runs on a nugget bank: their per-topic nugget (and citation
    support) scores, from each run's newest evaluation on the bank with ``assessor``'s labels (or
    the ``evaluation_ids`` given: a task's board), compared by the same tests and corrections."""
    if baseline is not None and baseline not in answer_names:
        answer_names = [baseline, *answer_names]
    _check(answer_names, test, multi, correction, alpha, resamples)
    matrix = answer_matrix(
        engine,
        bank_name=bank_name,
        answer_names=answer_names,
        measures=measures,
        assessor=assessor,
        missing=missing,
        evaluation_ids=evaluation_ids,
    )
    return compare_matrix(
        matrix,
        baseline=baseline,
        test=test,
        correction=correction,
        alpha=alpha,
        resamples=resamples,
        seed=seed,
        missing=missing,
        multi=multi,
    )


def _check(names: list[str], test: str, multi: str | None, correction: str, alpha: float, resamples: int) -> None:
    if len(names) < 2:
        raise InvalidParameterError(
            f"A comparison is of two runs or more; {len(names)} named.",
            remedy=Remedy(cli="Name at least two runs, or one run and --baseline.", web="Pick two or more runs."),
        )
    if multi is None and test not in significance.TESTS:
        raise InvalidParameterError(
            f"The paired test is one of {', '.join(significance.TESTS)}; not '{test}'.",
            remedy=Remedy(cli="Choose one with --test.", web="Choose one in the Test field."),
        )
    if multi is not None and multi not in significance.MULTI:
        raise InvalidParameterError(
            f"The test of all runs at once is one of {', '.join(significance.MULTI)}; not '{multi}'.",
            remedy=Remedy(cli="Choose one with --multi."),
        )
    if correction not in significance.CORRECTIONS:
        raise InvalidParameterError(
            f"The correction for multiple comparisons is one of {', '.join(significance.CORRECTIONS)}; "
            f"not '{correction}'.",
            remedy=Remedy(cli="Choose one with --correction."),
        )
    if not 0 < alpha < 1:
        raise InvalidParameterError(
            f"The significance level is between 0 and 1; not {alpha}.", remedy=Remedy(cli="Set it with --alpha.")
        )
    if resamples < 1:
        raise InvalidParameterError(
            f"The number of resamples is at least 1; not {resamples}.", remedy=Remedy(cli="Set it with --resamples.")
        )


def compare_matrix(
    matrix: ScoreMatrix,
    *,
    baseline: str | None = None,
    test: str = "t",
    correction: str = "holm",
    alpha: float = 0.05,
    resamples: int = 10_000,
    seed: int | None = None,
    missing: str = "error",
    multi: str | None = None,
) -> Comparison:
    """The tests of :func:`compare` on a score matrix already read (a ranking run's, an answer
    run's): the seed of a random procedure drawn when not given, and recorded in the settings."""
    qrels_name = matrix.qrels
    random = (multi or test) in ("randomization", "bootstrap", "randomized-tukey")
    if random and seed is None:
        seed = secrets.randbits(32)  # recorded in the settings, so the output can be reproduced
    rng = np.random.default_rng(seed) if random else None
    index_pairs = pairs_for(matrix.runs, baseline)
    settings = ComparisonSettings(
        qrels_name,
        matrix.runs,
        matrix.measures,
        baseline,
        multi or test,
        "tukey" if multi else correction,
        alpha,
        resamples if random else None,
        seed if random else None,
        missing,
        matrix.options,
    )
    # per measure, one row of per-topic differences per pair, computed once for every use below
    differences = {
        m: np.vstack([matrix.scores[m][i] - matrix.scores[m][j] for i, j in index_pairs]) for m in matrix.measures
    }
    outcomes = (
        _multi_outcomes(matrix, differences, index_pairs, multi, alpha, resamples, rng)
        if multi
        else _paired_outcomes(differences, test, correction, alpha, resamples, rng)
    )
    pairs = []
    for measure in matrix.measures:
        scores = matrix.scores[measure]
        diffs = differences[measure]
        wins, ties, losses = significance.wins_ties_losses(diffs)
        effect = significance.effect_size(diffs)
        statistic, p_value, p_corrected, low, high = outcomes[measure]
        for row, (i, j) in enumerate(index_pairs):
            pairs.append(
                PairComparison(
                    measure,
                    matrix.runs[i],
                    matrix.runs[j],
                    float(scores[i].mean()),
                    float(scores[j].mean()),
                    float(diffs[row].mean()),
                    float(low[row]),
                    float(high[row]),
                    float(statistic[row]),
                    float(p_value[row]),
                    float(p_corrected[row]),
                    bool(p_corrected[row] < alpha),
                    float(effect[row]),
                    int(wins[row]),
                    int(ties[row]),
                    int(losses[row]),
                    len(matrix.topics),
                )
            )
    return Comparison(settings, pairs, matrix)


def stored_comparison(
    matrix: ScoreMatrix, stored: StoredPairs, *, test: str, correction: str, alpha: float, missing: str
) -> Comparison:
    """:func:`compare_matrix`'s comparison of every pair of the matrix's runs on its one measure,
    with each pair's test as a worker stored it (``stored``: this test and alpha, of these very
    evaluations and topics) and the correction over the pairs compared: the same numbers."""
    measure = matrix.measures[0]
    scores = matrix.scores[measure]
    index_pairs = pairs_for(matrix.runs, None)
    tests = [stored.pair(matrix.runs[i], matrix.runs[j]) for i, j in index_pairs]
    p_corrected = significance.correct(np.array([t.p_value for t in tests]), correction, alpha)
    settings = ComparisonSettings(
        matrix.qrels, matrix.runs, matrix.measures, None, test, correction, alpha, None, None, missing, matrix.options
    )
    pairs = [
        PairComparison(
            measure,
            matrix.runs[i],
            matrix.runs[j],
            float(scores[i].mean()),
            float(scores[j].mean()),
            t.difference,
            t.ci_low,
            t.ci_high,
            t.statistic,
            t.p_value,
            float(p_corrected[row]),
            bool(p_corrected[row] < alpha),
            t.effect_size,
            t.wins,
            t.ties,
            t.losses,
            len(matrix.topics),
        )
        for row, ((i, j), t) in enumerate(zip(index_pairs, tests, strict=True))
    ]
    return Comparison(settings, pairs, matrix, prepared=True)


# per pair of one measure: statistic, p-value, corrected p-value, interval low and high
Outcomes = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def _paired_outcomes(
    differences: dict[str, np.ndarray],
    test: str,
    correction: str,
    alpha: float,
    resamples: int,
    rng: np.random.Generator | None,
) -> dict[str, Outcomes]:
    # every measure's pairs in one matrix: one draw of signs/weights serves them all
    diffs = np.vstack(list(differences.values()))
    outcome = significance.paired_test(diffs, test, confidence=1 - alpha, resamples=resamples, rng=rng)
    per_measure = {}
    width = len(next(iter(differences.values())))
    for k, measure in enumerate(differences):
        rows = slice(k * width, (k + 1) * width)
        p_value = outcome.p_value[rows]
        per_measure[measure] = (
            outcome.statistic[rows],
            p_value,
            significance.correct(p_value, correction, alpha),
            outcome.ci_low[rows],
            outcome.ci_high[rows],
        )
    return per_measure


def _multi_outcomes(
    matrix: ScoreMatrix,
    differences: dict[str, np.ndarray],
    index_pairs: list[tuple[int, int]],
    multi: str,
    alpha: float,
    resamples: int,
    rng: np.random.Generator | None,
) -> dict[str, Outcomes]:
    per_measure = {}
    for measure in matrix.measures:
        scores = matrix.scores[measure]
        if multi == "tukey":
            tukey = significance.tukey_hsd(scores, confidence=1 - alpha, pairs=index_pairs)
            per_measure[measure] = (tukey.statistic, tukey.p_value, tukey.p_value, tukey.ci_low, tukey.ci_high)
            continue
        assert rng is not None
        diffs = differences[measure]
        _, p_value, half_width = significance.randomized_tukey_hsd(
            scores, resamples=resamples, rng=rng, pairs=index_pairs, confidence=1 - alpha
        )
        difference = diffs.mean(axis=1)  # simultaneous intervals, from the same resamples as the p-values
        per_measure[measure] = (difference, p_value, p_value, difference - half_width, difference + half_width)
    return per_measure
