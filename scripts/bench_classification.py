#!/usr/bin/env python3
"""Benchmark the classification suite (the figure in docs/benchmarks.md).

10 million binary predictions in 100,000 groups (user-like: ~100 items each, ~10% positive,
scores rounded to 3 decimals so ties are common): the whole suite (confusion-matrix measures,
ROC/PR curves, AUC, AP, 11-point AP, break-even, the three best thresholds, GAUC, per-group
values, a cost matrix) through :func:`evalstore.metrics.classification.evaluate`, against scikit-learn
computing the subset it has (confusion-matrix measures, AUC, AP, and AUC group by group).

    python scripts/bench_classification.py [--items 10000000] [--groups 100000] [--sklearn-groups 2000]
        [--database URL ...]

With --database (repeatable; a SQLite or PostgreSQL URL, emptied of these sets first), the same
data also goes through the service as a user's commands do: gold labels and predictions
imported from Parquet files, then one evaluation job (read, align, compute, store the per-group
values), with the time of each step.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=10_000_000)
    parser.add_argument("--groups", type=int, default=100_000)
    parser.add_argument(
        "--sklearn-groups",
        type=int,
        default=2000,
        help="groups scikit-learn scores one by one (its time is extrapolated to all)",
    )
    parser.add_argument(
        "--database", action="append", default=[], help="also through the service, into this database (repeatable)"
    )
    args = parser.parse_args()
    from evalstore.metrics import classification

    rng = np.random.default_rng(0)
    groups = rng.integers(0, args.groups, args.items)
    y_true = (rng.random(args.items) < 0.1).astype(np.int64)
    score = np.round(np.clip(rng.normal(0.3 + 0.3 * y_true, 0.2), 0, 1), 3)
    costs = np.array([[0.0, 1.0], [5.0, 0.0]])
    timings = []
    for _ in range(3):
        start = time.perf_counter()
        suite = classification.evaluate(
            y_true, ["neg", "pos"], score=score, groups=groups, n_groups=args.groups, threshold="best-f1", costs=costs
        )
        timings.append(time.perf_counter() - start)
    print(
        f"evalstore full suite, {args.items:,} predictions, {args.groups:,} groups: "
        f"best {min(timings):.2f} s, worst {max(timings):.2f} s  "
        f"(auc {suite.aggregates['auc']:.4f}, gauc {suite.aggregates['gauc']:.4f}, "
        f"{len(suite.aggregates)} aggregates, {len(suite.per_group)} per-group measures)"
    )

    from sklearn import metrics

    y_pred = (score >= suite.settings["threshold"]).astype(np.int64)
    start = time.perf_counter()
    metrics.roc_auc_score(y_true, score)
    metrics.average_precision_score(y_true, score)
    metrics.precision_recall_fscore_support(y_true, y_pred)
    metrics.matthews_corrcoef(y_true, y_pred)
    metrics.cohen_kappa_score(y_true, y_pred)
    metrics.confusion_matrix(y_true, y_pred)
    whole = time.perf_counter() - start
    order = np.argsort(groups, kind="stable")
    bounds = np.searchsorted(groups[order], np.arange(args.sklearn_groups + 1))
    start = time.perf_counter()
    for g in range(args.sklearn_groups):
        rows = order[bounds[g] : bounds[g + 1]]
        if 0 < y_true[rows].sum() < len(rows):
            metrics.roc_auc_score(y_true[rows], score[rows])
    per_group = (time.perf_counter() - start) / args.sklearn_groups * args.groups
    print(
        f"scikit-learn: AUC, AP, P/R/F, MCC, kappa, confusion: {whole:.2f} s; "
        f"AUC per group, extrapolated to {args.groups:,} groups: {per_group:.1f} s"
    )

    for url in args.database:
        through_the_service(url, y_true, score, groups)


def through_the_service(url: str, y_true: np.ndarray, score: np.ndarray, groups: np.ndarray) -> None:
    """Import, register and evaluate as `evalstore labels import`, `predictions register` and
    `evaluate --labels --wait` do, timing each."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from evalstore.db.engine import make_engine, upgrade
    from evalstore.services import jobs
    from evalstore.services import labels as service
    from evalstore.services.context import AppContext
    from evalstore.services.kinds import predictions
    from evalstore.services.orchestration import work_on

    engine = make_engine(url)
    upgrade(engine)
    for prediction_set in service.list_prediction_sets(engine):
        if prediction_set.name == "bench-scores":
            service.delete_predictions(engine, "bench-scores")
    items = pa.array(np.char.add("i", np.arange(len(y_true)).astype("U9")).astype(object), pa.string())
    with tempfile.TemporaryDirectory() as folder:
        gold_path, predictions_path = Path(folder) / "gold.parquet", Path(folder) / "scores.parquet"
        pq.write_table(
            pa.table(
                {
                    "item_id": items,
                    "label": pa.array(np.where(y_true == 1, "pos", "neg")),
                    "group": pa.array(np.char.add("u", groups.astype("U6"))),
                }
            ),
            gold_path,
        )
        pq.write_table(pa.table({"item_id": items, "score": pa.array(score)}), predictions_path)
        start = time.perf_counter()
        service.import_labels(engine, gold_path, name="bench-gold", replace=True)
        imported = time.perf_counter() - start
        start = time.perf_counter()
        service.register_predictions(engine, predictions_path, name="bench-scores", labels_name="bench-gold")
        registered = time.perf_counter() - start
    print(f"{engine.dialect.name}: labels import {imported:.1f} s, predictions register {registered:.1f} s")
    # a worker that has not read these gold labels yet, then one that has (it keeps the last read)
    context = AppContext(engine)
    for worker in ("new worker", "same worker, again"):
        start = time.perf_counter()
        [ref] = predictions.enqueue(
            engine, labels_name="bench-gold", prediction_names=["bench-scores"], threshold="best-f1", force=True
        )
        [summary] = work_on(engine, [ref.evaluation_id], mlflow=False, context=context).values()
        evaluated = time.perf_counter() - start
        assert jobs.show_job(engine, ref.evaluation_id).state == "done"
        t = summary.timings
        print(
            f"{engine.dialect.name}: evaluation job ({worker}) {evaluated:.2f} s (read + align {t.load:.2f} s, "
            f"suite {t.compute:.2f} s, store {summary.topics:,} groups' values {t.store:.2f} s)"
        )
    engine.dispose()


if __name__ == "__main__":
    main()
