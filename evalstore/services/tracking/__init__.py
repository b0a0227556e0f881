"""MLflow delivery, as an outbox: results are committed with their delivery ``pending``, and the
deliverer (:mod:`.deliverer`) is the one path by which they reach MLflow, each exactly once.
:mod:`.states` is the delivery state machine in our database, :mod:`.client` the only module
that talks to MLflow (its public client)."""

from __future__ import annotations

from evalstore.services.tracking.deliverer import (
    BackgroundDeliverer,
    SyncReport,
    deliver,
    log_now,
    prepare,
    results_for,
    warm_up,
)
from evalstore.services.tracking.states import undelivered as pending_count

__all__ = [
    "BackgroundDeliverer",
    "SyncReport",
    "deliver",
    "log_now",
    "pending_count",
    "prepare",
    "results_for",
    "warm_up",
]
