"""Answer runs in the store: registered from a TREC RAG answer file (with their references as a
ranking run of the same name), listed, and shown sentence by sentence.

The references of an answer are a ranked list of segments (rank = position in ``references``),
so each answer run is registered with a ranking run of the same name holding them: every ranking
measure, ``evaluate --qrels``, leaderboards and comparisons then take it as they take any run,
and its values are trec_eval's on the same list. The run's scores are ``len(references) -
position``, so trec_eval's order (score descending) is the references' order.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from sqlalchemy import Engine, func, insert, select
from sqlalchemy.orm import Session

from evalstore.db import repositories as repo
from evalstore.db.models import (
    AnswerCitation,
    AnswerReference,
    AnswerRun,
    AnswerSentence,
    AnswerTopic,
    Run,
    Topic,
    TopicSet,
)
from evalstore.db.session import read_only, unit_of_work
from evalstore.errors import ConflictError, NotFoundError, Remedy
from evalstore.io import answers as answer_files
from evalstore.services import store
from evalstore.times import utc_text


@dataclass(frozen=True)
class AnswerRunSummary:
    name: str
    team: str | None
    layout: str
    topics: int
    sentences: int
    ranking_run: str | None  # the ranking run of its references
    content_hash: str
    created_at: datetime
    created: bool = True  # False: the same content was registered already

    def as_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "team": self.team,
            "layout": self.layout,
            "topics": self.topics,
            "sentences": self.sentences,
            "ranking_run": self.ranking_run,
            "content_hash": self.content_hash,
            "created_at": self.created_at.isoformat(),
        }


@dataclass(frozen=True)
class ShownSentence:
    position: int
    text: str
    citations: list[tuple[int, str]]  # (position in the references, segment id), first first


@dataclass(frozen=True)
class ShownAnswer:
    run: str
    topic: str
    topic_text: str | None
    response_length: int | None
    references: list[str]
    sentences: list[ShownSentence] = field(default_factory=list)


def content_hash(run: answer_files.AnswerRun) -> str:
    """The run's answers, canonically: the same answers hash the same whatever the layout."""
    digest = hashlib.sha256()
    for answer in sorted(run.answers, key=lambda a: a.topic):
        record = [
            answer.topic,
            list(answer.references),
            [[s.text, list(s.citations), list(s.scores or ())] for s in answer.sentences],
        ]
        digest.update(json.dumps(record, ensure_ascii=False).encode())
        digest.update(b"\n")
    return digest.hexdigest()


def topic_ids(engine: Engine, topic_set: str) -> set[str]:
    """The topics of a stored topic set (``evalstore topics import``)."""
    with read_only(engine) as session:
        found = session.scalar(select(TopicSet).where(TopicSet.name == topic_set))
        if found is None:
            raise NotFoundError(f"No topic set named '{topic_set}'.", remedy=Remedy(cli="See 'evalstore texts list'."))
        return set(session.scalars(select(Topic.topic).where(Topic.topic_set_id == found.id)))


def register_answers(
    engine: Engine,
    path: Path,
    *,
    name: str | None = None,
    topics: Collection[str] | None = None,
    limits: answer_files.AnswerLimits | None = None,
) -> list[AnswerRunSummary]:
    """Register every run of an answer file (one per ``run_id``; ``name`` renames a file's only
    run), each with its references as a ranking run, in a unit of work of its own. The whole file
    is read and checked, and every name looked up, before anything is stored: a bad file or a
    taken name stores nothing."""
    runs = answer_files.read_answers(path, topics=topics, limits=limits)
    if name is not None and len(runs) > 1:
        raise ConflictError(
            f"{path} holds {len(runs)} runs ({', '.join(r.name for r in runs[:5])}); each is registered "
            "under its run_id, so one name for them all cannot be given."
        )
    named = [(run, name or run.name) for run in runs]
    with read_only(engine) as session:
        for run, run_name in named:
            existing = session.scalar(select(AnswerRun).where(AnswerRun.name == run_name))
            if existing is not None and existing.content_hash != content_hash(run):
                raise _taken(existing)
            if existing is None and repo.find_run(session, run_name) is not None:
                raise ConflictError(
                    f"A ranking run named '{run_name}' is registered already; an answer run's references "
                    "are registered as a ranking run of its name. Choose another name."
                )
    return [store_answer_run(engine, run, run_name, str(path)) for run, run_name in named]


