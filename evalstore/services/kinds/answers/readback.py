"""Finished answer evaluations read back: one evaluation, and the newest of each answer run on a
nugget bank."""

from __future__ import annotations

from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from evalstore.db import repositories as repo
from evalstore.db.models import AnswerRun, Evaluation, NuggetBank
from evalstore.db.session import read_only
from evalstore.errors import EvaluationError, NotFoundError, Remedy
from evalstore.services.kinds.answers.evaluated import Evaluated


def stored_evaluation(engine: Engine, evaluation_id: int, *, with_topics: bool = True) -> Evaluated:
    """A finished answer evaluation read back (with its per-topic values)."""
    with read_only(engine) as session:
        row = session.execute(
            select(Evaluation, AnswerRun, NuggetBank)
            .join(AnswerRun, AnswerRun.id == Evaluation.answer_run_id)
            .join(NuggetBank, NuggetBank.id == Evaluation.nugget_bank_id)
            .where(Evaluation.id == evaluation_id)
        ).first()
        if row is None:
            raise NotFoundError(
                f"No answer evaluation {evaluation_id}.", remedy=Remedy(cli="See 'evalstore jobs list'.")
            )
        evaluation, answer_run, bank = row
        if evaluation.state != "done":
            raise EvaluationError(
                f"Evaluation {evaluation_id} of '{answer_run.name}' is {evaluation.state}"
                + (f": {evaluation.error}" if evaluation.error else ".")
            )
        stored = repo.aggregate_values(session, evaluation_id)
        per_topic = None
        if with_topics:
            table = repo.result_table(session, evaluation_id).to_pandas()
            if len(table):
                per_topic = table.pivot(index="query_id", columns="measure", values="value").sort_index()
                per_topic.index.name, per_topic.columns.name = "topic", None
        return Evaluated(
            answer_run.name,
            bank.name,
            evaluation.id,
            {a.measure: a.value for a in stored},
            {a.measure: int(a.query_count or 0) for a in stored},
            dict(evaluation.options),
            {
                "answers_hash": answer_run.content_hash,
                "bank_hash": bank.content_hash,
                "options_hash": evaluation.options_hash,
                "evalstore_version": evaluation.evalstore_version,
                "results_version": evaluation.results_version,
            },
            per_topic,
        )


def latest_evaluations(session: Session, bank: NuggetBank, assessor: str) -> list[tuple[AnswerRun, Evaluation]]:
    """Each answer run's newest finished evaluation on the bank with ``assessor``'s labels."""
    rows = session.execute(
        select(AnswerRun, Evaluation)
        .join(Evaluation, Evaluation.answer_run_id == AnswerRun.id)
        .where(Evaluation.nugget_bank_id == bank.id, Evaluation.state == "done")
        .order_by(AnswerRun.name, Evaluation.finished_at.desc(), Evaluation.id.desc())
    ).all()
    latest: dict[int, tuple[AnswerRun, Evaluation]] = {}
    for answer_run, evaluation in rows:
        if dict(evaluation.options).get("assessor") == assessor:
            latest.setdefault(answer_run.id, (answer_run, evaluation))
    return list(latest.values())
