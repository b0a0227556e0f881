"""A finished ranking evaluation read back from the store: the per-topic values and aggregates as
`results show` prints them and MLflow receives them.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from sqlalchemy import Engine, func, select
from sqlalchemy.orm import Session

from evalstore.db import repositories as repo
from evalstore.db.models import AggregateResult, Evaluation, QrelsSet, Run
from evalstore.db.session import read_only
from evalstore.errors import NotFoundError, Remedy
from evalstore.metrics import Measure, headline_measures, parse_measure, resolve_measures
from evalstore.trec_eval.output import render_lines, stored_rows

if TYPE_CHECKING:
    import pandas as pd


@functools.lru_cache(maxsize=4096)
def parsed_measure(name: str) -> Measure:
    """:func:`~evalstore.metrics.parse_measure` of a stored measure's name, kept: a delivery parses
    each of its ~100 names twice (its trec_eval text, its figures), ~3 ms of its CPU."""
    return parse_measure(name)


def topic_counts(session: Session, evaluation_ids: list[int]) -> dict[int, int]:
    """:func:`topic_count` of each evaluation, in one query."""
    found: dict[int, int] = {}
    unique = sorted(set(evaluation_ids))
    for start in range(0, len(unique), 500):
        rows = session.execute(
            select(AggregateResult.evaluation_id, func.max(AggregateResult.query_count))
            .where(AggregateResult.evaluation_id.in_(unique[start : start + 500]))
            .group_by(AggregateResult.evaluation_id)
        )
        found.update({evaluation_id: int(count or 0) for evaluation_id, count in rows})
    return found


def topic_count(session: Session, evaluation_id: int) -> int:
    count = session.scalar(
        select(AggregateResult.query_count).where(AggregateResult.evaluation_id == evaluation_id).limit(1)
    )
    return int(count or 0)


@dataclass(frozen=True)
class StoredResults:
    """One stored evaluation read back: per-topic values and aggregates by canonical measure name."""

    evaluation_id: int
    run: str
    run_tag: str | None
    qrels: str
    options: dict[str, Any]
    topics: list[str]
    measures: list[str]
    frame: pd.DataFrame  # one row per topic (sorted), one column per measure
    aggregates: dict[str, float]
    header: dict[str, Any]  # hashes, versions and the run's metadata
    kind: str = "ranking"

    def as_trec_eval(self, *, per_query: bool, with_counts: bool = True) -> str:
        """What ``evalstore trec-eval`` prints for the same files and options (``-q`` with
        ``per_query``); ``with_counts`` adds its runid and num_q lines."""
        measures = {parsed_measure(m): m for m in self.measures}
        rows = stored_rows(list(measures))
        if not with_counts:
            rows = [row for row in rows if row[2] is not None]
        # the table's values as one array, read a column at a time (a column of the frame each
        # measure was ~0.2 ms of pandas' indexing, 20 ms of a delivery's 98 measures)
        values, position = self.frame.to_numpy(), {name: i for i, name in enumerate(self.frame.columns)}
        return render_lines(
            rows,
            self.topics,
            lambda m: values[:, position[measures[m]]],
            lambda m: self.aggregates[measures[m]],
            self.run_tag,
            per_query=per_query,
            summary=True,
        )


def results(
    engine: Engine,
    *,
    qrels_name: str,
    run_name: str,
    measures: list[str] | None = None,
    evaluation_id: int | None = None,
) -> StoredResults:
    """The newest finished evaluation of the run on the qrels (or ``evaluation_id``), read back."""
    with read_only(engine) as session:
        qrels = repo.get_qrels(session, qrels_name)
        run = repo.get_run(session, run_name)
        statement = select(Evaluation).where(
            Evaluation.run_id == run.id, Evaluation.qrels_id == qrels.id, Evaluation.state == "done"
        )
        if evaluation_id is not None:
            statement = statement.where(Evaluation.id == evaluation_id)
        newest_first = list(session.scalars(statement.order_by(Evaluation.finished_at.desc(), Evaluation.id.desc())))
        evaluation = newest_first[0] if newest_first else None
        if measures and evaluation_id is None:  # the newest that holds them, not just the newest
            wanted_names = {str(m) for m in resolve_measures(measures)}
            evaluation = next((e for e in newest_first if wanted_names <= set(e.options["measures"])), evaluation)
        if evaluation is None:
            raise NotFoundError(
                f"No finished evaluation of run '{run_name}' on qrels '{qrels_name}'.",
                remedy=Remedy(cli=f"Run 'evalstore evaluate --qrels {qrels_name} --run {run_name} --wait'."),
            )
        stored = list(evaluation.options["measures"])
        wanted = stored
        if measures:
            wanted = [str(m) for m in resolve_measures(measures)]
            absent = [m for m in wanted if m not in stored]
            if absent:
                raise NotFoundError(
                    f"Measure '{absent[0]}' is not in evaluation {evaluation.id}.",
                    remedy=Remedy(
                        cli="Evaluate it with "
                        f"'evalstore evaluate --qrels {qrels_name} --run {run_name} --measures {absent[0]} --wait'."
                    ),
                )
        frame = per_topic_frame(repo.result_columns(session, evaluation.id, wanted), wanted)
        named = set(wanted)
        aggregates = {  # the columns, not ORM objects: ~100 a delivery
            measure: value
            for measure, value in session.execute(
                select(AggregateResult.measure, AggregateResult.value).where(
                    AggregateResult.evaluation_id == evaluation.id
                )
            )
            if measure in named and value is not None
        }
        header = {
            "run_hash": evaluation.run_hash,
            "qrels_hash": evaluation.qrels_hash,
            "options_hash": evaluation.options_hash,
            "evalstore_version": evaluation.evalstore_version,
            "results_version": evaluation.results_version,
            "system": run.system,
            "run_metadata": dict(run.metadata_ or {}),
        }
        return StoredResults(
            evaluation.id,
            run.name,
            run.tag,
            qrels.name,
            dict(evaluation.options),
            [str(t) for t in frame.index],
            wanted,
            frame,
            aggregates,
            header,
        )


def per_topic_frame(stored: repo.StoredColumns, measures: list[str]) -> pd.DataFrame:
    """The per-topic table of ``measures`` from their stored arrays: one row per topic (sorted as
    text), one column per measure. Each stored array is reordered once; a long (measure, topic)
    table pivoted was about a tenth of an MLflow delivery's CPU. A textual measure (relstring)
    holds its texts (NaN where a topic has none), and then the stored numbers are Python floats
    in an object table, as a table of mixed columns holds them."""
    import pandas as pd

    ids = stored.query_ids
    order = np.array(sorted(range(len(ids)), key=ids.__getitem__), dtype=np.intp)
    index = pd.Index([ids[i] for i in order], dtype="str", name="query_id")
    # one float64 block, filled a column at a time (a column an array: pandas then joins them)
    table = np.full((len(ids), len(measures)), np.nan)
    for column, measure in enumerate(measures):
        numbers = stored.numbers.get(measure)
        if numbers is not None:
            table[:, column] = numbers[order]
    frame = pd.DataFrame(table, index=index, columns=pd.Index(measures, dtype="str"))
    textual = {
        measure: texts
        for measure, texts in stored.texts.items()
        if measure in measures and texts is not None and any(text is not None for text in texts)
    }
    if textual:
        frame = frame.astype(object)
        for measure in set(measures) - stored.numbers.keys():  # not stored: a float column of NaN
            frame[measure] = np.full(len(ids), np.nan)
        for measure, texts in textual.items():
            frame[measure] = pd.Series([texts[i] for i in order], index=index, dtype="str")
    return frame


def main_scores(engine: Engine, evaluation_ids: list[int]) -> dict[int, dict[str, float]]:
    """The main measures' aggregates (AP, nDCG@10, P@10, RR: those computed) of each evaluation,
    for `evaluate --wait` to print."""
    if not evaluation_ids:
        return {}
    with read_only(engine) as session:
        rows = session.execute(
            select(AggregateResult.evaluation_id, AggregateResult.measure, AggregateResult.value).where(
                AggregateResult.evaluation_id.in_(evaluation_ids), AggregateResult.measure.in_(MAIN_MEASURES)
            )
        ).all()
    scores: dict[int, dict[str, float]] = {}
    for evaluation_id, measure, value in rows:
        if value is not None:
            scores.setdefault(evaluation_id, {})[measure] = value
    return scores


def read_back(engine: Engine, evaluation_id: int) -> StoredResults:
    """A finished evaluation read back whole, by id."""
    with read_only(engine) as session:
        names = session.execute(
            select(Run.name, QrelsSet.name)
            .select_from(Evaluation)
            .join(Run, Evaluation.run_id == Run.id)
            .join(QrelsSet, QrelsSet.id == Evaluation.qrels_id)
            .where(Evaluation.id == evaluation_id)
        ).one()
    return results(engine, qrels_name=names[1], run_name=names[0], evaluation_id=evaluation_id)


MAIN_MEASURES = tuple(headline_measures("ranking"))  # AP, nDCG@10, P@10, RR: the registry's headline
