"""One trec_eval-order sort of a run against its qrels, as matrices shared by every measure.

:class:`Ranking` holds, for every evaluated topic at once, the relevance of each retrieved
document in trec_eval order: score descending, ties broken by docno descending (trec_eval
``form_res_rels.c``, ``comp_sim_docno``); the run's rank column is never used. Documents not in
the qrels get :data:`NONPOOL`; qrels entries with negative relevance ("pooled but unjudged") get
:data:`UNJUDGED`; positions past a topic's last retrieved document hold :data:`PAD`.

Most kernels read only the judged entries (``judged_row``, ``judged_position``, ``judged_rel``:
a 7M-row run has some thousands) and the per-topic counts; the rest read ``Ranking.rel`` (shape
``(n_topics, depth)``), which they need where documents outside the qrels count (a negative
relevance level, a gain for them) or where every place does (relstring, rbp_resid, G). None
sorts or loops over topics in Python.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
import pyarrow as pa

from evalstore import _kernels as pc
from evalstore.io.hashing import KeyIndex, doc_hashes, with_topics
from evalstore.trec_order import EncodedRanks, encoded_ranks, positions_within_groups, take_rows

# codes in Ranking.rel (not the relevance values of a qrels file: there, -1 is what trec_eval
# reads as "pooled but unjudged", io.judgments.TREC_UNJUDGED, which is coded UNJUDGED here)
NONPOOL = -1
UNJUDGED = -2
PAD = -3


@dataclass(frozen=True)
class PrepareOptions:
    """How a run is turned into rankings (trec_eval flags in brackets)."""

    max_docs: int | None = None  # keep only the top N per topic after sorting [-M]
    judged_only: bool = False  # drop unjudged documents before scoring [-J]
    complete: bool = False  # evaluate every qrels topic; missing ones as empty rankings [-c]


# Known, _Topics and _JudgedDocs are plain classes, not dataclasses: a dataclass compiles its
# methods from source text each time its module is imported (~0.1 ms a method, six for a frozen
# one), in every `trec-eval` process; these records are only built and read here, never compared,
# hashed or printed.
class Known:
    """What the user already knew, for the user-oriented measures: per topic row, the number of
    relevant documents in the known set, and the row and position of each retrieved one (positions
    are the ranking's own: both come from the same ranking, cut at the same -M)."""

    def __init__(self, relevant: np.ndarray, row: np.ndarray, position: np.ndarray) -> None:
        self.relevant = relevant  # (n,) int64
        self.row = row
        self.position = position


@dataclass
class Ranking:
    topics: list[str]  # evaluated topics, in byte order (trec_eval's order)
    rel: np.ndarray  # (n, depth) int32: relevance level, NONPOOL, UNJUDGED or PAD
    num_ret: np.ndarray  # (n,) int64
    rel_levels: np.ndarray  # (n, levels) int64: judged docs (relevance >= 0) per level
    max_level: int  # highest relevance level in the qrels (over all topics)
    missing_topics: list[str]  # qrels topics with no retrieved document
    dropped_run_topics: list[str]  # run topics absent from the qrels (never evaluated)
    # (n,) bool: a missing topic that trec_eval -c ranks as one non-pool stand-in document (its
    # bogus_ranking in trec_eval.c), which -M and -J did not remove. Measures see an empty ranking
    # there, as the stand-in is never relevant; only 0/0 cases tell the two apart.
    stand_in: np.ndarray
    runid: str | None = None
    complete: bool = False  # every qrels topic is a row (trec_eval -c)
    # The same judged places as entries, by topic row then rank (what ``rel`` holds other than
    # NONPOOL and PAD): kernels that need only the judged documents read these, not the matrix.
    judged_row: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    judged_position: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    judged_rel: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int32))
    known: Known | None = None  # the user's known relevant documents (evaluate --known)
    _cache: dict[object, np.ndarray] = field(default_factory=dict, repr=False)

    @property
    def n(self) -> int:
        return len(self.topics)

    @property
    def depth(self) -> int:
        return int(self.rel.shape[1])

    def cached(self, key: object, compute: Callable[[], Any]) -> Any:
        if key not in self._cache:
            self._cache[key] = compute()
        return self._cache[key]

    @property
    def valid(self) -> np.ndarray:
        return self.cached("valid", lambda: self.rel != PAD)

    @property
    def ranks(self) -> np.ndarray:
        """1-based ranks as float64, shape (depth,)."""
        return self.cached("ranks", lambda: np.arange(1, self.depth + 1, dtype=np.float64))

    def is_rel(self, level: int) -> np.ndarray:
        """Retrieved and judged at least ``level`` (trec_eval ``rel >= relevance_level``). At a
        level of NONPOOL or below, documents outside the qrels count, and so does the stand-in
        document trec_eval -c ranks first for a topic without results (see ``stand_in``)."""

        def build() -> np.ndarray:
            relevant = self.valid & (self.rel >= level)
            if level <= NONPOOL:
                relevant[:, :1] |= self.stand_in[:, None]
            return relevant

        return self.cached(("is_rel", level), build)

    def cum_rel(self, level: int) -> np.ndarray:
        """Relevant documents in the top i+1, shape (n, depth) int64."""
        return self.cached(("cum", level), lambda: np.cumsum(self.is_rel(level), axis=1, dtype=np.int64))

    def num_rel(self, level: int) -> np.ndarray:
        """Judged documents at or above ``level`` in the qrels, retrieved or not."""
        start = min(max(level, 0), self.rel_levels.shape[1])
        return self.cached(("num_rel", level), lambda: self.rel_levels[:, start:].sum(axis=1))

    def num_rel_ret(self, level: int) -> np.ndarray:
        """trec_eval's num_rel_ret (form_res_rels.c): retrieved documents judged at least ``level``
        in the qrels. At a negative level the measures that walk the ranking count documents
        outside the qrels as relevant, but this count never does."""
        return self.judged_within(max(level, 0), self.depth)

    def judged_within(self, level: int, k: np.ndarray | int) -> np.ndarray:
        """Per topic, the documents judged at least ``level`` among its top k (k per topic or one for
        all; 0 where k <= 0), counted in the judged entries: the (n, depth) matrix is read only for a
        negative level, at which documents outside the qrels count too."""
        if level < 0:
            return self.at(self.cum_rel(level), k)
        return count_within(self.entry_keys(level), self.n, self.depth, k)

    def entry_keys(self, level: int | None = None) -> np.ndarray:
        """row * (depth + 1) + position of each judged entry (at ``level`` or above, 0 <= level),
        ascending, as the entries are ordered by row then position."""
        if level is None:
            return self.cached("entry_keys", lambda: self.judged_row * (self.depth + 1) + self.judged_position)
        return self.cached(("entry_keys", level), lambda: self.entry_keys()[self.judged_rel >= level])

    def at(self, cumulative: np.ndarray, k: np.ndarray | int) -> np.ndarray:
        """cumulative[:, k-1] per topic (see :func:`column_at`)."""
        return column_at(cumulative, k)

    def topic_rows(self, start: int, stop: int) -> Ranking:
        """The rankings of topic rows start..stop-1 alone (views of these matrices, no copy):
        every measure is per topic, so batches of topics give the values of the whole, and a
        batch's kernel intermediates are a batch's size (100k topics x 1,000 made each (n, depth)
        float64 intermediate 800 MB)."""
        lo, hi = np.searchsorted(self.judged_row, [start, stop])
        known = None
        if self.known is not None:
            mine = (self.known.row >= start) & (self.known.row < stop)
            known = Known(self.known.relevant[start:stop], self.known.row[mine] - start, self.known.position[mine])
        return Ranking(
            topics=self.topics[start:stop],
            rel=self.rel[start:stop],
            num_ret=self.num_ret[start:stop],
            rel_levels=self.rel_levels[start:stop],
            max_level=self.max_level,
            missing_topics=[],
            dropped_run_topics=[],
            stand_in=self.stand_in[start:stop],
            runid=self.runid,
            complete=self.complete,
            judged_row=self.judged_row[lo:hi] - start,
            judged_position=self.judged_position[lo:hi],
            judged_rel=self.judged_rel[lo:hi],
            known=known,
        )


