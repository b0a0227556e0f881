"""A prediction set aligned with its gold labels: both in the gold labels' item order, as the codes
the measures take."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from evalstore.db.models import LabelSet, PredictionSet
from evalstore.io.labels import Gold, indicator


@dataclass(frozen=True)
class Aligned:
    """A prediction set aligned with its gold labels, as the codes the measures take (multilabel:
    (items, classes) indicator matrices)."""

    classes: list[str]
    y_true: np.ndarray
    y_pred: np.ndarray | None
    score: np.ndarray | None
    scores: np.ndarray | None
    groups: np.ndarray | None
    group_names: list[str]
    weights: np.ndarray | None
    multilabel: bool


def aligned(prediction_set: PredictionSet, label_set: LabelSet, gold: Gold, tables: list[pa.Table]) -> Aligned:
    """Predictions in the gold labels' order, as codes (registration made sure both hold the same items)."""
    table = tables[0]
    classes = list(label_set.classes)
    items = table["item_id"]
    if len(items) == len(gold.items) and pc.all(pc.equal(gold.items, items)).as_py():
        # already in the gold labels' order (SQLite reads both by primary key; PostgreSQL in
        # storage order, which is file order when the files share it): checking costs ~0.2 s for
        # 10M items, hashing them ~2.5 s
        at = pa.array(np.arange(len(items)))
    else:
        at = pc.index_in(gold.items, value_set=items.combine_chunks())
    class_set = pa.array(classes, pa.string())
    multilabel = label_set.multilabel and prediction_set.kind != "clustering"
    if multilabel:
        y_true = indicator(gold.labels, classes)
    else:
        y_true = pc.index_in(gold.labels, value_set=class_set).to_numpy(zero_copy_only=False).astype(np.int64)
    y_pred = None
    if prediction_set.has_label:
        labels = table["label"].take(at)
        if multilabel:
            y_pred = indicator(labels, classes)
        elif prediction_set.kind == "clustering":
            y_pred = pc.dictionary_encode(labels).combine_chunks().indices.to_numpy(zero_copy_only=False)
        else:
            y_pred = pc.index_in(labels, value_set=class_set).to_numpy(zero_copy_only=False).astype(np.int64)
    score = table["score"].to_numpy()[at.to_numpy(zero_copy_only=False)] if prediction_set.has_score else None
    scores = None
    if prediction_set.score_classes:
        long = tables[1]
        rows = pc.index_in(long["item_id"], value_set=gold.items.combine_chunks()).to_numpy(zero_copy_only=False)
        columns = pc.index_in(long["class_label"], value_set=class_set).to_numpy(zero_copy_only=False)
        scores = np.zeros((len(gold.items), len(classes)))
        scores[rows, columns] = long["score"].to_numpy()
    group_column = table["group_id"].take(at) if table["group_id"].null_count == 0 else gold.groups
    groups, group_names = None, []
    if group_column is not None:
        encoded = pc.dictionary_encode(group_column).combine_chunks()
        groups = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)
        group_names = encoded.dictionary.to_pylist()
    return Aligned(classes, y_true, y_pred, score, scores, groups, group_names, gold.weights, multilabel)
