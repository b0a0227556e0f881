"""A classification evaluation as the kind hands it on (computed by a worker just now, or read back
from the store), and the hashes and versions MLflow tags it with."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from evalstore.db.models import LabelSet, PredictionSet

if TYPE_CHECKING:
    import pandas as pd


@dataclass(frozen=True)
class Evaluated:
    """A classification evaluation: computed by a worker just now, or read back from the store."""

    predictions: str
    labels: str
    kind: str
    evaluation_id: int
    aggregates: dict[str, float | None]  # None: not finite (an AUC with one class present)
    settings: dict[str, Any]  # threshold used, confusion matrix, curve points (binary scores)
    options: dict[str, Any]
    created: bool
    header: dict[str, Any]  # hashes and versions, as MLflow tags them
    per_group: pd.DataFrame | None = None  # group x measure (sorted by group), when read
    metadata: dict[str, Any] | None = None  # the prediction set's system and metadata


def evaluated_header(header: Mapping[str, Any], prediction_set: PredictionSet, label_set: LabelSet) -> dict[str, Any]:
    return {
        "predictions_hash": prediction_set.content_hash,
        "labels_hash": label_set.content_hash,
        "options_hash": header["options_hash"],
        "evalstore_version": header["evalstore_version"],
        "results_version": header["results_version"],
    }
