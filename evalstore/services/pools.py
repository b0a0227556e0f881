"""TREC-style pools: build from stored runs, export to assessors, import their judgments, measure
agreement, turn judgments into qrels, check the qrels' reusability, replay strategies.

The strategies and agreement statistics are in :mod:`evalstore.statistics.pooling`; this module reads and
writes the store, one transaction per write.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import secrets
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from sqlalchemy import Engine, delete, func, insert, select, tuple_
from sqlalchemy.orm import Session

from evalstore.db import repositories as repo
from evalstore.db.models import Pool, PoolEntry, PoolJudgment, Run
from evalstore.db.session import read_only, unit_of_work
from evalstore.errors import ConflictError, EvaluationError, InputFormatError, InvalidParameterError, NotFoundError
from evalstore.io.formats import ParsedFile
from evalstore.io.judgments import TREC_UNJUDGED, read_judgments
from evalstore.metrics import evaluate, resolve_measures
from evalstore.services import store
from evalstore.statistics import pooling

RESOLUTIONS = ("majority", "max")
EXPORT_FORMATS = ("tsv", "csv", "trec")


@dataclass(frozen=True)
class PoolSummary:
    name: str
    strategy: str
    runs: list[str]
    topics: int
    documents: int
    judged: int
    assessors: list[str]
    params: dict[str, Any]
    seed: int | None

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["params"] = {k: v for k, v in self.params.items() if k != "runs"}  # listed once, under runs
        return out


def _name_taken(name: str) -> ConflictError:
    return ConflictError(f"A pool named '{name}' exists. Pass --replace to rebuild it (its judgments go with it), "
                         "or choose another --name.")


def _in_table(frame: pd.DataFrame, keys: pd.DataFrame) -> np.ndarray:
    """For each (topic, doc) row of ``frame``, whether ``keys`` holds the pair (a hash join, not a
    Python loop per row)."""
    index = pd.MultiIndex.from_frame(keys[["topic", "doc"]])
    return pd.MultiIndex.from_frame(frame[["topic", "doc"]]).isin(index)


def _runs(session: Session, run_names: list[str] | None) -> list[Run]:
    runs = repo.list_runs(session) if run_names is None else [repo.get_run(session, n) for n in run_names]
    if not runs:
        raise NotFoundError("No runs are registered. Register runs with 'evalstore runs register PATH --name NAME'.")
    return runs


def _read_runs(session: Session, run_names: list[str] | None) -> dict[str, pa.Table]:
    return {run.name: repo.run_table(session, run, for_evaluation=True) for run in _runs(session, run_names)}


def read_candidates(session: Session, runs: list[Run], depth: int | None, topics: list[str] | None) -> pa.Table:
    """Each run's top ``depth`` per topic (:data:`pooling.CANDIDATES`), read in trec_eval order
    from the stored ranks, runs coded by their position in ``runs``."""
    table = repo.top_ranked(session, [run.id for run in runs], depth, topics)
    ids = np.array([run.id for run in runs], dtype=np.int64)
    by_id = np.argsort(ids)
    codes = by_id[np.searchsorted(ids, table["run_id"].to_numpy(), sorter=by_id)]
    return pa.table({"topic": table["topic"], "doc": table["doc"], "rank": table["rank"],
                     "run": pa.array(codes.astype(np.int32))}, schema=pooling.CANDIDATES)


def _contributors_json(contributors: pa.ListArray | pa.ChunkedArray) -> pa.Array:
    """Each row's list of run names as JSON text, built column-wise by pyarrow (json.dumps per row
    took 4.6 s for a 1M-document pool)."""
    if isinstance(contributors, pa.ChunkedArray):
        contributors = contributors.combine_chunks()
    names = contributors.values
    distinct = pc.unique(names)
    escaped = pa.array([json.dumps(name)[1:-1] for name in distinct.to_pylist()], pa.string())
    quoted = escaped.take(pc.index_in(names, value_set=distinct))
    joined = pc.binary_join(pa.ListArray.from_arrays(contributors.offsets, quoted), '","')
    return pc.binary_join_element_wise("[\"", joined, "\"]", "")


def build_pool(engine: Engine, *, name: str, run_names: list[str] | None, strategy: str = "depth",
               depth: int | None = None, budget: int | None = None, topics: list[str] | None = None,
               seed: int | None = None, rbp_p: float = 0.8, bandit_policy: str = "maxmean",
               replace: bool = False, task: str | None = None) -> PoolSummary:
    """Build and store a pool from stored runs (all of them when ``run_names`` is None); ``task``
    records the shared task whose runs it pools (its organiser then manages the pool)."""
    if strategy not in pooling.STRATEGIES:
        raise InvalidParameterError(f"--strategy must be one of {', '.join(pooling.STRATEGIES)}, not '{strategy}'.")
    if strategy == "depth" and depth is None:
        depth = 100
    if strategy != "depth" and budget is None:
        raise InvalidParameterError(f"--strategy {strategy} orders the candidates; give --budget N (documents to "
                                    "judge per topic).")
    if bandit_policy not in pooling.BANDIT_POLICIES:
        raise InvalidParameterError(f"--policy must be one of {', '.join(pooling.BANDIT_POLICIES)}.")
    if not 0 < rbp_p < 1:
        raise InvalidParameterError(f"--rbp-p must be between 0 and 1, not {rbp_p}.")
    random = strategy == "bandit" and bandit_policy == "thompson"
    if random and seed is None:
        seed = secrets.randbits(31)
    with read_only(engine) as session:
        if not replace and session.scalar(select(Pool.id).where(Pool.name == name)) is not None:
            raise _name_taken(name)  # before reading the runs; checked again in the writing transaction
        runs = _runs(session, run_names)
        cands = read_candidates(session, runs, depth, topics)
    if cands.num_rows == 0:
        raise EvaluationError("The runs retrieve nothing for the chosen topics; check --topics.")
    settings = pooling.PoolSettings(strategy, depth, budget, seed if random else None, rbp_p, bandit_policy)
    run_names = [run.name for run in runs]
    pool_frame = pooling.build(cands, run_names, settings)
    params = {"runs": run_names, "depth": depth, "budget": budget, "topics": topics,
              **({"rbp_p": rbp_p} if strategy == "rbp" else {}),
              **({"policy": bandit_policy} if strategy == "bandit" else {}), **({"task": task} if task else {})}
    with unit_of_work(engine) as session:
        existing = session.scalar(select(Pool).where(Pool.name == name))
        if existing is not None:
            if not replace:
                raise _name_taken(name)
            session.execute(delete(PoolEntry).where(PoolEntry.pool_id == existing.id))  # no foreign key
            session.delete(existing)
            session.flush()
        pool = Pool(name=name, strategy=strategy, params=params, seed=settings.seed)
        session.add(pool)
        session.flush()
        entries = pa.table({
            "pool_id": pa.array(np.full(pool_frame.num_rows, pool.id, np.int64)),
            "topic": pool_frame["topic"], "doc": pool_frame["doc"],
            "contributors": _contributors_json(pool_frame["contributors"]),
            "best_rank": pool_frame["best_rank"], "judge_order": pool_frame["judge_order"],
        })
        # in primary-key order, so the index grows at its right edge (saves ~0.8 s of a 1M-entry COPY)
        entries = entries.take(pc.sort_indices(entries, sort_keys=[("topic", "ascending"), ("doc", "ascending")]))
        repo.copy_batches(session, "pool_entries", entries.to_batches(max_chunksize=repo.BATCH_ROWS))
    # a new pool has no judgments yet; counting its entries back in the database cost 0.5 s at 1M
    return PoolSummary(name, strategy, run_names, len(pc.unique(entries["topic"])), entries.num_rows, 0, [],
                       params, settings.seed)


def list_pools(engine: Engine) -> list[PoolSummary]:
    with read_only(engine) as session:
        names = list(session.scalars(select(Pool.name).order_by(Pool.name)))
    return [show_pool(engine, n) for n in names]


def show_pool(engine: Engine, name: str) -> PoolSummary:
    with read_only(engine) as session:
        pool = repo.get_pool(session, name)
        topics, documents = session.execute(
            select(func.count(func.distinct(PoolEntry.topic)), func.count()).where(PoolEntry.pool_id == pool.id)
        ).one()
        judged = session.scalar(select(func.count(func.distinct(PoolJudgment.topic + "\t" + PoolJudgment.doc)))
                                .where(PoolJudgment.pool_id == pool.id)) or 0
        assessors = list(session.scalars(select(PoolJudgment.assessor).where(PoolJudgment.pool_id == pool.id)
                                         .distinct().order_by(PoolJudgment.assessor)))
        return PoolSummary(pool.name, pool.strategy, list(pool.params["runs"]), int(topics), int(documents),
                           int(judged), assessors, dict(pool.params), pool.seed)


def _entries(session: Session, pool: Pool) -> pd.DataFrame:
    rows = session.execute(select(PoolEntry.topic, PoolEntry.doc, PoolEntry.contributors, PoolEntry.best_rank,
                                  PoolEntry.judge_order).where(PoolEntry.pool_id == pool.id)).all()
    frame = pd.DataFrame(rows, columns=["topic", "doc", "contributors", "best_rank", "judge_order"])
    frame = frame.astype({"topic": object, "doc": object})
    return frame.sort_values(["topic", "judge_order"], kind="stable").reset_index(drop=True)


def _judgments(session: Session, pool: Pool) -> pd.DataFrame:
    """The pool's labels; a document an assessor skipped as not rateable (relevance -1) is no label."""
    rows = session.execute(select(PoolJudgment.topic, PoolJudgment.doc, PoolJudgment.assessor,
                                  PoolJudgment.relevance).where(PoolJudgment.pool_id == pool.id,
                                                                PoolJudgment.relevance >= 0)).all()
    frame = pd.DataFrame(rows, columns=["topic", "doc", "assessor", "relevance"])
    return frame.astype({"topic": object, "doc": object, "assessor": object})


