"""Judging pools: which documents to judge, in which order, and how assessors agree.

Pure functions over Arrow/pandas tables (no database; :mod:`evalstore.services.pools` stores the
results). Runs are always read in trec_eval order (score descending, then docno descending),
never by their rank column.

Strategies:

- ``depth``: the union of every run's top ``depth`` (the classic TREC pool), judged by best rank;
- ``rrf`` / ``rbp``: every candidate weighted by the sum over runs of reciprocal-rank-fusion
  weight 1/(60 + rank), or of rank-biased-precision weight (1 - p) p^(rank - 1) (Lipani et al.),
  judged heaviest first, ``budget`` per topic;
- ``mtf``: move-to-front (Cormack, Palmer & Clarke 1998): keep judging from the run whose last
  document was relevant, send a run to the back of the queue when it gives a non-relevant one;
- ``bandit``: runs are arms of a Bernoulli bandit (Losada, Parapar & Barreiro 2016/2017); MaxMean
  pulls the arm with the highest posterior mean (rel + 1) / (judged + 2), Thompson sampling draws
  from each arm's Beta posterior (seeded).

The adaptive strategies (mtf, bandit) need relevance feedback: ``judging_order`` takes an oracle
(known qrels for ``pool simulate``, the judgments made so far for a live pool; unknown documents
count as non-relevant, so a fresh pool gets the strategy's order before any feedback).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from evalstore.trec_order import positions_within_groups, trec_rank

STRATEGIES = ("depth", "rrf", "rbp", "mtf", "bandit")
BANDIT_POLICIES = ("maxmean", "thompson")
RRF_K = 60

# (topic, doc) -> relevance, or None when unknown
Oracle = Callable[[str, str], int | None]


CANDIDATES = pa.schema([("topic", pa.string()), ("doc", pa.string()), ("rank", pa.int32()), ("run", pa.int32())])


def candidates(runs: dict[str, pa.Table], depth: int | None, topics: list[str] | None = None) -> pa.Table:
    """Every (topic, doc, rank, run) the runs (topic, doc, score) retrieve within ``depth`` in
    trec_eval order, runs as codes in the order given. Stored runs are read this way by
    :func:`evalstore.db.repositories.top_ranked` instead, which filters in the database."""
    frames = []
    for index, table in enumerate(runs.values()):
        rank = trec_rank(table)
        keep = np.ones(len(rank), dtype=bool) if depth is None else rank <= depth
        if topics is not None:
            keep &= pc.is_in(table["topic"], value_set=pa.array(topics, pa.string())).to_numpy(zero_copy_only=False)
        kept = table.filter(pa.array(keep))
        frames.append(
            pa.table(
                {
                    "topic": kept["topic"],
                    "doc": kept["doc"],
                    "rank": pa.array(rank[keep]),
                    "run": pa.array(np.full(kept.num_rows, index, np.int32)),
                },
                schema=CANDIDATES,
            )
        )
    return pa.concat_tables(frames) if frames else CANDIDATES.empty_table()


@dataclass(frozen=True)
class PoolSettings:
    strategy: str
    depth: int | None
    budget: int | None  # judgments per topic; None: the whole candidate set
    seed: int | None = None
    rbp_p: float = 0.8
    bandit_policy: str = "maxmean"


@dataclass(frozen=True)
class _Pairs:
    """The distinct (topic, doc) pairs of a candidate table as integer codes, so grouping and
    ordering are numpy sorts over integers (pyarrow's group_by over the two string keys took
    2.4 s, and pandas' 3 s, for the 2.5M candidates of a 100-run depth-100 pool)."""

    of_candidate: np.ndarray  # per candidate row: its pair
    topic: np.ndarray  # per pair: topic code, codes in byte order of the topics
    doc: np.ndarray  # per pair: doc code, codes in byte order of the docs
    topics: pa.Array  # topic code -> topic
    docs: pa.Array  # doc code -> doc

    @classmethod
    def of(cls, cands: pa.Table) -> _Pairs:
        topic_codes, topics = _sorted_codes(cands["topic"])
        doc_codes, docs = _sorted_codes(cands["doc"])
        pair_keys = topic_codes * max(len(docs), 1) + doc_codes
        keys, of_candidate = np.unique(pair_keys, return_inverse=True)
        return cls(of_candidate.ravel(), keys // max(len(docs), 1), keys % max(len(docs), 1), topics, docs)

    def table(self, rows: np.ndarray) -> pa.Table:
        return pa.table(
            {"topic": self.topics.take(pa.array(self.topic[rows])), "doc": self.docs.take(pa.array(self.doc[rows]))}
        )


def _sorted_codes(column: pa.ChunkedArray) -> tuple[np.ndarray, pa.Array]:
    """Codes whose order is the values' byte order (trec_eval compares docnos with strcmp)."""
    encoded = pc.dictionary_encode(column).combine_chunks()
    values = encoded.dictionary
    order = pc.sort_indices(values).to_numpy()
    rank_of = np.empty(len(order), dtype=np.int64)
    rank_of[order] = np.arange(len(order))
    return rank_of[encoded.indices.to_numpy(zero_copy_only=False)], values.take(pa.array(order))


def build(cands: pa.Table, run_names: list[str], settings: PoolSettings, oracle: Oracle | None = None) -> pa.Table:
    """The pool: one row per (topic, doc) with ``best_rank``, ``contributors`` (run names, in the
    order given) and ``judge_order`` (1-based within the topic), ``budget`` per topic; sorted by
    topic, then judging order."""
    if settings.strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {settings.strategy!r}; choose one of {', '.join(STRATEGIES)}")
    pairs = _Pairs.of(cands)
    runs = cands["run"].to_numpy().astype(np.int64)
    ranks = cands["rank"].to_numpy().astype(np.int64)
    best_rank = _best_rank(pairs, ranks)
    # candidates by pair, then run: each pair's contributors in the order the runs were given
    by_pair = np.lexsort((runs, pairs.of_candidate))
    starts = np.flatnonzero(np.r_[True, np.diff(pairs.of_candidate[by_pair]) != 0])
    offsets = np.r_[starts, len(by_pair)].astype(np.int32)
    contributors = pa.ListArray.from_arrays(
        pa.array(offsets), pa.array(run_names, pa.string()).take(pa.array(runs[by_pair]))
    )
    judge_order = _pair_order(pairs, cands, ranks, best_rank, settings, oracle)
    kept = np.flatnonzero(judge_order > 0) if settings.budget is not None else np.arange(len(judge_order))
    # order's missing entries (0, past the budget) sort last within their topic
    rows = kept[
        np.lexsort((np.where(judge_order[kept] > 0, judge_order[kept], np.iinfo(np.int64).max), pairs.topic[kept]))
    ]
    return (
        pairs.table(rows)
        .append_column("contributors", contributors.take(pa.array(rows)))
        .append_column("best_rank", pa.array(best_rank[rows]))
        .append_column("judge_order", pa.array(judge_order[rows], pa.int64(), mask=judge_order[rows] <= 0))
    )


def _best_rank(pairs: _Pairs, ranks: np.ndarray) -> np.ndarray:
    """Each pair's best (lowest) rank over the runs that retrieved it."""
    best = np.full(len(pairs.topic), np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(best, pairs.of_candidate, ranks)
    return best


def _pair_order(
    pairs: _Pairs,
    cands: pa.Table,
    ranks: np.ndarray,
    best_rank: np.ndarray,
    settings: PoolSettings,
    oracle: Oracle | None,
) -> np.ndarray:
    """Each pair's 1-based judging order within its topic; 0 past the budget."""
    if settings.strategy in ("depth", "rrf", "rbp"):
        n = len(pairs.topic)
        key: np.ndarray
        if settings.strategy == "depth":
            key = best_rank.astype(np.float64)
        else:
            rank = ranks.astype(np.float64)
            weight = (
                1.0 / (RRF_K + rank)
                if settings.strategy == "rrf"
                else (1 - settings.rbp_p) * settings.rbp_p ** (rank - 1)
            )
            key = -np.bincount(pairs.of_candidate, weights=weight, minlength=n)
        # heaviest (or best-ranked) first; equal keys by docno descending, as trec_eval breaks ties
        ordered = np.lexsort((-pairs.doc, key, pairs.topic))
        position = positions_within_groups(pairs.topic[ordered]).astype(np.int64)
        if settings.budget is not None:
            position = np.where(position <= settings.budget, position, 0)
        order = np.empty(n, dtype=np.int64)
        order[ordered] = position
        return order
    adaptive = judging_order(cands, settings, oracle)
    lookup = pd.MultiIndex.from_frame(pairs.table(np.arange(len(pairs.topic))).to_pandas())
    order = np.zeros(len(pairs.topic), dtype=np.int64)
    order[lookup.get_indexer(pd.MultiIndex.from_frame(adaptive[["topic", "doc"]]))] = adaptive["judge_order"]
    return order


def judging_order(cands: pa.Table, settings: PoolSettings, oracle: Oracle | None = None) -> pd.DataFrame:
    """(topic, doc, judge_order) for the first ``budget`` documents of each topic."""
    if settings.strategy in ("depth", "rrf", "rbp"):
        pairs = _Pairs.of(cands)
        ranks = cands["rank"].to_numpy().astype(np.int64)
        order = _pair_order(pairs, cands, ranks, _best_rank(pairs, ranks), settings, oracle)
        chosen = np.flatnonzero(order > 0)
        chosen = chosen[np.lexsort((order[chosen], pairs.topic[chosen]))]
        return pairs.table(chosen).to_pandas().assign(judge_order=order[chosen])
    rng = np.random.default_rng(settings.seed)
    rows: list[tuple[str, str, int]] = []
    frame = cands.to_pandas()
    for topic, group in frame.groupby("topic", sort=True):
        # adaptive: each judgment decides the next one, so this loop is sequential by nature
        # (one step per judgment, over a handful of runs); the lists are built once per topic
        ordered = group.sort_values(["run", "rank"], kind="stable")
        lists = [docs.tolist() for _, docs in ordered.groupby("run", sort=True)["doc"]]
        sequence = (_move_to_front if settings.strategy == "mtf" else _bandit)(str(topic), lists, oracle, settings, rng)
        rows.extend((str(topic), doc, position + 1) for position, doc in enumerate(sequence))
    return pd.DataFrame(rows, columns=["topic", "doc", "judge_order"])


def _relevant(oracle: Oracle | None, topic: str, doc: str) -> bool:
    label = oracle(topic, doc) if oracle is not None else None
    return label is not None and label > 0


def _move_to_front(
    topic: str, lists: list[list[str]], oracle: Oracle | None, settings: PoolSettings, rng: np.random.Generator
) -> list[str]:
    budget = settings.budget if settings.budget is not None else sum(len(docs) for docs in lists)
    queue = list(range(len(lists)))  # runs, the current one at the front
    pointers = [0] * len(lists)
    judged: set[str] = set()
    sequence: list[str] = []
    while queue and len(sequence) < budget:
        run = queue[0]
        docs = lists[run]
        while pointers[run] < len(docs) and docs[pointers[run]] in judged:
            pointers[run] += 1
        if pointers[run] == len(docs):
            queue.pop(0)
            continue
        doc = docs[pointers[run]]
        pointers[run] += 1
        judged.add(doc)
        sequence.append(doc)
        if not _relevant(oracle, topic, doc):
            queue.append(queue.pop(0))  # a miss: to the back
    return sequence


def _bandit(
    topic: str, lists: list[list[str]], oracle: Oracle | None, settings: PoolSettings, rng: np.random.Generator
) -> list[str]:
    # One step per judgment over a handful of arms: plain Python lists, where numpy's per-call
    # overhead on arrays of a few elements was most of the time (a third of it is left). The
    # choices are the vectorised version's: the same float64 arithmetic, ties to the run named
    # first, and Thompson's draws from numpy as before.
    budget = settings.budget if settings.budget is not None else sum(len(docs) for docs in lists)
    arms = range(len(lists))
    thompson = settings.bandit_policy == "thompson"
    hits = [0.0] * len(lists)
    pulls = [0.0] * len(lists)
    pointers = [0] * len(lists)
    alive = [True] * len(lists)
    known: dict[str, bool] = {}
    sequence: list[str] = []
    while any(alive) and len(sequence) < budget:
        if thompson:
            draws = rng.beta(np.add(hits, 1), np.subtract(pulls, hits) + 1)
            arm = int(np.argmax(np.where(alive, draws, -np.inf)))
        else:  # max() keeps the first of equal scores: ties to the run named first
            arm = max((a for a in arms if alive[a]), key=lambda a: (hits[a] + 1) / (pulls[a] + 2))
        docs = lists[arm]
        if pointers[arm] == len(docs):
            alive[arm] = False
            continue
        doc = docs[pointers[arm]]
        pointers[arm] += 1
        if doc not in known:  # a document another run brought up is known already: a free update
            known[doc] = _relevant(oracle, topic, doc)
            sequence.append(doc)
        pulls[arm] += 1
        hits[arm] += known[doc]
    return sequence


# --- assessor agreement ----------------------------------------------------------------------


@dataclass(frozen=True)
class PairAgreement:
    first: str
    second: str
    items: int
    observed: float  # share of items with the same label
    kappa: float
    weighted_kappa: float | None  # linear weights, for graded labels
    quadratic_kappa: float | None  # quadratic weights, for graded labels


@dataclass(frozen=True)
class Agreement:
    assessors: list[str]
    labels: list[int]
    pairs: list[PairAgreement]
    items_all: int  # items every assessor judged (Fleiss' kappa is over these)
    fleiss_kappa: float | None
    items_any: int  # items judged by at least two assessors (Krippendorff's alpha uses them all)
    krippendorff_alpha: float | None  # ordinal: grades are ordered, their distances are not known
    krippendorff_by_level: dict[str, float | None]  # nominal, interval, ratio


def cohen_kappa(first: np.ndarray, second: np.ndarray, *, weights: str | None = None) -> float:
    """scikit-learn's Cohen's kappa (``weights`` linear or quadratic for graded labels); 1.0 when
    both assessors agree on every item and use one label only (sklearn returns nan there)."""
    from sklearn.metrics import cohen_kappa_score

    if len(first) and (first == second).all() and len(np.unique(first)) == 1:
        return 1.0
    return float(cohen_kappa_score(first, second, weights=weights))


def agreement(labels: pd.DataFrame) -> Agreement:
    """Agreement of assessors over ``labels`` (columns: item, assessor, label): Cohen's kappa for
    each pair over the items both judged (linearly weighted too when labels are graded), Fleiss'
    kappa (statsmodels) over the items all judged, Krippendorff's alpha (krippendorff) over
    everything, missing judgments allowed: ordinal, and at the nominal, interval and ratio levels."""
    import krippendorff
    from statsmodels.stats.inter_rater import aggregate_raters, fleiss_kappa

    wide = labels.pivot(index="item", columns="assessor", values="label")
    assessors = [str(a) for a in wide.columns]
    values = sorted(int(v) for v in pd.unique(labels["label"]))
    graded = len(values) > 2
    pairs = []
    for i, first in enumerate(assessors):
        for second in assessors[i + 1 :]:
            both = wide[[first, second]].dropna().to_numpy(dtype=int)
            if len(both) == 0:
                pairs.append(PairAgreement(first, second, 0, float("nan"), float("nan"), None, None))
                continue
            a, b = both[:, 0], both[:, 1]
            pairs.append(
                PairAgreement(
                    first,
                    second,
                    len(both),
                    float((a == b).mean()),
                    cohen_kappa(a, b),
                    cohen_kappa(a, b, weights="linear") if graded else None,
                    cohen_kappa(a, b, weights="quadratic") if graded else None,
                )
            )
    complete = wide.dropna().to_numpy(dtype=int)
    fleiss = None
    if len(assessors) >= 2 and len(complete):
        counts, _ = aggregate_raters(complete)
        with np.errstate(invalid="ignore", divide="ignore"):
            fleiss = float(fleiss_kappa(counts, method="fleiss"))
    shared = wide[wide.notna().sum(axis=1) >= 2]
    levels: tuple[Literal["ordinal", "nominal", "interval", "ratio"], ...] = ("ordinal", "nominal", "interval", "ratio")
    alphas: dict[str, float | None] = dict.fromkeys(levels)
    if len(shared) and len(values) > 1:
        for level in levels:
            alphas[level] = float(
                krippendorff.alpha(
                    reliability_data=shared.to_numpy(dtype=float).T, level_of_measurement=level, value_domain=values
                )
            )
    ordinal = alphas.pop("ordinal")
    return Agreement(assessors, values, pairs, len(complete), fleiss, len(shared), ordinal, alphas)
