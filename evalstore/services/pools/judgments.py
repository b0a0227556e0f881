"""A pool's judging: assessor sheets and batches, importing their judgments, agreement and
disagreements between assessors, and the qrels resolved from the judgments.
"""

from __future__ import annotations

import csv
import hashlib
import io
import secrets
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
from sqlalchemy import Engine, delete, insert, select, tuple_

from evalstore.db import repositories as repo
from evalstore.db.models import Pool, PoolEntry, PoolJudgment
from evalstore.db.session import read_only, unit_of_work
from evalstore.errors import EvaluationError, InputFormatError, InvalidParameterError, NotFoundError, Remedy
from evalstore.io.formats import ParsedFile
from evalstore.io.judgments import TREC_UNJUDGED, read_judgments
from evalstore.metrics import Measure, evaluate, resolve_measures
from evalstore.services import store
from evalstore.services.pools.build import (
    EXPORT_FORMATS,
    in_table,
    pool_entries,
    pool_judgments,
    pool_runs,
    read_candidates,
)
from evalstore.statistics import pooling

RESOLUTIONS = ("majority", "max")


def export_pool(
    engine: Engine, name: str, path: Path | None, *, fmt: str = "tsv", shuffle: bool = False, seed: int | None = None
) -> tuple[str, int | None]:
    """Assessor sheets: one row per pooled document, in judging order (or shuffled within each
    topic, seeded, so assessors cannot infer rank). Returns the text and the seed used."""
    if fmt not in EXPORT_FORMATS:
        raise _unknown_format(fmt)
    if shuffle and seed is None:
        seed = secrets.randbits(31)
    with read_only(engine) as session:
        entries = pool_entries(session, repo.get_pool(session, name))
    if shuffle:
        rng = np.random.default_rng(seed)
        entries = entries.assign(key=rng.random(len(entries))).sort_values(["topic", "key"], kind="stable")
    text = _sheet(entries, fmt)
    if path is not None:
        path.write_text(text)
    return text, seed if shuffle else None


def _unknown_format(fmt: str) -> InvalidParameterError:
    return InvalidParameterError(
        f"Assessor sheets are written as {', '.join(EXPORT_FORMATS)}; not '{fmt}'.",
        remedy=Remedy(cli="Choose one with --format."),
    )


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


