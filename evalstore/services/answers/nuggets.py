"""Nugget banks in the store: imported from a bank file, or from NIST's assignment files, which
bring their human assignments and the text of the answers assessed.

NIST's files may name a run otherwise than its answer file does (TREC 2024 RAG: two baselines
are ``baseline_frag_rag24...`` in the assessments and ``baseline_rag24...`` in the runs). An
assessed run is matched to a registered answer run, in this order, and the import says how:

1. ``run_aliases`` (``--run-alias NIST=REGISTERED``): the registered run named;
2. the same name;
3. the answer text: the one registered run whose answer to that topic, its sentences joined with
   one space, is the assessed ``answer_text`` word for word (two such runs: refused, name one);
4. none: the run is registered from the assessed answer text (one sentence, no citations),
   under the name the file gives.

A matched run whose answer differs from the assessed text is refused: its labels would score
another answer.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import Engine, delete, select
from sqlalchemy.orm import Session

from evalstore.db.models import (
    AnswerRun,
    AnswerSentence,
    Nugget,
    NuggetAssignment,
    NuggetBank,
    NuggetTopic,
)
from evalstore.db.session import read_only, unit_of_work
from evalstore.errors import ConflictError, InputFormatError, InvalidParameterError, NotFoundError, Remedy
from evalstore.io import answers as answer_files
from evalstore.io import nuggets as nugget_files
from evalstore.services import jobs
from evalstore.services.answers.runs import add_answer_run

HUMAN = "human"


@dataclass(frozen=True)
class RunMatch:
    assessed: str  # the run as the file names it
    stored: str  # the answer run its labels are stored for
    how: str  # alias | name | answer text | registered from the answer text


@dataclass(frozen=True)
class ImportedNuggets:
    bank: str
    topics: int
    nuggets: int
    created: bool  # False: the bank was stored already with the same nuggets
    assignments: int  # labels stored
    assessor: str
    runs: tuple[RunMatch, ...]


def bank_hash(parsed: nugget_files.NuggetFile) -> str:
    return _hash(
        (topic.topic, topic.query, [(n.text, n.importance) for n in topic.nuggets])
        for topic in sorted(parsed.topics, key=lambda t: t.topic)
    )


def _hash(topics: Iterable[tuple[str, str | None, list[tuple[str, str]]]]) -> str:
    digest = hashlib.sha256()
    for topic, query, nuggets in topics:
        record = [topic, query, [[text, importance] for text, importance in nuggets]]
        digest.update(json.dumps(record, ensure_ascii=False).encode() + b"\n")
    return digest.hexdigest()


def stored_bank_hash(session: Session, bank: NuggetBank) -> str:
    """The hash of a stored bank's nuggets as they are now (after edits in the browser), the same
    as ``bank_hash`` of a file holding them."""
    nuggets: dict[str, list[tuple[str, str]]] = {}
    for topic, text, importance in session.execute(
        select(Nugget.topic, Nugget.text, Nugget.importance)
        .where(Nugget.bank_id == bank.id)
        .order_by(Nugget.topic, Nugget.position)
    ):
        nuggets.setdefault(topic, []).append((text, importance))
    topics = session.execute(
        select(NuggetTopic.topic, NuggetTopic.query).where(NuggetTopic.bank_id == bank.id).order_by(NuggetTopic.topic)
    ).all()
    return _hash((topic, query, nuggets.get(topic, [])) for topic, query in topics)


def import_nuggets(
    engine: Engine,
    path: Path,
    *,
    name: str,
    run_aliases: Mapping[str, str] | None = None,
    assessor: str = HUMAN,
    limits: nugget_files.NuggetLimits | None = None,
) -> ImportedNuggets:
    """Store a nugget bank (or find it stored with the same nuggets for the file's topics) and,
    from an assignment file, its assignments under ``assessor``, the answers they assess matched to registered
    answer runs (the module says how); one unit of work: a refusal stores nothing."""
    if assessor != HUMAN and not (assessor.startswith("judge:") and 6 < len(assessor) <= 200):
        raise InvalidParameterError(f"An assessor is human or judge:NAME, not '{assessor[:60]}'.")
    parsed = nugget_files.read_nuggets(path, limits=limits)
    aliases = dict(run_aliases or {})
    unused = set(aliases) - {a.run for a in parsed.assessments}
    if unused:
        raise NotFoundError(
            f"No run named {sorted(unused)[0]} is assessed in {path}; a run alias names a run of the file."
        )
    digest = bank_hash(parsed)
    with unit_of_work(engine) as session:
        bank, created = _bank(session, parsed, name, digest, str(path))
        nugget_ids = {
            (n.topic, n.position): n.id for n in session.scalars(select(Nugget).where(Nugget.bank_id == bank.id))
        }
        matches = _match_runs(session, parsed, aliases, str(path))
        stored = 0
        for assessment in parsed.assessments:
            match = matches[assessment.run]
            run = session.scalar(select(AnswerRun).where(AnswerRun.name == match.stored))
            assert run is not None, "matched or registered above"
            ids = [nugget_ids[assessment.topic, i] for i in range(len(assessment.labels))]
            session.execute(
                delete(NuggetAssignment).where(
                    NuggetAssignment.nugget_id.in_(ids),
                    NuggetAssignment.answer_run_id == run.id,
                    NuggetAssignment.assessor == assessor,
                )
            )
            session.add_all(
                NuggetAssignment(nugget_id=i, answer_run_id=run.id, assessor=assessor, label=label, source=str(path))
                for i, label in zip(ids, assessment.labels, strict=True)
            )
            stored += len(ids)
        session.flush()
        return ImportedNuggets(
            name,
            len(parsed.topics),
            sum(len(t.nuggets) for t in parsed.topics),
            created,
            stored,
            assessor,
            tuple(matches.values()),
        )


def _bank(
    session: Session, parsed: nugget_files.NuggetFile, name: str, digest: str, source: str
) -> tuple[NuggetBank, bool]:
    bank = session.scalar(select(NuggetBank).where(NuggetBank.name == name))
    if bank is not None:
        if bank.content_hash != digest:
            _same_nuggets(session, bank, parsed, source)
        return bank, False
    bank = NuggetBank(
        name=name,
        content_hash=digest,
        topic_count=len(parsed.topics),
        nugget_count=sum(len(t.nuggets) for t in parsed.topics),
        source=source,
    )
    session.add(bank)
    session.flush()
    session.add_all(NuggetTopic(bank_id=bank.id, topic=t.topic, query=t.query) for t in parsed.topics)
    session.add_all(
        Nugget(bank_id=bank.id, topic=t.topic, position=i, text=n.text, importance=n.importance)
        for t in parsed.topics
        for i, n in enumerate(t.nuggets)
    )
    session.flush()
    return bank, True


def add_bank(
    session: Session, parsed: nugget_files.NuggetFile, name: str, source: str, *, drafted_by: str | None = None
) -> NuggetBank:
    """Store a new bank (a name taken is refused): ``drafted_by`` marks a judge's draft, not scored
    on until a person accepts it."""
    if session.scalar(select(NuggetBank.id).where(NuggetBank.name == name)) is not None:
        raise ConflictError(f"A nugget bank named '{name}' exists; choose another name.")
    bank, _ = _bank(session, parsed, name, bank_hash(parsed), source)
    bank.drafted_by = drafted_by
    for nugget in session.scalars(select(Nugget).where(Nugget.bank_id == bank.id)):
        nugget.drafted_by = drafted_by
    session.flush()
    return bank


def _same_nuggets(session: Session, bank: NuggetBank, parsed: nugget_files.NuggetFile, source: str) -> None:
    """A file for a stored bank (NIST's assignments of some of its topics) must give each of its
    topics the bank's nuggets, in the bank's order: its labels are stored against them."""
    stored: dict[str, list[tuple[str, str]]] = {}
    for key, text, importance in session.execute(
        select(Nugget.topic, Nugget.text, Nugget.importance).where(Nugget.bank_id == bank.id).order_by(Nugget.position)
    ):
        stored.setdefault(key, []).append((text, importance))
    for given in parsed.topics:
        if stored.get(given.topic) != [(n.text, n.importance) for n in given.nuggets]:
            what = "is not in" if given.topic not in stored else "has other nuggets than it has in"
            raise InputFormatError(
                source,
                given.line,
                f"topic {given.topic} {what} nugget bank '{bank.name}'",
                remedy=Remedy(cli="import it under another --name"),
            )


def _answer_texts(session: Session, topic: str) -> dict[str, str]:
    """Every registered run's answer to ``topic``, its sentences joined with one space."""
    sentences: dict[str, list[str]] = {}
    for run, text in session.execute(
        select(AnswerRun.name, AnswerSentence.text)
        .join(AnswerSentence, AnswerSentence.answer_run_id == AnswerRun.id)
        .where(AnswerSentence.topic == topic)
        .order_by(AnswerRun.name, AnswerSentence.position)
    ):
        sentences.setdefault(run, []).append(text)
    return {run: " ".join(texts) for run, texts in sentences.items()}


def _match_runs(
    session: Session, parsed: nugget_files.NuggetFile, aliases: dict[str, str], source: str
) -> dict[str, RunMatch]:
    by_run: dict[str, list[nugget_files.Assessment]] = {}
    for assessment in parsed.assessments:
        by_run.setdefault(assessment.run, []).append(assessment)
    matches: dict[str, RunMatch] = {}
    for run, assessments in by_run.items():
        texts = {a.topic: _answer_texts(session, a.topic) for a in assessments}
        if run in aliases:
            match = RunMatch(run, aliases[run], "alias")
            if session.scalar(select(AnswerRun.id).where(AnswerRun.name == match.stored)) is None:
                raise NotFoundError(
                    f"No answer run named '{match.stored}' (the alias of {run}).",
                    remedy=Remedy(cli="See 'evalstore answers list'."),
                )
        elif session.scalar(select(AnswerRun.id).where(AnswerRun.name == run)) is not None:
            match = RunMatch(run, run, "name")
        else:
            first = assessments[0]
            same = sorted(r for r, text in texts[first.topic].items() if text == first.answer_text)
            if len(same) > 1:
                raise InputFormatError(
                    source,
                    first.line,
                    f"run {run} is not registered, and registered runs {', '.join(same)} all gave its answer "
                    f"to topic {first.topic}",
                    remedy=Remedy(cli=f"pass --run-alias {run}=NAME to say which it is"),
                )
            if not same:
                matches[run] = _register_assessed(session, run, assessments, source)
                continue
            match = RunMatch(run, same[0], "answer text")
        for assessment in assessments:
            stored_text = texts[assessment.topic].get(match.stored)
            if stored_text is None:
                raise InputFormatError(
                    source,
                    assessment.line,
                    f"answer run '{match.stored}' has no answer to topic {assessment.topic}, where {run} is assessed",
                )
            if assessment.answer_text is not None and stored_text != assessment.answer_text:
                raise InputFormatError(
                    source,
                    assessment.line,
                    f"the answer of {run} assessed on topic {assessment.topic} is not the answer of registered run "
                    f"'{match.stored}' (matched by {match.how}); its labels would score another answer",
                    remedy=Remedy(cli="Check --run-alias"),
                )
        matches[run] = match
    return matches


def _register_assessed(session: Session, run: str, assessments: list[nugget_files.Assessment], source: str) -> RunMatch:
    missing = [a for a in assessments if not (a.answer_text or "").strip()]
    if missing:
        raise InputFormatError(
            source,
            missing[0].line,
            f"run {run} is not registered and the line gives no 'answer_text' to register it from",
            remedy=Remedy(cli="register its answers first ('evalstore answers register') or pass --run-alias"),
        )
    answers = tuple(
        answer_files.Answer(
            a.topic,
            None,
            (),
            (answer_files.Sentence(a.answer_text or "", ()),),
            a.response_length,
            a.line,
        )
        for a in assessments
    )
    add_answer_run(session, answer_files.AnswerRun(run, None, "assessed", answers), run, source, None)
    return RunMatch(run, run, "registered from the answer text")


@dataclass(frozen=True)
class BankSummary:
    name: str
    topics: int
    nuggets: int
    assessed_runs: int
    source: str | None


def list_banks(engine: Engine) -> list[BankSummary]:
    with read_only(engine) as session:
        banks = session.scalars(select(NuggetBank).order_by(NuggetBank.name)).all()
        out = []
        for bank in banks:
            runs = session.scalars(
                select(NuggetAssignment.answer_run_id)
                .join(Nugget, Nugget.id == NuggetAssignment.nugget_id)
                .where(Nugget.bank_id == bank.id)
                .distinct()
            ).all()
            out.append(BankSummary(bank.name, bank.topic_count, bank.nugget_count, len(runs), bank.source))
        return out


def get_bank(session: Session, name: str) -> NuggetBank:
    bank = session.scalar(select(NuggetBank).where(NuggetBank.name == name))
    if bank is None:
        raise NotFoundError(f"No nugget bank named '{name}'.", remedy=Remedy(cli="See 'evalstore nuggets list'."))
    return bank


class UnreviewedDraft(InvalidParameterError):
    """A drafted bank asked to be accepted while some of its nuggets have not been reviewed."""

    def __init__(self, bank: str, unreviewed: int) -> None:
        self.bank, self.unreviewed = bank, unreviewed
        super().__init__(
            f"{unreviewed} nuggets of bank '{bank}' are not reviewed yet: accept, edit or reject each first."
        )


# who reviewed a nugget that was vouched for as a whole from the command line (no person is
# signed in there: whoever runs the commands answers for the store)
COMMAND_LINE_REVIEWER = "command line"


def accept_bank(engine: Engine, name: str, *, reviewed_as_a_whole: bool = False) -> NuggetBank:
    """A person accepts a drafted bank after reviewing it: from now on it is scored on. Every nugget
    must have been reviewed (accepted, edited or rejected on the bank's page); with
    ``reviewed_as_a_whole`` the caller vouches for the ones that were not (reviewed elsewhere, as a
    file), and they are recorded as reviewed from the command line."""
    with unit_of_work(engine) as session:
        bank = get_bank(session, name)
        if bank.drafted_by is None:
            raise InvalidParameterError(f"Nugget bank '{name}' is not a draft; there is nothing to accept.")
        unreviewed = list(
            session.scalars(select(Nugget).where(Nugget.bank_id == bank.id, Nugget.reviewed_by.is_(None)))
        )
        if unreviewed and not reviewed_as_a_whole:
            raise UnreviewedDraft(name, len(unreviewed))
        for nugget in unreviewed:
            nugget.reviewed_by = COMMAND_LINE_REVIEWER
        if bank.accepted_at is None:
            bank.accepted_at = jobs.db_now(session)
        session.flush()
        session.expunge(bank)
        return bank