# --- statistics ------------------------------------------------------------------------------


@dataclass(frozen=True)
class PoolStats:
    per_topic: list[dict[str, Any]]  # topic, documents, judged, relevant (any assessor's max label > 0)
    per_run: list[dict[str, Any]]  # run, contributed, unique, judged@k


def pool_stats(engine: Engine, name: str, *, k: int = 10) -> PoolStats:
    with read_only(engine) as session:
        pool = repo.get_pool(session, name)
        entries = _entries(session, pool)
        judgments = _judgments(session, pool)
        runs = _runs(session, list(pool.params["runs"]))
        pool_topics = sorted(entries["topic"].unique())
        tops = read_candidates(session, runs, k, pool_topics).to_pandas()
    best = judgments.groupby(["topic", "doc"])["relevance"].max().reset_index()
    labelled = entries[["topic", "doc"]].merge(best, on=["topic", "doc"], how="left")
    per_topic = [{"topic": topic, "documents": int(len(group)), "judged": int(group["relevance"].notna().sum()),
                  "relevant": int((group["relevance"] > 0).sum())}
                 for topic, group in labelled.groupby("topic", sort=True)]
    exploded = entries[["topic", "doc", "contributors"]].explode("contributors")
    contributed = exploded.groupby("contributors").size()
    unique = entries[entries["contributors"].map(len) == 1].explode("contributors").groupby("contributors").size()
    judged = pd.Series(_in_table(tops, best), index=tops.index)
    # share of each run's top k judged, averaged over the pool's topics (a topic it misses counts 0)
    judged_per_run = judged.groupby(tops["run"]).sum() / (k * len(pool_topics)) if pool_topics else judged
    per_run = [{"run": run.name, "contributed": int(contributed.get(run.name, 0)),
                "unique": int(unique.get(run.name, 0)), f"judged@{k}": float(judged_per_run.get(code, 0.0))}
               for code, run in enumerate(runs)]
    return PoolStats(per_topic, per_run)


