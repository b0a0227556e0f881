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

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

STRATEGIES = ("depth", "rrf", "rbp", "mtf", "bandit")
BANDIT_POLICIES = ("maxmean", "thompson")
RRF_K = 60

# (topic, doc) -> relevance, or None when unknown
Oracle = Callable[[str, str], int | None]


def trec_ranked(run: pa.Table, depth: int | None = None) -> pa.Table:
    """(topic, doc, rank) of a run in trec_eval order, rank from 1 per topic, cut at ``depth``."""
    order = pc.sort_indices(run, sort_keys=[("topic", "ascending"), ("score", "descending"),
                                            ("doc", "descending")])
    topics = pc.take(run["topic"], order)
    docs = pc.take(run["doc"], order)
    codes = pc.dictionary_encode(topics).combine_chunks().indices.to_numpy(zero_copy_only=False)
    n = len(codes)
    starts = np.flatnonzero(np.r_[True, codes[1:] != codes[:-1]]) if n else np.zeros(0, dtype=np.int64)
    lengths = np.diff(np.r_[starts, n])
    rank = np.arange(n) - np.repeat(starts, lengths) + 1
    table = pa.table({"topic": topics, "doc": docs, "rank": pa.array(rank, pa.int32())})
    if depth is not None:
        table = table.filter(pa.array(rank <= depth))
    return table


def candidates(runs: dict[str, pa.Table], depth: int | None, topics: list[str] | None = None) -> pd.DataFrame:
    """Every (topic, doc, run, rank) the runs retrieve within ``depth``, runs as category codes in
    the order given."""
    frames = []
    for index, table in enumerate(runs.values()):
        ranked = trec_ranked(table, depth)
        if topics is not None:
            ranked = ranked.filter(pc.is_in(ranked["topic"], value_set=pa.array(topics, pa.string())))
        frame = ranked.to_pandas()
        frame["run"] = index
        frames.append(frame)
    frame = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["topic", "doc", "rank", "run"])
    return frame.astype({"topic": object, "doc": object})


@dataclass(frozen=True)
class PoolSettings:
    strategy: str
    depth: int | None
    budget: int | None  # judgments per topic; None: the whole candidate set
    seed: int | None = None
    rbp_p: float = 0.8
    bandit_policy: str = "maxmean"


def build(cands: pd.DataFrame, run_names: list[str], settings: PoolSettings,
          oracle: Oracle | None = None) -> pd.DataFrame:
    """The pool: one row per (topic, doc) with ``best_rank``, ``contributors`` (run names, in the
    order given) and ``judge_order`` (1-based within the topic), ``budget`` per topic."""
    if settings.strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {settings.strategy!r}; choose one of {', '.join(STRATEGIES)}")
    # pyarrow's hash aggregation: pandas' groupby with a Python lambda per (topic, doc) took 2 s
    # for a 50k-document pool
    grouped = pa.Table.from_pandas(cands[["topic", "doc", "rank", "run"]], preserve_index=False).group_by(
        ["topic", "doc"]).aggregate([("rank", "min"), ("run", "list")])
    pool = pd.DataFrame({"topic": grouped["topic"].to_numpy(zero_copy_only=False).astype(object),
                         "doc": grouped["doc"].to_numpy(zero_copy_only=False).astype(object),
                         "best_rank": grouped["rank_min"].to_numpy()})
    codes = pc.list_flatten(grouped["run_list"]).to_numpy()
    lengths = pc.list_value_length(grouped["run_list"]).to_numpy()
    # contributors in the order the runs were given (sorted codes), per row
    row = np.repeat(np.arange(len(lengths)), lengths)
    ordered = codes[np.lexsort((codes, row))]
    offsets = np.r_[0, np.cumsum(lengths)]
    names = np.asarray(run_names, dtype=object)[ordered]
    pool["contributors"] = pa.ListArray.from_arrays(pa.array(offsets, pa.int32()),
                                                    pa.array(names, pa.string())).to_pylist()
    order = judging_order(cands, settings, oracle)
    pool = pool.merge(order, on=["topic", "doc"], how="inner" if settings.budget is not None else "left")
    return pool.sort_values(["topic", "judge_order"], kind="stable").reset_index(drop=True)


