"""What an evaluation job is asked with (options, default measures per kind), its identity (options
hash, references, the claimed job) and the database clock.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from evalstore.backends import LOCAL, Backend
from evalstore.db.models import QrelsSet
from evalstore.errors import InvalidParameterError, Remedy
from evalstore.metrics import parse_measure, resolve_measures
from evalstore.metrics.preferences import PREFS_MEASURES
from evalstore.metrics.registry import JUDGMENTS_NAMED
from evalstore.services.context import AppContext

STATES = ("queued", "running", "done", "failed", "cancelled")


TERMINAL = frozenset({"done", "failed", "cancelled"})


# Compat is the one measure beyond these that needs no grade scale to be named (the C/W/L ones take
# max_rel) and is defined on every topic (Accuracy is not): ~4 % of the suite's time on robust03's
# 17 runs (51 ms against 1.15 s, best of 7), where the eight C/W/L measures would add ~55 %
DEFAULT_MEASURE_SET = ("all_trec", "Judged@10", "ERR@20", "nDCG(gain=exp)@10", "Compat")


DEFAULT_LEASE = timedelta(seconds=60)


MISSING_POLICIES = ("zero", "skip")


@dataclass(frozen=True)
class EvaluationOptions:
    """Everything besides the inputs that decides an evaluation's numbers."""

    measures: tuple[str, ...] = DEFAULT_MEASURE_SET
    relevance_level: int = 1
    max_docs: int | None = None
    judged_only: bool = False
    missing_topics: str = "zero"
    known_qrels: str | None = None  # the relevant documents the user knew (user-oriented measures)

    def resolved(self) -> dict[str, Any]:
        if self.missing_topics not in MISSING_POLICIES:
            raise InvalidParameterError(
                f"Missing topics are scored by one of {', '.join(MISSING_POLICIES)}; not '{self.missing_topics}'.",
                remedy=Remedy(cli="Choose one with --missing."),
            )
        measures = [str(m) for m in resolve_measures(self.measures)]
        resolved: dict[str, Any] = {
            "measures": measures,
            "relevance_level": self.relevance_level,
            "max_docs": self.max_docs,
            "judged_only": self.judged_only,
            "missing_topics": self.missing_topics,
            "tie_rule": "score desc, docno desc",
        }
        user_oriented = [m for m in measures if m in USER_ORIENTED_MEASURES]
        if self.known_qrels is None and user_oriented:
            raise InvalidParameterError(
                f"{user_oriented[0]} compares a ranking with what the user already knew.",
                remedy=Remedy(cli="Name those relevant documents with --known QRELS."),
            )
        if self.known_qrels is not None:  # only then, so every other evaluation keeps its options hash
            if self.judged_only:
                raise InvalidParameterError(
                    "-J closes up the ranking by the qrels' judgments; the user-oriented "
                    "measures need the ranking whole.",
                    remedy=Remedy(cli="Leave -J out, or --known and its measures."),
                )
            resolved["measures"] = [*measures, *(m for m in USER_ORIENTED_MEASURES if m not in measures)]
            resolved["known_qrels"] = self.known_qrels
        return resolved


USER_ORIENTED_MEASURES = ("Coverage", "Novelty", "RelativeRecall", "RecallEffort")


def describe_inputs(kind: str, inputs: str, judgments: str) -> str:
    """ "run 'bm25' on 'dl19'", "predictions 'p' on 'fruit'": a job's inputs as messages name them."""
    noun = {"ranking": "run", "classifier": "predictions"}.get(kind, kind)  # answers: "answers 'r' on 'bank'"
    return f"{noun} '{inputs}' on '{judgments}'"


@dataclass(frozen=True)
class JobRef:
    """What asking for an evaluation led to. ``inputs`` is the run or prediction set evaluated,
    ``judgments`` the qrels or gold labels it is evaluated against."""

    evaluation_id: int
    inputs: str
    judgments: str
    state: str
    outcome: str  # queued | requeued | already queued | reused
    kind: str = "ranking"

    def describe(self) -> str:
        return describe_inputs(self.kind, self.inputs, self.judgments)