# --- export and judgments --------------------------------------------------------------------


def export_pool(engine: Engine, name: str, path: Path | None, *, fmt: str = "tsv", shuffle: bool = False,
                seed: int | None = None) -> tuple[str, int | None]:
    """Assessor sheets: one row per pooled document, in judging order (or shuffled within each
    topic, seeded, so assessors cannot infer rank). Returns the text and the seed used."""
    if fmt not in EXPORT_FORMATS:
        raise InvalidParameterError(f"--format must be one of {', '.join(EXPORT_FORMATS)}, not '{fmt}'.")
    if shuffle and seed is None:
        seed = secrets.randbits(31)
    with read_only(engine) as session:
        entries = _entries(session, repo.get_pool(session, name))
    if shuffle:
        rng = np.random.default_rng(seed)
        entries = entries.assign(key=rng.random(len(entries))).sort_values(["topic", "key"], kind="stable")
    text = _sheet(entries, fmt)
    if path is not None:
        path.write_text(text)
    return text, seed if shuffle else None


def _sheet(entries: pd.DataFrame, fmt: str) -> str:
    """An assessor sheet of (topic, doc) rows: TSV/CSV with an empty relevance column, or TREC
    qrels lines with relevance -1 (pooled, not judged)."""
    buffer = io.StringIO()
    if fmt == "trec":
        for topic, doc in zip(entries["topic"], entries["doc"], strict=True):
            buffer.write(f"{topic} 0 {doc} {TREC_UNJUDGED}\n")
    else:
        writer = csv.writer(buffer, delimiter="\t" if fmt == "tsv" else ",", lineterminator="\n")
        writer.writerow(["topic", "doc", "relevance"])
        writer.writerows([t, d, ""] for t, d in zip(entries["topic"], entries["doc"], strict=True))
    return buffer.getvalue()


