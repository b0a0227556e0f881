"""Comparing stored systems: topic-aligned paired tests, Tukey HSD, and system-ranking agreement.

The inputs are the stored per-query values of each run's newest finished evaluation on the qrels
that holds the asked measures; a run without one is evaluated first, in this process, through the
job queue (so a worker's result is reused, never computed twice). The statistics themselves are
in :mod:`evalstore.statistics.significance`.
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
from evalstore.metrics import classification as measures_of_labels
from evalstore.metrics import resolve_measures
from evalstore.services import kinds, tracking
from evalstore.services.jobs import default_measures
from evalstore.services.kinds.base import Leaderboard, MlflowRun
from evalstore.services.kinds.predictions import aligned, group_values, latest_evaluations
from evalstore.services.kinds.ranking import Selection, chosen_evaluations
from evalstore.services.labels import get_label_set, get_prediction_set, read_with_gold
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


def score_matrix(engine: Engine, *, qrels_name: str, run_names: list[str], measures: list[str],
                 missing: str = "error", evaluate_missing: bool = True) -> ScoreMatrix:
    """Read (evaluating first where needed) the per-topic values of ``run_names`` on the qrels."""
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
        log.info("evaluating %d run(s) with no stored result for %s: %s", len(lacking), ", ".join(names),
                 ", ".join(lacking))
        evaluate_runs(engine, qrels_name=qrels_name, run_names=lacking,
                      measures=[*kind_defaults, *(n for n in names if n not in default)])
        chosen = _newest_evaluations(engine, qrels_name, run_names, names)
    if lacking and not evaluate_missing:  # a caller that must not write (a GET page): say what is there
        raise NotFoundError(f"Run '{lacking[0]}' has no stored {', '.join(names)} on '{qrels_name}'; "
                            "pick a measure its evaluation has.")
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
                f"--run {run_names[0]} --run {run} --force --wait'.")
    with read_only(engine) as session:
        frames = {}
        for run in run_names:
            table = repo.result_table(session, chosen[run].id, names).to_pandas()
            frames[run] = table.pivot(index="query_id", columns="measure", values="value")
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
                f"or pass --missing zero to score them 0 here.")
        zero_filled[run] = absent
    scores = {name: np.vstack([frames[run].reindex(topics)[name].fillna(0.0).to_numpy(dtype=float)
                               for run in run_names]) for name in names}
    options = {k: first_options.get(k) for k in _MEANING_OPTIONS}
    return ScoreMatrix(qrels_name, list(run_names), topics, names, scores,
                       {run: chosen[run].id for run in run_names}, options, zero_filled)


def _newest_evaluations(engine: Engine, qrels_name: str, run_names: list[str],
                        measures: list[str]) -> dict[str, Evaluation]:
    """For each run, its newest finished evaluation on the qrels holding all ``measures``."""
    with read_only(engine) as session:
        qrels = repo.get_qrels(session, qrels_name)
        chosen: dict[str, Evaluation] = {}
        for name in run_names:
            run = repo.get_run(session, name)
            for evaluation in session.scalars(
                select(Evaluation).where(Evaluation.run_id == run.id, Evaluation.qrels_id == qrels.id,
                                         Evaluation.state == "done")
                .order_by(Evaluation.finished_at.desc(), Evaluation.id.desc())
            ):
                if set(measures) <= set(evaluation.options["measures"]):
                    chosen[name] = evaluation
                    break
    return chosen


# --- pairwise comparison ---------------------------------------------------------------------


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
        return {"settings": asdict(self.settings), "zero_filled_topics": self.matrix.zero_filled,
                "evaluation_ids": self.matrix.evaluation_ids, "comparisons": [p.as_dict() for p in self.pairs]}

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


def compare(engine: Engine, *, qrels_name: str, run_names: list[str], measures: list[str],
            baseline: str | None = None, test: str = "t", correction: str = "holm", alpha: float = 0.05,
            resamples: int = 10_000, seed: int | None = None, missing: str = "error",
            multi: str | None = None, evaluate_missing: bool = True) -> Comparison:
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
            f"--correction must be one of {', '.join(significance.CORRECTIONS)}, not '{correction}'.")
    if not 0 < alpha < 1:
        raise InvalidParameterError(f"--alpha must be between 0 and 1, not {alpha}.")
    if resamples < 1:
        raise InvalidParameterError(f"--resamples must be at least 1, not {resamples}.")
    matrix = score_matrix(engine, qrels_name=qrels_name, run_names=run_names, measures=measures, missing=missing,
                          evaluate_missing=evaluate_missing)
    random = (multi or test) in ("randomization", "bootstrap", "randomized-tukey")
    if random and seed is None:
        seed = secrets.randbits(32)  # recorded in the settings, so the output can be reproduced
    rng = np.random.default_rng(seed) if random else None
    index_pairs = pairs_for(matrix.runs, baseline)
    settings = ComparisonSettings(
        qrels_name, matrix.runs, matrix.measures, baseline, multi or test, "tukey" if multi else correction, alpha,
        resamples if random else None, seed if random else None, missing, matrix.options)
    # per measure, one row of per-topic differences per pair, computed once for every use below
    differences = {m: np.vstack([matrix.scores[m][i] - matrix.scores[m][j] for i, j in index_pairs])
                   for m in matrix.measures}
    outcomes = (_multi_outcomes(matrix, differences, index_pairs, multi, alpha, resamples, rng) if multi
                else _paired_outcomes(differences, test, correction, alpha, resamples, rng))
    pairs = []
    for measure in matrix.measures:
        scores = matrix.scores[measure]
        diffs = differences[measure]
        wins, ties, losses = significance.wins_ties_losses(diffs)
        effect = significance.effect_size(diffs)
        statistic, p_value, p_corrected, low, high = outcomes[measure]
        for row, (i, j) in enumerate(index_pairs):
            pairs.append(PairComparison(
                measure, matrix.runs[i], matrix.runs[j], float(scores[i].mean()), float(scores[j].mean()),
                float(diffs[row].mean()), float(low[row]), float(high[row]), float(statistic[row]),
                float(p_value[row]), float(p_corrected[row]), bool(p_corrected[row] < alpha), float(effect[row]),
                int(wins[row]), int(ties[row]), int(losses[row]), len(matrix.topics)))
    return Comparison(settings, pairs, matrix)


# per pair of one measure: statistic, p-value, corrected p-value, interval low and high
Outcomes = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def _paired_outcomes(differences: dict[str, np.ndarray], test: str, correction: str, alpha: float,
                     resamples: int, rng: np.random.Generator | None) -> dict[str, Outcomes]:
    # every measure's pairs in one matrix: one draw of signs/weights serves them all
    diffs = np.vstack(list(differences.values()))
    outcome = significance.paired_test(diffs, test, confidence=1 - alpha, resamples=resamples, rng=rng)
    per_measure = {}
    width = len(next(iter(differences.values())))
    for k, measure in enumerate(differences):
        rows = slice(k * width, (k + 1) * width)
        p_value = outcome.p_value[rows]
        per_measure[measure] = (outcome.statistic[rows], p_value, significance.correct(p_value, correction, alpha),
                                outcome.ci_low[rows], outcome.ci_high[rows])
    return per_measure


def _multi_outcomes(matrix: ScoreMatrix, differences: dict[str, np.ndarray], index_pairs: list[tuple[int, int]],
                    multi: str, alpha: float, resamples: int, rng: np.random.Generator | None
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
        _, p_value, half_width = significance.randomized_tukey_hsd(scores, resamples=resamples, rng=rng,
                                                                   pairs=index_pairs, confidence=1 - alpha)
        difference = diffs.mean(axis=1)  # simultaneous intervals, from the same resamples as the p-values
        per_measure[measure] = (difference, p_value, p_value, difference - half_width, difference + half_width)
    return per_measure


def check_plot_size(panels: int) -> None:
    if panels > MAX_PLOT_PANELS:
        raise InvalidParameterError(
            f"A plot of {panels} comparisons is unreadable (at most {MAX_PLOT_PANELS}); "
            "name a --baseline, or fewer runs or measures.")


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
        axes.axhline(pair.difference, color="black", linestyle="--", linewidth=1,
                     label=f"mean {pair.difference:+.4f}")
        axes.set_xlim(-0.5, len(values) - 0.5)
        axes.set_xticks([])
        axes.set_xlabel(f"topics, sorted (wins {pair.wins} / ties {pair.ties} / losses {pair.losses})", fontsize=8)
        axes.set_ylabel(f"{pair.measure} difference", fontsize=8)
        mark = "*" if pair.significant else ""
        axes.set_title(f"{pair.run} - {pair.versus}\np={pair.p_value:.3g}, adjusted {pair.p_corrected:.3g}{mark}",
                       fontsize=9)
        axes.legend(fontsize=7, loc="upper right")
    settings = comparison.settings
    figure.suptitle(f"{settings.qrels}: {settings.test} test, {settings.correction} correction", fontsize=10)
    return figure


# --- rank correlation ------------------------------------------------------------------------


@dataclass(frozen=True)
class Correlation:
    first: str  # "measure on qrels" of the reference ordering
    second: str
    systems: list[str]
    first_scores: list[float]
    second_scores: list[float]
    result: significance.RankCorrelation
    selection: Selection = Selection()  # the options of the evaluations whose means are ordered

    def as_dict(self) -> dict[str, Any]:
        out = {"reference": self.first, "other": self.second, **asdict(self.result),
               "options": self.selection.as_dict()}
        out["swapped"] = [list(pair) for pair in self.result.swapped]
        out["systems_scores"] = {s: [a, b] for s, a, b in
                                 zip(self.systems, self.first_scores, self.second_scores, strict=True)}
        return out


def correlate(engine: Engine, *, qrels_names: list[str], measures: list[str],
              selection: Selection | None = None) -> Correlation:
    """Agreement between two orderings of the systems by mean score: two measures on one qrels,
    or one measure on two qrels (over the runs evaluated on both). The first is the reference
    (tau-AP is asymmetric). Means come from evaluations made with ``selection``'s options
    (default: evaluate's), as the leaderboard picks them."""
    selection = selection or Selection()
    if len(qrels_names) == 1 and len(measures) == 2:
        orderings = [(qrels_names[0], measures[0]), (qrels_names[0], measures[1])]
    elif len(qrels_names) == 2 and len(measures) == 1:
        orderings = [(qrels_names[0], measures[0]), (qrels_names[1], measures[0])]
    else:
        raise InvalidParameterError("Give one --qrels and two --measure, or two --qrels and one --measure.")
    means: list[dict[str, float]] = []
    for qrels_name, measure in orderings:
        name = str(resolve_measures([measure])[0])
        means.append(_means_by_run(engine, qrels_name, name, selection))
    systems = sorted(set(means[0]) & set(means[1]))
    if len(systems) < 2:
        raise EvaluationError(
            f"Fewer than two runs have both {orderings[0][1]} on '{orderings[0][0]}' and {orderings[1][1]} on "
            f"'{orderings[1][0]}'. Evaluate them first: 'evalstore evaluate --qrels QRELS --all-runs --wait'.")
    first = np.array([means[0][s] for s in systems])
    second = np.array([means[1][s] for s in systems])
    labels = [f"{m} on {q}" for q, m in orderings]
    return Correlation(labels[0], labels[1], systems, first.tolist(), second.tolist(),
                       significance.rank_correlation(systems, first, second), selection)


def _means_by_run(engine: Engine, qrels_name: str, measure: str, selection: Selection) -> dict[str, float]:
    """Mean over topics of ``measure`` for every run with a finished evaluation holding it, made
    with ``selection``'s options (as the leaderboard compares them)."""
    with read_only(engine) as session:
        qrels = repo.get_qrels(session, qrels_name)
        means = {}
        for run, holding in chosen_evaluations(session, qrels, [measure], selection).values():
            if measure not in holding:
                continue
            values = repo.result_table(session, holding[measure].id, [measure]).column("value").to_numpy()
            if len(values):
                means[run.name] = float(values.mean())
    return means


def log_comparison(comparison: Comparison, figure: Figure | None = None) -> str:
    """Log a comparison as its own MLflow run in the qrels' experiment: settings as params, the
    count of significant differences per measure as metrics, the table (CSV, JSON and an MLflow
    table) and the plot as artifacts. Returns the MLflow run id."""
    import pandas as pd  # pandas costs ~0.3 s to import; only logging builds this frame

    settings = comparison.settings
    name = f"compare: {', '.join(settings.runs)}"
    params = {"test": settings.test, "correction": settings.correction, "alpha": settings.alpha,
              "resamples": settings.resamples, "seed": settings.seed, "baseline": settings.baseline,
              "missing": settings.missing, "runs": ",".join(settings.runs), "measures": ",".join(settings.measures),
              "topics": len(comparison.matrix.topics),
              **{f"evaluation.{k}": v for k, v in settings.evaluation_options.items()}}
    metrics: dict[str, float | None] = {
        f"significant_pairs.{measure}": float(sum(p.significant for p in comparison.pairs if p.measure == measure))
        for measure in settings.measures}
    table = pd.DataFrame([p.as_dict() for p in comparison.pairs])
    payload = MlflowRun(
        experiment=settings.qrels, name=name if len(name) <= 250 else name[:247] + "...",
        tags={"evalstore.kind": "comparison", "evalstore.qrels": settings.qrels, "evalstore.version": __version__},
        params=params, metrics=metrics, tables={"comparison_table.json": table},
        texts={"comparison.csv": table.to_csv(index=False)}, dicts={"comparison.json": comparison.as_dict()},
        figures=(lambda: iter([("per_topic_differences.png", figure)])) if figure is not None else None)
    return tracking.log_now(payload, "the comparison")


# --- prediction sets -------------------------------------------------------------------------

@dataclass(frozen=True)
class McNemar:
    first: str
    second: str
    only_first_right: int
    only_second_right: int
    statistic: float
    p_value: float


def mcnemar(engine: Engine, *, labels_name: str, first: str, second: str) -> McNemar:
    """McNemar's test on the items one classifier labels right (multilabel: its whole label set)
    and the other wrong (statsmodels; the exact binomial version below 25 discordant items,
    chi-square with continuity correction above). Binary scores are cut at the threshold of
    their newest evaluation."""
    from statsmodels.stats.contingency_tables import mcnemar as sm_mcnemar  # ~0.5 s to import; McNemar only

    with read_only(engine) as session:
        label_set = get_label_set(session, labels_name)
        sets = [get_prediction_set(session, name) for name in (first, second)]
        gold, tables = read_with_gold(session, label_set, sets)
        pair = [aligned(p, label_set, gold, t) for p, t in zip(sets, tables, strict=True)]
        # scores are cut where their newest evaluation cut them (0.5 when never evaluated)
        latest = {p.id: ((e.settings or {}).get("threshold"), e.options["positive"])
                  for p, e in latest_evaluations(session, label_set)}
    right = []
    for prediction_set, data in zip(sets, pair, strict=True):
        cut, positive_class = latest.get(prediction_set.id, (None, None))
        if data.multilabel:  # an item is labelled right when its whole label set is
            if data.y_pred is not None:
                y_sets = data.y_pred
            else:
                assert data.scores is not None, "a multilabel prediction set has label sets or class scores"
                y_sets = data.scores >= (0.5 if cut is None else float(cut))
            right.append(np.all(y_sets == data.y_true, axis=1))
            continue
        if data.score is not None and (data.y_pred is None or cut is not None):
            positive = data.classes.index(positive_class) if positive_class is not None else 1
            y_pred = measures_of_labels.labels_at(data.score, 0.5 if cut is None else cut, positive)
        elif data.y_pred is not None:
            y_pred = data.y_pred
        else:
            assert data.scores is not None, "a prediction set has labels, a score or class scores"
            y_pred = np.argmax(data.scores, axis=1)
        right.append(y_pred == data.y_true)
    b = int((right[0] & ~right[1]).sum())
    c = int((~right[0] & right[1]).sum())
    table = [[int((right[0] & right[1]).sum()), b], [c, int((~right[0] & ~right[1]).sum())]]
    result = sm_mcnemar(table, exact=b + c < 25, correction=True)
    return McNemar(first, second, b, c, float(result.statistic), float(result.pvalue))


def pairs_of(names: list[str], baseline: str | None) -> list[tuple[str, str]]:
    """The pairs to compare: each name with the baseline, or every pair."""
    everyone = list(dict.fromkeys([*([baseline] if baseline else []), *names]))
    if len(everyone) < 2:
        raise InvalidParameterError("Name two prediction sets (or one and --baseline).")
    if baseline:
        return [(baseline, name) for name in everyone[1:]]
    return [(a, b) for i, a in enumerate(everyone) for b in everyone[i + 1:]]


def compare_groups(engine: Engine, *, labels_name: str, pairs: list[tuple[str, str]], measures_: list[str],
                   test: str, alpha: float, resamples: int, seed: int) -> list[dict[str, Any]]:
    """Paired tests over the groups both sets have a value for (the per-query comparison of
    ranking runs, with groups as topics), through :func:`evalstore.statistics.significance.paired_test`."""
    if test not in significance.TESTS:
        raise InvalidParameterError(f"--test must be mcnemar or one of {', '.join(significance.TESTS)}, not "
                                    f"'{test}'.")
    rng = np.random.default_rng(seed)
    rows = []
    for measure in measures_:
        for first, second in pairs:
            a = group_values(engine, labels_name=labels_name, prediction_name=first, measure=measure)
            b = group_values(engine, labels_name=labels_name, prediction_name=second, measure=measure)
            both = a.dropna().index.intersection(b.dropna().index)
            diffs = (a[both] - b[both]).to_numpy()  # first minus second, as ranking compare reports
            outcome = significance.paired_test(diffs[None, :], test, confidence=1 - alpha, resamples=resamples,
                                               rng=rng)
            rows.append({"measure": measure, "first": first, "second": second, "groups": len(both),
                         "mean first": float(a[both].mean()), "mean second": float(b[both].mean()),
                         "difference": float(diffs.mean()), "statistic": float(outcome.statistic[0]),
                         "p": float(outcome.p_value[0]), "significant": bool(outcome.p_value[0] < alpha)})
    return rows


def few_units_note(count: int, units: str) -> list[str]:
    """A warning when a test or interval rests on too few topics or groups to mean much (a
    bootstrap over 4 groups gave p = 0.0001)."""
    if count >= significance.FEW_TOPICS:
        return []
    return [f"only {count} {units}: with fewer than {significance.FEW_TOPICS}, intervals and p-values mean little"]


@dataclass(frozen=True)
class PredictionComparison:
    """McNemar's test per pair, or a paired test over per-group values, as rows to show."""

    title: str
    rows: list[dict[str, Any]]
    seed: int | None  # drawn for the resampling tests when none was given (printed to reproduce)
    notes: list[str] = field(default_factory=list)


def compare_predictions(engine: Engine, *, labels_name: str, names: list[str], measures: list[str], test: str,
                        baseline: str | None, alpha: float, resamples: int, seed: int | None) -> PredictionComparison:
    """McNemar on item-level correctness, or a paired test over per-group values."""
    pairs = pairs_of(names, baseline)
    rows: list[dict[str, Any]] = []
    if test == "mcnemar":
        for first, second in pairs:
            result = mcnemar(engine, labels_name=labels_name, first=first, second=second)
            rows.append({"first": first, "second": second, "only first right": result.only_first_right,
                         "only second right": result.only_second_right, "statistic": result.statistic,
                         "p": result.p_value, "significant": result.p_value < alpha})
        return PredictionComparison(f"McNemar on '{labels_name}'", rows, None)
    drawn = secrets.randbits(31) if seed is None else seed
    rows = compare_groups(engine, labels_name=labels_name, pairs=pairs, measures_=measures or ["accuracy"],
                          test=test, alpha=alpha, resamples=resamples, seed=drawn)
    return PredictionComparison(f"per-group comparison on '{labels_name}' ({test})", rows, drawn,
                                few_units_note(min(int(row["groups"]) for row in rows), "groups"))


def leaderboard(engine: Engine, *, kind: str, judgments: str, measures: list[str], sort: str | None,
                options: dict[str, Any] | None = None) -> Leaderboard:
    """Everything of ``kind`` evaluated against ``judgments`` (qrels, gold labels), best first;
    ``options`` selects the evaluations (the ranking kind's -l, -M, -J and missing-topic policy)."""
    return kinds.get(kind).leaderboard(engine, judgments=judgments, measures=measures, sort=sort, options=options)