def _taken(existing: AnswerRun) -> ConflictError:
    return ConflictError(
        f"An answer run named '{existing.name}' already exists with other answers (registered "
        f"{utc_text(existing.created_at)}); choose another name."
    )


def store_answer_run(
    engine: Engine, run: answer_files.AnswerRun, name: str, source: str, *, layout: str | None = None
) -> AnswerRunSummary:
    """A use case: one answer run and its references' ranking run, in one unit of work."""
    with tempfile.TemporaryDirectory(prefix="evalstore-answers-") as scratch:
        ranking = references_file(Path(scratch), run)
        if ranking is None:
            with unit_of_work(engine) as session:
                return add_answer_run(session, run, name, source, None, layout=layout)
        with store.prepare_run(engine, ranking) as prepared, store.run_unit_of_work(engine, prepared) as session:
            return add_answer_run(session, run, name, source, prepared, layout=layout)


def references_file(scratch: Path, run: answer_files.AnswerRun) -> Path | None:
    """The run's references as a TREC run file (None: no answer lists any)."""
    lines = [
        f"{answer.topic} Q0 {segment} {rank} {len(answer.references) - rank + 1} answers\n"
        for answer in run.answers
        for rank, segment in enumerate(answer.references, start=1)
    ]
    if not lines:
        return None
    target = scratch / "references.run"
    target.write_text("".join(lines), encoding="utf-8")
    return target


def add_answer_run(
    session: Session,
    run: answer_files.AnswerRun,
    name: str,
    source: str,
    ranking: store.PreparedRun | None,
    *,
    layout: str | None = None,
) -> AnswerRunSummary:
    """A step: store one answer run, and its references' ranking run when ``ranking`` (prepared
    for this unit of work: :func:`store.run_unit_of_work`); the same content under the same name
    is reported, not stored again."""
    digest = content_hash(run)
    existing = session.scalar(select(AnswerRun).where(AnswerRun.name == name))
    if existing is not None:
        if existing.content_hash == digest:
            return _summary(session, existing, created=False)
        raise _taken(existing)
    ranking_run_id = None
    if ranking is not None:
        ranking_run = repo.find_run(session, name)
        if ranking_run is not None and ranking_run.content_hash != ranking.parsed.content_hash:
            raise ConflictError(
                f"A ranking run named '{name}' already exists with other documents; an answer run's "
                "references are registered as a ranking run of its name. Choose another name."
            )
        if ranking_run is None:
            store.add_run(session, ranking, name=name, system="answers", description="an answer run's references")
            ranking_run = repo.find_run(session, name)
        assert ranking_run is not None
        ranking_run_id = ranking_run.id
    answer_run = AnswerRun(
        name=name,
        team=run.team,
        layout=layout or run.layout,
        content_hash=digest,
        topic_count=len(run.answers),
        ranking_run_id=ranking_run_id,
        source=source,
    )
    session.add(answer_run)
    session.flush()
    _add_answers(session, answer_run.id, run)
    session.flush()
    return _summary(session, answer_run, created=True)


