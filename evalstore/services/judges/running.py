"""Running a judge over a pool: every pooled document its current configuration has not rated yet
(resumable: labels are stored as they arrive, in small transactions), judged through the
endpoint by up to ``max_concurrency`` requests at once. A failure is stored as unrateable with its
reason and asked again on the next run; a human label is never touched (judges' labels live in
``judge_labels``, humans' in ``pool_judgments``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import httpx
from sqlalchemy import Engine, select

from evalstore.db import repositories as repo
from evalstore.db.models import Judge, JudgeLabel, JudgeRepeat, Pool, PoolEntry
from evalstore.db.session import read_only, unit_of_work
from evalstore.errors import InvalidParameterError, Remedy
from evalstore.io.texts import DocumentText, TopicStatement
from evalstore.services import collections, jobs
from evalstore.services.judges import consistency, costs
from evalstore.services.judges.asking import Asked, Asker, ask_all, chat_judge, check_budget
from evalstore.services.judges.client import Answer
from evalstore.services.judges.prompts import render
from evalstore.services.judges.registry import get_judge, provenance

WRITE_EVERY = 20  # labels per transaction: a crash loses at most these


@dataclass(frozen=True)
class JudgeRun:
    judge: str
    pool: str
    config_hash: str
    pooled: int  # documents of the chosen topics
    reused: int  # rated before under this configuration
    judged: int  # asked now
    rated: int  # of those, with a grade
    unrateable: int
    reasons: dict[str, int]  # unrateable: how many per reason (first words)
    input_tokens: int = 0  # of the calls made now
    output_tokens: int = 0
    seconds: float = 0.0  # summed over the calls
    cost_usd: float | None = None  # None: the judge declares no prices
    failed: list[dict[str, str]] = field(default_factory=list)  # unrateable now: topic, doc, reason
    skipped: list[dict[str, str]] = field(default_factory=list)  # not sent: the budget was reached first
    budget_usd: float | None = None
    repeats: int = 1  # answers asked per document (the first is its label)
    self_consistency: consistency.SelfConsistency | None = None  # with repeats: the judge's, over all its repeats

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def query_text(statement: TopicStatement) -> str:
    """What a judge reads as the query: the topic's title, then its description."""
    return " ".join(part for part in (statement.title, statement.description) if part)


def passage_text(text: DocumentText) -> str:
    """What a judge reads as the passage: the title (unless the text starts with it), then the text."""
    return f"{text.title}. {text.text}" if text.title and not text.text.startswith(text.title) else text.text


def check_texts(pool: Pool) -> None:
    """A judge reads the topics' statements and the documents' text the pool names."""
    if pool.topic_set is None or pool.collection is None:
        raise InvalidParameterError(
            f"Pool '{pool.name}' names no topic set or collection for its judges to read.",
            remedy=Remedy(
                cli=f"Run 'evalstore pool configure {pool.name} --topics TOPIC_SET --collection COLLECTION'.",
                web="Attach its topics and documents on its task's console.",
            ),
        )


@dataclass(frozen=True)
class _Plan:
    judge: Judge
    pool: Pool
    entries: int  # pooled documents of the chosen topics
    reused: int
    prompts: dict[tuple[str, str], str | None]  # (topic, doc) to ask -> its prompt (None: a text is missing)
    missing: dict[tuple[str, str], str]  # why a prompt is None


