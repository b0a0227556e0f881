"""The answers kind: an answer run evaluated on a nugget bank's assignments (and citation-support
labels) with :mod:`evalstore.metrics.answers`, values stored per topic.

The runs and banks themselves are stored and read by :mod:`evalstore.services.answers`.

Modules, by job: queueing (one job per answer run assessed on the bank), job (a worker computing
the measures), evaluated (the evaluation handed on), readback (finished evaluations read back),
board (the leaderboard on one bank), payload (what MLflow receives), kind (what the registry holds).
"""

from __future__ import annotations

from evalstore.services.kinds.answers.board import DEFAULT_MEASURES, evaluation_scores, leaderboard
from evalstore.services.kinds.answers.evaluated import Evaluated
from evalstore.services.kinds.answers.kind import ANSWERS, AnswerKind
from evalstore.services.kinds.answers.queueing import assessed_runs, enqueue, enqueue_run
from evalstore.services.kinds.answers.readback import latest_evaluations, stored_evaluation

__all__ = [
    "ANSWERS",
    "DEFAULT_MEASURES",
    "AnswerKind",
    "Evaluated",
    "assessed_runs",
    "enqueue",
    "enqueue_run",
    "evaluation_scores",
    "latest_evaluations",
    "leaderboard",
    "stored_evaluation",
]