@dataclass(frozen=True)
class ClaimedJob:
    evaluation_id: int
    run_id: int | None  # a ranking job: run and qrels
    qrels_id: int | None
    options: dict[str, Any]
    attempt: int
    worker_id: str
    prediction_set_id: int | None = None  # a classification or clustering job
    kind: str = "ranking"  # ranking | classifier | clustering: which kind runs it (services.kinds)
    backend: Backend = LOCAL  # where its heavy part runs (evaluations.backend)


class JobLost(Exception):
    """The worker no longer holds the job (cancelled, or claimed again after its lease ran out)."""


class ChoreInterrupted(Exception):
    """An idle worker's chore (summaries, letters, paired tests) stopped part-way because jobs
    are waiting or the worker is stopping: what it stored stays, the rest is done at the next
    idle moment (each chore stores only what is missing)."""


Interrupted = Callable[[], bool]  # whether a chore should stop now (ChoreInterrupted)


def never() -> bool:
    return False


def options_hash(options: dict[str, Any], run_hash: str, qrels_hash: str) -> str:
    payload = json.dumps({**options, "run_hash": run_hash, "qrels_hash": qrels_hash}, sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()


def new_worker_id(prefix: str = "worker") -> str:
    return f"{prefix}:{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


def db_now(session: Session) -> datetime:
    """The database's clock on PostgreSQL (workers on several hosts agree on it); SQLite is
    one host, and SQLite's own clock has no sub-second precision."""
    if session.get_bind().dialect.name == "postgresql":
        value = session.scalar(select(func.statement_timestamp()))
        assert value is not None
        return value
    return datetime.now(UTC)


def as_utc(value: datetime) -> datetime:
    """A stored timestamp with its zone: SQLite hands them back without one (written in UTC)."""
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


# what an evaluation computes when no measures are named, by the kind of judgments
DEFAULT_MEASURES_BY_KIND = {
    "subtopics": tuple(
        f"{name}@{k}" for name in ("alpha_nDCG", "ERR_IA", "nERR_IA", "P_IA", "StRecall") for k in (5, 10, 20)
    )
    + ("NRBP", "nNRBP", "AP_IA"),
    "preferences": PREFS_MEASURES,
}


def default_measures(kind: str) -> tuple[str, ...]:
    """What an evaluation against judgments of this kind computes when no measures are named."""
    return DEFAULT_MEASURES_BY_KIND.get(kind, DEFAULT_MEASURE_SET)


def resolved_for(context: AppContext, options: EvaluationOptions, qrels: QrelsSet) -> dict[str, Any]:
    """:func:`for_judgments`, kept in ``context`` by the options and the kind of judgments (all
    that decides it): a server resolves a task's options upload after upload, ~2 ms of parsing
    the default set's ~100 measure names each time. A refusal is not kept (it names the qrels)."""
    key = (options, qrels.kind)
    kept = context.resolved_options.get(key)
    if kept is None:
        kept = context.resolved_options.put(key, for_judgments(options, qrels))
    return {**kept, "measures": list(kept["measures"])}  # the caller's own to change


def for_judgments(options: EvaluationOptions, qrels: QrelsSet) -> dict[str, Any]:
    """The options resolved for these judgments: a kind's own default measures, and a clear
    refusal of a measure or option the kind cannot give a meaning to."""
    if options.measures == DEFAULT_MEASURE_SET:
        options = replace(options, measures=default_measures(qrels.kind))
    resolved = options.resolved()
    wrong = [name for name in resolved["measures"] if parse_measure(name).spec.judgments != qrels.kind]
    if wrong:
        needs = parse_measure(wrong[0]).spec.judgments
        raise InvalidParameterError(
            f"{wrong[0]} is computed from {JUDGMENTS_NAMED[needs]} judgments, and qrels '{qrels.name}' hold "
            f"{JUDGMENTS_NAMED[qrels.kind]} judgments.",
            remedy=Remedy(cli="'evalstore measures' lists the judgments each measure needs."),
        )
    if qrels.kind != "relevance" and (options.judged_only or options.relevance_level != 1):
        reason = (
            "ndeval counts every judgment above 0"
            if qrels.kind == "subtopics"
            else "their levels order documents, and above 0 is relevant"
        )
        raise InvalidParameterError(
            f"-l and -J apply to relevance judgments; qrels '{qrels.name}' hold "
            f"{JUDGMENTS_NAMED[qrels.kind]} judgments ({reason})."
        )
    return resolved
