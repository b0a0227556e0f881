"""An answer run's evaluation on a nugget bank as the kind hands it on (computed by a worker just
now, or read back from the store)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd


@dataclass(frozen=True)
class Evaluated:
    answers: str  # the answer run
    bank: str  # the nugget bank
    evaluation_id: int
    aggregates: dict[str, float | None]  # each measure's mean over the topics it has a value on
    topic_counts: dict[str, int]  # how many topics each mean is over
    options: dict[str, Any]
    header: dict[str, Any]  # hashes and versions, as MLflow tags them
    per_topic: pd.DataFrame | None = None  # topic x measure, when read
    kind: str = "answers"
