"""Answer runs' evaluations on a nugget bank asked for: one job per answer run assessed on it.

The options name whose labels are read (``assessor``: ``human``, or ``judge:NAME``); the job's
hash covers the answers, the bank and the labels themselves, so new or revised labels make a
new job rather than reusing the old values."""

from __future__ import annotations

import hashlib
import json

from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from evalstore.db.models import AnswerRun, Nugget, NuggetAssignment, NuggetBank
from evalstore.db.session import unit_of_work
from evalstore.errors import InvalidParameterError, NotFoundError, Remedy
from evalstore.services import jobs
from evalstore.services.answers import assessors, get_answer_run, get_bank


def labels_hash(session: Session, answer_run: AnswerRun, bank: NuggetBank, assessor: str) -> str:
    """The labels an evaluation reads: nugget assignments on the bank and citation support (for
    ``human``, the ones :mod:`~evalstore.services.answers.assessors` chooses, and whose they are)."""
    digest = hashlib.sha256()
    given = assessors.nugget_labels(session, bank.id, answer_run.id, assessor)
    for nugget_id, label in sorted(given.labels.items()):
        digest.update(f"{nugget_id}:{label}\n".encode())
    if any(who != assessors.PEOPLE for who in given.by.values()) and assessor == assessors.PEOPLE:
        # whose labels were chosen (imported labels alone hash as they always did)
        digest.update(json.dumps(sorted(given.by.items())).encode() + b"\n")
    digest.update(b"--\n")
    for (topic, sentence), support in sorted(assessors.support_labels(session, answer_run.id, assessor).items()):
        digest.update(json.dumps([topic, sentence, support]).encode() + b"\n")
    return digest.hexdigest()


def assessed_runs(session: Session, bank: NuggetBank, assessor: str) -> list[str]:
    """The answer runs with labels by ``assessor`` on the bank's nuggets, by name."""
    return list(
        session.scalars(
            select(AnswerRun.name)
            .join(NuggetAssignment, NuggetAssignment.answer_run_id == AnswerRun.id)
            .join(Nugget, Nugget.id == NuggetAssignment.nugget_id)
            .where(Nugget.bank_id == bank.id, assessors.reads(NuggetAssignment.assessor, assessor))
            .distinct()
            .order_by(AnswerRun.name)
        )
    )


def enqueue(
    engine: Engine,
    *,
    bank_name: str,
    answer_names: list[str] | None,
    assessor: str = "human",
    force: bool = False,
    max_attempts: int = 3,
) -> list[jobs.JobRef]:
    """One job per answer run (every run ``assessor`` labelled on the bank when ``answer_names``
    is None), in one transaction; the same run, bank, labels and options are one job."""
    with unit_of_work(engine) as session:
        bank = get_bank(session, bank_name)
        if bank.drafted_by is not None and bank.accepted_at is None:
            raise InvalidParameterError(
                f"Nugget bank '{bank_name}' is a draft by {bank.drafted_by}, not reviewed yet: it is scored on "
                "once a person has reviewed and accepted it.",
                remedy=Remedy(
                    cli=f"Review its nuggets and accept it with 'evalstore nuggets accept {bank_name}'.",
                    web="Review its nuggets on the bank's page, then accept the bank for scoring there.",
                ),
            )
        names = answer_names or assessed_runs(session, bank, assessor)
        if not names:
            raise NotFoundError(
                f"No answer run has {assessor} assignments on nugget bank '{bank_name}'.",
                remedy=Remedy(cli=f"Import them with 'evalstore nuggets import FILE --name {bank_name}'."),
            )
        return [
            enqueue_run(session, get_answer_run(session, name), bank, assessor, force=force, max_attempts=max_attempts)
            for name in dict.fromkeys(names)
        ]


def enqueue_run(
    session: Session,
    answer_run: AnswerRun,
    bank: NuggetBank,
    assessor: str,
    *,
    force: bool = False,
    max_attempts: int = 3,
) -> jobs.JobRef:
    """A step: one answer run's job on the bank with ``assessor``'s labels (a finished one with
    the same answers, bank and labels is reused)."""
    options = {"assessor": assessor}
    digest = hashlib.sha256(
        json.dumps(
            {
                **options,
                "answers_hash": answer_run.content_hash,
                "bank_hash": bank.content_hash,
                "labels_hash": labels_hash(session, answer_run, bank, assessor),
            },
            sort_keys=True,
        ).encode()
    ).hexdigest()
    return jobs.enqueue_job(
        session,
        (answer_run.name, bank.name),
        {"answer_run_id": answer_run.id, "nugget_bank_id": bank.id},
        digest,
        options,
        force=force,
        max_attempts=max_attempts,
        kind="answers",
        measures="[]",
    )
