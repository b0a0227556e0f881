"""The leaderboard of any evaluation kind on one set of judgments (qrels, gold labels)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine

from evalstore.services import kinds
from evalstore.services.kinds.base import Leaderboard


def leaderboard(
    engine: Engine,
    *,
    kind: str,
    judgments: str,
    measures: list[str],
    sort: str | None,
    options: dict[str, Any] | None = None,
) -> Leaderboard:
    """Everything of ``kind`` evaluated against ``judgments`` (qrels, gold labels), best first;
    ``options`` selects the evaluations (the ranking kind's -l, -M, -J and missing-topic policy)."""
    return kinds.get(kind).leaderboard(engine, judgments=judgments, measures=measures, sort=sort, options=options)
