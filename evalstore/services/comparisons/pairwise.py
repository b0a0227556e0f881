"""Runs compared on the same topics: the score matrix of stored per-query values, paired tests and
Tukey HSD, the comparison's figure and its MLflow run.
"""

from __future__ import annotations

import logging
import secrets
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from sqlalchemy import Engine, select

from evalstore._version import __version__
from evalstore.db import repositories as repo
from evalstore.db.models import Evaluation
from evalstore.db.session import read_only
from evalstore.errors import EvaluationError, InvalidParameterError, NotFoundError
from evalstore.metrics import resolve_measures
from evalstore.services import kinds, tracking
from evalstore.services.comparisons.predictions import few_units_note
from evalstore.services.jobs import default_measures
from evalstore.services.kinds.base import Leaderboard, MlflowRun
from evalstore.services.kinds.ranking import TopicFilter
from evalstore.services.orchestration import evaluate_runs
from evalstore.statistics import significance

if TYPE_CHECKING:
    from matplotlib.figure import Figure

log = logging.getLogger("evalstore.compare")


# Options that change what a value means; runs compared must agree on them.
_MEANING_OPTIONS = ("relevance_level", "max_docs", "judged_only", "missing_topics")


MISSING_POLICIES = ("error", "zero")


# A plot with more panels than this is unreadable; the CLI asks for --baseline or fewer runs.
MAX_PLOT_PANELS = 24


@dataclass(frozen=True)
class ScoreMatrix:
    """Per-topic values of several runs on one qrels, aligned by topic."""

    qrels: str
    runs: list[str]
    topics: list[str]
    measures: list[str]
    scores: dict[str, np.ndarray]  # measure -> (runs x topics)
    evaluation_ids: dict[str, int]  # run -> evaluation read
    options: dict[str, Any]  # the evaluation options the runs share
    zero_filled: dict[str, list[str]] = field(default_factory=dict)  # run -> topics scored 0 (--missing zero)


def score_matrix(
    engine: Engine,
    *,
    qrels_name: str,
    run_names: list[str],
    measures: list[str],
    missing: str = "error",
    evaluate_missing: bool = True,
    topic_filter: TopicFilter | None = None,
) -> ScoreMatrix:
    """Read (evaluating first where needed) the per-topic values of ``run_names`` on the qrels (of
    the topics ``topic_filter`` keeps: a split task's public ones)."""
    if missing not in MISSING_POLICIES:
        raise InvalidParameterError(f"--missing must be one of {', '.join(MISSING_POLICIES)}, not '{missing}'.")
    if len(set(run_names)) != len(run_names):
        raise InvalidParameterError("A run is named twice; name each run once.")
    names = [str(m) for m in resolve_measures(measures)]
    chosen = _newest_evaluations(engine, qrels_name, run_names, names)
    lacking = [r for r in run_names if r not in chosen]
    if lacking and evaluate_missing:
        with read_only(engine) as session:
            kind_defaults = list(default_measures(repo.get_qrels(session, qrels_name).kind))
        default = {str(m) for m in resolve_measures(kind_defaults)}
        log.info(
            "evaluating %d run(s) with no stored result for %s: %s", len(lacking), ", ".join(names), ", ".join(lacking)
        )
        evaluate_runs(
            engine,
            qrels_name=qrels_name,
            run_names=lacking,
            measures=[*kind_defaults, *(n for n in names if n not in default)],
        )
        chosen = _newest_evaluations(engine, qrels_name, run_names, names)
    if lacking and not evaluate_missing:  # a caller that must not write (a GET page): say what is there
        raise NotFoundError(
            f"Run '{lacking[0]}' has no stored {', '.join(names)} on '{qrels_name}'; pick a measure its evaluation has."
        )
    assert all(r in chosen for r in run_names), "evaluate_runs stores every run or raises"
    first_options = chosen[run_names[0]].options
    for run in run_names[1:]:
        options = chosen[run].options
        differing = [k for k in _MEANING_OPTIONS if options.get(k) != first_options.get(k)]
        if differing:
            key = differing[0]
            raise EvaluationError(
                f"Runs '{run_names[0]}' and '{run}' were evaluated with different {key} "
                f"({first_options.get(key)} vs {options.get(key)}), so their values do not compare. "
                f"Evaluate both with the same options: 'evalstore evaluate --qrels {qrels_name} "
                f"--run {run_names[0]} --run {run} --force --wait'."
            )
    with read_only(engine) as session:
        frames = {}
        for run in run_names:
            table = repo.result_table(session, chosen[run].id, names).to_pandas()
            frame = table.pivot(index="query_id", columns="measure", values="value")
            kept = frame if topic_filter is None else frame[[topic_filter.keeps(str(t)) for t in frame.index]]
            frames[run] = kept
    topics = sorted(set().union(*(frame.index for frame in frames.values())))
    zero_filled: dict[str, list[str]] = {}
    for run, frame in frames.items():
        absent = sorted(set(topics) - set(frame.index))
        if not absent:
            continue
        if missing == "error":
            shown = ", ".join(absent[:5]) + (f" and {len(absent) - 5} more" if len(absent) > 5 else "")
            raise EvaluationError(
                f"Run '{run}' has no value for {len(absent)} topic(s) the other runs have ({shown}): its "
                f"evaluation skipped topics it did not retrieve for. Re-evaluate it scoring them 0 with "
                f"'evalstore evaluate --qrels {qrels_name} --run {run} --missing zero --force --wait', "
                f"or pass --missing zero to score them 0 here."
            )
        zero_filled[run] = absent
    scores = {
        name: np.vstack([frames[run].reindex(topics)[name].fillna(0.0).to_numpy(dtype=float) for run in run_names])
        for name in names
    }
    options = {k: first_options.get(k) for k in _MEANING_OPTIONS}
    return ScoreMatrix(
        qrels_name,
        list(run_names),
        topics,
        names,
        scores,
        {run: chosen[run].id for run in run_names},
        options,
        zero_filled,
    )


