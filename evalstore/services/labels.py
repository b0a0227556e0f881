"""Gold labels, classifier predictions and clusterings in the store: importing, registering,
listing, deleting, and reading them back as Arrow (for the classifier and clustering kinds).

One transaction per write; a bad file is refused before anything is stored.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from sqlalchemy import Engine, delete, select
from sqlalchemy.orm import Session

from evalstore.db import arrow_reads
from evalstore.db import repositories as repo
from evalstore.db.models import GoldLabel, LabelSet, Prediction, PredictionScore, PredictionSet
from evalstore.db.session import read_only, unit_of_work
from evalstore.errors import ConflictError, InvalidParameterError, Remedy, replace_or_rename
from evalstore.io.labels import Gold, read_predictions
from evalstore.io.labels import read_gold as read_gold_file
from evalstore.services.context import Lru

PREDICTION_KINDS = ("classifier", "clustering")


@dataclass(frozen=True)
class SetSummary:
    kind: str  # labels | classifier | clustering
    name: str
    rows: int
    content_hash: str
    created_at: datetime
    details: dict[str, Any]
    created: bool = True

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind,
            "rows": self.rows,
            "created_at": self.created_at.isoformat(),
            "content_hash": self.content_hash,
            **self.details,
        }


def _label_summary(label_set: LabelSet, created: bool = True) -> SetSummary:
    return SetSummary(
        "labels",
        label_set.name,
        label_set.row_count,
        label_set.content_hash,
        label_set.created_at,
        {
            "classes": list(label_set.classes),
            "groups": label_set.group_count,
            "multilabel": label_set.multilabel,
            "weighted": label_set.weighted,
            "description": label_set.description,
            "source": label_set.source,
        },
        created,
    )


def _prediction_summary(prediction_set: PredictionSet, labels: str, created: bool = True) -> SetSummary:
    provides = [
        what
        for what, has in (
            ("label", prediction_set.has_label),
            ("score", prediction_set.has_score),
            ("class scores", bool(prediction_set.score_classes)),
        )
        if has
    ]
    return SetSummary(
        prediction_set.kind,
        prediction_set.name,
        prediction_set.row_count,
        prediction_set.content_hash,
        prediction_set.created_at,
        {
            "labels": labels,
            "system": prediction_set.system,
            "provides": provides,
            "probabilities": prediction_set.probabilities,
            "metadata": dict(prediction_set.metadata_ or {}),
            "description": prediction_set.description,
            "source": prediction_set.source,
        },
        created,
    )


def get_label_set(session: Session, name: str) -> LabelSet:
    return repo.get_named(
        session,
        LabelSet,
        name,
        f"No gold labels named '{name}'.",
        Remedy(cli=f"Import them with 'evalstore labels import PATH --name {name}'."),
    )


def get_prediction_set(session: Session, name: str) -> PredictionSet:
    return repo.get_named(
        session,
        PredictionSet,
        name,
        f"No predictions named '{name}'.",
        Remedy(
            cli=f"Register them with 'evalstore predictions register PATH --name {name} --labels GOLD' "
            "(or 'evalstore clusters register')."
        ),
    )


def _copy(session: Session, table_name: str, table: pa.Table) -> None:
    repo.copy_batches(session, table_name, table.to_batches(max_chunksize=repo.BATCH_ROWS))


# --- gold labels -----------------------------------------------------------------------------


def import_labels(
    engine: Engine, path: Path, *, name: str, description: str | None = None, replace: bool = False
) -> SetSummary:
    """Store gold labels (item_id, label [, group]); the same content under the same name again
    stores nothing, other content needs ``replace`` (refused while predictions use the labels)."""
    gold = read_gold_file(path)
    with unit_of_work(engine) as session:
        existing = session.scalar(select(LabelSet).where(LabelSet.name == name))
        if existing is not None:
            if existing.content_hash == gold.content_hash:
                return _label_summary(existing, created=False)
            if not replace:
                raise ConflictError(
                    f"Gold labels named '{name}' exist with other content.", remedy=replace_or_rename("them")
                )
            users = list(session.scalars(select(PredictionSet.name).where(PredictionSet.label_set_id == existing.id)))
            if users:
                raise ConflictError(
                    f"Gold labels '{name}' are used by {', '.join(users)}.",
                    remedy=Remedy(
                        cli="Delete those predictions first, or import the new labels under another --name.",
                        web="Delete those predictions first, or choose another name.",
                    ),
                )
            session.execute(delete(GoldLabel).where(GoldLabel.label_set_id == existing.id))
            session.delete(existing)
            session.flush()
        groups = gold.groups
        label_set = LabelSet(
            name=name,
            description=description,
            content_hash=gold.content_hash,
            row_count=len(gold.items),
            classes=gold.classes,
            group_count=0 if groups is None else pc.count_distinct(groups).as_py(),
            source=str(path),
            multilabel=gold.multilabel,
            weighted=gold.weights is not None,
        )
        session.add(label_set)
        session.flush()
        _copy(
            session,
            "gold_labels",
            pa.table(
                {
                    "label_set_id": pa.array(np.full(len(gold.items), label_set.id, np.int64)),
                    "item_id": gold.items,
                    "label": gold.labels,
                    "group_id": groups if groups is not None else pa.nulls(len(gold.items), pa.string()),
                    "weight": pa.array(gold.weights)
                    if gold.weights is not None
                    else pa.nulls(len(gold.items), pa.float64()),
                }
            ),
        )
        return _label_summary(label_set)


def list_label_sets(engine: Engine) -> list[SetSummary]:
    with read_only(engine) as session:
        return [_label_summary(s) for s in session.scalars(select(LabelSet).order_by(LabelSet.name))]


def read_gold(session: Session, label_set: LabelSet) -> Gold:
    return read_with_gold(session, label_set, [])[0]


# --- predictions -----------------------------------------------------------------------------


def register_predictions(
    engine: Engine,
    path: Path,
    *,
    name: str,
    labels_name: str,
    kind: str = "classifier",
    system: str | None = None,
    metadata: dict[str, Any] | None = None,
    description: str | None = None,
    probabilities: bool = False,
    replace: bool = False,
) -> SetSummary:
    """Store a classifier's predictions (label, score, or score_<class> columns; optional group)
    or a clustering (cluster_id), after checking them against the gold labels."""
    if kind not in PREDICTION_KINDS:
        raise InvalidParameterError(f"kind must be one of {', '.join(PREDICTION_KINDS)}")
    with read_only(engine) as session:
        label_set = get_label_set(session, labels_name)
        gold = read_gold(session, label_set)
    parsed = read_predictions(path, gold, probabilities=probabilities, clustering=kind == "clustering")
    content_hash = hashlib.sha256(f"{parsed.content_hash}:{label_set.content_hash}:{kind}".encode()).hexdigest()
    with unit_of_work(engine) as session:
        existing = session.scalar(select(PredictionSet).where(PredictionSet.name == name))
        if existing is not None:
            if existing.content_hash == content_hash:
                return _prediction_summary(existing, labels_name, created=False)
            if not replace:
                raise ConflictError(
                    f"Predictions named '{name}' exist with other content.",
                    remedy=Remedy(
                        cli="Pass --replace to replace them (their evaluations go with them), "
                        "or choose another --name.",
                        web="Choose another name.",
                    ),
                )
            repo.delete_prediction_set(session, existing)
        prediction_set = PredictionSet(
            name=name,
            label_set_id=label_set.id,
            kind=kind,
            system=system,
            description=description,
            metadata_=metadata or {},
            content_hash=content_hash,
            row_count=len(parsed.items),
            has_label=parsed.labels is not None,
            has_score=parsed.score is not None,
            score_classes=sorted(parsed.class_scores),
            probabilities=probabilities,
            source=str(path),
        )
        session.add(prediction_set)
        session.flush()
        n = len(parsed.items)
        _copy(
            session,
            "predictions",
            pa.table(
                {
                    "prediction_set_id": pa.array(np.full(n, prediction_set.id, np.int64)),
                    "item_id": parsed.items,
                    "label": parsed.labels if parsed.labels is not None else pa.nulls(n, pa.string()),
                    "score": pa.array(parsed.score) if parsed.score is not None else pa.nulls(n, pa.float64()),
                    "group_id": parsed.groups if parsed.groups is not None else pa.nulls(n, pa.string()),
                }
            ),
        )
        for label, values in sorted(parsed.class_scores.items()):
            _copy(
                session,
                "prediction_scores",
                pa.table(
                    {
                        "prediction_set_id": pa.array(np.full(n, prediction_set.id, np.int64)),
                        "item_id": parsed.items,
                        "class_label": pa.array(np.full(n, label, dtype=object), pa.string()),
                        "score": pa.array(values),
                    }
                ),
            )
        return _prediction_summary(prediction_set, labels_name)


def list_prediction_sets(engine: Engine, labels_name: str | None = None) -> list[SetSummary]:
    with read_only(engine) as session:
        query = select(PredictionSet, LabelSet.name).join(LabelSet, LabelSet.id == PredictionSet.label_set_id)
        if labels_name is not None:
            query = query.where(LabelSet.id == get_label_set(session, labels_name).id)
        return [_prediction_summary(p, labels) for p, labels in session.execute(query.order_by(PredictionSet.name))]


def delete_predictions(engine: Engine, name: str) -> None:
    with unit_of_work(engine) as session:
        prediction_set = get_prediction_set(session, name)
        repo.delete_prediction_set(session, prediction_set)


def _prediction_reads(prediction_set: PredictionSet) -> list[tuple[Any, list[str], list[pa.DataType]]]:
    """The SELECTs of a prediction set's rows (and its per-class scores), for arrow_reads.read_together."""
    reads: list[tuple[Any, list[str], list[pa.DataType]]] = [
        (
            select(Prediction.item_id, Prediction.label, Prediction.score, Prediction.group_id).where(
                Prediction.prediction_set_id == prediction_set.id
            ),
            ["item_id", "label", "score", "group_id"],
            [pa.string(), pa.string(), pa.float64(), pa.string()],
        )
    ]
    if prediction_set.score_classes:
        reads.append(
            (
                select(PredictionScore.item_id, PredictionScore.class_label, PredictionScore.score).where(
                    PredictionScore.prediction_set_id == prediction_set.id
                ),
                ["item_id", "class_label", "score"],
                [pa.string(), pa.string(), pa.float64()],
            )
        )
    return reads


