"""The evaluation kinds, registered in one place: :data:`KINDS` maps a job's kind (``ranking``,
``classifier``, ``clustering``, ``answers``; :attr:`evalstore.services.jobs.ClaimedJob.kind`) to the object
that runs it, reads it back, ranks it and describes it to MLflow (:class:`base.EvaluationKind`).
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import Engine

from evalstore.services.context import AppContext
from evalstore.services.jobs import ClaimedJob
from evalstore.services.kinds.answers import ANSWERS
from evalstore.services.kinds.base import ComputedJob, EvaluationKind
from evalstore.services.kinds.predictions import CLASSIFIER, CLUSTERING
from evalstore.services.kinds.ranking import RANKING, compute_batch

KINDS: dict[str, EvaluationKind] = {kind.name: kind for kind in (RANKING, CLASSIFIER, CLUSTERING, ANSWERS)}


def get(name: str) -> EvaluationKind:
    """The kind called ``name`` (a job's, or a stored evaluation's)."""
    return KINDS[name]


def compute_many(
    engine: Engine, claimed: Sequence[ClaimedJob], *, context: AppContext | None = None
) -> list[ComputedJob | Exception]:
    """Each claimed job computed (or the error that stopped it), in their order: ranking jobs in
    one pass (:func:`~evalstore.services.kinds.ranking.compute_batch`), the others one by one."""
    if all(job.kind == RANKING.name for job in claimed):
        return compute_batch(engine, claimed, context=context)
    outcomes: list[ComputedJob | Exception] = []
    for job in claimed:
        try:
            outcomes.append(get(job.kind).compute(engine, job, context=context))
        except Exception as error:
            outcomes.append(error)
    return outcomes