def count_within(keys: np.ndarray, n: int, depth: int, k: np.ndarray | int) -> np.ndarray:
    """Per topic of an (n, depth) ranking, how many of ``keys`` (some of
    :meth:`Ranking.entry_keys`) lie in its top k (k per topic or one for all; 0 where k <= 0). A
    (n, w) k gives (n, w) counts: w cutoffs a topic."""
    width = depth + 1
    first = np.arange(n, dtype=np.int64) * width
    k = np.asarray(k, dtype=np.int64)
    if k.ndim == 2:
        first = first[:, None]
    else:
        k = np.broadcast_to(k, (n,))
    within = np.clip(k, 0, width)
    return np.searchsorted(keys, first + within) - np.searchsorted(keys, first)


def column_at(matrix: np.ndarray, k: np.ndarray | int) -> np.ndarray:
    """matrix[:, k-1] per row (0 where k <= 0); past the last column, the last column."""
    n, width = matrix.shape
    k = np.broadcast_to(np.asarray(k, dtype=np.int64), (n,))
    if width == 0:
        return np.zeros(n)
    values = matrix[np.arange(n), np.clip(k, 1, width) - 1]
    return np.where(k > 0, values, 0)


class _Topics:
    """Which topics are evaluated, and each run topic's row in the matrices (a plain class: see
    :class:`Known`)."""

    def __init__(
        self,
        qrels_topics: pa.Array,
        judgment_code: np.ndarray,
        code: np.ndarray,
        row_of: np.ndarray,
        topics: list[str],
        missing: list[str],
        dropped: list[str],
    ) -> None:
        self.qrels_topics = qrels_topics  # every qrels topic, sorted: topic codes index this
        self.judgment_code = judgment_code  # per qrels row: its topic's code
        self.code = code  # per given run topic value: its qrels code, -1 when the qrels lack it
        self.row_of = row_of  # qrels code -> row in the matrices, -1 when not evaluated
        self.topics = topics
        self.missing = missing
        self.dropped = dropped