@dataclass(frozen=True)
class NextBatch:
    documents: pd.DataFrame  # topic, doc, judge_order: added to the pool, to be judged next
    judged: int  # documents with a resolved label when the batch was chosen
    relevant: int
    sheet: str


def next_batch(engine: Engine, name: str, *, count: int, path: Path | None = None, fmt: str = "tsv",
               resolve: str = "majority") -> NextBatch:
    """The online loop of a pool: replay its strategy with the judgments made so far as feedback
    and add, per topic, the next ``count`` documents it would judge that are not in the pool yet
    (one transaction), returned as an assessor sheet.

    Move-to-front and the bandit stay with the runs that have paid off in the labels imported so
    far; documents already handed out but not judged yet count as non-relevant in the replay, so
    the whole batch is the strategy's choice when none of them turns out relevant (exact for
    ``count`` 1). For depth, RRF and RBP the order is fixed and the batch is its continuation.
    """
    if count < 1:
        raise InvalidParameterError("--count must be at least 1 (documents per topic).")
    if fmt not in EXPORT_FORMATS:
        raise InvalidParameterError(f"--format must be one of {', '.join(EXPORT_FORMATS)}, not '{fmt}'.")
    with read_only(engine) as session:
        pool = repo.get_pool(session, name)
        pool_id, strategy, params, seed = pool.id, pool.strategy, dict(pool.params), pool.seed
        entries = _entries(session, pool)
        judgments = _judgments(session, pool)
        runs = _runs(session, list(params["runs"]))
        cands = read_candidates(session, runs, params.get("depth"), sorted(entries["topic"].unique()))
    labels = resolve_labels(judgments, resolve) if not judgments.empty else pd.Series(dtype=int)
    known = {key: int(value) for key, value in labels.items()}
    settings = pooling.PoolSettings(strategy, params.get("depth"), None, seed, params.get("rbp_p", 0.8),
                                    params.get("policy", "maxmean"))
    order = pooling.judging_order(cands, settings, oracle=lambda t, d: known.get((t, d)))
    fresh = order[~_in_table(order, entries)]
    fresh = fresh.groupby("topic", sort=False).head(count)
    if fresh.empty:
        raise EvaluationError(f"Pool '{name}' holds every document its runs offer "
                              f"({'to depth ' + str(params['depth']) if params.get('depth') else 'at any depth'}); "
                              "nothing is left to judge. Build a deeper pool to go on.")
    # contributors and best rank of the new documents, as pool build gives them
    offered = cands.filter(pa.array(_in_table(cands.select(["topic", "doc"]).to_pandas(), fresh)))
    details = pooling.build(offered, [run.name for run in runs], pooling.PoolSettings("depth", None, None))
    details = details.to_pandas().set_index(["topic", "doc"]).loc[pd.MultiIndex.from_frame(fresh[["topic", "doc"]])]
    last = entries.groupby("topic")["judge_order"].max()
    within = fresh.groupby("topic", sort=False).cumcount().to_numpy() + 1
    added = pd.DataFrame({"topic": fresh["topic"].to_numpy(), "doc": fresh["doc"].to_numpy(),
                          "judge_order": fresh["topic"].map(last).fillna(0).to_numpy(np.int64) + within})
    with unit_of_work(engine) as session:
        if session.scalar(select(Pool.id).where(Pool.id == pool_id)) is None:
            raise NotFoundError(f"Pool '{name}' was deleted while the next batch was chosen.")
        session.execute(insert(PoolEntry), [
            {"pool_id": pool_id, "topic": t, "doc": d, "judge_order": int(o), "best_rank": int(b),
             "contributors": list(c)}
            for t, d, o, b, c in zip(added["topic"], added["doc"], added["judge_order"],
                                     details["best_rank"], details["contributors"], strict=True)])
    sheet = _sheet(added, fmt)
    if path is not None:
        path.write_text(sheet)
    return NextBatch(added, len(known), sum(1 for v in known.values() if v > 0), sheet)


