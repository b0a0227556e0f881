"""Answers assessed in the browser by the assessors of a nugget bank: which answers each sees, the
nugget screen (which of the topic's nuggets an answer holds: support, partial_support,
not_support) and the support screen (whether each cited sentence's first citation supports it:
2, 1, 0), and the labels they make.

A person's labels are stored as ``human:NAME`` beside imported (``human``) and judges'
(``judge:NAME``) ones, each assignment with the time it took, so ``evaluate --nuggets BANK
--assessor human:NAME`` scores on them and ``nuggets compare`` sets them against a judge's or
another person's. Assessing is blind: a screen shows only the assessor's own labels.

With a share of answers assessed twice (``nuggets configure --double-share``), a topic is its
first assessor's (who labelled it first) and each other assessor assesses a seeded sample of its
answers, as a pool's topics are judged twice (:mod:`evalstore.services.judging.roles`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from sqlalchemy import Engine, func, select
from sqlalchemy.orm import Session

from evalstore.db.models import (
    AnswerCitation,
    AnswerReference,
    AnswerRun,
    AnswerTopic,
    CitationSupport,
    Nugget,
    NuggetAssignment,
    NuggetBank,
    NuggetBankAssessor,
    NuggetTopic,
)
from evalstore.db.session import read_only, unit_of_work
from evalstore.errors import InvalidParameterError, NotFoundError
from evalstore.io.texts import DocumentText
from evalstore.services import collections, jobs
from evalstore.services.access import Principal, audit
from evalstore.services.answers import ShownAnswer, shown_answer
from evalstore.statistics.sampling import double_sample

LABELS = ("support", "partial_support", "not_support")
SUPPORT_LABELS = {2: "full", 1: "partial", 0: "none"}
# longer than this on one label, the assessor was away: the time says nothing of the label
LONGEST_LABEL_SECONDS = 3600.0

ROLE_EVERY = "every answer"
ROLE_FIRST = "first assessor"
ROLE_SECOND = "second assessor (blind sample)"
ROLE_OPEN = "first assessor, unless another assessor assesses this topic first"


def person(principal: Principal) -> str:
    """The assessor name a person's labels are stored under."""
    assert principal.name is not None
    return f"human:{principal.name}"


def assessed_bank(session: Session, principal: Principal, name: str) -> NuggetBank:
    """A bank the principal assesses: an assessor's assigned banks; any bank for an admin."""
    principal.require("nuggets:assess")
    bank = session.scalar(select(NuggetBank).where(NuggetBank.name == name))
    assigned = bank is not None and session.get(NuggetBankAssessor, (bank.id, principal.user_id)) is not None
    if bank is None or not (principal.is_admin or assigned):
        raise NotFoundError(f"No nugget bank named '{name}' assigned to you.")
    return bank


def _first_assessor(session: Session, bank: NuggetBank, topic: str) -> str | None:
    """Who labelled the topic's nuggets first (a person; a tie in time: the first name)."""
    found = session.execute(
        select(NuggetAssignment.assessor)
        .join(Nugget, Nugget.id == NuggetAssignment.nugget_id)
        .where(Nugget.bank_id == bank.id, Nugget.topic == topic, NuggetAssignment.assessor.like("human:%"))
        .order_by(NuggetAssignment.assessed_at, NuggetAssignment.assessor)
        .limit(1)
    ).first()
    return None if found is None else str(found[0])


def _role(bank: NuggetBank, principal: Principal, first: str | None) -> str:
    if bank.double_share is None:
        return ROLE_EVERY
    if first is None:
        return ROLE_OPEN
    return ROLE_FIRST if first == person(principal) else ROLE_SECOND


