"""Agreement between system rankings: Kendall's tau and friends between the orderings two qrels sets or
measures give the same runs.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from sqlalchemy import Engine

from evalstore.db import repositories as repo
from evalstore.db.session import read_only
from evalstore.errors import EvaluationError, InvalidParameterError, Remedy
from evalstore.metrics import resolve_measures
from evalstore.services.kinds.ranking import Selection, chosen_evaluations
from evalstore.statistics import significance


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
        out = {
            "reference": self.first,
            "other": self.second,
            **asdict(self.result),
            "options": self.selection.as_dict(),
        }
        out["swapped"] = [list(pair) for pair in self.result.swapped]
        out["systems_scores"] = {
            s: [a, b] for s, a, b in zip(self.systems, self.first_scores, self.second_scores, strict=True)
        }
        return out


def correlate(
    engine: Engine, *, qrels_names: list[str], measures: list[str], selection: Selection | None = None
) -> Correlation:
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
        raise InvalidParameterError(
            "A correlation is of two orderings: two measures on one qrels, or one measure on two qrels; "
            f"not {len(measures)} measure(s) on {len(qrels_names)} qrels.",
            remedy=Remedy(cli="Give one --qrels and two --measure, or two --qrels and one --measure."),
        )
    means: list[dict[str, float]] = []
    for qrels_name, measure in orderings:
        name = str(resolve_measures([measure])[0])
        means.append(_means_by_run(engine, qrels_name, name, selection))
    systems = sorted(set(means[0]) & set(means[1]))
    if len(systems) < 2:
        raise EvaluationError(
            f"Fewer than two runs have both {orderings[0][1]} on '{orderings[0][0]}' and {orderings[1][1]} on "
            f"'{orderings[1][0]}'.",
            remedy=Remedy(cli="Evaluate them first: 'evalstore evaluate --qrels QRELS --all-runs --wait'."),
        )
    first = np.array([means[0][s] for s in systems])
    second = np.array([means[1][s] for s in systems])
    labels = [f"{m} on {q}" for q, m in orderings]
    return Correlation(
        labels[0],
        labels[1],
        systems,
        first.tolist(),
        second.tolist(),
        significance.rank_correlation(systems, first, second),
        selection,
    )


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
