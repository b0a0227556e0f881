"""What a pool tells about its runs: statistics, the qrels' reusability (leave one contributor out) and
replays of pooling strategies.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
from sqlalchemy import Engine

from evalstore.db import repositories as repo
from evalstore.db.session import read_only
from evalstore.errors import InvalidParameterError, Remedy
from evalstore.metrics import evaluate, resolve_measures
from evalstore.services.pools.build import in_table, pool_entries, pool_judgments, pool_runs, read_candidates, read_runs
from evalstore.statistics import pooling


@dataclass(frozen=True)
class PoolTopicStats:
    topic: str
    documents: int
    judged: int
    relevant: int  # documents whose highest label (over assessors) is above 0


@dataclass(frozen=True)
class PoolRunStats:
    run: str
    contributed: int
    unique: int  # documents no other run brought
    judged: float  # share of the run's top k judged, averaged over the pool's topics
    k: int

    def as_dict(self) -> dict[str, object]:
        judged = {f"judged@{self.k}": self.judged}
        return {"run": self.run, "contributed": self.contributed, "unique": self.unique, **judged}


@dataclass(frozen=True)
class PoolStats:
    per_topic: list[PoolTopicStats]
    per_run: list[PoolRunStats]


def pool_stats(engine: Engine, name: str, *, k: int = 10) -> PoolStats:
    with read_only(engine) as session:
        pool = repo.get_pool(session, name)
        entries = pool_entries(session, pool)
        judgments = pool_judgments(session, pool)
        runs = pool_runs(session, list(pool.params["runs"]))
        pool_topics = sorted(entries["topic"].unique())
        tops = read_candidates(session, runs, k, pool_topics).to_pandas()
    best = judgments.groupby(["topic", "doc"])["relevance"].max().reset_index()
    labelled = entries[["topic", "doc"]].merge(best, on=["topic", "doc"], how="left")
    per_topic = [
        PoolTopicStats(
            str(topic),
            int(len(group)),
            int(group["relevance"].notna().sum()),
            int((group["relevance"] > 0).sum()),
        )
        for topic, group in labelled.groupby("topic", sort=True)
    ]
    exploded = entries[["topic", "doc", "contributors"]].explode("contributors")
    contributed = exploded.groupby("contributors").size()
    unique = entries[entries["contributors"].map(len) == 1].explode("contributors").groupby("contributors").size()
    judged = pd.Series(in_table(tops, best), index=tops.index)
    # share of each run's top k judged, averaged over the pool's topics (a topic it misses counts 0)
    judged_per_run = judged.groupby(tops["run"]).sum() / (k * len(pool_topics)) if pool_topics else judged
    per_run = [
        PoolRunStats(
            run.name,
            int(contributed.get(run.name, 0)),
            int(unique.get(run.name, 0)),
            float(judged_per_run.get(code, 0.0)),
            k,
        )
        for code, run in enumerate(runs)
    ]
    return PoolStats(per_topic, per_run)


def reusability(engine: Engine, *, qrels_name: str, pool_name: str, measures: list[str]) -> list[dict[str, Any]]:
    """Leave-one-run-out (Zobel 1998) over a stored pool: see :func:`leave_out`."""
    names = [str(m) for m in resolve_measures(measures)]
    with read_only(engine) as session:
        pool = repo.get_pool(session, pool_name)
        entries = pool_entries(session, pool)
        qrels = repo.qrels_table(session, repo.get_qrels(session, qrels_name)).to_pandas()
        runs = read_runs(session, list(pool.params["runs"]))
    qrels = qrels.astype({"topic": object, "doc": object})
    return leave_out(qrels, runs, entries[["topic", "doc", "contributors"]], {run: [run] for run in runs}, names)


def leave_out(
    qrels: pd.DataFrame,
    runs: dict[str, pa.Table],
    contributors: pd.DataFrame,
    groups: dict[str, list[str]],
    names: list[str],
) -> list[dict[str, Any]]:
    """Zobel's test of a pool's reusability, for each group of runs (one run; a team's runs): the
    judged documents only the group brought to the pool are dropped from the qrels, its runs are
    evaluated on what is left, and each run's score and rank (among the other runs, scored on the
    full qrels) are compared with its score and rank on the full qrels."""
    full = {run: evaluate(qrels, table, names).aggregates for run, table in runs.items()}
    rows = []
    for group, members in groups.items():
        inside = set(members)
        only = contributors[contributors["contributors"].map(lambda c, inside=inside: set(c) <= inside)]
        dropped = in_table(qrels, only)
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
                row.update(
                    {
                        f"{name}": full[run][name],
                        f"{name} without": reduced[name],
                        f"{name} change": reduced[name] - full[run][name],
                        f"{name} rank": rank_full,
                        f"{name} rank without": rank_reduced,
                    }
                )
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


def simulate(
    engine: Engine,
    *,
    qrels_name: str,
    run_names: list[str] | None,
    strategies: list[str],
    budgets: list[int],
    depth: int | None = None,
    seed: int | None = None,
    bandit_policy: str = "maxmean",
) -> Simulation:
    """Replay strategies against known qrels: relevant documents found per judgment spent."""
    for strategy in strategies:
        if strategy not in pooling.STRATEGIES:
            raise InvalidParameterError(
                f"The pooling strategies are {', '.join(pooling.STRATEGIES)}; not '{strategy}'.",
                remedy=Remedy(cli="Choose them with --strategy."),
            )
    if not budgets or min(budgets) < 1:
        raise InvalidParameterError(
            "A simulation spends one or more budgets, each of at least 1 judgment per topic; "
            f"got {', '.join(map(str, budgets)) if budgets else 'none'}.",
            remedy=Remedy(cli="Give --budget N, once for each budget."),
        )
    budgets = sorted(set(budgets))
    if bandit_policy == "thompson" and seed is None:
        seed = secrets.randbits(31)
    with read_only(engine) as session:
        qrels = repo.qrels_table(session, repo.get_qrels(session, qrels_name)).to_pandas()
        qrels_topics = sorted(qrels["topic"].unique())
        cands = read_candidates(session, pool_runs(session, run_names), depth, qrels_topics)
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
