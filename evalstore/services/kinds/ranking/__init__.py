"""The package's modules, by job: job (a claimed job's inputs read and its results computed), batch
(claimed jobs on one qrels computed in one pass, their rankings stacked), readback
(a finished evaluation read back, as `results show` and MLflow get it), board (the leaderboard of
runs on one qrels: which evaluations count, means and intervals), payload (what MLflow receives) and
kind (the RankingKind the registry holds); tiers (a board's letters) and pairs (a task's paired
tests), stored by an idle worker.
"""

from __future__ import annotations

from evalstore.services.kinds.ranking.batch import (
    compute_batch,
)
from evalstore.services.kinds.ranking.board import (
    LeaderboardRow,
    RankedRuns,
    Selection,
    TopicFilter,
    chosen_evaluation_ids,
    chosen_evaluations,
    leaderboard,
)
from evalstore.services.kinds.ranking.job import (
    compute_job,
    log,
    run_job,
)
from evalstore.services.kinds.ranking.kind import (
    RANKING,
    RankingKind,
)
from evalstore.services.kinds.ranking.medians import (
    StoredMedians,
    medians_from_values,
    run_values,
    stored_medians,
)
from evalstore.services.kinds.ranking.pairs import (
    PairStats,
    StoredPairs,
    holds_a_task,
    prepare_pairs,
    refresh_pairs,
    stored_pairs,
)
from evalstore.services.kinds.ranking.payload import (
    mlflow_run,
)
from evalstore.services.kinds.ranking.readback import (
    MAIN_MEASURES,
    StoredResults,
    main_scores,
    read_back,
    results,
)
from evalstore.services.kinds.ranking.tiers import (
    compute_tiers,
    nearest_tiers,
    refresh_tiers,
    stored_tiers,
    tiers_key,
    tiers_slot,
)

__all__ = [
    "LeaderboardRow",
    "MAIN_MEASURES",
    "PairStats",
    "RANKING",
    "RankedRuns",
    "RankingKind",
    "Selection",
    "StoredMedians",
    "StoredPairs",
    "StoredResults",
    "TopicFilter",
    "chosen_evaluation_ids",
    "chosen_evaluations",
    "compute_batch",
    "compute_job",
    "compute_tiers",
    "leaderboard",
    "holds_a_task",
    "log",
    "main_scores",
    "mlflow_run",
    "read_back",
    "nearest_tiers",
    "prepare_pairs",
    "refresh_pairs",
    "refresh_tiers",
    "results",
    "run_job",
    "medians_from_values",
    "run_values",
    "stored_medians",
    "stored_pairs",
    "stored_tiers",
    "tiers_key",
    "tiers_slot",
]
