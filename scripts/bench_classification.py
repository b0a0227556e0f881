#!/usr/bin/env python3
"""Benchmark the classification suite (the figure in the README).

10 million binary predictions in 100,000 groups (user-like: ~100 items each, ~10% positive,
scores rounded to 3 decimals so ties are common): the whole suite (confusion-matrix measures,
ROC/PR curves, AUC, AP, 11-point AP, break-even, the three best thresholds, GAUC, per-group
values, a cost matrix) through :func:`evalstore.classification.evaluate`, against scikit-learn
computing the subset it has (confusion-matrix measures, AUC, AP, and AUC group by group).

    python scripts/bench_classification.py [--items 10000000] [--groups 100000] [--sklearn-groups 2000]
"""

from __future__ import annotations

import argparse
import time

import numpy as np


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=10_000_000)
    parser.add_argument("--groups", type=int, default=100_000)
    parser.add_argument("--sklearn-groups", type=int, default=2000,
                        help="groups scikit-learn scores one by one (its time is extrapolated to all)")
    args = parser.parse_args()
    from evalstore import classification

    rng = np.random.default_rng(0)
    groups = rng.integers(0, args.groups, args.items)
    y_true = (rng.random(args.items) < 0.1).astype(np.int64)
    score = np.round(np.clip(rng.normal(0.3 + 0.3 * y_true, 0.2), 0, 1), 3)
    costs = np.array([[0.0, 1.0], [5.0, 0.0]])
    timings = []
    for _ in range(3):
        start = time.perf_counter()
        suite = classification.evaluate(y_true, ["neg", "pos"], score=score, groups=groups, n_groups=args.groups,
                                        threshold="best-f1", costs=costs)
        timings.append(time.perf_counter() - start)
    print(f"evalstore full suite, {args.items:,} predictions, {args.groups:,} groups: "
          f"best {min(timings):.2f} s, worst {max(timings):.2f} s  "
          f"(auc {suite.aggregates['auc']:.4f}, gauc {suite.aggregates['gauc']:.4f}, "
          f"{len(suite.aggregates)} aggregates, {len(suite.per_group)} per-group measures)")

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
        rows = order[bounds[g]:bounds[g + 1]]
        if 0 < y_true[rows].sum() < len(rows):
            metrics.roc_auc_score(y_true[rows], score[rows])
    per_group = (time.perf_counter() - start) / args.sklearn_groups * args.groups
    print(f"scikit-learn: AUC, AP, P/R/F, MCC, kappa, confusion: {whole:.2f} s; "
          f"AUC per group, extrapolated to {args.groups:,} groups: {per_group:.1f} s")


if __name__ == "__main__":
    main()
