"""Qrels versions: an immutable, content-hashed version of a named lineage of qrels, built from a
pool's labels (``human``: the assessors' labels, resolved by majority; ``judge:NAME``: a judge's,
under its current configuration; ``hybrid[:NAME]``: the human label where there is one, else the
judge's). Every pooled document without a label is -1 (pooled, not judged), as ``pool qrels``
writes it. A version's judgments are a qrels set named ``NAME@vN``; a version whose content equals
the newest one's is not made again. Building one re-points the tasks evaluated on the lineage (on
any of its versions, or on qrels named NAME) and queues their runs' re-evaluation."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import numpy as np
import pandas as pd
from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from evalstore.db import repositories as repo
from evalstore.db.models import (
    Judge,
    JudgeLabel,
    Pool,
    PoolEntry,
    PoolJudgment,
    QrelsSet,
    QrelsVersion,
    Run,
    Submission,
    Task,
)
from evalstore.db.session import read_only, unit_of_work
from evalstore.db.staging import StagedRows, staged_rows
from evalstore.errors import EvaluationError, InvalidParameterError, NotFoundError, Remedy
from evalstore.io.judgments import TREC_UNJUDGED
from evalstore.services import jobs, pools
from evalstore.services import store as store_module
from evalstore.services.judges.registry import get_judge
from evalstore.services.tasks.judge_made import ProbeResult, judge_behind


@dataclass(frozen=True)
class Source:
    kind: str  # human | judge | hybrid | ensemble
    judge: str | None  # ensemble: the members' names, separated by commas

    def __str__(self) -> str:
        return self.kind if self.judge is None else f"{self.kind}:{self.judge}"

    @property
    def members(self) -> list[str]:
        return [n.strip() for n in (self.judge or "").split(",") if n.strip()]


ENSEMBLE_RULES = ("majority", "mean", "median")


def parse_source(text: str) -> Source:
    kind, _, judge = text.partition(":")
    if kind == "ensemble":
        found = Source(kind, judge)
        if len(found.members) < 2 or len(set(found.members)) != len(found.members):
            raise InvalidParameterError(
                f"An ensemble is of two or more different judges (ensemble:A,B,C); not '{text}'."
            )
        return Source(kind, ",".join(found.members))
    if kind not in ("human", "judge", "hybrid") or (kind == "human" and judge) or (kind == "judge" and not judge):
        raise InvalidParameterError(
            f"A version's labels are human, judge:NAME, hybrid, hybrid:NAME or ensemble:A,B,...; not '{text}'.",
            remedy=Remedy(cli="Name them with --from."),
        )
    return Source(kind, judge or None)


def combine(members: list[pd.Series], rule: str) -> tuple[pd.Series, pd.Series]:
    """One grade per document from the members' grades of it (JudgeBlender, Rahmani et al. 2024,
    arXiv 2412.13268), over the members that graded it: ``majority`` the most frequent grade (a tie
    goes to the lowest of the tied: a document is not promoted on a split vote), ``mean`` and
    ``median`` rounded half up. Also, per document, how many members graded it."""
    frame = pd.concat(members, axis=1)
    values = frame.to_numpy(dtype=float)
    graded = (~np.isnan(values)).sum(axis=1)
    if rule == "mean":
        combined = np.floor(np.nanmean(values, axis=1) + 0.5)
    elif rule == "median":
        combined = np.floor(np.nanmedian(values, axis=1) + 0.5)
    else:
        grades = np.arange(int(np.nanmax(values)) + 1)
        votes = (values[:, :, None] == grades[None, None, :]).sum(axis=1)
        combined = votes.argmax(axis=1).astype(float)  # argmax: the first (lowest) of the tied
    return (
        pd.Series(combined.astype(np.int64), index=frame.index),
        pd.Series(graded.astype(np.int64), index=frame.index),
    )


def human_labels(session: Session, pool: Pool) -> pd.Series:
    """People's labels of the pool's documents (0 or more), one per document by majority."""
    rows = session.execute(
        select(PoolJudgment.topic, PoolJudgment.doc, PoolJudgment.assessor, PoolJudgment.relevance).where(
            PoolJudgment.pool_id == pool.id, PoolJudgment.relevance >= 0
        )
    ).all()
    frame = pd.DataFrame(rows, columns=["topic", "doc", "assessor", "relevance"])
    if frame.empty:
        return pd.Series(dtype="int64", index=pd.MultiIndex.from_tuples([], names=["topic", "doc"]))
    return pools.resolve_labels(frame, "majority")


def judge_labels(session: Session, pool: Pool, judge: Judge, *, config_hash: str | None = None) -> pd.Series:
    """The judge's grades of the pool's documents under ``config_hash`` (default: its current
    configuration), unrateable ones left out."""
    rows = session.execute(
        select(JudgeLabel.topic, JudgeLabel.doc, JudgeLabel.relevance).where(
            JudgeLabel.judge_id == judge.id,
            JudgeLabel.config_hash == (config_hash or judge.config_hash),
            JudgeLabel.pool_id == pool.id,
            JudgeLabel.relevance.is_not(None),
        )
    ).all()
    index = pd.MultiIndex.from_tuples([(t, d) for t, d, _ in rows], names=["topic", "doc"])
    return pd.Series([int(r or 0) for _, _, r in rows], index=index, dtype="int64")  # None filtered out above


@dataclass(frozen=True)
class QrelsVersionView:
    """A version of a qrels lineage: its qrels (``NAME@vN``), the pool and labels it was built
    from (``source``, sent as ``from``; ``sources``: the judge and its configuration, an
    ensemble's members, as recorded), its counts, hash and parent, and the judge's stored probe
    (None: no judge made these labels, or it was not probed so)."""

    name: str
    version: int
    qrels: str | None
    pool: str
    source: str | None
    sources: dict[str, Any]
    counts: dict[str, int]
    content_hash: str
    parent: str | None
    created_at: str
    probe: ProbeResult | None
    probe_text: str | None

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "version": self.version,
            "qrels": self.qrels,
            "pool": self.pool,
            "from": self.source,
            "sources": self.sources,
            "counts": self.counts,
            "content_hash": self.content_hash,
            "parent": self.parent,
            "created_at": self.created_at,
            "probe": self.probe,
            "probe_text": self.probe_text,
        }


@dataclass(frozen=True)
class QueuedRun:
    """A run of a task that moved to a new version, queued for evaluation on it."""

    task: str
    run: str
    job: int
    state: str


@dataclass(frozen=True)
class MovedTask:
    """A task moved to a new version: the qrels it was on (sent as ``from``) and its runs."""

    previous: str
    runs: list[str]

    def as_dict(self) -> dict[str, Any]:
        return {"from": self.previous, "runs": self.runs}


@dataclass(frozen=True)
class BuiltVersion(QrelsVersionView):
    """The version a build made (``created``) or found with the same content; the tasks it moved
    (by name) and their runs' queued jobs."""

    created: bool
    queued: list[QueuedRun]
    moved: dict[str, MovedTask]

    @classmethod
    def of(
        cls, view: QrelsVersionView, *, created: bool, queued: list[QueuedRun], moved: dict[str, MovedTask]
    ) -> BuiltVersion:
        shown = {f.name: getattr(view, f.name) for f in fields(QrelsVersionView)}
        return cls(**shown, created=created, queued=queued, moved=moved)

    def as_dict(self) -> dict[str, Any]:
        return {
            **super().as_dict(),
            "created": self.created,
            "queued": [{"task": q.task, "run": q.run, "job": q.job, "state": q.state} for q in self.queued],
            "moved": {task: moved.as_dict() for task, moved in self.moved.items()},
        }


def _only_judge(session: Session, pool: Pool) -> Judge:
    labelled = select(JudgeLabel.judge_id).where(JudgeLabel.pool_id == pool.id)
    judges = list(session.scalars(select(Judge).where(Judge.id.in_(labelled)).order_by(Judge.name)))
    if len(judges) != 1:
        known = ", ".join(j.name for j in judges) or "none"
        raise InvalidParameterError(
            f"Hybrid labels need the judge's name: pool '{pool.name}' has not exactly one judge (judges: {known}).",
            remedy=Remedy(cli="Write --from hybrid:NAME."),
        )
    return judges[0]


def build_version(engine: Engine, name: str, *, pool_name: str, source: str, rule: str = "majority") -> BuiltVersion:
    """Build (or find, when the content is the newest version's) a version of the lineage ``name``
    (``rule``: how an ensemble's members' grades are combined, :func:`combine`)."""
    chosen = parse_source(source)
    if rule not in ENSEMBLE_RULES:
        raise InvalidParameterError(f"An ensemble's rule is {', '.join(ENSEMBLE_RULES)}; not '{rule}'.")
    if "@" in name:
        raise InvalidParameterError(f"A qrels lineage's name holds no '@' (its versions are NAME@vN); not '{name}'.")
    with read_only(engine) as session:
        pool = repo.get_pool(session, pool_name)
        entries = session.execute(select(PoolEntry.topic, PoolEntry.doc).where(PoolEntry.pool_id == pool.id)).all()
        human = human_labels(session, pool) if chosen.kind in ("human", "hybrid") else None
        judge = None
        if chosen.kind in ("judge", "hybrid"):
            judge = get_judge(session, chosen.judge) if chosen.judge else _only_judge(session, pool)
        judged = judge_labels(session, pool, judge) if judge is not None else None
        members = [get_judge(session, member) for member in chosen.members] if chosen.kind == "ensemble" else []
        member_labels = [judge_labels(session, pool, member).rename(member.name) for member in members]
    labels, counts = _chosen_labels(chosen, rule, pool_name, human, judged, members, member_labels)
    if labels.empty:
        raise EvaluationError(
            f"Pool '{pool_name}' has no {chosen} labels yet.",
            remedy=Remedy(
                cli=f"Judge it first ('evalstore judges run NAME --pool {pool_name}', or 'evalstore judgments import')."
            ),
        )
    keys = pd.MultiIndex.from_tuples([tuple(e) for e in entries], names=["topic", "doc"])
    parsed, combined = pools.qrels_of_labels(keys, labels)
    counts["unjudged"] = int((combined == TREC_UNJUDGED).sum())
    content_hash = parsed.content_hash
    sources = _sources(chosen, pool_name, rule, members, judge)

    def store(staged: StagedRows) -> BuiltVersion:
        # the version's qrels, its row and the re-pointed tasks with their queued jobs commit
        # together: a crash in between leaves no NAME@vN without its version, nor the reverse
        with unit_of_work(engine, staged.attach) as session:
            newest = session.scalar(
                select(QrelsVersion).where(QrelsVersion.name == name).order_by(QrelsVersion.version.desc()).limit(1)
            )
            if newest is not None and newest.content_hash == content_hash:
                return BuiltVersion.of(_view(session, newest), created=False, queued=[], moved={})
            version = 1 if newest is None else newest.version + 1
            stored = store_module.add_qrels(
                session,
                staged,
                parsed,
                name=f"{name}@v{version}",
                source=f"pool:{pool_name} ({chosen})",
                description=f"version {version} of '{name}': pool '{pool_name}', from {chosen}",
            )
            qrels = repo.get_qrels(session, stored.summary.name)
            row = QrelsVersion(
                name=name,
                version=version,
                qrels_id=qrels.id,
                pool_name=pool_name,
                sources=sources,
                parent_id=newest.id if newest is not None else None,
                content_hash=content_hash,
                counts=counts,
            )
            session.add(row)
            session.flush()
            queued, moved = _requeue(session, name, qrels)
            return BuiltVersion.of(_view(session, row), created=True, queued=queued, moved=moved)

    with staged_rows(engine, repo.judgments_to_store(parsed.table)) as staged:
        # two builds of one lineage at once: the loser sees the winner's version and decides again
        return store_module.retry_on_name_race(lambda: store(staged))


def _chosen_labels(
    chosen: Source,
    rule: str,
    pool_name: str,
    human: pd.Series | None,
    judged: pd.Series | None,
    members: list[Judge],
    member_labels: list[pd.Series],
) -> tuple[pd.Series, dict[str, int]]:
    """The labels ``chosen`` names (a human's, a judge's, both, or an ensemble's members'
    combined by ``rule``), and how many came from where."""
    if chosen.kind == "ensemble":
        if any(found.empty for found in member_labels):
            empty = [m.name for m, found in zip(members, member_labels, strict=True) if found.empty]
            raise EvaluationError(
                f"Pool '{pool_name}' has no labels of judge {', '.join(empty)} yet.",
                remedy=Remedy(cli=f"Judge it first ('evalstore judges run NAME --pool {pool_name}')."),
            )
        labels, graded = combine(member_labels, rule)
        counts = {"ensemble": len(labels), "by_all_members": int((graded == len(members)).sum())}
    elif chosen.kind == "human":
        assert human is not None
        labels, counts = human, {"human": len(human)}
    elif chosen.kind == "judge":
        assert judged is not None
        labels, counts = judged, {"judge": len(judged)}
    else:
        assert human is not None and judged is not None
        from_judge = judged[~judged.index.isin(human.index)]
        labels = pd.concat([human, from_judge])
        counts = {"human": len(human), "judge": len(from_judge)}
    return labels, counts


def _sources(chosen: Source, pool_name: str, rule: str, members: list[Judge], judge: Judge | None) -> dict[str, Any]:
    """Where a version's labels came from, as its row keeps it."""
    sources: dict[str, Any] = {"from": str(chosen), "pool": pool_name}
    if chosen.kind == "ensemble":
        # each member's labels stay in judge_labels under its configuration: `judgments provenance
        # --judge MEMBER` shows every member's label of a document, with its own provenance
        sources["rule"] = rule
        sources["members"] = [
            {"judge": m.name, "judge_config": m.config_hash, "model": m.model, "prompt_hash": m.prompt_hash}
            for m in members
        ]
    if judge is not None:
        sources.update(
            judge=judge.name, judge_config=judge.config_hash, model=judge.model, prompt_hash=judge.prompt_hash
        )
    return sources


def _requeue(session: Session, name: str, qrels: QrelsSet) -> tuple[list[QueuedRun], dict[str, MovedTask]]:
    """Point the lineage's tasks at the new version and queue their runs' evaluation on it; the
    queued jobs, and per task the qrels it was on and its runs. What the new version does to a
    task's ranking is for the queued jobs to find (``judgments compare`` once they are done): it is
    never evaluated here, beside them."""
    lineage = set(
        session.scalars(
            select(QrelsVersion.qrels_id).where(QrelsVersion.name == name, QrelsVersion.qrels_id != qrels.id)
        )
    )
    plain = repo.find_qrels(session, name)
    if plain is not None:
        lineage.add(plain.id)
    queued = []
    moved: dict[str, MovedTask] = {}
    for task in session.scalars(select(Task).where(Task.qrels_id.in_(lineage)).order_by(Task.name)):
        previous = session.get(QrelsSet, task.qrels_id)
        assert previous is not None
        moved[task.name] = MovedTask(previous.name, [])
        task.qrels_id = qrels.id
        options = jobs.EvaluationOptions(measures=tuple(task.measures)) if task.measures else jobs.EvaluationOptions()
        for submission in session.scalars(
            select(Submission).where(Submission.task_id == task.id).order_by(Submission.id)
        ):
            run = session.get(Run, submission.run_id)
            assert run is not None  # a submission's run is deleted with it
            ref = jobs.enqueue_run(session, run, qrels, options)
            submission.evaluation_id = ref.evaluation_id
            queued.append(QueuedRun(task.name, run.name, ref.evaluation_id, ref.state))
            moved[task.name].runs.append(run.name)
    return queued, moved


def _view(session: Session, row: QrelsVersion) -> QrelsVersionView:
    qrels = session.get(QrelsSet, row.qrels_id)
    parent = session.get(QrelsVersion, row.parent_id) if row.parent_id is not None else None
    behind = judge_behind(session, qrels.name) if qrels else None
    return QrelsVersionView(
        name=row.name,
        version=row.version,
        qrels=qrels.name if qrels else None,
        pool=row.pool_name,
        source=row.sources.get("from"),
        sources=row.sources,
        counts=row.counts,
        content_hash=row.content_hash,
        parent=f"{parent.name}@v{parent.version}" if parent else None,
        created_at=row.created_at.isoformat(),
        probe=behind["probe"] if behind else None,
        probe_text=behind["probe_text"] if behind else None,
    )


def list_versions(engine: Engine, name: str) -> list[QrelsVersionView]:
    """The lineage, oldest first."""
    with read_only(engine) as session:
        rows = list(
            session.scalars(select(QrelsVersion).where(QrelsVersion.name == name).order_by(QrelsVersion.version))
        )
        if not rows:
            known = list(session.scalars(select(QrelsVersion.name).distinct().order_by(QrelsVersion.name)))
            raise NotFoundError(
                f"No qrels versions named '{name}' (lineages: {', '.join(known) or 'none'}).",
                remedy=Remedy(cli=f"Build one with 'evalstore qrels build {name} --pool POOL --from human'."),
            )
        return [_view(session, row) for row in rows]