_GOLD_READ = (["item_id", "label", "group_id", "weight"], [pa.string()] * 3 + [pa.float64()])


def read_with_gold(
    session: Session,
    label_set: LabelSet,
    prediction_sets: list[PredictionSet],
    *,
    cache: Lru[tuple[int, str], Any] | None = None,
) -> tuple[Gold, list[list[pa.Table]]]:
    """The gold labels and each prediction set's tables, read together. A worker evaluates set
    after set against the same gold labels, so its context's ``cache`` keeps the last ones read
    (keyed by id and content hash: replaced labels are read afresh)."""
    key = (label_set.id, label_set.content_hash)
    reads = [read for p in prediction_sets for read in _prediction_reads(p)]
    gold: Gold | None = None if cache is None else cache.get(key)
    if gold is None:
        reads.insert(
            0,
            (
                select(GoldLabel.item_id, GoldLabel.label, GoldLabel.group_id, GoldLabel.weight).where(
                    GoldLabel.label_set_id == label_set.id
                ),
                *_GOLD_READ,
            ),
        )
    tables = arrow_reads.read_together(session, reads)
    if gold is None:
        table = tables.pop(0)
        groups = table["group_id"] if table["group_id"].null_count == 0 else None
        weights = table["weight"].to_numpy() if label_set.weighted else None
        gold = Gold(table["item_id"], table["label"], groups, label_set.content_hash, weights, label_set.multilabel)
        if cache is not None:
            cache.put(key, gold)
    per_set = []
    for p in prediction_sets:
        count = 2 if p.score_classes else 1
        per_set.append(tables[:count])
        tables = tables[count:]
    return gold, per_set