def _my_answers(session: Session, bank: NuggetBank, principal: Principal, topic: str) -> tuple[str, list[str]]:
    """The assessor's role on the topic, and the answer runs (by name) they assess on it."""
    answers = list(
        session.scalars(
            select(AnswerRun.name)
            .join(AnswerTopic, AnswerTopic.answer_run_id == AnswerRun.id)
            .where(AnswerTopic.topic == topic)
            .order_by(AnswerRun.name)
        )
    )
    role = _role(bank, principal, _first_assessor(session, bank, topic))
    if role != ROLE_SECOND:
        return role, answers
    assert bank.double_share is not None and bank.double_seed is not None
    sample = double_sample(bank.double_seed, bank.double_share, topic, answers)
    done = _labelled_answers(session, bank, principal, topic)
    return role, [a for a in answers if a in sample or a in done]


def _labelled_answers(session: Session, bank: NuggetBank, principal: Principal, topic: str) -> set[str]:
    return set(
        session.scalars(
            select(AnswerRun.name)
            .join(NuggetAssignment, NuggetAssignment.answer_run_id == AnswerRun.id)
            .join(Nugget, Nugget.id == NuggetAssignment.nugget_id)
            .where(Nugget.bank_id == bank.id, Nugget.topic == topic, NuggetAssignment.assessor == person(principal))
            .distinct()
        )
    )


def _topic(session: Session, bank: NuggetBank, topic: str) -> NuggetTopic:
    found = session.get(NuggetTopic, (bank.id, topic))
    if found is None:
        raise NotFoundError(f"Nugget bank '{bank.name}' has no topic '{topic}'.")
    return found


# --- the assessor's banks and topics --------------------------------------------------------------


@dataclass(frozen=True)
class AssessedBank:
    name: str
    topics: int
    nuggets: int
    draft: bool


def assessor_banks(engine: Engine, principal: Principal) -> list[AssessedBank]:
    principal.require("nuggets:assess")
    with read_only(engine) as session:
        statement = select(NuggetBank).order_by(NuggetBank.name)
        if not principal.is_admin:
            statement = statement.join(NuggetBankAssessor, NuggetBankAssessor.bank_id == NuggetBank.id).where(
                NuggetBankAssessor.user_id == principal.user_id
            )
        return [
            AssessedBank(b.name, b.topic_count, b.nugget_count, b.drafted_by is not None and b.accepted_at is None)
            for b in session.scalars(statement)
        ]


@dataclass(frozen=True)
class TopicWork:
    topic: str
    query: str | None
    nuggets: int
    answers: int  # that this assessor assesses
    assessed: int  # of them, every nugget labelled by this assessor
    cited: int  # cited sentences of those answers
    supported: int  # of them, labelled by this assessor
    role: str


def bank_topics(engine: Engine, principal: Principal, name: str) -> list[TopicWork]:
    """The bank's topics with this assessor's share of answers and their progress on it."""
    with read_only(engine) as session:
        bank = assessed_bank(session, principal, name)
        out = []
        for topic in session.scalars(
            select(NuggetTopic).where(NuggetTopic.bank_id == bank.id).order_by(NuggetTopic.topic)
        ):
            role, answers = _my_answers(session, bank, principal, topic.topic)
            nuggets = session.scalar(
                select(func.count()).select_from(Nugget).where(Nugget.bank_id == bank.id, Nugget.topic == topic.topic)
            )
            progress = _progress(session, bank, principal, topic.topic, answers)
            out.append(TopicWork(topic.topic, topic.query, int(nuggets or 0), len(answers), *progress, role))
        return out


def _progress(
    session: Session, bank: NuggetBank, principal: Principal, topic: str, answers: list[str]
) -> tuple[int, int, int]:
    nugget_ids = list(session.scalars(select(Nugget.id).where(Nugget.bank_id == bank.id, Nugget.topic == topic)))
    labelled: dict[str, int] = dict(
        session.execute(
            select(AnswerRun.name, func.count())
            .join(NuggetAssignment, NuggetAssignment.answer_run_id == AnswerRun.id)
            .where(NuggetAssignment.nugget_id.in_(nugget_ids), NuggetAssignment.assessor == person(principal))
            .group_by(AnswerRun.name)
        ).all()
    )
    assessed = sum(1 for a in answers if nugget_ids and labelled.get(a, 0) >= len(nugget_ids))
    cited = supported = 0
    for answer in answers:
        sentences = _cited_sentences(session, answer, topic)
        cited += len(sentences)
        supported += len(set(sentences) & set(_my_support(session, principal, answer, topic)))
    return assessed, cited, supported


