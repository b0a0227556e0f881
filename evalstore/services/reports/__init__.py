"""What the service's pages show: a task's leaderboard with significance tiers and pool
contribution (boards), a run's per-topic picture against the median run and a comparison of runs
with the topics where they disagree most (runs). Every function takes the principal asking; the
visibility rules are the tasks service's (a hidden task's scores, another team's runs, a split
task's private topics before its release: never shown)."""

from __future__ import annotations

from evalstore.services.reports.boards import (
    DOWNLOADS,
    FINAL,
    JUDGED_WARNING,
    BoardPage,
    BoardRow,
    MeasureChoice,
    MeasureGroup,
    board_download,
    board_page,
    leaderboard,
    measure_groups,
)
from evalstore.services.reports.runs import (
    DISAGREEING_TOPICS,
    PER_TOPIC_COLUMNS,
    TOP_DOCUMENTS,
    ComparePage,
    Disagreement,
    Picture,
    RankedDocument,
    RunPage,
    compare_page,
    compared,
    median_peers,
    run_page,
    scored_run_page,
    stored_picture,
    values_picture,
)

__all__ = [
    "DISAGREEING_TOPICS",
    "DOWNLOADS",
    "FINAL",
    "JUDGED_WARNING",
    "PER_TOPIC_COLUMNS",
    "TOP_DOCUMENTS",
    "BoardPage",
    "BoardRow",
    "MeasureChoice",
    "MeasureGroup",
    "measure_groups",
    "ComparePage",
    "Disagreement",
    "Picture",
    "RankedDocument",
    "RunPage",
    "board_download",
    "board_page",
    "compare_page",
    "compared",
    "median_peers",
    "leaderboard",
    "run_page",
    "scored_run_page",
    "stored_picture",
    "values_picture",
]