def import_judgments(engine: Engine, path: Path, *, pool_name: str, assessor: str,
                     allow_outside_pool: bool = False) -> int:
    """Store one assessor's judgments for the pool, whole or not at all, beside the assessor's
    earlier ones. A document judged again by the same assessor takes the new label; two different
    labels in one file are refused."""
    rows = read_judgments(path)
    seen: dict[tuple[str, str], tuple[int, int]] = {}
    for line, topic, doc, label in rows:
        previous = seen.get((topic, doc))
        if previous is not None and previous[1] != label:
            raise InputFormatError(str(path), line, f"topic {topic} doc {doc} is labelled {label} here and "
                                                    f"{previous[1]} at line {previous[0]}; keep one label")
        seen[(topic, doc)] = (line, label)
    with unit_of_work(engine) as session:
        pool = repo.get_pool(session, pool_name)
        if not allow_outside_pool:
            pooled = {(topic, doc) for topic, doc in session.execute(
                select(PoolEntry.topic, PoolEntry.doc).where(PoolEntry.pool_id == pool.id))}
            for (topic, doc), (line, _) in seen.items():
                if (topic, doc) not in pooled:
                    raise InputFormatError(str(path), line, f"topic {topic} doc {doc} is not in pool '{pool_name}'; "
                                                            "pass --allow-outside-pool to keep it anyway")
        # judgments arrive in batches (pool next): a file adds to the assessor's earlier ones and
        # relabels only the documents it names
        keys = list(seen)
        for start in range(0, len(keys), 500):
            session.execute(delete(PoolJudgment).where(
                PoolJudgment.pool_id == pool.id, PoolJudgment.assessor == assessor,
                tuple_(PoolJudgment.topic, PoolJudgment.doc).in_(keys[start:start + 500])))
        if seen:
            session.execute(insert(PoolJudgment), [
                {"pool_id": pool.id, "topic": t, "doc": d, "assessor": assessor, "relevance": label}
                for (t, d), (_, label) in seen.items()])
    return len(seen)


def pool_agreement(engine: Engine, name: str) -> pooling.Agreement:
    with read_only(engine) as session:
        judgments = _judgments(session, repo.get_pool(session, name))
    if judgments["assessor"].nunique() < 2:
        raise EvaluationError(f"Pool '{name}' has judgments from fewer than two assessors; import another "
                              "assessor's with 'evalstore judgments import PATH --pool "
                              f"{name} --assessor NAME'.")
    labels = pd.DataFrame({"item": judgments["topic"] + "\t" + judgments["doc"],
                           "assessor": judgments["assessor"], "label": judgments["relevance"]})
    return pooling.agreement(labels)


@dataclass(frozen=True)
class Disagreement:
    """Assessors who labelled one pooled document differently, and what that does to the system
    ranking: ``swaps`` run pairs change order by mean ``measure`` between the lowest and the
    highest label (the other documents keep their resolved labels); ``largest_change`` is the
    largest change of a run's mean."""

    topic: str
    doc: str
    labels: dict[str, int]  # assessor -> label
    swaps: int
    largest_change: float