# --- the nugget screen ----------------------------------------------------------------------------


@dataclass(frozen=True)
class ScreenNugget:
    id: int
    text: str
    importance: str
    label: str | None  # this assessor's (None: not labelled yet)


@dataclass(frozen=True)
class NuggetScreen:
    """An answer to assess (None: the assessor's share of the topic is done), the topic's nuggets
    with this assessor's labels of it, and their progress."""

    bank: str
    topic: str
    query: str | None
    role: str
    answer: ShownAnswer | None
    position: int  # 1-based among the answers this assessor assesses
    answers: tuple[str, ...]  # that this assessor assesses, in order
    assessed: tuple[str, ...]  # of them, fully labelled by this assessor
    nuggets: tuple[ScreenNugget, ...]


def nugget_screen(
    engine: Engine, principal: Principal, name: str, topic: str, *, answer: str | None = None
) -> NuggetScreen:
    """The next answer of the topic this assessor has not assessed (or ``answer``, to revise)."""
    with read_only(engine) as session:
        bank = assessed_bank(session, principal, name)
        statement = _topic(session, bank, topic)
        role, answers = _my_answers(session, bank, principal, topic)
        nuggets = list(
            session.scalars(
                select(Nugget).where(Nugget.bank_id == bank.id, Nugget.topic == topic).order_by(Nugget.position)
            )
        )
        mine = _my_labels(session, principal, [n.id for n in nuggets])
        complete = tuple(a for a in answers if nuggets and all((a, n.id) in mine for n in nuggets))
        if answer is None:
            answer = next((a for a in answers if a not in complete), None)
        elif answer not in answers:
            raise NotFoundError(f"Answer '{answer}' to topic '{topic}' is not one you assess in bank '{name}'.")
        shown = None
        if answer is not None:
            run = session.scalar(select(AnswerRun).where(AnswerRun.name == answer))
            assert run is not None
            topic_row = session.get(AnswerTopic, (run.id, topic))
            assert topic_row is not None
            shown = shown_answer(session, run, topic_row)
        return NuggetScreen(
            bank.name,
            topic,
            statement.query,
            role,
            shown,
            answers.index(answer) + 1 if answer is not None else len(answers),
            tuple(answers),
            complete,
            tuple(ScreenNugget(n.id, n.text, n.importance, mine.get((answer or "", n.id))) for n in nuggets),
        )


def _my_labels(session: Session, principal: Principal, nugget_ids: list[int]) -> dict[tuple[str, int], str]:
    return {
        (run, nugget): label
        for run, nugget, label in session.execute(
            select(AnswerRun.name, NuggetAssignment.nugget_id, NuggetAssignment.label)
            .join(AnswerRun, AnswerRun.id == NuggetAssignment.answer_run_id)
            .where(NuggetAssignment.nugget_id.in_(nugget_ids), NuggetAssignment.assessor == person(principal))
        )
    }


@dataclass(frozen=True)
class Assessed:
    bank: str
    topic: str
    answer: str
    labels: int  # stored or changed
    revised: int  # of them, changes of a label made before


