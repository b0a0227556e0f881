"""Comparing stored systems: topic-aligned paired tests, Tukey HSD, and system-ranking agreement.

The inputs are the stored per-query values of each run's newest finished evaluation on the qrels
that holds the asked measures; a run without one is evaluated first, in this process, through the
job queue (so a worker's result is reused, never computed twice). The statistics themselves are
in :mod:`evalstore.statistics.significance`.

The package's modules, by job: matrix (the runs' per-topic values, aligned by topic), pairwise
(paired tests and Tukey HSD between runs), figures (the comparison's figure, drawn by
:mod:`evalstore.plots`), payload (the comparison's MLflow run), rankings (rank correlation of system
orderings across qrels or measures), predictions (comparisons of prediction sets: McNemar and
per-group tests) and boards (the leaderboard of any kind).
"""

from __future__ import annotations

from evalstore.services.comparisons.boards import leaderboard
from evalstore.services.comparisons.figures import MAX_PLOT_PANELS, check_plot_size, comparison_figure
from evalstore.services.comparisons.matrix import MISSING_POLICIES, ScoreMatrix, answer_matrix, log, score_matrix
from evalstore.services.comparisons.pairwise import (
    Comparison,
    ComparisonSettings,
    Outcomes,
    PairComparison,
    compare,
    compare_answers,
    compare_matrix,
    pairs_for,
    stored_comparison,
)
from evalstore.services.comparisons.payload import log_comparison
from evalstore.services.comparisons.predictions import (
    GroupComparison,
    McNemar,
    McNemarRow,
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
    "GroupComparison",
    "McNemar",
    "McNemarRow",
    "Outcomes",
    "PairComparison",
    "PredictionComparison",
    "ScoreMatrix",
    "check_plot_size",
    "answer_matrix",
    "compare",
    "compare_answers",
    "compare_matrix",
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
    "stored_comparison",
]
