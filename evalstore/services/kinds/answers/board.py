"""The leaderboard of answer runs evaluated on one nugget bank: each measure's mean over the
topics assessed, with a 95% confidence interval (t over the per-topic values) as ranking boards
give."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pyarrow.compute as pc
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from evalstore.db import repositories as repo
from evalstore.db.session import read_only
from evalstore.errors import NotFoundError, Remedy
from evalstore.metrics.answers import answer_measure
from evalstore.services.answers import get_bank
from evalstore.services.kinds.answers.readback import latest_evaluations
from evalstore.services.kinds.base import Leaderboard

DEFAULT_MEASURES = ["V_strict", "A_strict", "V", "A", "W"]


def _interval(values: np.ndarray) -> tuple[float, float] | None:
    from scipy import stats

    finite = values[np.isfinite(values)]
    if finite.size < 2:
        return None
    half = float(stats.t.ppf(0.975, finite.size - 1) * finite.std(ddof=1) / math.sqrt(finite.size))
    mean = float(finite.mean())
    return mean - half, mean + half


def evaluation_scores(session: Session, evaluation_id: int, names: list[str]) -> dict[str, Any]:
    """A finished evaluation's row on a board: each measure's mean (``M``), its 95% t interval
    over the topics (``M_ci_low``, ``M_ci_high``; None under two topics) and its topics
    (``M_topics``)."""
    stored = {a.measure: a for a in repo.aggregate_values(session, evaluation_id)}
    table = repo.result_table(session, evaluation_id, names)
    record: dict[str, Any] = {}
    for m in names:
        per_topic = table.filter(pc.equal(table["measure"], m))["value"].to_numpy(zero_copy_only=False).astype(float)
        record[m] = stored[m].value if m in stored else None
        interval = _interval(per_topic) if per_topic.size else None
        record[f"{m}_ci_low"], record[f"{m}_ci_high"] = interval if interval else (None, None)
        record[f"{m}_topics"] = int(stored[m].query_count or 0) if m in stored else 0
    return record


def leaderboard(
    engine: Engine, *, bank_name: str, measures: list[str], sort: str | None, assessor: str = "human"
) -> Leaderboard:
    """Every answer run evaluated on the bank (its newest evaluation), best first by ``sort`` (or
    the first measure); measures by their names or nuggetizer's."""
    names = [answer_measure(m).family.name for m in (measures or DEFAULT_MEASURES)]
    names = list(dict.fromkeys(names))
    by = answer_measure(sort).family.name if sort else names[0]
    with read_only(engine) as session:
        bank = get_bank(session, bank_name)
        latest = latest_evaluations(session, bank, assessor)
        if not latest:
            raise NotFoundError(
                f"No answer run is evaluated on nugget bank '{bank_name}' yet.",
                remedy=Remedy(cli=f"Run 'evalstore evaluate --nuggets {bank_name} --all-answers --wait'."),
            )
        records = [
            {
                "answers": answer_run.name,
                "evaluation": evaluation.id,
                **evaluation_scores(session, evaluation.id, names),
            }
            for answer_run, evaluation in latest
        ]
    records.sort(key=lambda r: (r.get(by) is None, -(r.get(by) or 0.0), r["answers"]))
    columns = ["answers", "evaluation"]
    for m in names:
        columns += [m, f"{m}_ci_low", f"{m}_ci_high", f"{m}_topics"]
    cells = []
    for i, r in enumerate(records, start=1):
        cell = {"#": str(i), "answers": r["answers"]}
        for m in names:
            low, high = r[f"{m}_ci_low"], r[f"{m}_ci_high"]
            shown = "" if r[m] is None else f"{r[m]:.4f}"
            if low is not None and high is not None:
                shown += f" [{low:.3f}, {high:.3f}]"
            cell[m] = shown
        cell["topics"] = str(max((r[f"{m}_topics"] for m in names), default=0))
        cells.append(cell)
    warnings = (
        []
        if len({r[f"{names[0]}_topics"] for r in records}) <= 1
        else ["The runs are not assessed on the same topics: their means are over different topics."]
    )
    return Leaderboard(
        title=f"leaderboard: nugget bank {bank_name} ({assessor} assignments; by {by})",
        record_columns=columns,
        records=records,
        cell_columns=["#", "answers", *names, "topics"],
        cells=cells,
        warnings=warnings,
    )