def assess_answer(
    engine: Engine,
    principal: Principal,
    name: str,
    topic: str,
    answer: str,
    labels: Mapping[int, str],
    *,
    seconds: Mapping[int, float] | None = None,
) -> Assessed:
    """Store this assessor's labels of every nugget of the topic for one answer, all or none. A
    label given before is revised; its time stays that of the first labelling."""
    wrong = sorted({label for label in labels.values() if label not in LABELS})
    if wrong:
        raise InvalidParameterError(f"A label is support, partial_support or not_support, not '{wrong[0][:40]}'.")
    if any(s < 0 for s in (seconds or {}).values()):
        raise InvalidParameterError("The time spent on a label cannot be negative.")
    with unit_of_work(engine) as session:
        bank = assessed_bank(session, principal, name)
        _topic(session, bank, topic)
        _, answers = _my_answers(session, bank, principal, topic)
        if answer not in answers:
            raise NotFoundError(f"Answer '{answer}' to topic '{topic}' is not one you assess in bank '{name}'.")
        nugget_ids = list(session.scalars(select(Nugget.id).where(Nugget.bank_id == bank.id, Nugget.topic == topic)))
        outside = sorted(set(labels) - set(nugget_ids))
        if outside:
            raise InvalidParameterError(
                f"Nugget {outside[0]} is not a nugget of topic '{topic}' in bank '{name}'; nothing was stored."
            )
        missing = len(set(nugget_ids) - set(labels))
        if missing:
            raise InvalidParameterError(
                f"Label every nugget of the answer: {missing} of {len(nugget_ids)} have no label; nothing was stored."
            )
        run = session.scalar(select(AnswerRun).where(AnswerRun.name == answer))
        assert run is not None
        now = jobs.db_now(session)
        who = person(principal)
        revised = 0
        for nugget_id, label in labels.items():
            row = session.get(NuggetAssignment, (nugget_id, run.id, who))
            if row is None:
                spent = (seconds or {}).get(nugget_id)
                session.add(
                    NuggetAssignment(
                        nugget_id=nugget_id,
                        answer_run_id=run.id,
                        assessor=who,
                        label=label,
                        source="the nugget page",
                        assessed_at=now,
                        seconds=None if spent is None else min(spent, LONGEST_LABEL_SECONDS),
                    )
                )
            elif row.label != label:
                row.label, revised = label, revised + 1
        audit(
            session,
            principal.name,
            "nuggets.assess",
            name,
            {"topic": topic, "answer": answer, "labels": len(labels), "revised": revised},
        )
        return Assessed(name, topic, answer, len(labels), revised)


# --- the support screen ---------------------------------------------------------------------------


@dataclass(frozen=True)
class CitedSentence:
    position: int  # 0-based; shown from 1
    text: str
    segment: str  # its first citation
    segment_text: DocumentText | None  # None: the bank's collection lacks it
    label: int | None  # this assessor's


@dataclass(frozen=True)
class SupportScreen:
    bank: str
    topic: str
    query: str | None
    answer: str | None  # None: every cited sentence of this assessor's answers is labelled
    position: int
    answers: tuple[str, ...]
    done: tuple[str, ...]  # answers whose every cited sentence this assessor labelled
    sentences: tuple[CitedSentence, ...]
    collection: str | None


def _cited_sentences(session: Session, answer: str, topic: str) -> dict[int, str]:
    """An answer's cited sentences: position -> the segment its first citation names."""
    return dict(
        session.execute(
            select(AnswerCitation.sentence, AnswerReference.segment)
            .join(AnswerRun, AnswerRun.id == AnswerCitation.answer_run_id)
            .join(
                AnswerReference,
                (AnswerReference.answer_run_id == AnswerCitation.answer_run_id)
                & (AnswerReference.topic == AnswerCitation.topic)
                & (AnswerReference.position == AnswerCitation.reference),
            )
            .where(AnswerRun.name == answer, AnswerCitation.topic == topic, AnswerCitation.position == 0)
        ).all()
    )


def _my_support(session: Session, principal: Principal, answer: str, topic: str) -> dict[int, int]:
    return dict(
        session.execute(
            select(CitationSupport.sentence, CitationSupport.label)
            .join(AnswerRun, AnswerRun.id == CitationSupport.answer_run_id)
            .where(
                AnswerRun.name == answer, CitationSupport.topic == topic, CitationSupport.assessor == person(principal)
            )
        ).all()
    )