def disagreements(engine: Engine, name: str, *, measure: str = "AP") -> tuple[list[Disagreement], int]:
    """The pool's disagreements, those that change the ranking of its runs most first, and the
    number of run pairs. Each one is scored by evaluating every run on its topic under each label:
    one engine call over (variant, run, topic) pseudo-topics, not a loop of evaluations."""
    [chosen] = resolve_measures([measure])
    with read_only(engine) as session:
        pool = repo.get_pool(session, name)
        judgments = _judgments(session, pool)
        runs = _runs(session, list(pool.params["runs"]))
        topics = sorted(judgments["topic"].unique())
        cands = read_candidates(session, runs, None, topics).to_pandas() if topics else None
    labels_per_item = judgments.groupby(["topic", "doc"])["relevance"]
    spread = labels_per_item.agg(["min", "max"])
    split = spread[spread["min"] != spread["max"]]
    pairs = len(runs) * (len(runs) - 1) // 2
    if split.empty or cands is None:
        return [], pairs
    base = resolve_labels(judgments, "majority").rename("relevance").reset_index()
    # variants: 0 is the resolved labels on every topic; 2i+1 and 2i+2 the i-th disagreement's
    # topic with its document at the lowest and at the highest label
    variant_topics: list[tuple[int, str, str | None, int | None]] = [(0, t, None, None) for t in topics]
    for i, (topic, doc, low, high) in enumerate(zip(split.index.get_level_values(0), split.index.get_level_values(1),
                                                     split["min"], split["max"], strict=True)):
        variant_topics += [(2 * i + 1, topic, doc, int(low)), (2 * i + 2, topic, doc, int(high))]
    variants = pd.DataFrame(variant_topics, columns=["variant", "topic", "doc", "label"])
    qrels = variants[["variant", "topic"]].merge(base, on="topic")
    changed = qrels.merge(variants.dropna(subset=["doc"]), on=["variant", "topic", "doc"], how="left")["label"]
    qrels["relevance"] = changed.fillna(qrels["relevance"]).astype(np.int64).to_numpy()
    ranked = variants[["variant", "topic"]].merge(cands, on="topic")
    run_names = {i: run.name for i, run in enumerate(runs)}

    def key(frame: pd.DataFrame, run: pd.Series) -> pa.Array:
        return pa.array(frame["variant"].astype(str) + "\t" + run.astype(str) + "\t" + frame["topic"], pa.string())

    qrels_per_run = qrels.merge(pd.DataFrame({"run": list(run_names)}), how="cross")
    result = evaluate(
        pa.table({"topic": key(qrels_per_run, qrels_per_run["run"]), "doc": pa.array(qrels_per_run["doc"], pa.string()),
                  "relevance": pa.array(qrels_per_run["relevance"].to_numpy())}),
        pa.table({"topic": key(ranked, ranked["run"]), "doc": pa.array(ranked["doc"], pa.string()),
                  "score": pa.array(-ranked["rank"].to_numpy(np.float64))}),
        [chosen], missing_topics="zero")
    values = result.per_query[result.per_query["measure"] == str(chosen)]
    parts = values["query_id"].str.split("\t", expand=True)
    scores = pd.DataFrame({"variant": parts[0].astype(int), "run": parts[1].astype(int), "topic": parts[2],
                           "value": values["value"].to_numpy(float)})
    base_scores = scores[scores["variant"] == 0].pivot(index="run", columns="topic", values="value")
    base_scores = base_scores.reindex(index=list(run_names), columns=topics).fillna(0.0)
    means = base_scores.mean(axis=1).to_numpy()
    by_variant = (scores[scores["variant"] > 0].pivot(index="variant", columns="run", values="value")
                  .reindex(columns=list(run_names)).fillna(0.0))
    found = []
    for i, (topic, doc) in enumerate(split.index):
        before = base_scores[topic].to_numpy()
        low = means + (by_variant.loc[2 * i + 1].to_numpy() - before) / len(topics)
        high = means + (by_variant.loc[2 * i + 2].to_numpy() - before) / len(topics)
        order_low = np.sign(low[:, None] - low[None, :])
        order_high = np.sign(high[:, None] - high[None, :])
        swaps = int((order_low != order_high).sum() // 2)
        item = judgments[(judgments["topic"] == topic) & (judgments["doc"] == doc)]
        found.append(Disagreement(topic, doc, dict(zip(item["assessor"], item["relevance"].astype(int), strict=True)),
                                  swaps, float(np.abs(high - low).max())))
    found.sort(key=lambda d: (-d.swaps, -d.largest_change, d.topic, d.doc))
    return found, pairs


# --- qrels -----------------------------------------------------------------------------------


def resolve_labels(judgments: pd.DataFrame, resolve: str) -> pd.Series:
    """One label per judged (topic, doc): the most frequent (ties: the higher label), the highest,
    or one assessor's (``assessor:NAME``)."""
    if resolve.startswith("assessor:"):
        who = resolve.removeprefix("assessor:")
        mine = judgments[judgments["assessor"] == who]
        if mine.empty:
            known = ", ".join(sorted(judgments["assessor"].unique())) or "none"
            raise InvalidParameterError(f"No judgments by assessor '{who}' in this pool (assessors: {known}).")
        return mine.set_index(["topic", "doc"])["relevance"]
    if resolve not in RESOLUTIONS:
        raise InvalidParameterError("--resolve must be majority, max or assessor:NAME.")
    grouped = judgments.groupby(["topic", "doc"])["relevance"]
    if resolve == "max":
        return grouped.max()
    return grouped.agg(lambda labels: max(Counter(labels.tolist()).items(), key=lambda kv: (kv[1], kv[0]))[0])


def pool_qrels(engine: Engine, name: str, *, qrels_name: str, resolve: str = "majority",
               replace: bool = False) -> Any:
    """Store the pool's judgments as qrels: the resolved label of every judged document, and
    relevance -1 (pooled, not judged) for the rest of the pool, so judged@k stays honest."""
    with read_only(engine) as session:
        pool = repo.get_pool(session, name)
        entries = _entries(session, pool)
        judgments = _judgments(session, pool)
    if judgments.empty:
        raise EvaluationError(f"Pool '{name}' has no judgments yet; import them with 'evalstore judgments import "
                              f"PATH --pool {name} --assessor NAME'.")
    labels = resolve_labels(judgments, resolve)
    keys = pd.MultiIndex.from_frame(entries[["topic", "doc"]])
    pooled = pd.Series(labels.reindex(keys).fillna(TREC_UNJUDGED).astype(int).to_numpy(), index=keys)
    outside = labels[~labels.index.isin(keys)]  # judged with --allow-outside-pool
    combined = pd.concat([pooled, outside]).sort_index()
    table = pa.table({
        "topic": pa.array([t for t, _ in combined.index], pa.string()),
        "iteration": pa.array(["0"] * len(combined), pa.string()),
        "doc": pa.array([d for _, d in combined.index], pa.string()),
        "relevance": pa.array(combined.to_numpy(np.int64)),
    })
    text = "".join(f"{t} 0 {d} {r}\n" for (t, d), r in combined.items())
    parsed = ParsedFile(table, hashlib.sha256(text.encode()).hexdigest(), None)
    return store.store_qrels(engine, parsed, name=qrels_name, source=f"pool:{name} ({resolve})",
                             description=f"judgments of pool '{name}', resolved by {resolve}", replace=replace)


# --- reusability and simulation --------------------------------------------------------------


def reusability(engine: Engine, *, qrels_name: str, pool_name: str, measures: list[str]) -> list[dict[str, Any]]:
    """Leave-one-run-out (Zobel 1998) over a stored pool: see :func:`leave_out`."""
    names = [str(m) for m in resolve_measures(measures)]
    with read_only(engine) as session:
        pool = repo.get_pool(session, pool_name)
        entries = _entries(session, pool)
        qrels = repo.qrels_table(session, repo.get_qrels(session, qrels_name)).to_pandas()
        runs = _read_runs(session, list(pool.params["runs"]))
    qrels = qrels.astype({"topic": object, "doc": object})
    return leave_out(qrels, runs, entries[["topic", "doc", "contributors"]], {run: [run] for run in runs}, names)


def leave_out(qrels: pd.DataFrame, runs: dict[str, pa.Table], contributors: pd.DataFrame,
              groups: dict[str, list[str]], names: list[str]) -> list[dict[str, Any]]:
    """Zobel's test of a pool's reusability, for each group of runs (one run; a team's runs): the
    judged documents only the group brought to the pool are dropped from the qrels, its runs are
    evaluated on what is left, and each run's score and rank (among the other runs, scored on the
    full qrels) are compared with its score and rank on the full qrels."""
    full = {run: evaluate(qrels, table, names).aggregates for run, table in runs.items()}
    rows = []
    for group, members in groups.items():
        inside = set(members)
        only = contributors[contributors["contributors"].map(lambda c, inside=inside: set(c) <= inside)]
        dropped = _in_table(qrels, only)
        kept = qrels[~dropped]
        unique_relevant = int((dropped & (qrels["relevance"].to_numpy() > 0)).sum())
        for run in members:
            reduced = evaluate(kept, runs[run], names).aggregates
            row: dict[str, Any] = {"run": run, "unique_docs": len(only), "unique_relevant": unique_relevant}
            if [run] != members or group != run:
                row = {"group": group, **row}
            for name in names:
                others = [full[r][name] for r in runs if r not in inside]
                rank_full = 1 + sum(v > full[run][name] for v in others)
                rank_reduced = 1 + sum(v > reduced[name] for v in others)
                row.update({f"{name}": full[run][name], f"{name} without": reduced[name],
                            f"{name} change": reduced[name] - full[run][name],
                            f"{name} rank": rank_full, f"{name} rank without": rank_reduced})
            rows.append(row)
    return rows


@dataclass(frozen=True)
class Simulation:
    budgets: list[int]
    strategies: list[str]
    found: dict[str, list[int]]  # strategy -> relevant found (all topics) at each budget per topic
    total_relevant: int
    curves: dict[str, np.ndarray]  # strategy -> relevant found after 1..max budget judgments per topic
    topics: int
    seed: int | None


def simulate(engine: Engine, *, qrels_name: str, run_names: list[str] | None, strategies: list[str],
             budgets: list[int], depth: int | None = None, seed: int | None = None,
             bandit_policy: str = "maxmean") -> Simulation:
    """Replay strategies against known qrels: relevant documents found per judgment spent."""
    for strategy in strategies:
        if strategy not in pooling.STRATEGIES:
            raise InvalidParameterError(f"--strategy must be among {', '.join(pooling.STRATEGIES)}, not "
                                        f"'{strategy}'.")
    if not budgets or min(budgets) < 1:
        raise InvalidParameterError("Give --budget N (judgments per topic, at least 1; repeatable).")
    budgets = sorted(set(budgets))
    if bandit_policy == "thompson" and seed is None:
        seed = secrets.randbits(31)
    with read_only(engine) as session:
        qrels = repo.qrels_table(session, repo.get_qrels(session, qrels_name)).to_pandas()
        qrels_topics = sorted(qrels["topic"].unique())
        cands = read_candidates(session, _runs(session, run_names), depth, qrels_topics)
    labels = dict(zip(zip(qrels["topic"], qrels["doc"], strict=True), qrels["relevance"].astype(int), strict=True))
    top = max(budgets)
    found: dict[str, list[int]] = {}
    curves: dict[str, np.ndarray] = {}
    for strategy in strategies:
        settings = pooling.PoolSettings(strategy, depth, top, seed, bandit_policy=bandit_policy)
        order = pooling.judging_order(cands, settings, oracle=lambda t, d: labels.get((t, d)))
        hit = np.array([labels.get((t, d), 0) > 0 for t, d in zip(order["topic"], order["doc"], strict=True)])
        at = order["judge_order"].to_numpy()
        per_step = np.bincount(at[hit], minlength=top + 1)[1:]
        curves[strategy] = np.cumsum(per_step)
        found[strategy] = [int(curves[strategy][b - 1]) for b in budgets]
    total = int(sum(1 for v in labels.values() if v > 0))
    return Simulation(budgets, strategies, found, total, curves, len(qrels_topics), seed)


def simulation_figure(sim: Simulation, title: str) -> Any:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    figure = Figure(figsize=(7, 4.5), dpi=100, layout="constrained")
    axes = figure.add_subplot()
    for strategy, curve in sim.curves.items():
        axes.plot(np.arange(1, len(curve) + 1) * sim.topics, curve, label=strategy)
    axes.axhline(sim.total_relevant, color="grey", linestyle=":", label=f"all relevant ({sim.total_relevant})")
    axes.set_xlabel(f"judgments spent ({sim.topics} topics)")
    axes.set_ylabel("relevant documents found")
    axes.set_title(title)
    axes.grid(alpha=0.3)
    axes.legend()
    return figure
