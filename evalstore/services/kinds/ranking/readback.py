"""A finished ranking evaluation read back from the store: the per-topic values and aggregates as
`results show` prints them and MLflow receives them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import Engine, func, select
from sqlalchemy.orm import Session

from evalstore.db import repositories as repo
from evalstore.db.models import AggregateResult, Evaluation, QrelsSet, Run
from evalstore.db.session import read_only
from evalstore.errors import NotFoundError, Remedy
from evalstore.metrics import headline_measures, parse_measure, resolve_measures
from evalstore.trec_eval.output import render_lines, stored_rows

if TYPE_CHECKING:
    import pandas as pd


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
        measures = {parse_measure(m): m for m in self.measures}
        rows = stored_rows(list(measures))
        if not with_counts:
            rows = [row for row in rows if row[2] is not None]
        return render_lines(
            rows,
            self.topics,
            lambda m: self.frame[measures[m]].tolist(),
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
        table = repo.result_table(session, evaluation.id, wanted).to_pandas()
        numbers = table.pivot(index="query_id", columns="measure", values="value")
        texts = table[table["text_value"].notna()]
        frame = numbers.astype(object) if len(texts) else numbers
        if len(texts):
            for measure, column in texts.pivot(index="query_id", columns="measure", values="text_value").items():
                frame[measure] = column
        frame = frame.reindex(columns=wanted)
        frame.columns.name = None
        aggregates = {
            a.measure: a.value
            for a in repo.aggregate_values(session, evaluation.id)
            if a.measure in wanted and a.value is not None
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