def _column_key(column: pa.ChunkedArray | pa.Array) -> tuple[tuple[int, ...], ...]:
    """Where a column's values are in memory. Arrow never changes a buffer once written, so two
    columns with the same key hold the same values while the first is alive; the caches below
    keep the column they were computed from, so its buffers cannot be freed and reused. Not the
    table's identity: ``evaluate`` validates in-memory qrels into a new Table a call, over the
    caller's buffers (a loop over 17 runs encoded the same judgments 17 times)."""
    chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
    return tuple(
        (chunk.offset, len(chunk), *(0 if buffer is None else buffer.address for buffer in chunk.buffers()))
        for chunk in chunks
    )


_last_topics: tuple[pa.ChunkedArray, tuple[tuple[int, ...], ...], tuple[pa.Array, np.ndarray]] | None = None


def _qrels_topics(qrels: pa.Table) -> tuple[pa.Array, np.ndarray]:
    """The qrels' topics, sorted, and each judgment's topic code into them: one hash pass over
    the judgments' topics, kept for the last qrels topics seen (a loop over runs)."""
    global _last_topics
    key = _column_key(qrels["topic"])
    if _last_topics is not None and _last_topics[1] == key:
        return _last_topics[2]
    encoded = pc.dictionary_encode(qrels["topic"])
    encoded = encoded.combine_chunks() if isinstance(encoded, pa.ChunkedArray) else encoded
    order = pc.array_sort_indices(encoded.dictionary).to_numpy()
    place = np.empty(len(order), dtype=np.int64)
    place[order] = np.arange(len(order))
    found = (pc.take(encoded.dictionary, pa.array(order)), place[encoded.indices.to_numpy(zero_copy_only=False)])
    _last_topics = (qrels["topic"], key, found)
    return found


