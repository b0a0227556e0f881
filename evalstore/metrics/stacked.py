"""Many runs' rankings against one qrels, evaluated as one: their rows stacked into one
:class:`~evalstore.metrics.preparation.Ranking`, each measure's kernel called once for all of them.

Every measure is computed topic by topic, a row of the ranking's matrices at a time, so a topic's
value does not depend on the rows beside it: the rows of several runs' rankings, one under the
other, give each run's values as its own ranking would. Only rankings of the same depth are
stacked together, so that no row gains padding columns it did not have alone (the values are
then the same floating-point operations on the same numbers, not merely equal in exact
arithmetic). A campaign's runs nearly all have one depth (1,000, or -M's).

Stacking saves the kernels' fixed costs, which are small beside their work on rankings of
ordinary size: on robust03's 17 runs (100 x 1,000 each) all_trec took ~250 ms of CPU stacked 5 at a
time against ~285 ms one by one. Larger stacks were no faster (the matrices leave the caches), so
a stack is bounded to :data:`STACK_CELLS`, below compute's threading threshold.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from evalstore.metrics.preparation import Ranking
from evalstore.metrics.registry import Measure

# evalstore.metrics.compute, passed in: this module is imported by the package, not the other way
Compute = Callable[..., dict[Measure, np.ndarray]]

# at most this many cells (topics x depth) in one stack (5 robust03 runs): 0.2M to 1M were as
# fast on robust03, 5M slower; one thread below evalstore.metrics.THREADED_CELLS
STACK_CELLS = 500_000


def stack(rankings: Sequence[Ranking]) -> Ranking:
    """One ranking whose rows are ``rankings``' rows, in order (all of one depth, with one qrels'
    relevance levels and one set of options). The per-run fields (topics missing from a run, its
    dropped topics, its runid) stay with each run's own ranking."""
    first = rankings[0]
    if any(
        rk.depth != first.depth
        or rk.complete != first.complete
        or rk.known is not None
        or rk.rel_levels.shape[1] != first.rel_levels.shape[1]
        for rk in rankings
    ):
        raise ValueError("only rankings of one depth, one qrels and one set of options stack")
    offsets = np.cumsum([0] + [rk.n for rk in rankings])
    return Ranking(
        topics=[topic for rk in rankings for topic in rk.topics],
        rel=np.concatenate([rk.rel for rk in rankings]),
        num_ret=np.concatenate([rk.num_ret for rk in rankings]),
        rel_levels=np.concatenate([rk.rel_levels for rk in rankings]),
        max_level=first.max_level,
        missing_topics=[],
        dropped_run_topics=[],
        stand_in=np.concatenate([rk.stand_in for rk in rankings]),
        complete=first.complete,
        judged_row=np.concatenate([rk.judged_row + offset for rk, offset in zip(rankings, offsets, strict=False)]),
        judged_position=np.concatenate([rk.judged_position for rk in rankings]),
        judged_rel=np.concatenate([rk.judged_rel for rk in rankings]),
    )


def compute_stacked(
    compute: Compute,
    rankings: Sequence[Ranking],
    measures: Sequence[Measure],
    *,
    relevance_level: int = 1,
    collection_size: int = 0,
    threads: int | None = None,
    stack_cells: int = STACK_CELLS,
) -> list[dict[Measure, np.ndarray]]:
    """``compute`` (:func:`evalstore.metrics.compute`) for each of ``rankings`` (in their order):
    those of one depth are stacked, up to ``stack_cells`` cells a stack, and each stack is computed
    once."""
    kwargs: dict[str, Any] = {
        "relevance_level": relevance_level,
        "collection_size": collection_size,
        "threads": threads,
    }
    values: list[dict[Measure, np.ndarray] | None] = [None] * len(rankings)
    by_depth: dict[int, list[int]] = {}
    for index, rk in enumerate(rankings):
        if rk.known is not None or rk.n == 0:  # what the user knew is per run; nothing to stack
            values[index] = compute(rk, measures, **kwargs)
        else:
            by_depth.setdefault(rk.depth, []).append(index)
    for depth, indices in by_depth.items():
        for group in _bounded(indices, rankings, max(depth, 1), stack_cells):
            if len(group) == 1:
                values[group[0]] = compute(rankings[group[0]], measures, **kwargs)
                continue
            together = compute(stack([rankings[i] for i in group]), measures, **kwargs)
            start = 0
            for i in group:
                stop = start + rankings[i].n
                values[i] = {measure: column[start:stop] for measure, column in together.items()}
                start = stop
    return [value for value in values if value is not None]


def _bounded(indices: list[int], rankings: Sequence[Ranking], depth: int, cells: int) -> list[list[int]]:
    """``indices`` in consecutive groups of at most ``cells`` cells (a larger ranking alone)."""
    groups: list[list[int]] = []
    size = 0
    for i in indices:
        rows = rankings[i].n * depth
        if groups and size + rows <= cells:
            groups[-1].append(i)
            size += rows
        else:
            groups.append([i])
            size = rows
    return groups
