"""Building a pool from stored runs (depth, or a strategy of statistics.pooling), and reading pools and
their entries back.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from sqlalchemy import Engine, delete, func, select
from sqlalchemy.orm import Session

from evalstore.db import repositories as repo
from evalstore.db.models import Pool, PoolEntry, PoolJudgment, Run
from evalstore.db.session import read_only, unit_of_work
from evalstore.errors import ConflictError, EvaluationError, InvalidParameterError, NotFoundError, Remedy
from evalstore.statistics import pooling

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


# A pool built for a task is named "<task>:<name>", and no other pool's name holds the separator:
# names are unique per task, so per organiser, and building one never tells of another
# organiser's pool (a name taken in the whole store would). The name given has no separator, so
# the task is what comes before the last one.
TASK_POOL_SEPARATOR = ":"
POOL_NAME_MAX = 200  # pools.name's width


def stored_pool_name(name: str, task: str | None) -> str:
    """The name a pool is stored and reached under: ``name`` itself, or ``<task>:<name>`` for a
    task's pool; refused when the separator is misplaced or the whole is too long."""
    if TASK_POOL_SEPARATOR in name:
        raise InvalidParameterError(
            f"A pool's name has no '{TASK_POOL_SEPARATOR}': it is kept for the pools of a task, "
            f"named '<task>{TASK_POOL_SEPARATOR}<name>'; got '{name}'."
        )
    stored = f"{task}{TASK_POOL_SEPARATOR}{name}" if task else name
    if len(stored) > POOL_NAME_MAX:
        raise InvalidParameterError(
            f"A pool's name, with its task's before it, is at most {POOL_NAME_MAX} characters; "
            f"'{stored[:80]}...' has {len(stored)}."
        )
    return stored


class PoolNameTaken(ConflictError):
    """A pool of that (stored) name exists; ``name`` says which, for each edge's own words."""

    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(
            f"A pool named '{name}' exists.",
            remedy=Remedy(
                cli="Pass --replace to rebuild it (its judgments go with it), or choose another --name.",
                web="Choose another name.",
            ),
        )


def _name_taken(name: str) -> PoolNameTaken:
    return PoolNameTaken(name)


def in_table(frame: pd.DataFrame, keys: pd.DataFrame) -> np.ndarray:
    """For each (topic, doc) row of ``frame``, whether ``keys`` holds the pair (a hash join, not a
    Python loop per row)."""
    index = pd.MultiIndex.from_frame(keys[["topic", "doc"]])
    return pd.MultiIndex.from_frame(frame[["topic", "doc"]]).isin(index)


def pool_runs(session: Session, run_names: list[str] | None) -> list[Run]:
    runs = repo.list_runs(session) if run_names is None else [repo.get_run(session, n) for n in run_names]
    if not runs:
        raise NotFoundError(
            "No runs are registered.",
            remedy=Remedy(cli="Register runs with 'evalstore runs register PATH --name NAME'."),
        )
    return runs


def read_runs(session: Session, run_names: list[str] | None) -> dict[str, pa.Table]:
    return {run.name: repo.run_table(session, run, for_evaluation=True) for run in pool_runs(session, run_names)}


def read_candidates(session: Session, runs: list[Run], depth: int | None, topics: list[str] | None) -> pa.Table:
    """Each run's top ``depth`` per topic (:data:`pooling.CANDIDATES`), read in trec_eval order
    from the stored ranks, runs coded by their position in ``runs``."""
    table = repo.top_ranked(session, [run.id for run in runs], depth, topics)
    ids = np.array([run.id for run in runs], dtype=np.int64)
    by_id = np.argsort(ids)
    codes = by_id[np.searchsorted(ids, table["run_id"].to_numpy(), sorter=by_id)]
    return pa.table(
        {"topic": table["topic"], "doc": table["doc"], "rank": table["rank"], "run": pa.array(codes.astype(np.int32))},
        schema=pooling.CANDIDATES,
    )


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
    return pc.binary_join_element_wise('["', joined, '"]', "")


