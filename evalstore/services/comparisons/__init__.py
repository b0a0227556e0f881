"""Comparing stored systems: topic-aligned paired tests, Tukey HSD, and system-ranking agreement.

The inputs are the stored per-query values of each run's newest finished evaluation on the qrels
that holds the asked measures; a run without one is evaluated first, in this process, through the
job queue (so a worker's result is reused, never computed twice). The statistics themselves are
in :mod:`evalstore.statistics.significance`.

The package's modules, by job: pairwise (the score matrix, paired tests and Tukey HSD between runs,
their figure and MLflow run, and the kind-generic leaderboard), rankings (rank correlation of system
orderings across qrels or measures) and predictions (comparisons of prediction sets: McNemar and
per-group tests).
"""

from __future__ import annotations

from evalstore.services.comparisons.pairwise import (
    MAX_PLOT_PANELS,
    MISSING_POLICIES,
    Comparison,
    ComparisonSettings,
    Outcomes,
    PairComparison,
    ScoreMatrix,
    check_plot_size,
    compare,
    comparison_figure,
    leaderboard,
    log,
    log_comparison,
    pairs_for,
    score_matrix,
)
from evalstore.services.comparisons.predictions import (
    McNemar,
    PredictionComparison,
    compare_groups,
    compare_predictions,
    few_units_note,
    mcnemar,
    pairs_of,
)
from evalstore.services.comparisons.rankings import (
    Correlation,
    correlate,
)

__all__ = [
    "Comparison",
    "ComparisonSettings",
    "Correlation",
    "MAX_PLOT_PANELS",
    "MISSING_POLICIES",
    "McNemar",
    "Outcomes",
    "PairComparison",
    "PredictionComparison",
    "ScoreMatrix",
    "check_plot_size",
    "compare",
    "compare_groups",
    "compare_predictions",
    "comparison_figure",
    "correlate",
    "few_units_note",
    "leaderboard",
    "log",
    "log_comparison",
    "mcnemar",
    "pairs_for",
    "pairs_of",
    "score_matrix",
]