def _newest_evaluations(
    engine: Engine, qrels_name: str, run_names: list[str], measures: list[str]
) -> dict[str, Evaluation]:
    """For each run, its newest finished evaluation on the qrels holding all ``measures``."""
    with read_only(engine) as session:
        qrels = repo.get_qrels(session, qrels_name)
        chosen: dict[str, Evaluation] = {}
        for name in run_names:
            run = repo.get_run(session, name)
            for evaluation in session.scalars(
                select(Evaluation)
                .where(Evaluation.run_id == run.id, Evaluation.qrels_id == qrels.id, Evaluation.state == "done")
                .order_by(Evaluation.finished_at.desc(), Evaluation.id.desc())
            ):
                if set(measures) <= set(evaluation.options["measures"]):
                    chosen[name] = evaluation
                    break
    return chosen


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
) -> Comparison:
    """Paired comparison of runs on each measure, p-values corrected within each measure's family
    (the comparisons with the baseline, or all pairs); or, with ``multi``, Tukey's HSD over all
    runs at once (the family is every pair of runs, whichever pairs are reported)."""
    if baseline is not None and baseline not in run_names:
        run_names = [baseline, *run_names]
    if len(run_names) < 2:
        raise InvalidParameterError("Name at least two runs to compare (or one run and --baseline).")
    if multi is None and test not in significance.TESTS:
        raise InvalidParameterError(f"--test must be one of {', '.join(significance.TESTS)}, not '{test}'.")
    if multi is not None and multi not in significance.MULTI:
        raise InvalidParameterError(f"--multi must be one of {', '.join(significance.MULTI)}, not '{multi}'.")
    if correction not in significance.CORRECTIONS:
        raise InvalidParameterError(
            f"--correction must be one of {', '.join(significance.CORRECTIONS)}, not '{correction}'."
        )
    if not 0 < alpha < 1:
        raise InvalidParameterError(f"--alpha must be between 0 and 1, not {alpha}.")
    if resamples < 1:
        raise InvalidParameterError(f"--resamples must be at least 1, not {resamples}.")
    matrix = score_matrix(
        engine,
        qrels_name=qrels_name,
        run_names=run_names,
        measures=measures,
        missing=missing,
        evaluate_missing=evaluate_missing,
        topic_filter=topic_filter,
    )
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


def check_plot_size(panels: int) -> None:
    if panels > MAX_PLOT_PANELS:
        raise InvalidParameterError(
            f"A plot of {panels} comparisons is unreadable (at most {MAX_PLOT_PANELS}); "
            "name a --baseline, or fewer runs or measures."
        )


