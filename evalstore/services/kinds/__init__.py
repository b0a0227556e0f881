"""The evaluation kinds, registered in one place: :data:`KINDS` maps a job's kind (``ranking``,
``classifier``, ``clustering``; :attr:`evalstore.services.jobs.ClaimedJob.kind`) to the object
that runs it, reads it back, ranks it and describes it to MLflow (:class:`base.EvaluationKind`).
"""

from __future__ import annotations

from evalstore.services.kinds.base import EvaluationKind
from evalstore.services.kinds.predictions import CLASSIFIER, CLUSTERING
from evalstore.services.kinds.ranking import RANKING

KINDS: dict[str, EvaluationKind] = {kind.name: kind for kind in (RANKING, CLASSIFIER, CLUSTERING)}

# what each kind is evaluated against, as the CLI names it (--qrels, --labels)
JUDGED_BY = {"ranking": "qrels", "classifier": "labels", "clustering": "labels"}


def get(name: str) -> EvaluationKind:
    """The kind called ``name`` (a job's, or a stored evaluation's)."""
    return KINDS[name]