def _resolve_topics(qrels: pa.Table, run_topics: pa.Array | pa.ChunkedArray, complete: bool) -> _Topics:
    qrels_topics, judgment_code = _qrels_topics(qrels)
    run_code = pc.index_in(run_topics, value_set=qrels_topics).to_numpy(zero_copy_only=False)
    in_qrels = ~np.isnan(run_code) if run_code.dtype.kind == "f" else run_code >= 0
    run_code = np.where(in_qrels, np.nan_to_num(run_code, nan=-1), -1).astype(np.int64)
    dropped = [] if in_qrels.all() else sorted(set(pc.unique(pc.filter(run_topics, pa.array(~in_qrels))).to_pylist()))

    present = np.zeros(len(qrels_topics), dtype=bool)
    present[run_code[run_code >= 0]] = True
    all_topics = qrels_topics.to_pylist()
    missing = [t for t, p in zip(all_topics, present, strict=True) if not p]
    evaluated = np.ones(len(all_topics), dtype=bool) if complete else present
    row_of = np.full(len(all_topics), -1, dtype=np.int64)
    row_of[evaluated] = np.arange(int(evaluated.sum()))
    topics = [t for t, e in zip(all_topics, evaluated, strict=True) if e]
    return _Topics(qrels_topics, judgment_code, run_code, row_of, topics, missing, dropped)


def prepare(
    qrels: pa.Table,
    run: pa.Table,
    options: PrepareOptions = PrepareOptions(),
    runid: str | None = None,
    ranked: EncodedRanks | None = None,
    doc_keys: np.ndarray | None = None,
) -> Ranking:
    """Rank ``run`` (topic, doc, score) in trec_eval order and look its judgments up in ``qrels``
    (topic, doc, relevance). Only the judged documents' places are kept: a topic's other places,
    up to its number of retrieved documents, are unjudged. A large run's judged documents are a
    few thousand of its millions, so nothing the size of the run is sorted or joined: run files
    in rank order (nearly all) are only checked to be (:func:`encoded_ranks`, or ``ranked`` when the
    caller has it). ``doc_keys``: the run's docnos' :func:`doc_hashes`, when the caller has them
    (left as they are)."""
    ranked = encoded_ranks(run) if ranked is None else ranked
    resolved = _resolve_topics(qrels, ranked.topics, options.complete)
    n = len(resolved.topics)
    # per distinct run topic: its row in the matrices (-1: not evaluated)
    topic_row = np.where(resolved.code >= 0, resolved.row_of[np.maximum(resolved.code, 0)], -1)
    evaluated = topic_row >= 0
    counts = np.zeros(n, dtype=np.int64)
    counts[topic_row[evaluated]] = ranked.counts[evaluated]
    judged, rel = _judged_rows(run["doc"], topic_row, ranked.codes, qrels, resolved, doc_keys)
    rows = topic_row[ranked.codes[judged]]
    position = ranked.ranks_at(judged) - 1
    order = np.lexsort((position, rows))
    rows, position, rel = rows[order], position[order], rel[order]
    rows, position, rel, counts = _cut_then_condense(rows, position, rel, counts, n, options)
    return _ranking(qrels, resolved, rows, position, rel, counts, options, runid)


def prepare_ranked(
    qrels: pa.Table,
    retrieved: pa.Table,
    judged: pa.Table,
    options: PrepareOptions = PrepareOptions(),
    runid: str | None = None,
) -> Ranking:
    """The :func:`prepare` of a stored run from what the database computes for it, using the
    trec_eval-order rank each row got at registration: ``retrieved`` (topic, retrieved) holds each
    run topic's number of documents, ``judged`` (topic, rank, relevance) the rank of each run
    document the qrels judge. Nothing is sorted, and the unjudged documents (almost all of a
    large run) never leave the database."""
    resolved = _resolve_topics(qrels, retrieved["topic"], options.complete)
    n = len(resolved.topics)
    counts = np.zeros(n, dtype=np.int64)
    keep = resolved.code >= 0
    counts[resolved.row_of[resolved.code[keep]]] = retrieved["retrieved"].to_numpy()[keep]
    code = pc.index_in(judged["topic"], value_set=resolved.qrels_topics).to_numpy(zero_copy_only=False)
    rows = resolved.row_of[code.astype(np.int64)]  # judged topics are in the qrels and the run
    position = judged["rank"].to_numpy().astype(np.int64) - 1
    relevance = judged["relevance"].to_numpy()
    rel = np.where(relevance < 0, UNJUDGED, relevance).astype(np.int32)
    order = np.lexsort((position, rows))  # the judged documents only (~10k for a 7M-row run)
    rows, position, rel = rows[order], position[order], rel[order]
    rows, position, rel, counts = _cut_then_condense(rows, position, rel, counts, n, options)
    return _ranking(qrels, resolved, rows, position, rel, counts, options, runid)