def _plan(engine: Engine, name: str, pool_name: str, topics: list[str] | None, limit: int | None) -> _Plan:
    """What a run would ask: the pool's documents (of ``topics``; at most ``limit``) this judge's
    configuration has not rated yet, in judging order, with their prompts."""
    if limit is not None and limit < 1:
        raise InvalidParameterError(
            f"A run judges at least 1 document; not {limit}.", remedy=Remedy(cli="Set how many with --limit.")
        )
    with read_only(engine) as session:
        judge = get_judge(session, name)
        pool = repo.get_pool(session, pool_name)
        check_texts(pool)
        statement = select(PoolEntry.topic, PoolEntry.doc).where(PoolEntry.pool_id == pool.id)
        if topics:
            statement = statement.where(PoolEntry.topic.in_(topics))
        entries = session.execute(statement.order_by(PoolEntry.topic, PoolEntry.judge_order, PoolEntry.doc)).all()
        if topics and not entries:
            raise InvalidParameterError(f"Pool '{pool_name}' holds none of the topics {', '.join(topics)}.")
        rated = set(
            session.execute(
                select(JudgeLabel.topic, JudgeLabel.doc).where(
                    JudgeLabel.judge_id == judge.id,
                    JudgeLabel.config_hash == judge.config_hash,
                    JudgeLabel.pool_id == pool.id,
                    JudgeLabel.relevance.is_not(None),
                )
            ).all()
        )
        todo = [(t, d) for t, d in entries if (t, d) not in rated][:limit]
        statements = {t: collections.topic_statement(session, pool.topic_set, t) for t in {t for t, _ in todo}}
        documents = collections.document_texts(session, pool.collection, sorted({d for _, d in todo}))
        session.expunge(judge)
        session.expunge(pool)
    low, high = judge.params["scale"]
    prompts: dict[tuple[str, str], str | None] = {}
    missing: dict[tuple[str, str], str] = {}
    for topic, doc in todo:
        statement_, text = statements.get(topic), documents.get(doc)
        if statement_ is None or text is None:
            prompts[(topic, doc)] = None
            missing[(topic, doc)] = (
                f"topic set '{pool.topic_set}' lacks topic {topic}"
                if statement_ is None
                else f"collection '{pool.collection}' lacks document {doc}"
            )
            continue
        prompts[(topic, doc)] = render(
            judge.prompt_template,
            query=query_text(statement_),
            passage=passage_text(text),
            scale=(int(low), int(high)),
        )
    reused = sum(1 for t, d in entries if (t, d) in rated)
    return _Plan(judge, pool, len(entries), reused, prompts, missing)


@dataclass(frozen=True)
class RunEstimate:
    """What judging a pool would send and cost: its pooled documents, those rated already under
    the judge's configuration, and those that cannot be asked (a text is missing: they would be
    stored unrateable, not sent)."""

    judge: str
    pool: str
    pooled: int
    reused: int
    estimate: costs.Estimate
    unaskable: int

    def as_dict(self) -> dict[str, object]:
        head = {"judge": self.judge, "pool": self.pool, "pooled": self.pooled, "reused": self.reused}
        return head | asdict(self.estimate) | {"unaskable": self.unaskable}


def estimate_run(
    engine: Engine, name: str, *, pool_name: str, topics: list[str] | None = None, limit: int | None = None
) -> RunEstimate:
    """What ``run_judge`` with these arguments would send and cost, nothing sent
    (:func:`evalstore.services.judges.costs.estimate`)."""
    plan = _plan(engine, name, pool_name, topics, limit)
    with read_only(engine) as session:
        past = costs.per_call(session, get_judge(session, name))
    sent = [p for p in plan.prompts.values() if p is not None]
    found = costs.estimate(plan.judge, sent, past)
    return RunEstimate(plan.judge.name, plan.pool.name, plan.entries, plan.reused, found, len(plan.missing))


