"""TREC-style pools: build from stored runs, export to assessors, import their judgments, measure
agreement, turn judgments into qrels, check the qrels' reusability, replay strategies.

The strategies and agreement statistics are in :mod:`evalstore.statistics.pooling`; this module
reads and writes the store, one transaction per write.

The package's modules, by job: build (making a pool from stored runs, listing it, reading its
entries), judgments (assessor sheets, importing judgments, agreement, disagreements, qrels from the
judgments) and analysis (pool statistics, reusability, replaying strategies).
"""

from __future__ import annotations

from evalstore.services.pools.analysis import (
    PoolRunStats,
    PoolStats,
    PoolTopicStats,
    Simulation,
    leave_out,
    pool_stats,
    reusability,
    simulate,
    simulation_figure,
)
from evalstore.services.pools.build import (
    EXPORT_FORMATS,
    PoolNameTaken,
    PoolSummary,
    build_pool,
    list_pools,
    pool_entries,
    pool_judgments,
    pool_runs,
    read_candidates,
    read_runs,
    show_pool,
    stored_pool_name,
)
from evalstore.services.pools.judgments import (
    RESOLUTIONS,
    Disagreement,
    NextBatch,
    disagreements,
    export_pool,
    import_judgments,
    next_batch,
    pool_agreement,
    pool_qrels,
    qrels_of_labels,
    resolve_labels,
)

__all__ = [
    "Disagreement",
    "EXPORT_FORMATS",
    "NextBatch",
    "PoolRunStats",
    "PoolStats",
    "PoolNameTaken",
    "PoolSummary",
    "PoolTopicStats",
    "RESOLUTIONS",
    "Simulation",
    "pool_entries",
    "pool_judgments",
    "read_runs",
    "pool_runs",
    "build_pool",
    "disagreements",
    "export_pool",
    "import_judgments",
    "leave_out",
    "list_pools",
    "next_batch",
    "pool_agreement",
    "pool_qrels",
    "pool_stats",
    "read_candidates",
    "qrels_of_labels",
    "resolve_labels",
    "reusability",
    "show_pool",
    "stored_pool_name",
    "simulate",
    "simulation_figure",
]