def next_batch(
    engine: Engine, name: str, *, count: int, path: Path | None = None, fmt: str = "tsv", resolve: str = "majority"
) -> NextBatch:
    """The online loop of a pool: replay its strategy with the judgments made so far as feedback
    and add, per topic, the next ``count`` documents it would judge that are not in the pool yet
    (one transaction), returned as an assessor sheet.

    Move-to-front and the bandit stay with the runs that have paid off in the labels imported so
    far; documents already handed out but not judged yet count as non-relevant in the replay, so
    the whole batch is the strategy's choice when none of them turns out relevant (exact for
    ``count`` 1). For depth, RRF and RBP the order is fixed and the batch is its continuation.
    """
    if count < 1:
        raise InvalidParameterError(
            f"A batch adds at least 1 document per topic; not {count}.", remedy=Remedy(cli="Give --count 1 or more.")
        )
    if fmt not in EXPORT_FORMATS:
        raise _unknown_format(fmt)
    with read_only(engine) as session:
        pool = repo.get_pool(session, name)
        pool_id, strategy, params, seed = pool.id, pool.strategy, dict(pool.params), pool.seed
        entries = pool_entries(session, pool)
        judgments = pool_judgments(session, pool)
        runs = pool_runs(session, list(params["runs"]))
        cands = read_candidates(session, runs, params.get("depth"), sorted(entries["topic"].unique()))
    labels = resolve_labels(judgments, resolve) if not judgments.empty else pd.Series(dtype=int)
    known = {key: int(value) for key, value in labels.items()}
    settings = pooling.PoolSettings(
        strategy, params.get("depth"), None, seed, params.get("rbp_p", 0.8), params.get("policy", "maxmean")
    )
    order = pooling.judging_order(cands, settings, oracle=lambda t, d: known.get((t, d)))
    fresh = order[~in_table(order, entries)]
    fresh = fresh.groupby("topic", sort=False).head(count)
    if fresh.empty:
        raise EvaluationError(
            f"Pool '{name}' holds every document its runs offer "
            f"({'to depth ' + str(params['depth']) if params.get('depth') else 'at any depth'}); "
            "nothing is left to judge. Build a deeper pool to go on."
        )
    # contributors and best rank of the new documents, as pool build gives them
    offered = cands.filter(pa.array(in_table(cands.select(["topic", "doc"]).to_pandas(), fresh)))
    details = pooling.build(offered, [run.name for run in runs], pooling.PoolSettings("depth", None, None))
    details = details.to_pandas().set_index(["topic", "doc"]).loc[pd.MultiIndex.from_frame(fresh[["topic", "doc"]])]
    last = entries.groupby("topic")["judge_order"].max()
    within = fresh.groupby("topic", sort=False).cumcount().to_numpy() + 1
    added = pd.DataFrame(
        {
            "topic": fresh["topic"].to_numpy(),
            "doc": fresh["doc"].to_numpy(),
            "judge_order": fresh["topic"].map(last).fillna(0).to_numpy(np.int64) + within,
        }
    )
    with unit_of_work(engine) as session:
        if session.scalar(select(Pool.id).where(Pool.id == pool_id)) is None:
            raise NotFoundError(f"Pool '{name}' was deleted while the next batch was chosen.")
        session.execute(
            insert(PoolEntry),
            [
                {
                    "pool_id": pool_id,
                    "topic": t,
                    "doc": d,
                    "judge_order": int(o),
                    "best_rank": int(b),
                    "contributors": list(c),
                }
                for t, d, o, b, c in zip(
                    added["topic"],
                    added["doc"],
                    added["judge_order"],
                    details["best_rank"],
                    details["contributors"],
                    strict=True,
                )
            ],
        )
    sheet = _sheet(added, fmt)
    if path is not None:
        path.write_text(sheet)
    return NextBatch(added, len(known), sum(1 for v in known.values() if v > 0), sheet)


def import_judgments(
    engine: Engine, path: Path, *, pool_name: str, assessor: str, allow_outside_pool: bool = False
) -> int:
    """Store one assessor's judgments for the pool, whole or not at all, beside the assessor's
    earlier ones. A document judged again by the same assessor takes the new label; two different
    labels in one file are refused."""
    rows = read_judgments(path)
    seen: dict[tuple[str, str], tuple[int, int]] = {}
    for line, topic, doc, label in rows:
        previous = seen.get((topic, doc))
        if previous is not None and previous[1] != label:
            raise InputFormatError(
                str(path),
                line,
                f"topic {topic} doc {doc} is labelled {label} here and "
                f"{previous[1]} at line {previous[0]}; keep one label",
            )
        seen[(topic, doc)] = (line, label)
    with unit_of_work(engine) as session:
        pool = repo.get_pool(session, pool_name)
        if not allow_outside_pool:
            pooled = {
                (topic, doc)
                for topic, doc in session.execute(
                    select(PoolEntry.topic, PoolEntry.doc).where(PoolEntry.pool_id == pool.id)
                )
            }
            for (topic, doc), (line, _) in seen.items():
                if (topic, doc) not in pooled:
                    raise InputFormatError(
                        str(path),
                        line,
                        f"topic {topic} doc {doc} is not in pool '{pool_name}'",
                        remedy=Remedy(cli="pass --allow-outside-pool to keep it anyway"),
                    )
        # judgments arrive in batches (pool next): a file adds to the assessor's earlier ones and
        # relabels only the documents it names
        keys = list(seen)
        for start in range(0, len(keys), 500):
            session.execute(
                delete(PoolJudgment).where(
                    PoolJudgment.pool_id == pool.id,
                    PoolJudgment.assessor == assessor,
                    tuple_(PoolJudgment.topic, PoolJudgment.doc).in_(keys[start : start + 500]),
                )
            )
        if seen:
            session.execute(
                insert(PoolJudgment),
                [
                    {"pool_id": pool.id, "topic": t, "doc": d, "assessor": assessor, "relevance": label}
                    for (t, d), (_, label) in seen.items()
                ],
            )
    return len(seen)