def _cut_then_condense(
    rows: np.ndarray, position: np.ndarray, rel: np.ndarray, counts: np.ndarray, n: int, options: PrepareOptions
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Apply -M, then -J, in trec_eval's order (``form_res_rels.c``: the sorted ranking is cut at
    ``max_num_docs_per_topic`` first, then the judged-only pass drops unjudged documents from what
    is left and closes up their places). ``rows`` and ``position`` come grouped by topic row, in
    rank order; ``counts`` is each topic's number of retrieved documents (the rows not given are
    unjudged)."""
    if options.max_docs is not None:
        within = position < options.max_docs
        rows, rel, position = rows[within], rel[within], position[within]
        counts = np.minimum(counts, options.max_docs)
    if options.judged_only:
        judged = rel >= 0
        rows, rel = rows[judged], rel[judged]
        counts = np.bincount(rows, minlength=n) if n else counts
        position = _positions(rows, counts)
    return rows, position, rel, counts


def _positions(rows: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """0-based place of each row within its topic, for rows grouped by topic row in order."""
    if not len(rows):
        return np.zeros(0, dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    return np.arange(len(rows)) - starts[rows]


def _ranking(
    qrels: pa.Table,
    resolved: _Topics,
    rows: np.ndarray,
    position: np.ndarray,
    rel: np.ndarray,
    counts: np.ndarray,
    options: PrepareOptions,
    runid: str | None,
) -> Ranking:
    """The matrices: each topic's first ``counts`` places NONPOOL unless (rows, position) gives
    their relevance, PAD after (-M and -J are applied already)."""
    n = len(resolved.topics)
    stand_in = np.zeros(n, dtype=bool)
    if options.complete and not options.judged_only and options.max_docs != 0 and resolved.missing:
        missing_codes = pc.index_in(pa.array(resolved.missing, pa.string()), value_set=resolved.qrels_topics)
        stand_in[resolved.row_of[missing_codes.to_numpy(zero_copy_only=False).astype(np.int64)]] = True
    # at least one column where a stand-in is: the kernels that count documents outside the qrels
    # read its place there (Ranking.is_rel)
    depth = max(int(counts.max()) if n and len(counts) else 0, int(stand_in.any()))
    matrix = np.full((n, depth), PAD, dtype=np.int32)
    matrix[np.arange(depth) < counts[:, None]] = NONPOOL
    matrix[rows, position] = rel

    rel_levels, max_level = _relevance_levels(qrels, resolved.judgment_code, resolved.row_of, n)
    return Ranking(
        topics=resolved.topics,
        rel=matrix,
        num_ret=counts.astype(np.int64),
        rel_levels=rel_levels,
        max_level=max_level,
        missing_topics=resolved.missing,
        dropped_run_topics=resolved.dropped,
        stand_in=stand_in,
        runid=runid,
        complete=options.complete,
        judged_row=rows.astype(np.int64),
        judged_position=position.astype(np.int64),
        judged_rel=rel.astype(np.int32),
    )


# runs shorter than this look their (topic, docno) pairs up by 64-bit key, longer ones as text (see
# _judged_rows)
HASHED_LOOKUP_ROWS = 1_000_000


class _JudgedDocs:
    """A qrels table's judged docnos (``docs``): as their 64-bit hashes, and as codes, each
    judgment's, into the distinct docnos (``values``). Each is computed when first asked for (a
    plain class: see :class:`Known`)."""

    def __init__(self, docs: pa.ChunkedArray) -> None:
        self.docs = docs
        # the judgments' (topic row, docno code) keys, sorted, and their judgments, for the last
        # topic rows seen (keyed by row_of's bytes): the runs of a campaign nearly all have every topic
        self.sorted_keys: dict[bytes, tuple[np.ndarray, np.ndarray]] = {}
        # the judgments' (topic, docno) hash keys indexed, for the last qrels topic column seen
        # (kept alive beside its _column_key)
        self.pairs: dict[tuple[tuple[int, ...], ...], tuple[pa.ChunkedArray, KeyIndex]] = {}

    @cached_property
    def hashes(self) -> np.ndarray:
        return doc_hashes(self.docs)

    @cached_property
    def _encoded(self) -> tuple[np.ndarray, pa.Array]:
        encoded = pc.dictionary_encode(self.docs)
        encoded = encoded.combine_chunks() if isinstance(encoded, pa.ChunkedArray) else encoded
        return encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64), encoded.dictionary

    @property
    def codes(self) -> np.ndarray:
        return self._encoded[0]

    @property
    def values(self) -> pa.Array:
        return self._encoded[1]


# the last qrels docnos seen, their _column_key and what was worked out of them
_last_judged: list[tuple[pa.ChunkedArray, tuple[tuple[int, ...], ...], _JudgedDocs]] = []


def _judged_docs(qrels: pa.Table) -> _JudgedDocs:
    """Kept for the last qrels docnos seen (:func:`_column_key`): a loop evaluating many runs
    against one qrels hashes and encodes its docnos once, not once a run."""
    key = _column_key(qrels["doc"])
    if _last_judged and _last_judged[0][1] == key:
        return _last_judged[0][2]
    judged = _JudgedDocs(qrels["doc"])
    _last_judged[:] = [(qrels["doc"], key, judged)]
    return judged


def _judgment_pairs(judged: _JudgedDocs, qrels: pa.Table, resolved: _Topics) -> KeyIndex | None:
    """Every judgment's (topic, docno) as a 64-bit key, indexed (:func:`_pair_index`); None when
    two judgments share a key (a pair judged twice, or two pairs whose hashes collide): those
    qrels take the look-up as text, which keeps each row's first judgment."""
    index = _pair_index(judged, qrels, resolved.judgment_code)
    return index if index.distinct else None


