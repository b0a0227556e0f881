"""Estimating a learned system's quality over splits of the topics (or of a classifier's items):
holdout (the textbook's 2/3-1/3), repeated random subsampling, k-fold and leave-one-out
cross-validation, and the bootstrap (train on a resample, test out of bag), stratified where asked.

scikit-learn's splitters draw the splits (train_test_split, (Stratified)ShuffleSplit,
(Stratified)KFold, LeaveOneOut, utils.resample), from the recorded seed: the same seed gives the
same split. ``runs combine`` builds a cross-validated run (each topic from the run trained without
it), and fold values give each fold's mean over its test topics, and their mean and spread.

The package's modules, by job: drawing (drawing, importing, listing and exporting splits) and
folds (a cross-validated run combined from per-fold runs; a run's values on each fold).
"""

from __future__ import annotations

from evalstore.services.splits.drawing import (
    HOLDOUT_SHARE,
    IMPORTED,
    METHODS,
    PARTITIONING,
    STRATA,
    FoldUnits,
    SplitExport,
    SplitSummary,
    export_split,
    import_split,
    list_splits,
    make_split,
    members,
    show_split,
    split_items,
    split_topics,
)
from evalstore.services.splits.folds import (
    FoldValues,
    combine_runs,
    fold_values,
    log_fold_values,
    record_fold_values,
    stored_fold_values,
)

__all__ = [
    "HOLDOUT_SHARE",
    "IMPORTED",
    "METHODS",
    "PARTITIONING",
    "STRATA",
    "FoldValues",
    "FoldUnits",
    "SplitExport",
    "SplitSummary",
    "split_items",
    "split_topics",
    "combine_runs",
    "export_split",
    "fold_values",
    "import_split",
    "list_splits",
    "log_fold_values",
    "make_split",
    "members",
    "record_fold_values",
    "show_split",
    "stored_fold_values",
]