def support_screen(
    engine: Engine, principal: Principal, name: str, topic: str, *, answer: str | None = None
) -> SupportScreen:
    """The next answer of the topic with a cited sentence this assessor has not labelled (or
    ``answer``), each cited sentence beside the text of the segment it first cites."""
    with read_only(engine) as session:
        bank = assessed_bank(session, principal, name)
        statement = _topic(session, bank, topic)
        _, answers = _my_answers(session, bank, principal, topic)
        cited = {a: _cited_sentences(session, a, topic) for a in answers}
        mine = {a: _my_support(session, principal, a, topic) for a in answers}
        done = tuple(a for a in answers if set(cited[a]) <= set(mine[a]))
        if answer is None:
            answer = next((a for a in answers if a not in done), None)
        elif answer not in answers:
            raise NotFoundError(f"Answer '{answer}' to topic '{topic}' is not one you assess in bank '{name}'.")
        sentences: tuple[CitedSentence, ...] = ()
        if answer is not None:
            run = session.scalar(select(AnswerRun).where(AnswerRun.name == answer))
            assert run is not None
            topic_row = session.get(AnswerTopic, (run.id, topic))
            assert topic_row is not None
            shown = shown_answer(session, run, topic_row)
            texts = collections.document_texts(session, bank.collection, sorted(set(cited[answer].values())))
            sentences = tuple(
                CitedSentence(
                    s.position,
                    s.text,
                    cited[answer][s.position],
                    texts.get(cited[answer][s.position]),
                    mine[answer].get(s.position),
                )
                for s in shown.sentences
                if s.position in cited[answer]
            )
        return SupportScreen(
            bank.name,
            topic,
            statement.query,
            answer,
            answers.index(answer) + 1 if answer is not None else len(answers),
            tuple(answers),
            done,
            sentences,
            bank.collection,
        )


def assess_support(
    engine: Engine,
    principal: Principal,
    name: str,
    topic: str,
    answer: str,
    labels: Mapping[int, int],
    *,
    seconds: Mapping[int, float] | None = None,
) -> Assessed:
    """Store this assessor's support labels (sentence position, 0-based -> 2, 1 or 0) of one
    answer's cited sentences, all or none; a label given before is revised."""
    if any(label not in SUPPORT_LABELS for label in labels.values()):
        raise InvalidParameterError("A citation's support is 2 (full), 1 (partial) or 0 (none).")
    with unit_of_work(engine) as session:
        bank = assessed_bank(session, principal, name)
        _topic(session, bank, topic)
        _, answers = _my_answers(session, bank, principal, topic)
        if answer not in answers:
            raise NotFoundError(f"Answer '{answer}' to topic '{topic}' is not one you assess in bank '{name}'.")
        cited = _cited_sentences(session, answer, topic)
        outside = sorted(set(labels) - set(cited))
        if outside:
            raise InvalidParameterError(
                f"Sentence {outside[0] + 1} of the answer cites nothing; only a sentence's first citation is judged."
            )
        if not labels:
            raise InvalidParameterError("Label at least one cited sentence; nothing was stored.")
        run = session.scalar(select(AnswerRun).where(AnswerRun.name == answer))
        assert run is not None
        who = person(principal)
        now = jobs.db_now(session)
        revised = 0
        for sentence, label in labels.items():
            row = session.get(CitationSupport, (run.id, topic, sentence, who))
            if row is None:
                spent = (seconds or {}).get(sentence)
                session.add(
                    CitationSupport(
                        answer_run_id=run.id,
                        topic=topic,
                        sentence=sentence,
                        assessor=who,
                        segment=cited[sentence],
                        label=label,
                        assessed_at=now,
                        seconds=None if spent is None else min(max(spent, 0.0), LONGEST_LABEL_SECONDS),
                    )
                )
            elif row.label != label:
                row.label, revised = label, revised + 1
        audit(
            session,
            principal.name,
            "support.assess",
            name,
            {"topic": topic, "answer": answer, "labels": len(labels), "revised": revised},
        )
        return Assessed(name, topic, answer, len(labels), revised)
