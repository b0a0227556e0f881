"""Running a judge over a pool: every pooled document its current configuration has not rated yet
(resumable: labels are stored as they arrive, in small transactions), judged through the
endpoint by up to ``max_concurrency`` requests at once. A failure is stored as unrateable with its
reason and asked again on the next run; a human label is never touched (judges' labels live in
``judge_labels``, humans' in ``pool_judgments``)."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from typing import Any

import httpx
from sqlalchemy import Engine, select

from evalstore import config
from evalstore.db import repositories as repo
from evalstore.db.models import Judge, JudgeLabel, Pool, PoolEntry
from evalstore.db.session import read_only, unit_of_work
from evalstore.errors import InvalidParameterError
from evalstore.io.texts import DocumentText, TopicStatement
from evalstore.services import collections, jobs
from evalstore.services.judges.client import Answer, ChatJudge, ChatSettings
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

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def api_key(judge: Judge) -> str | None:
    if judge.api_key_env is None:
        return None
    key = config.secret(judge.api_key_env)
    if not key:
        raise InvalidParameterError(
            f"Judge '{judge.name}' reads its API key from ${judge.api_key_env}, which is not "
            "set; export it and run again."
        )
    return key


def chat_judge(
    judge: Judge, *, client: httpx.Client | None = None, sleep: Callable[[float], None] | None = None
) -> ChatJudge:
    params = judge.params
    settings = ChatSettings(
        judge.endpoint,
        judge.model,
        api_key(judge),
        float(params["temperature"]),
        params.get("seed"),
        int(params["max_tokens"]),
        float(params["timeout"]),
        str(params["structured"]),
    )
    low, high = params["scale"]
    return ChatJudge(settings, (int(low), int(high)), client=client, **({"sleep": sleep} if sleep else {}))


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
            f"Pool '{pool.name}' names no topic set or collection for its judges to read; "
            f"run 'evalstore pool configure {pool.name} --topics TOPIC_SET --collection "
            "COLLECTION'."
        )


def run_judge(
    engine: Engine,
    name: str,
    *,
    pool_name: str,
    topics: list[str] | None = None,
    limit: int | None = None,
    progress: Callable[[int, int], None] | None = None,
    client: httpx.Client | None = None,
    sleep: Callable[[float], None] | None = None,
) -> JudgeRun:
    """Judge the pool's documents (of ``topics``; at most ``limit`` of them) that this judge's
    configuration has not rated yet, in judging order. ``progress(done, total)`` after each."""
    if limit is not None and limit < 1:
        raise InvalidParameterError(f"--limit must be at least 1; not {limit}.")
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
    reused = sum(1 for t, d in entries if (t, d) in rated)
    asker = chat_judge(judge, client=client, sleep=sleep)
    scale = asker.scale

    def ask(topic: str, doc: str) -> Answer:
        statement_, text = statements.get(topic), documents.get(doc)
        if statement_ is None or text is None:
            missing = (
                f"topic set '{pool.topic_set}' lacks topic {topic}"
                if statement_ is None
                else f"collection '{pool.collection}' lacks document {doc}"
            )
            return Answer(None, None, None, missing, 0, "none", 0.0)
        return asker.judge(
            render(judge.prompt_template, query=query_text(statement_), passage=passage_text(text), scale=scale)
        )

    reasons: dict[str, int] = {}
    done = rated_now = 0
    pending: list[tuple[str, str, Answer]] = []
    try:
        with ThreadPoolExecutor(max_workers=int(judge.params["max_concurrency"])) as executor:
            futures = {executor.submit(ask, t, d): (t, d) for t, d in todo}
            try:
                for future in as_completed(futures):
                    topic, doc = futures[future]
                    answer = future.result()
                    pending.append((topic, doc, answer))
                    done += 1
                    if answer.relevance is None:
                        key = (answer.reason or "unknown").split(":")[0]
                        reasons[key] = reasons.get(key, 0) + 1
                    else:
                        rated_now += 1
                    if len(pending) >= WRITE_EVERY:
                        _store(engine, judge, pool, pending)
                        pending = []
                    if progress is not None:
                        progress(done, len(todo))
            except BaseException:
                for future in futures:
                    future.cancel()
                raise
    finally:
        if pending:
            _store(engine, judge, pool, pending)
        asker.close()
    return JudgeRun(
        judge.name, pool.name, judge.config_hash, len(entries), reused, done, rated_now, done - rated_now, reasons
    )


def _store(engine: Engine, judge: Judge, pool: Pool, answers: list[tuple[str, str, Answer]]) -> None:
    with unit_of_work(engine) as session:
        now = jobs.db_now(session)
        for topic, doc, answer in answers:
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