def _pair_index(judged: _JudgedDocs, qrels: pa.Table, judgment_code: np.ndarray) -> KeyIndex:
    """The judgments' (topic, docno) keys (each docno's hash mixed with its topic's code),
    indexed once for the qrels' topic column (a campaign's runs share it)."""
    memo = _column_key(qrels["topic"])
    if memo not in judged.pairs:
        judged.pairs.clear()
        judged.pairs[memo] = (qrels["topic"], KeyIndex(with_topics(judged.hashes.copy(), judgment_code)))
    return judged.pairs[memo][1]


def qrels_lookups(qrels: pa.Table) -> dict[str, pa.Array]:
    """What :func:`prepare` works out of the qrels alone, as arrays to keep with them on disk
    (evalstore.io.parsed_cache): their topics sorted, each judgment's topic code and docno hash,
    and the index of the judgments' (topic, docno) keys. In a fresh process these took 20-30 ms
    of robust03's qrels (numpy's first calls, new memory); :func:`remember_qrels_lookups` gives
    them back to the next command for nothing. Worked out here, they are remembered too."""
    topics, code = _qrels_topics(qrels)
    judged = _judged_docs(qrels)
    index = _pair_index(judged, qrels, code)
    return {
        "topics": topics,
        "judgment_code": pa.array(code),
        "doc_hash": pa.array(judged.hashes),
        "pair_key": pa.array(index.keys),
        "pair_slot": pa.array(index.slots),
        "pair_probes_distinct": pa.array([index.probes, int(index.distinct)], pa.int64()),
    }


