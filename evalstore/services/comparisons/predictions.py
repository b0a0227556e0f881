"""Prediction sets compared against the same gold labels: McNemar's test on the items, paired tests on
the groups.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field

import numpy as np
from sqlalchemy import Engine

from evalstore.db.session import read_only
from evalstore.errors import InvalidParameterError, Remedy
from evalstore.metrics import classification as measures_of_labels
from evalstore.services.kinds.predictions import aligned, group_values, latest_evaluations
from evalstore.services.labels import get_label_set, get_prediction_set, read_with_gold
from evalstore.statistics import significance


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
        latest = {
            p.id: ((e.settings or {}).get("threshold"), e.options["positive"])
            for p, e in latest_evaluations(session, label_set)
        }
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


@dataclass(frozen=True)
class McNemarRow:
    """McNemar's test of a pair, as a row to show (columns named in words)."""

    first: str
    second: str
    only_first_right: int
    only_second_right: int
    statistic: float
    p: float
    significant: bool

    def as_dict(self) -> dict[str, object]:
        return {
            "first": self.first,
            "second": self.second,
            "only first right": self.only_first_right,
            "only second right": self.only_second_right,
            "statistic": self.statistic,
            "p": self.p,
            "significant": self.significant,
        }


@dataclass(frozen=True)
class GroupComparison:
    """A paired test of a pair over the groups both have a value for, as a row to show; the
    difference is first minus second."""

    measure: str
    first: str
    second: str
    groups: int
    mean_first: float
    mean_second: float
    difference: float
    statistic: float
    p: float
    significant: bool

    def as_dict(self) -> dict[str, object]:
        return {
            "measure": self.measure,
            "first": self.first,
            "second": self.second,
            "groups": self.groups,
            "mean first": self.mean_first,
            "mean second": self.mean_second,
            "difference": self.difference,
            "statistic": self.statistic,
            "p": self.p,
            "significant": self.significant,
        }


def pairs_of(names: list[str], baseline: str | None) -> list[tuple[str, str]]:
    """The pairs to compare: each name with the baseline, or every pair."""
    everyone = list(dict.fromkeys([*([baseline] if baseline else []), *names]))
    if len(everyone) < 2:
        raise InvalidParameterError(
            f"A comparison is of two prediction sets or more; {len(everyone)} named.",
            remedy=Remedy(cli="Name two, or one and --baseline."),
        )
    if baseline:
        return [(baseline, name) for name in everyone[1:]]
    return [(a, b) for i, a in enumerate(everyone) for b in everyone[i + 1 :]]


def compare_groups(
    engine: Engine,
    *,
    labels_name: str,
    pairs: list[tuple[str, str]],
    measures_: list[str],
    test: str,
    alpha: float,
    resamples: int,
    seed: int,
) -> list[GroupComparison]:
    """Paired tests over the groups both sets have a value for (the per-query comparison of
    ranking runs, with groups as topics), through :func:`evalstore.statistics.significance.paired_test`."""
    if test not in significance.TESTS:
        raise InvalidParameterError(
            f"The paired test is mcnemar or one of {', '.join(significance.TESTS)}; not '{test}'.",
            remedy=Remedy(cli="Choose one with --test."),
        )
    rng = np.random.default_rng(seed)
    rows = []
    for measure in measures_:
        for first, second in pairs:
            a = group_values(engine, labels_name=labels_name, prediction_name=first, measure=measure)
            b = group_values(engine, labels_name=labels_name, prediction_name=second, measure=measure)
            both = a.dropna().index.intersection(b.dropna().index)
            diffs = (a[both] - b[both]).to_numpy()  # first minus second, as ranking compare reports
            outcome = significance.paired_test(diffs[None, :], test, confidence=1 - alpha, resamples=resamples, rng=rng)
            rows.append(
                GroupComparison(
                    measure,
                    first,
                    second,
                    len(both),
                    float(a[both].mean()),
                    float(b[both].mean()),
                    float(diffs.mean()),
                    float(outcome.statistic[0]),
                    float(outcome.p_value[0]),
                    bool(outcome.p_value[0] < alpha),
                )
            )
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
    rows: list[McNemarRow] | list[GroupComparison]
    seed: int | None  # drawn for the resampling tests when none was given (printed to reproduce)
    notes: list[str] = field(default_factory=list)


def compare_predictions(
    engine: Engine,
    *,
    labels_name: str,
    names: list[str],
    measures: list[str],
    test: str,
    baseline: str | None,
    alpha: float,
    resamples: int,
    seed: int | None,
) -> PredictionComparison:
    """McNemar on item-level correctness, or a paired test over per-group values."""
    pairs = pairs_of(names, baseline)
    if test == "mcnemar":
        tested = []
        for first, second in pairs:
            result = mcnemar(engine, labels_name=labels_name, first=first, second=second)
            tested.append(
                McNemarRow(
                    first,
                    second,
                    result.only_first_right,
                    result.only_second_right,
                    result.statistic,
                    result.p_value,
                    result.p_value < alpha,
                )
            )
        return PredictionComparison(f"McNemar on '{labels_name}'", tested, None)
    drawn = secrets.randbits(31) if seed is None else seed
    rows = compare_groups(
        engine,
        labels_name=labels_name,
        pairs=pairs,
        measures_=measures or ["accuracy"],
        test=test,
        alpha=alpha,
        resamples=resamples,
        seed=drawn,
    )
    return PredictionComparison(
        f"per-group comparison on '{labels_name}' ({test})",
        rows,
        drawn,
        few_units_note(min(row.groups for row in rows), "groups"),
    )