def run_judge(
    engine: Engine,
    name: str,
    *,
    pool_name: str,
    topics: list[str] | None = None,
    limit: int | None = None,
    max_cost: float | None = None,
    repeats: int = 1,
    progress: Callable[[int, int], None] | None = None,
    client: httpx.Client | None = None,
    sleep: Callable[[float], None] | None = None,
) -> JudgeRun:
    """Judge the pool's documents (of ``topics``; at most ``limit`` of them) that this judge's
    configuration has not rated yet, in judging order. ``progress(done, total)`` after each. With
    ``max_cost`` (US dollars, the judge's prices) a call is sent only while the budget holds its
    worst case (:class:`evalstore.services.judges.costs.Budget`); the rest are skipped, listed and
    left for the next run. With ``repeats`` K above 1 each document is asked K times: the first
    answer is its label, the others are stored as its repeats (the judge's self-consistency,
    :mod:`evalstore.services.judges.consistency`)."""
    if not 1 <= repeats <= 20:
        raise InvalidParameterError(f"A document is asked 1 to 20 times; not {repeats}.")
    if max_cost is not None and max_cost <= 0:
        raise InvalidParameterError(f"The budget must be above 0 dollars; not {max_cost:g}.")
    plan = _plan(engine, name, pool_name, topics, limit)
    judge, pool = plan.judge, plan.pool
    asker = Asker(judge, chat_judge(judge, client=client, sleep=sleep), check_budget(judge, max_cost))

    def ask(key: tuple[str, str]) -> Asked[tuple[str, str]]:
        prompt = plan.prompts[key]
        if prompt is None:
            return Asked(key, Answer(None, None, None, plan.missing[key], 0, "none", 0.0))
        first = asker.once(prompt)
        again: list[Answer] = []
        while first.sent and len(again) < repeats - 1:
            answer = asker.once(prompt)
            if not answer.sent:  # the budget ends the repeats; the label stands
                break
            again.append(answer)
        return Asked(key, first, tuple(again))

    todo = list(plan.prompts)
    try:
        tally = ask_all(
            judge,
            todo,
            ask,
            lambda answered: _store(engine, judge, pool, answered),
            write_every=WRITE_EVERY,
            progress=progress,
        )
    finally:
        asker.close()
    consistent = None
    if repeats > 1:
        with read_only(engine) as session:
            consistent = consistency.self_consistency(session, get_judge(session, judge.name))
    return JudgeRun(
        judge.name,
        pool.name,
        judge.config_hash,
        plan.entries,
        plan.reused,
        tally.asked,
        tally.labelled,
        tally.asked - tally.labelled,
        tally.reasons,
        tally.input_tokens,
        tally.output_tokens,
        tally.seconds,
        tally.cost(judge),
        [{"topic": t, "doc": d, "reason": reason} for (t, d), reason in tally.failed],
        [{"topic": t, "doc": d, "reason": reason} for (t, d), reason in tally.skipped],
        max_cost,
        repeats,
        consistent,
    )


def _store(engine: Engine, judge: Judge, pool: Pool, answers: list[Asked[tuple[str, str]]]) -> None:
    with unit_of_work(engine) as session:
        now = jobs.db_now(session)
        for asked in answers:
            (topic, doc), answer, again = asked.item, asked.answer, list(asked.again)
            _store_repeats(session, judge, pool, topic, doc, again, now)
            row = session.scalar(
                select(JudgeLabel).where(
                    JudgeLabel.judge_id == judge.id,
                    JudgeLabel.config_hash == judge.config_hash,
                    JudgeLabel.pool_id == pool.id,
                    JudgeLabel.topic == topic,
                    JudgeLabel.doc == doc,
                )
            )
            if row is None:
                row = JudgeLabel(
                    judge_id=judge.id, config_hash=judge.config_hash, pool_id=pool.id, topic=topic, doc=doc, attempts=0
                )
                session.add(row)
            row.relevance, row.reason = answer.relevance, answer.reason
            row.raw_output, row.explanation = answer.raw_output, answer.explanation
            row.provenance = provenance(judge, answer.structured)
            row.attempts = (row.attempts or 0) + answer.attempts
            row.seconds, row.created_at = answer.seconds, now
            # tokens add up over the label's runs, as attempts do: each call is paid for
            if answer.input_tokens is not None:
                row.input_tokens = (row.input_tokens or 0) + answer.input_tokens
            if answer.output_tokens is not None:
                row.output_tokens = (row.output_tokens or 0) + answer.output_tokens


def _store_repeats(session: Any, judge: Judge, pool: Pool, topic: str, doc: str, again: list[Answer], now: Any) -> None:
    """Repeats 2.. of a label (a run with more repeats replaces those it asks again)."""
    for number, answer in enumerate(again, start=2):
        row = session.scalar(
            select(JudgeRepeat).where(
                JudgeRepeat.judge_id == judge.id,
                JudgeRepeat.config_hash == judge.config_hash,
                JudgeRepeat.pool_id == pool.id,
                JudgeRepeat.topic == topic,
                JudgeRepeat.doc == doc,
                JudgeRepeat.repeat == number,
            )
        )
        if row is None:
            row = JudgeRepeat(
                judge_id=judge.id, config_hash=judge.config_hash, pool_id=pool.id, topic=topic, doc=doc, repeat=number
            )
            session.add(row)
        row.relevance, row.reason, row.raw_output = answer.relevance, answer.reason, answer.raw_output
        row.attempts, row.seconds, row.created_at = answer.attempts, answer.seconds, now
        row.input_tokens, row.output_tokens = answer.input_tokens, answer.output_tokens
