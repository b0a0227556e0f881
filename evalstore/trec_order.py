"""trec_eval's ranking order, shared by storage, pooling and anything else that ranks a run.

trec_eval ranks a topic's documents by score descending, ties broken by docno descending (byte
order; ``form_res_rels.c``, ``comp_sim_docno``); the run file's rank column is never used.
"""

from __future__ import annotations

from functools import cached_property

import numpy as np
import pyarrow as pa

from evalstore import _kernels as pc


def trec_rank(run: pa.Table) -> np.ndarray:
    """Each row's 1-based rank within its topic in trec_eval order, aligned with ``run``'s rows
    (topic, doc, score)."""
    return ranks_and_counts(run)[0]


def ranks_and_counts(run: pa.Table) -> tuple[np.ndarray, pa.Table]:
    """:func:`trec_rank`, and each topic's number of rows (topic, retrieved), from one encoding
    of the topics."""
    ranked = encoded_ranks(run)
    return ranked.ranks, pa.table({"topic": ranked.topics, "retrieved": ranked.counts})


def take_rows(column: pa.ChunkedArray, rows: np.ndarray) -> pa.Array:
    """``column``'s values at ``rows``, a chunk at a time: ChunkedArray.take joins every chunk into
    one array first (pyarrow 26), which for a few thousand docnos of a 7M-row run copied all 76 MB."""
    if column.num_chunks <= 1:
        return pc.take(column.combine_chunks(), pa.array(rows, pa.int64()))
    # rows asked for in order (prepare's judged rows) need no sort and no putting back
    order = None if (rows[1:] >= rows[:-1]).all() else np.argsort(rows, kind="stable")
    ascending = rows if order is None else rows[order]
    ends = np.cumsum([len(chunk) for chunk in column.chunks])
    cuts = np.searchsorted(ascending, ends).tolist()
    pieces, low, start = [], 0, 0
    for chunk, high, end in zip(column.chunks, cuts, ends.tolist(), strict=True):
        if high > low:
            pieces.append(pc.take(chunk, pa.array(ascending[low:high] - start)))
        low, start = high, end
    taken = pa.concat_arrays(pieces) if pieces else pa.array([], column.type)
    if order is None:
        return taken
    back = np.empty(len(order), dtype=np.int64)
    back[order] = np.arange(len(order))
    return pc.take(taken, pa.array(back))


# ranks_at finds each asked-for row's tie a row at a time and compares the row with every row of
# its tie: past ties this long, or more pairs than a quarter of the run's rows, every row is ranked
# by one sort instead (robust03's rutcor03100, its scores tied in long runs: 2.6 s by pairs, 0.03 s
# by the sort)
MAX_TIE_LENGTH = 256
TIE_PAIRS_PER_ROW = 0.25


class EncodedRanks:
    """A run's topics as integer codes into ``topics`` (in order of first appearance), and each
    row's 1-based rank within its topic in trec_eval order.

    A plain class, not a dataclass: a frozen dataclass compiles six methods from source text each
    time its module is imported (~0.1 ms each, in every `trec-eval` process), and this one is
    never compared, hashed or printed."""

    def __init__(
        self,
        topics: pa.Array,
        codes: np.ndarray,
        run: pa.Table,
        starts: np.ndarray | None,
        tied_scores: np.ndarray | None,
    ) -> None:
        self.topics = topics
        self.codes = codes
        self.run = run
        # each topic's first row, when the run lists each topic's rows together by score descending
        # (a row's rank then follows from its place, computed only for the rows asked about)
        self.starts = starts
        # with ``starts``, the scores when some are tied (ties may be listed in any order: Anserini's
        # runs list them by docno ascending, trec_eval ranks them by docno descending)
        self.tied_scores = tied_scores

    @cached_property
    def ranks(self) -> np.ndarray:
        """Every row's rank (int32)."""
        if self.starts is not None and (self.tied_scores is None or self._ties_in_trec_order()):
            return positions_within_groups(self.codes)
        keyed = pa.table({"topic": self.codes, "score": self.run["score"], "doc": self.run["doc"]})
        order = pc.sort_indices(
            keyed, sort_keys=[("topic", "ascending"), ("score", "descending"), ("doc", "descending")]
        ).to_numpy()
        ranks = np.empty(len(order), dtype=np.int32)
        ranks[order] = positions_within_groups(self.codes[order])
        return ranks

    def _ties_in_trec_order(self) -> bool:
        """Whether each row tied with the one before has a smaller docno (trec_eval's tie rule)."""
        assert self.tied_scores is not None
        score = self.tied_scores
        later = np.flatnonzero((score[1:] == score[:-1]) & (self.codes[1:] == self.codes[:-1])) + 1
        docs = self.run["doc"]
        return bool(pc.all(pc.greater(take_rows(docs, later - 1), take_rows(docs, later))).as_py())

    def ranks_at(self, rows: np.ndarray) -> np.ndarray:
        """The ranks of the rows ``rows`` (int64): the judged few of a large run, without ranking its
        millions of other rows."""
        rows = rows.astype(np.int64)
        if self.starts is None:
            return self.ranks[rows].astype(np.int64)
        topic = np.searchsorted(self.starts, rows, side="right") - 1
        first = self.starts[topic]
        if self.tied_scores is None:
            return rows - first + 1
        ends = np.append(self.starts, len(self.codes))[topic + 1]
        bounds = (
            _tie_bounds_of_all(self.tied_scores, self.starts, rows)
            if len(self.codes) <= ALL_TIES_PER_ASKED_ROW * len(rows)
            else _tie_bounds(self.tied_scores, rows, first, ends)
        )
        if bounds is None:
            return self.ranks[rows].astype(np.int64)
        low, high = bounds
        size = high - low
        tied = np.flatnonzero(size > 1)
        if int(size[tied].sum()) > TIE_PAIRS_PER_ROW * len(self.codes):
            return self.ranks[rows].astype(np.int64)
        # each tied row against every row of its tie: ahead of it are those with a greater docno
        owner = np.repeat(tied, size[tied])
        other = low[owner] + positions_within_groups(owner) - 1
        docs = self.run["doc"]
        ahead = pc.greater(take_rows(docs, other), take_rows(docs, rows[owner]))
        greater = np.bincount(owner, weights=ahead.to_numpy(zero_copy_only=False), minlength=len(rows))
        return low - first + 1 + greater.astype(np.int64)

    @cached_property
    def counts(self) -> np.ndarray:
        """Each topic's number of rows (int64), by topic code."""
        if self.starts is None:
            return np.bincount(self.codes, minlength=len(self.topics)).astype(np.int64)
        counts = np.zeros(len(self.topics), dtype=np.int64)
        counts[self.codes[self.starts]] = np.diff(np.append(self.starts, len(self.codes)))
        return counts