def _add_answers(session: Session, key: int, run: answer_files.AnswerRun) -> None:
    """The run's topics, references, sentences and citations, stored under answer run ``key``."""
    # executemany of plain rows: the ORM's unit of work took ~4 s for a run of 300 answers
    rows: list[tuple[type, list[dict[str, object]]]] = [
        (
            AnswerTopic,
            [
                {
                    "answer_run_id": key,
                    "topic": a.topic,
                    "topic_text": a.topic_text,
                    "response_length": a.response_length,
                }
                for a in run.answers
            ],
        ),
        (
            AnswerReference,
            [
                {"answer_run_id": key, "topic": a.topic, "position": i, "segment": segment}
                for a in run.answers
                for i, segment in enumerate(a.references)
            ],
        ),
        (
            AnswerSentence,
            [
                {"answer_run_id": key, "topic": a.topic, "position": i, "text": s.text}
                for a in run.answers
                for i, s in enumerate(a.sentences)
            ],
        ),
        (
            AnswerCitation,
            [
                {
                    "answer_run_id": key,
                    "topic": a.topic,
                    "sentence": i,
                    "position": j,
                    "reference": reference,
                    "score": s.scores[j] if s.scores is not None else None,
                }
                for a in run.answers
                for i, s in enumerate(a.sentences)
                for j, reference in enumerate(s.citations)
            ],
        ),
    ]
    for table, values in rows:
        if values:
            session.execute(insert(table), values)


def _summary(session: Session, run: AnswerRun, *, created: bool) -> AnswerRunSummary:
    sentences = session.scalar(
        select(func.count()).select_from(AnswerSentence).where(AnswerSentence.answer_run_id == run.id)
    )
    ranking = None
    if run.ranking_run_id is not None:
        ranking_run = session.get(Run, run.ranking_run_id)
        ranking = ranking_run.name if ranking_run is not None else None
    return AnswerRunSummary(
        run.name,
        run.team,
        run.layout,
        run.topic_count,
        int(sentences or 0),
        ranking,
        run.content_hash,
        run.created_at,
        created,
    )


def get_answer_run(session: Session, name: str) -> AnswerRun:
    run = session.scalar(select(AnswerRun).where(AnswerRun.name == name))
    if run is None:
        raise NotFoundError(f"No answer run named '{name}'.", remedy=Remedy(cli="See 'evalstore answers list'."))
    return run


def list_answer_runs(engine: Engine) -> list[AnswerRunSummary]:
    with read_only(engine) as session:
        runs = session.scalars(select(AnswerRun).order_by(AnswerRun.name)).all()
        return [_summary(session, run, created=False) for run in runs]


def show_answers(engine: Engine, name: str, *, topic: str | None = None) -> list[ShownAnswer]:
    """A run's answers (one topic's with ``topic``), sentence by sentence, each citation resolved
    to the segment it cites."""
    with read_only(engine) as session:
        run = get_answer_run(session, name)
        topics_query = select(AnswerTopic).where(AnswerTopic.answer_run_id == run.id).order_by(AnswerTopic.topic)
        if topic is not None:
            topics_query = topics_query.where(AnswerTopic.topic == topic)
        answers = session.scalars(topics_query).all()
        if topic is not None and not answers:
            raise NotFoundError(f"Answer run '{name}' has no answer to topic {topic}.")
        return [shown_answer(session, run, answer) for answer in answers]


def shown_answer(session: Session, run: AnswerRun, answer: AnswerTopic) -> ShownAnswer:
    """One answer, sentence by sentence, each citation resolved to the segment it cites."""
    where = (AnswerReference.answer_run_id == run.id, AnswerReference.topic == answer.topic)
    references = list(session.scalars(select(AnswerReference.segment).where(*where).order_by(AnswerReference.position)))
    cited: dict[int, list[int]] = {}
    for sentence, reference in session.execute(
        select(AnswerCitation.sentence, AnswerCitation.reference)
        .where(AnswerCitation.answer_run_id == run.id, AnswerCitation.topic == answer.topic)
        .order_by(AnswerCitation.sentence, AnswerCitation.position)
    ):
        cited.setdefault(sentence, []).append(reference)
    sentences = [
        ShownSentence(s.position, s.text, [(r, references[r]) for r in cited.get(s.position, [])])
        for s in session.scalars(
            select(AnswerSentence)
            .where(AnswerSentence.answer_run_id == run.id, AnswerSentence.topic == answer.topic)
            .order_by(AnswerSentence.position)
        )
    ]
    return ShownAnswer(run.name, answer.topic, answer.topic_text, answer.response_length, references, sentences)
