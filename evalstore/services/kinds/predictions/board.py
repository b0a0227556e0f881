"""The leaderboard of prediction sets evaluated against one set of gold labels, and the table the CLI
shows.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlalchemy import Engine, select

from evalstore.db.models import AggregateResult
from evalstore.db.session import read_only
from evalstore.errors import InvalidParameterError, NotFoundError, Remedy
from evalstore.metrics import headline_measures, higher_is_better
from evalstore.services.kinds.base import (
    Leaderboard,
)
from evalstore.services.kinds.predictions.readback import latest_evaluations
from evalstore.services.labels import get_label_set

if TYPE_CHECKING:
    import pandas as pd


def leaderboard(engine: Engine, *, labels_name: str, measure_names: list[str]) -> pd.DataFrame:
    """One row per prediction set (its newest evaluation), sorted by the first measure, best first
    (the registry says which way: error_rate, cost and fallout lowest first); no measures named:
    the defaults for the labels' kind of task."""
    with read_only(engine) as session:
        label_set = get_label_set(session, labels_name)
        measure_names = measure_names or (MULTILABEL_LEADERBOARD if label_set.multilabel else DEFAULT_LEADERBOARD)
        latest = latest_evaluations(session, label_set)
        if not latest:
            raise NotFoundError(
                f"Nothing is evaluated against '{labels_name}' yet.",
                remedy=Remedy(cli=f"Run 'evalstore evaluate --labels {labels_name} --wait'."),
            )
        ids = [e.id for _, e in latest]
        values = session.execute(
            select(AggregateResult.evaluation_id, AggregateResult.measure, AggregateResult.value).where(
                AggregateResult.evaluation_id.in_(ids), AggregateResult.measure.in_(measure_names)
            )
        ).all()
    import pandas as pd

    table = pd.DataFrame(values, columns=["evaluation_id", "measure", "value"]).pivot(
        index="evaluation_id", columns="measure", values="value"
    )
    unknown = [m for m in measure_names if m not in table.columns]
    if unknown:
        raise InvalidParameterError(
            f"No stored values for {', '.join(unknown)}. Classification measures include "
            f"{', '.join(headline_measures('classifier'))}; clusterings: {', '.join(headline_measures('clustering'))}.",
            remedy=Remedy(cli="'evalstore measures --kind classifier' lists them all."),
        )
    rows = [
        {
            "predictions": p.name,
            "system": p.system or "",
            "kind": p.kind,
            **{m: table.at[e.id, m] if e.id in table.index else None for m in measure_names},
        }
        for p, e in latest
    ]
    frame = pd.DataFrame(rows)
    best_first = not higher_is_better(measure_names[0])
    return frame.sort_values(measure_names[0], ascending=best_first, na_position="last").reset_index(drop=True)


DEFAULT_LEADERBOARD = ["f1_macro", "accuracy", "mcc"]


MULTILABEL_LEADERBOARD = ["f1_macro", "jaccard_samples", "subset_accuracy", "hamming_loss"]


# what `evaluate --labels --wait` shows of each evaluation (the columns no set has are left out)
SHOWN_MEASURES = [*headline_measures("classifier"), *headline_measures("clustering")]


def leaderboard_view(labels_name: str, names: list[str], frame: pd.DataFrame) -> Leaderboard:
    records = frame.to_dict("records")
    cells = [
        {"#": str(i), **{str(k): (f"{v:.4f}" if isinstance(v, float) else v) for k, v in row.items()}}
        for i, row in enumerate(records, start=1)
    ]
    return Leaderboard(
        title=f"leaderboard: {labels_name} (by {names[0]})",
        record_columns=["predictions", "system", "kind", *names],
        records=[{str(k): v for k, v in row.items()} for row in records],
        cell_columns=["#", "predictions", "system", *names],
        cells=cells,
    )
