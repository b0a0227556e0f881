"""A nugget bank's organiser at work: who assesses it and how (the segments' texts, the share of
answers assessed twice), and the bank edited in the browser: nuggets added, edited, merged, split,
marked vital or okay, and a judge's draft reviewed nugget by nugget (accepted, edited or rejected)
before the bank is accepted for scoring.

Each nugget keeps its provenance: the judge that drafted it, the person who last changed it and
the person who reviewed it. A nugget whose text changes loses its assignments (they judged the old
text); a change of importance keeps them (whether an answer holds a nugget does not depend on
it). Every change recomputes the bank's hash, so evaluations made before it are not reused.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Engine, delete, func, select
from sqlalchemy.orm import Session

from evalstore.db import repositories as repo
from evalstore.db.models import Nugget, NuggetAssignment, NuggetBank, NuggetBankAssessor, NuggetTopic, User
from evalstore.db.session import read_only, unit_of_work
from evalstore.errors import InvalidParameterError, NotFoundError
from evalstore.services import jobs
from evalstore.services.access import Principal, audit, get_user
from evalstore.services.answers import get_bank, stored_bank_hash

IMPORTANCE = ("vital", "okay")
# a nugget is a short fact (the nuggetizer's rule is 1 to 12 words); the file reader's bound
NUGGET_CHARACTERS = 5000
NUGGETS_PER_TOPIC = 1000


@dataclass(frozen=True)
class BankSettings:
    bank: str
    organiser: str | None
    collection: str | None
    double_share: float | None
    double_seed: int | None
    assessors: tuple[str, ...]


def configure_bank(
    engine: Engine,
    name: str,
    *,
    organiser: str | None = None,
    collection: str | None = None,
    double_share: float | None = None,
    seed: int | None = None,
    by: Principal | None = None,
) -> BankSettings:
    """Name the bank's organiser (who edits it in the browser), the collection holding the cited
    segments' texts, and the share of each topic's answers a second assessor assesses, blind (a
    seed is drawn and recorded when none is given). Unnamed settings keep their value."""
    with unit_of_work(engine) as session:
        bank = get_bank(session, name)
        if organiser is not None:
            user = get_user(session, organiser)
            if user.role not in ("organiser", "admin"):
                raise InvalidParameterError(
                    f"User '{organiser}' is {_a(user.role)}; a bank is organised by an organiser."
                )
            bank.organiser_id = user.id
        if collection is not None:
            repo.get_collection(session, collection)
            bank.collection = collection
        if double_share is not None:
            if not 0 <= double_share <= 1:
                raise InvalidParameterError(f"The share of answers assessed twice is 0 to 1; not {double_share}.")
            bank.double_share = double_share
            bank.double_seed = seed if seed is not None else secrets.randbits(31)
        audit(
            session,
            by.name if by else None,
            "nuggets.configure",
            name,
            {"organiser": organiser, "collection": collection, "double_share": double_share},
        )
        session.flush()
        return bank_settings(session, bank)


def _a(role: str) -> str:
    return f"{'an' if role[:1] in 'aeiou' else 'a'} {role}"


def bank_settings(session: Session, bank: NuggetBank) -> BankSettings:
    organiser = session.get(User, bank.organiser_id) if bank.organiser_id is not None else None
    assessors = session.scalars(
        select(User.name)
        .join(NuggetBankAssessor, NuggetBankAssessor.user_id == User.id)
        .where(NuggetBankAssessor.bank_id == bank.id)
        .order_by(User.name)
    )
    return BankSettings(
        bank.name,
        organiser.name if organiser else None,
        bank.collection,
        bank.double_share,
        bank.double_seed,
        tuple(assessors),
    )


def assign_bank_assessor(engine: Engine, name: str, user_name: str, *, by: Principal | None = None) -> None:
    """Let an assessor assess answers by the bank in the browser."""
    with unit_of_work(engine) as session:
        bank = get_bank(session, name)
        user = get_user(session, user_name)
        if user.role not in ("assessor", "admin"):
            raise InvalidParameterError(f"User '{user_name}' is {_a(user.role)}; answers are assessed by assessors.")
        if session.get(NuggetBankAssessor, (bank.id, user.id)) is None:
            session.add(NuggetBankAssessor(bank_id=bank.id, user_id=user.id))
        audit(session, by.name if by else None, "nuggets.assign", name, {"assessor": user_name})


def managed_bank(session: Session, principal: Principal, name: str) -> NuggetBank:
    """A bank the principal edits: the banks they organise; any bank for an admin. Another's bank
    is told as not found: its name says nothing of its nuggets."""
    principal.require("nuggets:manage")
    bank = session.scalar(select(NuggetBank).where(NuggetBank.name == name))
    if bank is None or not (principal.is_admin or bank.organiser_id == principal.user_id):
        raise NotFoundError(f"No nugget bank named '{name}' that you organise.")
    return bank


@dataclass(frozen=True)
class OrganisedBank:
    name: str
    topics: int
    nuggets: int
    drafted_by: str | None
    accepted: bool
    unreviewed: int


def organised_banks(engine: Engine, principal: Principal) -> list[OrganisedBank]:
    """The banks the principal edits (an admin: every bank)."""
    principal.require("nuggets:manage")
    with read_only(engine) as session:
        statement = select(NuggetBank).order_by(NuggetBank.name)
        if not principal.is_admin:
            statement = statement.where(NuggetBank.organiser_id == principal.user_id)
        banks = list(session.scalars(statement))
        unreviewed = dict(
            session.execute(
                select(Nugget.bank_id, func.count())
                .where(Nugget.bank_id.in_([b.id for b in banks]), Nugget.reviewed_by.is_(None))
                .group_by(Nugget.bank_id)
            ).all()
        )
        return [
            OrganisedBank(
                b.name, b.topic_count, b.nugget_count, b.drafted_by, b.accepted_at is not None, unreviewed.get(b.id, 0)
            )
            for b in banks
        ]


# --- the bank's page ------------------------------------------------------------------------------


@dataclass(frozen=True)
class EditedNugget:
    id: int
    position: int
    text: str
    importance: str
    drafted_by: str | None
    edited_by: str | None
    reviewed_by: str | None
    assignments: int  # labels stored for it (by anyone)


@dataclass(frozen=True)
class BankTopic:
    topic: str
    query: str | None
    nuggets: tuple[EditedNugget, ...]


@dataclass(frozen=True)
class BankPage:
    name: str
    drafted_by: str | None
    accepted_at: datetime | None
    settings: BankSettings
    topics: tuple[BankTopic, ...]

    @property
    def is_draft(self) -> bool:
        return self.drafted_by is not None and self.accepted_at is None

    @property
    def unreviewed(self) -> int:
        return sum(n.reviewed_by is None for t in self.topics for n in t.nuggets)


def bank_page(engine: Engine, principal: Principal, name: str) -> BankPage:
    with read_only(engine) as session:
        bank = managed_bank(session, principal, name)
        counts = dict(
            session.execute(
                select(NuggetAssignment.nugget_id, func.count())
                .join(Nugget, Nugget.id == NuggetAssignment.nugget_id)
                .where(Nugget.bank_id == bank.id)
                .group_by(NuggetAssignment.nugget_id)
            ).all()
        )
        by_topic: dict[str, list[EditedNugget]] = {}
        for n in session.scalars(select(Nugget).where(Nugget.bank_id == bank.id).order_by(Nugget.position)):
            by_topic.setdefault(n.topic, []).append(
                EditedNugget(
                    n.id,
                    n.position,
                    n.text,
                    n.importance,
                    n.drafted_by,
                    n.edited_by,
                    n.reviewed_by,
                    int(counts.get(n.id, 0)),
                )
            )
        topics = tuple(
            BankTopic(t.topic, t.query, tuple(by_topic.get(t.topic, ())))
            for t in session.scalars(
                select(NuggetTopic).where(NuggetTopic.bank_id == bank.id).order_by(NuggetTopic.topic)
            )
        )
        return BankPage(bank.name, bank.drafted_by, bank.accepted_at, bank_settings(session, bank), topics)


# --- edits ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BankEdit:
    """What an edit did: the nuggets it left or made, and the labels it removed (they judged a
    text that changed)."""

    bank: str
    topic: str
    nuggets: tuple[int, ...]
    labels_removed: int


def _text(text: str) -> str:
    cleaned = " ".join(text.split())
    if not cleaned:
        raise InvalidParameterError("A nugget needs a text.")
    if len(cleaned) > NUGGET_CHARACTERS:
        raise InvalidParameterError(
            f"A nugget holds at most {NUGGET_CHARACTERS} characters; this one has {len(cleaned)}."
        )
    return cleaned


def _importance(importance: str) -> str:
    if importance not in IMPORTANCE:
        raise InvalidParameterError(f"A nugget is vital or okay, not '{importance[:20]}'.")
    return importance


def _nugget(session: Session, bank: NuggetBank, nugget_id: int) -> Nugget:
    nugget = session.get(Nugget, nugget_id)
    if nugget is None or nugget.bank_id != bank.id:
        raise NotFoundError(f"Nugget bank '{bank.name}' holds no nugget {nugget_id}.")
    return nugget


def _unlabel(session: Session, nugget_ids: list[int]) -> int:
    removed = session.scalar(
        select(func.count()).select_from(NuggetAssignment).where(NuggetAssignment.nugget_id.in_(nugget_ids))
    )
    session.execute(delete(NuggetAssignment).where(NuggetAssignment.nugget_id.in_(nugget_ids)))
    return int(removed or 0)


def _renumber(session: Session, bank: NuggetBank, topic: str) -> None:
    """Positions 0..n-1 again after a nugget left or came (an assignment file's labels are matched
    to a topic's nuggets by position); in two passes, as (bank, topic, position) is unique."""
    nuggets = list(
        session.scalars(
            select(Nugget).where(Nugget.bank_id == bank.id, Nugget.topic == topic).order_by(Nugget.position, Nugget.id)
        )
    )
    for i, nugget in enumerate(nuggets):
        nugget.position = -1 - i
    session.flush()
    for i, nugget in enumerate(nuggets):
        nugget.position = i
    session.flush()


def _rehash(session: Session, bank: NuggetBank) -> None:
    session.flush()
    bank.nugget_count = session.scalar(select(func.count()).select_from(Nugget).where(Nugget.bank_id == bank.id)) or 0
    bank.content_hash = stored_bank_hash(session, bank)


def _who(principal: Principal) -> str:
    assert principal.name is not None
    return principal.name


def add_nugget(engine: Engine, principal: Principal, name: str, topic: str, text: str, importance: str) -> BankEdit:
    """A nugget the organiser adds to a topic of the bank, last in the topic's order."""
    with unit_of_work(engine) as session:
        bank = managed_bank(session, principal, name)
        if session.get(NuggetTopic, (bank.id, topic)) is None:
            raise NotFoundError(f"Nugget bank '{name}' has no topic '{topic}'.")
        count = session.scalar(
            select(func.count()).select_from(Nugget).where(Nugget.bank_id == bank.id, Nugget.topic == topic)
        )
        if (count or 0) >= NUGGETS_PER_TOPIC:
            raise InvalidParameterError(f"A topic holds at most {NUGGETS_PER_TOPIC} nuggets.")
        nugget = Nugget(
            bank_id=bank.id,
            topic=topic,
            position=int(count or 0),
            text=_text(text),
            importance=_importance(importance),
            edited_by=_who(principal),
            reviewed_by=_who(principal),
        )
        session.add(nugget)
        _rehash(session, bank)
        audit(session, principal.name, "nuggets.add", name, {"topic": topic, "text": nugget.text})
        return BankEdit(name, topic, (nugget.id,), 0)


def edit_nugget(
    engine: Engine, principal: Principal, name: str, nugget_id: int, text: str, importance: str
) -> BankEdit:
    """The organiser's version of a nugget (its text, vital or okay): it counts as reviewed. A new
    text removes the nugget's labels."""
    with unit_of_work(engine) as session:
        bank = managed_bank(session, principal, name)
        nugget = _nugget(session, bank, nugget_id)
        new_text, new_importance = _text(text), _importance(importance)
        removed = _unlabel(session, [nugget.id]) if new_text != nugget.text else 0
        before = {"text": nugget.text, "importance": nugget.importance}
        if (new_text, new_importance) != (nugget.text, nugget.importance):
            nugget.edited_by = _who(principal)
        nugget.text, nugget.importance, nugget.reviewed_by = new_text, new_importance, _who(principal)
        _rehash(session, bank)
        audit(
            session,
            principal.name,
            "nuggets.edit",
            name,
            {"nugget": nugget.id, "from": before, "to": {"text": new_text, "importance": new_importance}},
        )
        return BankEdit(name, nugget.topic, (nugget.id,), removed)


def accept_nugget(engine: Engine, principal: Principal, name: str, nugget_id: int) -> BankEdit:
    """The organiser accepts a nugget as it stands (a judge's draft, reviewed)."""
    with unit_of_work(engine) as session:
        bank = managed_bank(session, principal, name)
        nugget = _nugget(session, bank, nugget_id)
        nugget.reviewed_by = _who(principal)
        audit(session, principal.name, "nuggets.accept_nugget", name, {"nugget": nugget.id, "text": nugget.text})
        return BankEdit(name, nugget.topic, (nugget.id,), 0)


def reject_nugget(engine: Engine, principal: Principal, name: str, nugget_id: int) -> BankEdit:
    """The nugget leaves the bank, with its labels (the audit log keeps its text and provenance)."""
    with unit_of_work(engine) as session:
        bank = managed_bank(session, principal, name)
        nugget = _nugget(session, bank, nugget_id)
        topic = nugget.topic
        removed = _unlabel(session, [nugget.id])
        audit(
            session,
            principal.name,
            "nuggets.reject",
            name,
            {"nugget": nugget.id, "topic": topic, "text": nugget.text, "drafted_by": nugget.drafted_by},
        )
        session.delete(nugget)
        session.flush()
        _renumber(session, bank, topic)
        _rehash(session, bank)
        return BankEdit(name, topic, (), removed)


def merge_nuggets(
    engine: Engine, principal: Principal, name: str, nugget_ids: list[int], text: str, importance: str
) -> BankEdit:
    """Two or more nuggets of one topic become one, with the text given, in the place of the first;
    their labels are removed (they judged other texts)."""
    with unit_of_work(engine) as session:
        bank = managed_bank(session, principal, name)
        if len(set(nugget_ids)) < 2:
            raise InvalidParameterError("Pick two or more nuggets of one topic to merge.")
        nuggets = sorted((_nugget(session, bank, i) for i in set(nugget_ids)), key=lambda n: n.position)
        topics = {n.topic for n in nuggets}
        if len(topics) > 1:
            raise InvalidParameterError("Only nuggets of one topic are merged.")
        kept, gone = nuggets[0], nuggets[1:]
        removed = _unlabel(session, [n.id for n in nuggets])
        audit(
            session,
            principal.name,
            "nuggets.merge",
            name,
            {"into": kept.id, "texts": [n.text for n in nuggets], "text": text},
        )
        kept.text, kept.importance = _text(text), _importance(importance)
        kept.edited_by = kept.reviewed_by = _who(principal)
        for nugget in gone:
            session.delete(nugget)
        session.flush()
        _renumber(session, bank, kept.topic)
        _rehash(session, bank)
        return BankEdit(name, kept.topic, (kept.id,), removed)


def split_nugget(
    engine: Engine, principal: Principal, name: str, nugget_id: int, texts: list[str], importance: str
) -> BankEdit:
    """A nugget becomes two or more (one per text, in its place and after it); its labels are
    removed. The new nuggets keep the judge that drafted the original."""
    with unit_of_work(engine) as session:
        bank = managed_bank(session, principal, name)
        cleaned = [_text(t) for t in texts if t.strip()]
        if len(cleaned) < 2:
            raise InvalidParameterError("Give two or more texts, one a line, to split a nugget into.")
        nugget = _nugget(session, bank, nugget_id)
        removed = _unlabel(session, [nugget.id])
        audit(session, principal.name, "nuggets.split", name, {"nugget": nugget.id, "from": nugget.text, "to": cleaned})
        # the new nuggets go right after it: everything after it moves down
        for later in session.scalars(
            select(Nugget).where(
                Nugget.bank_id == bank.id, Nugget.topic == nugget.topic, Nugget.position > nugget.position
            )
        ):
            later.position += len(cleaned) - 1 + NUGGETS_PER_TOPIC  # clear of the new ones until renumbered
        session.flush()
        nugget.text, nugget.importance = cleaned[0], _importance(importance)
        nugget.edited_by = nugget.reviewed_by = _who(principal)
        made = [nugget]
        for i, text in enumerate(cleaned[1:], start=1):
            made.append(
                Nugget(
                    bank_id=bank.id,
                    topic=nugget.topic,
                    position=nugget.position + i,
                    text=text,
                    importance=nugget.importance,
                    drafted_by=nugget.drafted_by,
                    edited_by=_who(principal),
                    reviewed_by=_who(principal),
                )
            )
            session.add(made[-1])
        session.flush()
        _renumber(session, bank, nugget.topic)
        _rehash(session, bank)
        return BankEdit(name, nugget.topic, tuple(n.id for n in made), removed)


def accept_draft(engine: Engine, principal: Principal, name: str) -> NuggetBank:
    """The organiser accepts a judge's draft for scoring, once every nugget is reviewed."""
    with unit_of_work(engine) as session:
        bank = managed_bank(session, principal, name)
        if bank.drafted_by is None:
            raise InvalidParameterError(f"Nugget bank '{name}' is not a draft; there is nothing to accept.")
        unreviewed = session.scalar(
            select(func.count()).select_from(Nugget).where(Nugget.bank_id == bank.id, Nugget.reviewed_by.is_(None))
        )
        if unreviewed:
            raise InvalidParameterError(
                f"{unreviewed} nuggets of bank '{name}' are not reviewed yet: accept, edit or reject each first."
            )
        if bank.accepted_at is None:
            bank.accepted_at = jobs.db_now(session)
        audit(session, principal.name, "nuggets.accept", name, {"drafted_by": bank.drafted_by})
        session.flush()
        session.expunge(bank)
        return bank
