"""Finished classification and clustering evaluations read back: one evaluation, the newest of a
prediction set, and a measure's per-group values.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from evalstore.db import repositories as repo
from evalstore.db.models import Evaluation, LabelSet, PredictionSet
from evalstore.db.session import read_only
from evalstore.errors import EvaluationError, NotFoundError, Remedy
from evalstore.services.kinds.predictions.evaluated import Evaluated, evaluated_header
from evalstore.services.labels import get_label_set, get_prediction_set

if TYPE_CHECKING:
    import pandas as pd


def stored_evaluation(engine: Engine, evaluation_id: int, *, with_groups: bool = True) -> Evaluated:
    """A finished classification evaluation read back (with its per-group values)."""
    with read_only(engine) as session:
        row = session.execute(
            select(Evaluation, PredictionSet, LabelSet)
            .join(PredictionSet, PredictionSet.id == Evaluation.prediction_set_id)
            .join(LabelSet, LabelSet.id == PredictionSet.label_set_id)
            .where(Evaluation.id == evaluation_id)
        ).first()
        if row is None:
            raise NotFoundError(
                f"No classification evaluation {evaluation_id}.", remedy=Remedy(cli="See 'evalstore jobs list'.")
            )
        evaluation, prediction_set, label_set = row
        if evaluation.state != "done":
            raise EvaluationError(
                f"Evaluation {evaluation_id} of '{prediction_set.name}' is {evaluation.state}"
                + (f": {evaluation.error}" if evaluation.error else ".")
            )
        aggregates = {a.measure: a.value for a in repo.aggregate_values(session, evaluation_id)}
        per_group = None
        if with_groups:
            table = repo.result_table(session, evaluation_id).to_pandas()
            if len(table):
                per_group = table.pivot(index="query_id", columns="measure", values="value").sort_index()
                per_group.index.name, per_group.columns.name = "group", None
        header = {
            "options_hash": evaluation.options_hash,
            "evalstore_version": evaluation.evalstore_version,
            "results_version": evaluation.results_version,
        }
        return Evaluated(
            prediction_set.name,
            label_set.name,
            prediction_set.kind,
            evaluation.id,
            aggregates,
            dict(evaluation.settings or {}),
            dict(evaluation.options),
            False,
            evaluated_header(header, prediction_set, label_set),
            per_group,
            {"system": prediction_set.system, **dict(prediction_set.metadata_ or {})},
        )


def newest_results(
    engine: Engine, *, labels_name: str, prediction_name: str, measures: list[str] | None = None
) -> Evaluated:
    """The newest finished evaluation of a prediction set on its gold labels, read back with its
    per-group values; with ``measures``, only those (each a stored name: ``f1_macro``,
    ``precision.cat``), refused with the names that exist when one does not."""
    with read_only(engine) as session:
        label_set = get_label_set(session, labels_name)
        prediction_set = get_prediction_set(session, prediction_name)
        evaluation = dict((p.id, e) for p, e in latest_evaluations(session, label_set)).get(prediction_set.id)
    if evaluation is None:
        raise NotFoundError(
            f"'{prediction_name}' is not evaluated on '{labels_name}' yet.",
            remedy=Remedy(
                cli=f"Run 'evalstore evaluate --labels {labels_name} --predictions {prediction_name} --wait'."
            ),
        )
    result = stored_evaluation(engine, evaluation.id)
    if not measures:
        return result
    absent = [m for m in measures if m not in result.aggregates]
    if absent:
        raise NotFoundError(
            f"No stored value of '{absent[0]}' in evaluation {result.evaluation_id}; it holds "
            f"{', '.join(sorted(result.aggregates))}."
        )
    per_group = result.per_group
    if per_group is not None:
        kept = [m for m in measures if m in per_group.columns]
        per_group = per_group[kept] if kept else None
    return dataclasses.replace(result, aggregates={m: result.aggregates[m] for m in measures}, per_group=per_group)


def latest_evaluations(session: Session, label_set: LabelSet) -> list[tuple[PredictionSet, Evaluation]]:
    rows = session.execute(
        select(PredictionSet, Evaluation)
        .join(Evaluation, Evaluation.prediction_set_id == PredictionSet.id)
        .where(PredictionSet.label_set_id == label_set.id, Evaluation.state == "done")
        .order_by(PredictionSet.name, Evaluation.finished_at.desc(), Evaluation.id.desc())
    ).all()
    latest: dict[int, tuple[PredictionSet, Evaluation]] = {}
    for prediction_set, evaluation in rows:
        latest.setdefault(prediction_set.id, (prediction_set, evaluation))
    return list(latest.values())


def group_values(engine: Engine, *, labels_name: str, prediction_name: str, measure: str) -> pd.Series:
    """The newest evaluation's per-group values of one measure, indexed by group."""
    with read_only(engine) as session:
        label_set = get_label_set(session, labels_name)
        prediction_set = get_prediction_set(session, prediction_name)
        latest = dict((p.id, e) for p, e in latest_evaluations(session, label_set))
        evaluation = latest.get(prediction_set.id)
        if evaluation is None:
            raise NotFoundError(
                f"'{prediction_name}' is not evaluated yet.",
                remedy=Remedy(
                    cli=f"Run 'evalstore evaluate --labels {labels_name} --predictions {prediction_name} --wait'."
                ),
            )
        table = repo.result_table(session, evaluation.id, [measure])
    if not table.num_rows:
        raise NotFoundError(
            f"No per-group values of {measure} for '{prediction_name}': per-group values need a "
            "group column (in the gold labels or the predictions)."
        )
    import pandas as pd

    return pd.Series(
        table["value"].to_numpy(zero_copy_only=False),
        index=table["query_id"].to_pylist(),
        name=prediction_name,
        dtype=float,
    )