def remember_qrels_lookups(qrels: pa.Table, lookups: dict[str, pa.Array]) -> bool:
    """Take :func:`qrels_lookups`' arrays as worked out of ``qrels`` (the next :func:`prepare`
    against them uses these instead of working them out again). False, and nothing taken, when
    they do not fit ``qrels`` (a kept file damaged on the disk): they are then worked out again."""
    global _last_topics
    try:
        topics, code, hashes, keys, slots = (
            lookups[name] for name in ("topics", "judgment_code", "doc_hash", "pair_key", "pair_slot")
        )
        probes, distinct = lookups["pair_probes_distinct"].to_pylist()
        code, hashes, keys, slots = (array.to_numpy() for array in (code, hashes, keys, slots))
        fits = (
            pa.types.is_string(topics.type)
            and len(code) == len(hashes) == len(keys) == qrels.num_rows
            and (not len(code) or (0 <= code.min() and code.max() < len(topics)))
            and len(slots) >= 16
            and len(slots) & (len(slots) - 1) == 0
            and (not len(slots) or (-1 <= slots.min() and slots.max() < len(keys)))
            and 1 <= probes <= len(slots)
            and code.dtype == np.int64
            and hashes.dtype == keys.dtype == np.uint64
            and slots.dtype == np.int64
        )
    except (KeyError, ValueError, TypeError, pa.ArrowException):
        return False
    if not fits:
        return False
    _last_topics = (qrels["topic"], _column_key(qrels["topic"]), (topics, code))
    judged = _JudgedDocs(qrels["doc"])
    judged.__dict__["hashes"] = hashes  # the cached_property's value
    judged.pairs[_column_key(qrels["topic"])] = (qrels["topic"], KeyIndex.restored(keys, slots, probes, bool(distinct)))
    _last_judged[:] = [(qrels["doc"], _column_key(qrels["doc"]), judged)]
    return True


def _judged_rows(
    docs: pa.ChunkedArray,
    topic_row: np.ndarray,
    codes: np.ndarray,
    qrels: pa.Table,
    resolved: _Topics,
    doc_keys: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """The run rows the qrels judge for their (evaluated) topic, and their relevance codes (the
    level, or UNJUDGED for a negative one). Not pyarrow's hash join: it loads pyarrow.dataset and
    pandas (0.16 s of an ordinary run's start-up) and joins every row.

    An ordinary run's (topic, docno) pairs are looked up by 64-bit key among the judgments'
    (:func:`_judged_rows_by_pair`): hashed in numpy, where pyarrow's hashing of the text took 40-80
    ms of a fresh process for robust03's 100k rows and 128k judgments. A large run's docnos are
    looked up as text (hashing 7M docnos first cost more than it saved), and so are any run's when
    two judgments share a key: the rows holding a judged docno, then those few matched by (topic
    row, docno code) integer pairs."""
    judged = _judged_docs(qrels)
    if len(docs) < HASHED_LOOKUP_ROWS and (pairs := _judgment_pairs(judged, qrels, resolved)) is not None:
        keys = doc_hashes(docs) if doc_keys is None else doc_keys.copy()
        return _judged_rows_by_pair(docs, topic_row, codes, qrels, resolved, pairs, keys)
    width = len(judged.values)
    # which rows hold a judged docno (a bit a row), then the codes of those few: index_in over
    # every row answered 4 bytes a row, and its joined copy another 4
    member = pc.is_in(docs, value_set=judged.values)
    candidates = np.flatnonzero(member.to_numpy(zero_copy_only=False)) if len(docs) else np.zeros(0, np.int64)
    if not len(candidates) or not width:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int32)
    qrels_key, judgment = _sorted_judgment_keys(judged, resolved, width)
    if not len(judgment):
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int32)
    found = pc.index_in(take_rows(docs, candidates), value_set=judged.values)
    doc_code = found.to_numpy(zero_copy_only=False).astype(np.int64)
    # a row of a topic that is not evaluated has row -1: a negative key, never a judgment's
    key = topic_row[codes[candidates]].astype(np.int64) * width + doc_code
    low = np.searchsorted(qrels_key, key)
    if (qrels_key[1:] != qrels_key[:-1]).all():  # one judgment a key (nearly always)
        size = (qrels_key[np.minimum(low, len(qrels_key) - 1)] == key).astype(np.int64)
    else:
        size = np.searchsorted(qrels_key, key, side="right") - low
    # each run row with every judgment of its key (one, but for a judgment given twice)
    owner = np.repeat(np.arange(len(candidates)), size)
    run_row = candidates[owner]
    pair_judgment = judgment[low[owner] + positions_within_groups(owner) - 1]
    run_row, first = np.unique(run_row, return_index=True)  # each row's first judgment
    levels = qrels["relevance"].to_numpy()[pair_judgment[first]]
    return run_row, np.where(levels < 0, UNJUDGED, levels).astype(np.int32)