def build_pool(
    engine: Engine,
    *,
    name: str,
    run_names: list[str] | None,
    strategy: str = "depth",
    depth: int | None = None,
    budget: int | None = None,
    topics: list[str] | None = None,
    seed: int | None = None,
    rbp_p: float = 0.8,
    bandit_policy: str = "maxmean",
    replace: bool = False,
    task: str | None = None,
) -> PoolSummary:
    """Build and store a pool from stored runs (all of them when ``run_names`` is None); ``task``
    records the shared task whose runs it pools (its organiser then manages the pool), and the
    pool is named ``<task>:<name>`` (:func:`stored_pool_name`)."""
    name = stored_pool_name(name, task)
    if strategy not in pooling.STRATEGIES:
        raise InvalidParameterError(
            f"A pool's strategy is one of {', '.join(pooling.STRATEGIES)}; not '{strategy}'.",
            remedy=Remedy(cli="Choose one with --strategy."),
        )
    if strategy == "depth" and depth is None:
        depth = 100
    if strategy != "depth" and budget is None:
        raise InvalidParameterError(
            f"The {strategy} strategy orders the candidates, and judges as many per topic as its budget: "
            "none was given.",
            remedy=Remedy(cli="Give --budget N (documents to judge per topic)."),
        )
    if bandit_policy not in pooling.BANDIT_POLICIES:
        raise InvalidParameterError(
            f"The bandit's policy is one of {', '.join(pooling.BANDIT_POLICIES)}; not '{bandit_policy}'.",
            remedy=Remedy(cli="Choose one with --policy."),
        )
    if not 0 < rbp_p < 1:
        raise InvalidParameterError(
            f"RBP's persistence p is between 0 and 1, not {rbp_p}.", remedy=Remedy(cli="Give another --rbp-p.")
        )
    random = strategy == "bandit" and bandit_policy == "thompson"
    if random and seed is None:
        seed = secrets.randbits(31)
    with read_only(engine) as session:
        if not replace and session.scalar(select(Pool.id).where(Pool.name == name)) is not None:
            raise _name_taken(name)  # before reading the runs; checked again in the writing transaction
        runs = pool_runs(session, run_names)
        cands = read_candidates(session, runs, depth, topics)
    if cands.num_rows == 0:
        raise EvaluationError(
            "The runs retrieve nothing for the chosen topics.",
            remedy=Remedy(cli="Check --topics.", web="Check the topics, or leave them empty to pool every one."),
        )
    settings = pooling.PoolSettings(strategy, depth, budget, seed if random else None, rbp_p, bandit_policy)
    run_names = [run.name for run in runs]
    pool_frame = pooling.build(cands, run_names, settings)
    params = {
        "runs": run_names,
        "depth": depth,
        "budget": budget,
        "topics": topics,
        **({"rbp_p": rbp_p} if strategy == "rbp" else {}),
        **({"policy": bandit_policy} if strategy == "bandit" else {}),
        **({"task": task} if task else {}),
    }
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
        entries = pa.table(
            {
                "pool_id": pa.array(np.full(pool_frame.num_rows, pool.id, np.int64)),
                "topic": pool_frame["topic"],
                "doc": pool_frame["doc"],
                "contributors": _contributors_json(pool_frame["contributors"]),
                "best_rank": pool_frame["best_rank"],
                "judge_order": pool_frame["judge_order"],
            }
        )
        # in primary-key order, so the index grows at its right edge (saves ~0.8 s of a 1M-entry COPY)
        entries = entries.take(pc.sort_indices(entries, sort_keys=[("topic", "ascending"), ("doc", "ascending")]))
        repo.copy_batches(session, "pool_entries", entries.to_batches(max_chunksize=repo.BATCH_ROWS))
    # a new pool has no judgments yet; counting its entries back in the database cost 0.5 s at 1M
    return PoolSummary(
        name, strategy, run_names, len(pc.unique(entries["topic"])), entries.num_rows, 0, [], params, settings.seed
    )


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
        judged = (
            session.scalar(
                select(func.count(func.distinct(PoolJudgment.topic + "\t" + PoolJudgment.doc))).where(
                    PoolJudgment.pool_id == pool.id
                )
            )
            or 0
        )
        assessors = list(
            session.scalars(
                select(PoolJudgment.assessor)
                .where(PoolJudgment.pool_id == pool.id)
                .distinct()
                .order_by(PoolJudgment.assessor)
            )
        )
        return PoolSummary(
            pool.name,
            pool.strategy,
            list(pool.params["runs"]),
            int(topics),
            int(documents),
            int(judged),
            assessors,
            dict(pool.params),
            pool.seed,
        )


def pool_entries(session: Session, pool: Pool) -> pd.DataFrame:
    rows = session.execute(
        select(
            PoolEntry.topic, PoolEntry.doc, PoolEntry.contributors, PoolEntry.best_rank, PoolEntry.judge_order
        ).where(PoolEntry.pool_id == pool.id)
    ).all()
    frame = pd.DataFrame(rows, columns=["topic", "doc", "contributors", "best_rank", "judge_order"])
    frame = frame.astype({"topic": object, "doc": object})
    return frame.sort_values(["topic", "judge_order"], kind="stable").reset_index(drop=True)


def pool_judgments(session: Session, pool: Pool) -> pd.DataFrame:
    """The pool's labels; a document an assessor skipped as not rateable (relevance -1) is no label."""
    rows = session.execute(
        select(PoolJudgment.topic, PoolJudgment.doc, PoolJudgment.assessor, PoolJudgment.relevance).where(
            PoolJudgment.pool_id == pool.id, PoolJudgment.relevance >= 0
        )
    ).all()
    frame = pd.DataFrame(rows, columns=["topic", "doc", "assessor", "relevance"])
    return frame.astype({"topic": object, "doc": object, "assessor": object})