def encoded_ranks(run: pa.Table) -> EncodedRanks:
    """Each row's trec_eval rank within its topic (run: topic, doc, score). Run files usually list
    each topic's documents together by score: checking so takes ~0.05 s for 7M rows, where
    pyarrow's sort takes 0.4 s (3 s when the rows are shuffled), which is then the fallback.
    Topics are grouped by integer code: their order does not matter, only which rows share one."""
    if run.num_rows == 0:
        return EncodedRanks(pa.array([], pa.string()), np.zeros(0, dtype=np.int32), run, np.zeros(0, np.int64), None)
    encoded = pc.dictionary_encode(run["topic"])
    encoded = encoded.combine_chunks() if isinstance(encoded, pa.ChunkedArray) else encoded
    codes = encoded.indices.to_numpy(zero_copy_only=False)
    starts = np.flatnonzero(np.concatenate(([True], codes[1:] != codes[:-1])))
    if len(starts) != len(encoded.dictionary):  # a topic's rows apart: sort
        return EncodedRanks(encoded.dictionary, codes, run, None, None)
    score = run["score"].to_numpy()
    rising = np.flatnonzero(~(score[:-1] >= score[1:])) + 1  # NaN included: such a run is sorted
    if not _members(rising, starts).all():
        return EncodedRanks(encoded.dictionary, codes, run, None, None)
    return EncodedRanks(encoded.dictionary, codes, run, starts, score if (score[:-1] == score[1:]).any() else None)


def _tie_bounds(
    score: np.ndarray, rows: np.ndarray, first: np.ndarray, ends: np.ndarray
) -> tuple[np.ndarray, np.ndarray] | None:
    """The rows [low, high) of each asked-for row's run of equal scores within its topic (rows
    ``first`` to ``ends``): widened a row at a time, for the asked-for rows only (as many steps as
    the longest of their ties), not by a mask over every row of the run. None past
    :data:`MAX_TIE_LENGTH` steps."""
    low, high = rows.copy(), rows + 1
    if _widen(score, low, first, -1) and _widen(score, high, ends, 1):
        return low, high
    return None


# ranks_at finds the ties of the rows asked for by marking every tie of the run (a few passes over
# all rows) when those rows are at least this share of the run (an ordinary run's judged ones: ~2 ms
# of widening became ~0.3), else by widening from the rows asked for
ALL_TIES_PER_ASKED_ROW = 16


def _tie_bounds_of_all(score: np.ndarray, starts: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """:func:`_tie_bounds`, from every run of equal scores within a topic (topics begin at
    ``starts``); None likewise, when a tie of an asked-for row is longer than :data:`MAX_TIE_LENGTH`."""
    begins = np.ones(len(score), dtype=bool)
    begins[1:] = score[1:] != score[:-1]
    begins[starts] = True
    first_rows = np.flatnonzero(begins)
    tie = np.cumsum(begins)[rows] - 1
    low, high = first_rows[tie], np.append(first_rows[1:], len(score))[tie]
    if len(rows) and int((high - low).max()) > MAX_TIE_LENGTH:
        return None
    return low, high


def _widen(score: np.ndarray, bound: np.ndarray, limit: np.ndarray, step: int) -> bool:
    """Move each ``bound`` (a first row, step -1, or a row past the last, step 1) over the rows
    whose score equals the one inside it, up to ``limit``; False if some would move on."""
    inside = 0 if step < 0 else -1  # the row next to the bound that is in the tie
    moving = np.flatnonzero(bound != limit)
    for _ in range(MAX_TIE_LENGTH):
        if not len(moving):
            return True
        edge = bound[moving] + inside
        moving = moving[score[edge + step] == score[edge]]
        bound[moving] += step
        moving = moving[bound[moving] != limit[moving]]
    return not len(moving)


def _members(values: np.ndarray, sorted_set: np.ndarray) -> np.ndarray:
    at = np.minimum(np.searchsorted(sorted_set, values), len(sorted_set) - 1)
    return sorted_set[at] == values


def positions_within_groups(codes: np.ndarray) -> np.ndarray:
    """1-based position of each row within its run of equal codes."""
    n = len(codes)
    starts = np.flatnonzero(np.concatenate(([True], codes[1:] != codes[:-1]))) if n else np.zeros(0, np.int64)
    # one np.repeat over the groups, not a cumulative maximum over every row (7M rows: 0.01 s, not 0.1-0.3 s)
    return (np.arange(1, n + 1) - np.repeat(starts, np.diff(np.append(starts, n)))).astype(np.int32)