def judging_order(cands: pd.DataFrame, settings: PoolSettings,
                  oracle: Oracle | None = None) -> pd.DataFrame:
    """(topic, doc, judge_order) for the first ``budget`` documents of each topic."""
    if settings.strategy in ("depth", "rrf", "rbp"):
        if settings.strategy == "depth":
            keyed = cands.groupby(["topic", "doc"], sort=False)["rank"].min().rename("key").reset_index()
        else:
            rank = cands["rank"].to_numpy(dtype=float)
            weight = (1.0 / (RRF_K + rank) if settings.strategy == "rrf"
                      else (1 - settings.rbp_p) * settings.rbp_p ** (rank - 1))
            keyed = (cands.assign(key=-weight).groupby(["topic", "doc"], sort=False)["key"].sum().reset_index())
        # heaviest (or best-ranked) first; equal keys by docno descending, as trec_eval breaks ties
        keyed = keyed.sort_values(["topic", "key", "doc"], ascending=[True, True, False], kind="stable")
        keyed["judge_order"] = keyed.groupby("topic", sort=False).cumcount() + 1
        if settings.budget is not None:
            keyed = keyed[keyed["judge_order"] <= settings.budget]
        return keyed[["topic", "doc", "judge_order"]]
    rng = np.random.default_rng(settings.seed)
    rows = []
    for topic, group in cands.groupby("topic", sort=True):
        # adaptive: each judgment decides the next one, so this loop is sequential by nature
        # (one step per judgment, over a handful of runs); the lists are built once per topic
        ordered = group.sort_values(["run", "rank"], kind="stable")
        lists = [docs.tolist() for _, docs in ordered.groupby("run", sort=True)["doc"]]
        sequence = (_move_to_front if settings.strategy == "mtf" else _bandit)(
            str(topic), lists, oracle, settings, rng)
        rows.extend((topic, doc, position + 1) for position, doc in enumerate(sequence))
    return pd.DataFrame(rows, columns=["topic", "doc", "judge_order"])


def _relevant(oracle: Oracle | None, topic: str, doc: str) -> bool:
    label = oracle(topic, doc) if oracle is not None else None
    return label is not None and label > 0


def _move_to_front(topic: str, lists: list[list[str]], oracle: Oracle | None, settings: PoolSettings,
                   rng: np.random.Generator) -> list[str]:
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


def _bandit(topic: str, lists: list[list[str]], oracle: Oracle | None, settings: PoolSettings,
            rng: np.random.Generator) -> list[str]:
    budget = settings.budget if settings.budget is not None else sum(len(docs) for docs in lists)
    arms = len(lists)
    hits = np.zeros(arms)
    pulls = np.zeros(arms)
    pointers = [0] * arms
    alive = np.ones(arms, dtype=bool)
    known: dict[str, bool] = {}
    sequence: list[str] = []
    while alive.any() and len(sequence) < budget:
        if settings.bandit_policy == "thompson":
            score = rng.beta(hits + 1, pulls - hits + 1)
        else:
            score = (hits + 1) / (pulls + 2)
        score = np.where(alive, score, -np.inf)
        arm = int(np.argmax(score))  # ties: the run named first
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


@dataclass(frozen=True)
class Agreement:
    assessors: list[str]
    labels: list[int]
    pairs: list[PairAgreement]
    items_all: int  # items every assessor judged (Fleiss' kappa is over these)
    fleiss_kappa: float | None
    items_any: int  # items judged by at least two assessors (Krippendorff's alpha uses them all)
    krippendorff_alpha: float | None


def cohen_kappa(first: np.ndarray, second: np.ndarray, *, weighted: bool = False) -> float:
    """scikit-learn's Cohen's kappa (linear weights when ``weighted``); 1.0 when both assessors
    agree on every item and use one label only (sklearn returns nan there)."""
    from sklearn.metrics import cohen_kappa_score

    if len(first) and (first == second).all() and len(np.unique(first)) == 1:
        return 1.0
    return float(cohen_kappa_score(first, second, weights="linear" if weighted else None))


def agreement(labels: pd.DataFrame) -> Agreement:
    """Agreement of assessors over ``labels`` (columns: item, assessor, label): Cohen's kappa for
    each pair over the items both judged (linearly weighted too when labels are graded), Fleiss'
    kappa (statsmodels) over the items all judged, Krippendorff's ordinal alpha (krippendorff) over
    everything, missing judgments allowed."""
    import krippendorff
    from statsmodels.stats.inter_rater import aggregate_raters, fleiss_kappa

    wide = labels.pivot(index="item", columns="assessor", values="label")
    assessors = [str(a) for a in wide.columns]
    values = sorted(int(v) for v in pd.unique(labels["label"]))
    graded = len(values) > 2
    pairs = []
    for i, first in enumerate(assessors):
        for second in assessors[i + 1:]:
            both = wide[[first, second]].dropna().to_numpy(dtype=int)
            if len(both) == 0:
                pairs.append(PairAgreement(first, second, 0, float("nan"), float("nan"), None))
                continue
            a, b = both[:, 0], both[:, 1]
            pairs.append(PairAgreement(first, second, len(both), float((a == b).mean()), cohen_kappa(a, b),
                                       cohen_kappa(a, b, weighted=True) if graded else None))
    complete = wide.dropna().to_numpy(dtype=int)
    fleiss = None
    if len(assessors) >= 2 and len(complete):
        counts, _ = aggregate_raters(complete)
        with np.errstate(invalid="ignore", divide="ignore"):
            fleiss = float(fleiss_kappa(counts, method="fleiss"))
    shared = wide[wide.notna().sum(axis=1) >= 2]
    alpha = None
    if len(shared) and len(values) > 1:
        alpha = float(krippendorff.alpha(reliability_data=shared.to_numpy(dtype=float).T,
                                         level_of_measurement="ordinal", value_domain=values))
    return Agreement(assessors, values, pairs, len(complete), fleiss, len(shared), alpha)
