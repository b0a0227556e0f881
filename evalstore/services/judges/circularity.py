"""Circularity (Clarke & Dietz 2024): a run that declares, in its metadata, the model that made the
labels it is evaluated on is favoured by them. A run declares its models as ``models`` in its
metadata (``runs register --meta models=gpt-4o,monot5``: names separated by commas); qrels made
by a judge know its model (their version's sources)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from evalstore.db.models import QrelsSet, QrelsVersion, Run


def declared_models(metadata: dict[str, Any] | None) -> set[str]:
    value = (metadata or {}).get("models")
    names = value if isinstance(value, list) else str(value or "").split(",")
    return {str(n).strip().lower() for n in names if str(n).strip()}


def judge_models(session: Session, qrels_name: str) -> set[str]:
    """The models whose labels are in the qrels (none for qrels that are not a judge-made version)."""
    sources = session.scalar(
        select(QrelsVersion.sources)
        .join(QrelsSet, QrelsSet.id == QrelsVersion.qrels_id)
        .where(QrelsSet.name == qrels_name)
    )
    model = (sources or {}).get("model")
    return {str(model).lower()} if model else set()


def circular_runs(session: Session, qrels_name: str, runs: Iterable[Run]) -> dict[str, list[str]]:
    """Run name -> the judge models of ``qrels_name`` it declares (only runs that declare one)."""
    models = judge_models(session, qrels_name)
    if not models:
        return {}
    found = {run.name: sorted(declared_models(run.metadata_) & models) for run in runs}
    return {name: shared for name, shared in found.items() if shared}
