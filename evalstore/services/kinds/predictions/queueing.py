"""Prediction sets' evaluations asked for: the options checked and written out as stored, one job
queued per prediction set."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from evalstore.backends import LOCAL, Backend
from evalstore.db.models import LabelSet, PredictionSet
from evalstore.db.session import unit_of_work
from evalstore.errors import InvalidParameterError, NotFoundError, Remedy
from evalstore.io.labels import read_cost_matrix
from evalstore.metrics import classification as measures
from evalstore.services import jobs
from evalstore.services.kinds import out_of_core
from evalstore.services.labels import get_label_set, get_prediction_set


def _evaluation_options(
    session: Session,
    label_set: LabelSet,
    *,
    cost_matrix: Path | None,
    threshold: float | str | None,
    positive: str | None,
    prior: float | None,
    beta: float,
    baseline: str | None,
) -> dict[str, Any]:
    """Check the options and write them out as stored (the cost matrix and baseline included, so
    the job needs nothing but its row)."""
    if isinstance(threshold, str) and threshold not in measures.THRESHOLD_RULES:
        try:
            threshold = float(threshold)
        except ValueError:
            raise InvalidParameterError(
                f"A threshold is a number or one of {', '.join(measures.THRESHOLD_RULES)}; not '{threshold}'.",
                remedy=Remedy(cli="Give one with --threshold."),
            ) from None
    if prior is not None and not 0 < prior < 1:
        raise InvalidParameterError(
            f"The prior, P(positive class), is between 0 and 1; not {prior}.",
            remedy=Remedy(cli="Give another --prior."),
        )
    classes = list(label_set.classes)
    if label_set.multilabel:
        given = [
            (what, flag)
            for what, flag, value in (
                ("a positive class", "--positive", positive),
                ("a cost matrix", "--cost-matrix", cost_matrix),
                ("a baseline", "--baseline", baseline),
                ("a prior", "--prior", prior),
            )
            if value is not None
        ]
        if isinstance(threshold, str):
            given.append((f"the threshold rule '{threshold}'", f"--threshold {threshold}"))
        if given:
            raise InvalidParameterError(
                f"'{label_set.name}' is multilabel: {', '.join(what for what, _ in given)} "
                f"{'applies' if len(given) == 1 else 'apply'} to binary or multiclass labels only.",
                remedy=Remedy(
                    cli=f"Leave out {', '.join(flag for _, flag in given)}; a number for --threshold cuts "
                    "per-class scores."
                ),
            )
    if positive is not None and positive not in classes:
        raise InvalidParameterError(
            f"The positive class '{positive}' is not a gold class ({', '.join(classes)}).",
            remedy=Remedy(cli="Choose one of them with --positive."),
        )
    base_set = get_prediction_set(session, baseline) if baseline else None
    costs = read_cost_matrix(cost_matrix, classes) if cost_matrix is not None else None
    positive_code = classes.index(positive) if positive is not None else len(classes) - 1
    return {
        "threshold": threshold,
        "positive": classes[positive_code] if len(classes) == 2 else None,
        "prior": prior,
        "beta": beta,
        "cost_matrix": costs.tolist() if costs is not None else None,
        "baseline": base_set.name if base_set else None,
        "baseline_hash": base_set.content_hash if base_set else None,
    }


def enqueue(
    engine: Engine,
    *,
    labels_name: str,
    prediction_names: list[str] | None,
    cost_matrix: Path | None = None,
    threshold: float | str | None = None,
    positive: str | None = None,
    prior: float | None = None,
    beta: float = 1.0,
    baseline: str | None = None,
    force: bool = False,
    max_attempts: int = 3,
    backend: Backend = LOCAL,
) -> list[jobs.JobRef]:
    """Queue one evaluation job per prediction set (all of the labels' when ``prediction_names``
    is None), in one transaction. The same set and options are one job, reused once done unless
    ``force``, as for ranking runs (:func:`evalstore.services.jobs.enqueue`). ``backend`` (DuckDB
    or Spark) takes binary predictions with a score (:mod:`evalstore.services.kinds.backends`)."""
    with unit_of_work(engine) as session:
        label_set = get_label_set(session, labels_name)
        names = prediction_names or list(
            session.scalars(
                select(PredictionSet.name)
                .where(PredictionSet.label_set_id == label_set.id)
                .order_by(PredictionSet.name)
            )
        )
        if not names:
            raise NotFoundError(
                f"No predictions are registered for '{labels_name}'.",
                remedy=Remedy(
                    cli=f"Register them with 'evalstore predictions register PATH --name NAME --labels {labels_name}'."
                ),
            )
        options = _evaluation_options(
            session,
            label_set,
            cost_matrix=cost_matrix,
            threshold=threshold,
            positive=positive,
            prior=prior,
            beta=beta,
            baseline=baseline,
        )
        if not backend.local:
            out_of_core.check_label_set(label_set, options, backend)
        refs = []
        for name in dict.fromkeys(names):
            prediction_set = get_prediction_set(session, name)
            if prediction_set.label_set_id != label_set.id:
                raise InvalidParameterError(
                    f"Predictions '{name}' were registered against other gold labels, not '{labels_name}'."
                )
            if not backend.local:
                out_of_core.check_prediction_set(prediction_set, backend)
            digest = hashlib.sha256(
                json.dumps({**options, "predictions_hash": prediction_set.content_hash}, sort_keys=True).encode()
            ).hexdigest()
            refs.append(
                jobs.enqueue_job(
                    session,
                    (name, labels_name),
                    {"prediction_set_id": prediction_set.id},
                    digest,
                    options,
                    force=force,
                    max_attempts=max_attempts,
                    kind=prediction_set.kind,
                    backend=backend,
                    measures="[]",
                )
            )
        return refs