def comparison_figure(comparison: Comparison) -> Figure:
    """Per-topic differences of every (pair, measure), sorted, one panel each: bars above zero are
    topics the run wins, below it topics it loses; the dashed line is the mean difference and the
    band its confidence interval."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    panels = comparison.pairs
    check_plot_size(len(panels))
    columns = min(3, len(panels))
    rows = -(-len(panels) // columns)
    figure = Figure(figsize=(4.6 * columns, 3.2 * rows), dpi=100, layout="constrained")
    level = round(100 * (1 - comparison.settings.alpha))
    for index, pair in enumerate(panels):
        axes = figure.add_subplot(rows, columns, index + 1)
        values = np.sort(comparison.differences(pair))[::-1]
        positions = np.arange(len(values))
        axes.bar(positions, values, width=1.0, color=np.where(values >= 0, "#4c72b0", "#c44e52"), linewidth=0)
        axes.axhline(0, color="black", linewidth=0.6)
        axes.axhspan(pair.ci_low, pair.ci_high, color="#999999", alpha=0.25, label=f"{level}% CI")
        axes.axhline(pair.difference, color="black", linestyle="--", linewidth=1, label=f"mean {pair.difference:+.4f}")
        axes.set_xlim(-0.5, len(values) - 0.5)
        axes.set_xticks([])
        axes.set_xlabel(f"topics, sorted (wins {pair.wins} / ties {pair.ties} / losses {pair.losses})", fontsize=8)
        axes.set_ylabel(f"{pair.measure} difference", fontsize=8)
        mark = "*" if pair.significant else ""
        axes.set_title(
            f"{pair.run} - {pair.versus}\np={pair.p_value:.3g}, adjusted {pair.p_corrected:.3g}{mark}", fontsize=9
        )
        axes.legend(fontsize=7, loc="upper right")
    settings = comparison.settings
    figure.suptitle(f"{settings.qrels}: {settings.test} test, {settings.correction} correction", fontsize=10)
    return figure


def log_comparison(comparison: Comparison, figure: Figure | None = None) -> str:
    """Log a comparison as its own MLflow run in the qrels' experiment: settings as params, the
    count of significant differences per measure as metrics, the table (CSV, JSON and an MLflow
    table) and the plot as artifacts. Returns the MLflow run id."""
    import pandas as pd  # pandas costs ~0.3 s to import; only logging builds this frame

    settings = comparison.settings
    name = f"compare: {', '.join(settings.runs)}"
    params = {
        "test": settings.test,
        "correction": settings.correction,
        "alpha": settings.alpha,
        "resamples": settings.resamples,
        "seed": settings.seed,
        "baseline": settings.baseline,
        "missing": settings.missing,
        "runs": ",".join(settings.runs),
        "measures": ",".join(settings.measures),
        "topics": len(comparison.matrix.topics),
        **{f"evaluation.{k}": v for k, v in settings.evaluation_options.items()},
    }
    metrics: dict[str, float | None] = {
        f"significant_pairs.{measure}": float(sum(p.significant for p in comparison.pairs if p.measure == measure))
        for measure in settings.measures
    }
    table = pd.DataFrame([p.as_dict() for p in comparison.pairs])
    payload = MlflowRun(
        experiment=settings.qrels,
        name=name if len(name) <= 250 else name[:247] + "...",
        tags={"evalstore.kind": "comparison", "evalstore.qrels": settings.qrels, "evalstore.version": __version__},
        params=params,
        metrics=metrics,
        tables={"comparison_table.json": table},
        texts={"comparison.csv": table.to_csv(index=False)},
        dicts={"comparison.json": comparison.as_dict()},
        figures=(lambda: iter([("per_topic_differences.png", figure)])) if figure is not None else None,
    )
    return tracking.log_now(payload, "the comparison")


def leaderboard(
    engine: Engine,
    *,
    kind: str,
    judgments: str,
    measures: list[str],
    sort: str | None,
    options: dict[str, Any] | None = None,
) -> Leaderboard:
    """Everything of ``kind`` evaluated against ``judgments`` (qrels, gold labels), best first;
    ``options`` selects the evaluations (the ranking kind's -l, -M, -J and missing-topic policy)."""
    return kinds.get(kind).leaderboard(engine, judgments=judgments, measures=measures, sort=sort, options=options)