def _judged_rows_by_pair(
    docs: pa.ChunkedArray,
    topic_row: np.ndarray,
    codes: np.ndarray,
    qrels: pa.Table,
    resolved: _Topics,
    pairs: KeyIndex,
    doc_keys: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_judged_rows` for an ordinary run against qrels that judge each (topic, docno) once:
    each row's (topic, docno) key is looked up among the judgments' in one pass. A key found is a
    candidate, confirmed on the judgment's topic code and docno text. A campaign's runs share the
    index (the qrels side is built once): ~2 ms a robust03 run where the two-step look-up took ~8."""
    code = resolved.code[codes]  # each row's topic as a qrels topic code, -1 where the qrels lack it
    judgment = pairs.find(with_topics(doc_keys, np.maximum(code, 0)))  # doc_keys made pair keys in place
    run_row = np.flatnonzero((judgment >= 0) & (topic_row[codes] >= 0))
    judgment = judgment[run_row]
    same_topic = resolved.judgment_code[judgment] == code[run_row]
    run_row, judgment = run_row[same_topic], judgment[same_topic]
    same_doc = pc.equal(take_rows(docs, run_row), take_rows(qrels["doc"], judgment)).to_numpy(zero_copy_only=False)
    run_row, judgment = run_row[same_doc], judgment[same_doc]
    levels = qrels["relevance"].to_numpy()[judgment]
    return run_row, np.where(levels < 0, UNJUDGED, levels).astype(np.int32)


def _sorted_judgment_keys(judged: _JudgedDocs, resolved: _Topics, width: int) -> tuple[np.ndarray, np.ndarray]:
    """The evaluated topics' judgments as sorted keys row * width + docno code, and which judgment
    each is; kept for the last topic rows seen (sorting 128k judgments took ~5 ms of each run)."""
    memo = resolved.row_of.tobytes()
    if memo in judged.sorted_keys:
        return judged.sorted_keys[memo]
    qrels_row = resolved.row_of[resolved.judgment_code]
    kept = np.flatnonzero(qrels_row >= 0)
    qrels_key = qrels_row[kept] * width + judged.codes[kept]
    order = np.argsort(qrels_key, kind="stable")  # a (topic, docno) judged twice: in file order
    judged.sorted_keys.clear()
    judged.sorted_keys[memo] = (qrels_key[order], kept[order])
    return judged.sorted_keys[memo]


def _relevance_levels(qrels: pa.Table, code: np.ndarray, row_of: np.ndarray, n: int) -> tuple[np.ndarray, int]:
    relevance = qrels["relevance"].to_numpy()
    rows = row_of[code]
    judged = (relevance >= 0) & (rows >= 0)
    max_level = int(relevance.max()) if len(relevance) else 0
    levels = max(max_level, 0) + 1
    flat = rows[judged] * levels + relevance[judged]
    counts = np.bincount(flat, minlength=n * levels).reshape(n, levels) if n else np.zeros((0, levels), np.int64)
    return counts.astype(np.int64), max_level


def attach_known(rk: Ranking, known: Ranking) -> None:
    """Give ``rk`` what the user knew: ``known`` is the same ranking prepared against the qrels of
    the documents the user already knew (relevance above 0 counts as known)."""
    rows = {topic: i for i, topic in enumerate(rk.topics)}
    mapped = np.array([rows.get(topic, -1) for topic in known.topics], dtype=np.int64)
    relevant = np.zeros(rk.n, dtype=np.int64)
    present = mapped >= 0
    relevant[mapped[present]] = known.rel_levels[present, 1:].sum(axis=1)
    entries = (known.judged_rel >= 1) & present[known.judged_row]
    rk.known = Known(relevant, mapped[known.judged_row[entries]], known.judged_position[entries])