def pool_agreement(engine: Engine, name: str) -> pooling.Agreement:
    with read_only(engine) as session:
        judgments = pool_judgments(session, repo.get_pool(session, name))
    if judgments["assessor"].nunique() < 2:
        raise EvaluationError(
            f"Pool '{name}' has judgments from fewer than two assessors.",
            remedy=Remedy(
                cli=f"Import another assessor's with 'evalstore judgments import PATH --pool {name} --assessor NAME'."
            ),
        )
    labels = pd.DataFrame(
        {
            "item": judgments["topic"] + "\t" + judgments["doc"],
            "assessor": judgments["assessor"],
            "label": judgments["relevance"],
        }
    )
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
        judgments = pool_judgments(session, pool)
        runs = pool_runs(session, list(pool.params["runs"]))
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
    for i, (topic, doc, low, high) in enumerate(
        zip(split.index.get_level_values(0), split.index.get_level_values(1), split["min"], split["max"], strict=True)
    ):
        variant_topics += [(2 * i + 1, topic, doc, int(low)), (2 * i + 2, topic, doc, int(high))]
    variants = pd.DataFrame(variant_topics, columns=["variant", "topic", "doc", "label"])
    qrels = variants[["variant", "topic"]].merge(base, on="topic")
    changed = qrels.merge(variants.dropna(subset=["doc"]), on=["variant", "topic", "doc"], how="left")["label"]
    qrels["relevance"] = changed.fillna(qrels["relevance"]).astype(np.int64).to_numpy()
    ranked = variants[["variant", "topic"]].merge(cands, on="topic")
    run_names = {i: run.name for i, run in enumerate(runs)}

    scores = _variant_scores(qrels, ranked, list(run_names), chosen)
    base_scores = scores[scores["variant"] == 0].pivot(index="run", columns="topic", values="value")
    base_scores = base_scores.reindex(index=list(run_names), columns=topics).fillna(0.0)
    means = base_scores.mean(axis=1).to_numpy()
    by_variant = (
        scores[scores["variant"] > 0]
        .pivot(index="variant", columns="run", values="value")
        .reindex(columns=list(run_names))
        .fillna(0.0)
    )
    found = []
    for i, (topic, doc) in enumerate(split.index):
        before = base_scores[topic].to_numpy()
        low = means + (by_variant.loc[2 * i + 1].to_numpy() - before) / len(topics)
        high = means + (by_variant.loc[2 * i + 2].to_numpy() - before) / len(topics)
        order_low = np.sign(low[:, None] - low[None, :])
        order_high = np.sign(high[:, None] - high[None, :])
        swaps = int((order_low != order_high).sum() // 2)
        item = judgments[(judgments["topic"] == topic) & (judgments["doc"] == doc)]
        found.append(
            Disagreement(
                topic,
                doc,
                dict(zip(item["assessor"], item["relevance"].astype(int), strict=True)),
                swaps,
                float(np.abs(high - low).max()),
            )
        )
    found.sort(key=lambda d: (-d.swaps, -d.largest_change, d.topic, d.doc))
    return found, pairs


def _variant_scores(qrels: pd.DataFrame, ranked: pd.DataFrame, runs: list[int], chosen: Measure) -> pd.DataFrame:
    """Each run's ``chosen`` value on each variant's topic (variant, run, topic, value): one
    evaluation whose topics are the (variant, run, topic) triples."""

    def key(frame: pd.DataFrame, run: pd.Series) -> pa.Array:
        return pa.array(frame["variant"].astype(str) + "\t" + run.astype(str) + "\t" + frame["topic"], pa.string())

    qrels_per_run = qrels.merge(pd.DataFrame({"run": runs}), how="cross")
    result = evaluate(
        pa.table(
            {
                "topic": key(qrels_per_run, qrels_per_run["run"]),
                "doc": pa.array(qrels_per_run["doc"], pa.string()),
                "relevance": pa.array(qrels_per_run["relevance"].to_numpy()),
            }
        ),
        pa.table(
            {
                "topic": key(ranked, ranked["run"]),
                "doc": pa.array(ranked["doc"], pa.string()),
                "score": pa.array(-ranked["rank"].to_numpy(np.float64)),
            }
        ),
        [chosen],
        missing_topics="zero",
    )
    values = result.per_query[result.per_query["measure"] == str(chosen)]
    parts = values["query_id"].str.split("\t", expand=True)
    scores = pd.DataFrame(
        {
            "variant": parts[0].astype(int),
            "run": parts[1].astype(int),
            "topic": parts[2],
            "value": values["value"].to_numpy(float),
        }
    )
    return scores


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
        raise InvalidParameterError(
            f"Judgments are resolved by majority, max or assessor:NAME; not '{resolve}'.",
            remedy=Remedy(cli="Choose one with --resolve."),
        )
    grouped = judgments.groupby(["topic", "doc"])["relevance"]
    if resolve == "max":
        return grouped.max()
    return grouped.agg(lambda labels: max(Counter(labels.tolist()).items(), key=lambda kv: (kv[1], kv[0]))[0])


def qrels_of_labels(pooled: pd.MultiIndex, labels: pd.Series) -> tuple[ParsedFile, pd.Series]:
    """Labels as qrels, the one way evalstore turns labels into judgments (``pool qrels`` and qrels
    versions): every pooled (topic, doc) with its label, or -1 (pooled, not judged) where it has
    none, so judged@k stays honest; a label outside the pool (judged with --allow-outside-pool)
    kept. The parsed qrels, content-hashed as their TREC text, and the grade per (topic, doc)."""
    inside = pd.Series(labels.reindex(pooled).fillna(TREC_UNJUDGED).astype(int).to_numpy(), index=pooled)
    combined = pd.concat([inside, labels[~labels.index.isin(pooled)]]).sort_index()
    table = pa.table(
        {
            "topic": pa.array([t for t, _ in combined.index], pa.string()),
            "iteration": pa.array(["0"] * len(combined), pa.string()),
            "doc": pa.array([d for _, d in combined.index], pa.string()),
            "relevance": pa.array(combined.to_numpy(np.int64)),
        }
    )
    text = "".join(f"{t} 0 {d} {r}\n" for (t, d), r in combined.items())
    return ParsedFile(table, hashlib.sha256(text.encode()).hexdigest(), None), combined


def pool_qrels(engine: Engine, name: str, *, qrels_name: str, resolve: str = "majority", replace: bool = False) -> Any:
    """Store the pool's judgments as qrels: the resolved label of every judged document, and
    relevance -1 (pooled, not judged) for the rest of the pool, so judged@k stays honest."""
    with read_only(engine) as session:
        pool = repo.get_pool(session, name)
        entries = pool_entries(session, pool)
        judgments = pool_judgments(session, pool)
    if judgments.empty:
        raise EvaluationError(
            f"Pool '{name}' has no judgments yet.",
            remedy=Remedy(cli=f"Import them with 'evalstore judgments import PATH --pool {name} --assessor NAME'."),
        )
    keys = pd.MultiIndex.from_frame(entries[["topic", "doc"]])
    parsed, _ = qrels_of_labels(keys, resolve_labels(judgments, resolve))
    return store.store_qrels(
        engine,
        parsed,
        name=qrels_name,
        source=f"pool:{name} ({resolve})",
        description=f"judgments of pool '{name}', resolved by {resolve}",
        replace=replace,
    )
