"""People without a terminal: invites, password-reset links and teams.

An admin makes a single-use link: an **invite** carries a role and a team, and whoever opens it
chooses a user name and password and is signed in; a **reset link** lets one user choose a new
password. A link's secret is in the link only (shown once, when it is made); the database keeps its
SHA-256, compared in constant time. A link expires (``EVALSTORE_INVITE_DAYS``,
``EVALSTORE_RESET_HOURS``), is refused once used, and an admin may revoke it before.

A team is the name its members share (``users.team``): a participant's runs, quota and daily cap
are the team's (tasks.submissions counts by team), so teammates see and withdraw each other's runs
and may revoke each other's API tokens (a leaked one must not wait for its owner).
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, cast

from sqlalchemy import CursorResult, Engine, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from evalstore.db.models import ROLES, AccountLink, ApiToken, User
from evalstore.db.session import read_only, unit_of_work
from evalstore.errors import ConflictError, InvalidParameterError, NotFoundError
from evalstore.services import access, passwords
from evalstore.services.access import Principal, UserView
from evalstore.services.context import AppContext, context_for
from evalstore.services.jobs import as_utc, db_now

KINDS = ("invite", "reset")
_PREFIX = {"invite": "inv", "reset": "pwr"}
PATHS = {"invite": "/join/", "reset": "/reset/"}
CODE_MAX = 100  # prefix, id and 43 characters of secret: anything longer is not a link of ours
_ID_DIGITS = 9
# a chosen user name: shown on every page and in the audit log, typed at sign-in
USER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@-]{0,63}")
TEAM_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9 ._-]{0,99}")

_BAD_LINK = {
    "invite": "This invite link is not valid: check that it was copied whole, or ask the server's admin for a new one.",
    "reset": "This password-reset link is not valid: check that it was copied whole, "
    "or ask the server's admin for a new one.",
}


@dataclass(frozen=True)
class IssuedLink:
    """A link as made: ``code`` (in ``path``) is shown this once and kept only as a hash."""

    id: int
    kind: str
    code: str
    role: str | None
    team: str | None
    user: str | None
    expires_at: datetime

    @property
    def path(self) -> str:
        return PATHS[self.kind] + self.code


@dataclass(frozen=True)
class LinkView:
    """A link as the admin's list shows it (never its secret)."""

    id: int
    kind: str
    role: str | None
    team: str | None
    user: str | None
    created_by: str | None
    created_at: datetime
    expires_at: datetime
    used_at: datetime | None
    used_by: str | None
    revoked_at: datetime | None
    state: str  # open | used | expired | revoked

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "role": self.role,
            "team": self.team,
            "user": self.user,
            "created_by": self.created_by,
            "created_at": self.created_at.isoformat(timespec="seconds"),
            "expires_at": self.expires_at.isoformat(timespec="seconds"),
            "used_by": self.used_by,
            "state": self.state,
        }


@dataclass(frozen=True)
class OpenedLink:
    """What a valid, unused link offers whoever holds it."""

    id: int
    kind: str
    role: str | None
    team: str | None
    user: str | None  # the account a reset link is for
    expires_at: datetime


@dataclass(frozen=True)
class Team:
    name: str
    members: list[UserView]


class LinkGone(NotFoundError):
    """A real link (its secret matched) that can no longer be used: used, expired or revoked."""

    def __init__(self, kind: str, state: str) -> None:
        self.kind, self.state = kind, state
        what = "invite link" if kind == "invite" else "password-reset link"
        reason = {"used": "has been used already", "expired": "has expired", "revoked": "was revoked"}[state]
        super().__init__(f"This {what} {reason}; each link works once. Ask the server's admin for a new one.")


class PasswordsDiffer(InvalidParameterError):
    def __init__(self) -> None:
        super().__init__("The two passwords differ; type the same password twice.")


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def _state(link: AccountLink, now: datetime) -> str:
    if link.used_at is not None:
        return "used"
    if link.revoked_at is not None:
        return "revoked"
    if as_utc(link.expires_at) <= now:
        return "expired"
    return "open"


def check_team(team: str) -> str:
    team = team.strip()
    if not TEAM_NAME.fullmatch(team):
        raise InvalidParameterError(
            "A team's name is 1 to 100 letters, digits, spaces, '.', '_' or '-', starting with a letter or digit."
        )
    return team


def check_user_name(name: str) -> str:
    if not USER_NAME.fullmatch(name):
        raise InvalidParameterError(
            "A user name is 1 to 64 letters, digits, '.', '_', '@' or '-', starting with a letter or digit."
        )
    return name


def _issue(
    engine: Engine,
    kind: str,
    *,
    lifetime: timedelta,
    by: str | None,
    role: str | None = None,
    team: str | None = None,
    user_name: str | None = None,
) -> IssuedLink:
    secret = secrets.token_urlsafe(32)
    with unit_of_work(engine) as session:
        user = access.get_user(session, user_name) if user_name is not None else None
        if user is not None and user.disabled_at is not None:
            raise InvalidParameterError(f"User '{user.name}' is disabled; enable them before resetting a password.")
        now = db_now(session)
        if user is not None:  # a new reset link replaces the user's open ones
            session.execute(
                update(AccountLink)
                .where(
                    AccountLink.user_id == user.id,
                    AccountLink.kind == "reset",
                    AccountLink.used_at.is_(None),
                    AccountLink.revoked_at.is_(None),
                )
                .values(revoked_at=now)
            )
        link = AccountLink(
            kind=kind,
            secret_hash=_digest(secret),
            role=role,
            team=team,
            user_id=user.id if user is not None else None,
            created_by=by,
            created_at=now,
            expires_at=now + lifetime,
        )
        session.add(link)
        session.flush()
        access.audit(session, by, f"links.{kind}", user_name or role, {"link": link.id, "role": role, "team": team})
        code = f"{_PREFIX[kind]}_{link.id}_{secret}"
        return IssuedLink(link.id, kind, code, role, team, user_name, link.expires_at)


def create_invite(
    engine: Engine, *, role: str, team: str | None = None, by: str | None = None, days: float = 7.0
) -> IssuedLink:
    """A single-use invite for a new account of ``role`` (a participant's needs a ``team``)."""
    if role not in ROLES:
        raise InvalidParameterError(f"Unknown role '{role}'; choose one of {', '.join(ROLES)}.")
    team = check_team(team) if team and team.strip() else None
    if role == "participant" and team is None:
        raise InvalidParameterError("A participant belongs to a team: give the invite a team.")
    return _issue(engine, "invite", lifetime=timedelta(days=days), by=by, role=role, team=team)


def create_reset_link(engine: Engine, user_name: str, *, by: str | None = None, hours: float = 24.0) -> IssuedLink:
    """A single-use link with which ``user_name`` chooses a new password; it replaces their open
    reset links."""
    return _issue(engine, "reset", lifetime=timedelta(hours=hours), by=by, user_name=user_name)


def _split(code: str, kind: str) -> tuple[int, str]:
    prefix, _, rest = code.partition("_")
    link_id, _, secret = rest.partition("_")
    if (
        len(code) > CODE_MAX
        or prefix != _PREFIX[kind]
        or not secret
        or not link_id.isascii()
        or not link_id.isdigit()
        or len(link_id) > _ID_DIGITS
    ):
        raise NotFoundError(_BAD_LINK[kind])
    return int(link_id), secret


def _find(session: Session, code: str, kind: str) -> AccountLink:
    """The link ``code`` names, its secret checked in constant time; LinkGone when it is real but
    no longer usable. Every way a code can be wrong gets one message."""
    link_id, secret = _split(code, kind)
    link = session.get(AccountLink, link_id)
    expected = link.secret_hash if link is not None and link.kind == kind else _digest("")
    if not hmac.compare_digest(_digest(secret), expected) or link is None:
        raise NotFoundError(_BAD_LINK[kind])
    state = _state(link, datetime.now(UTC))
    if state != "open":
        raise LinkGone(kind, state)
    return link


def open_link(engine: Engine, code: str, kind: str) -> OpenedLink:
    """What a link offers, without using it (its page's GET)."""
    with read_only(engine) as session:
        link = _find(session, code, kind)
        user = session.get(User, link.user_id) if link.user_id is not None else None
        return OpenedLink(link.id, kind, link.role, link.team, user.name if user else None, link.expires_at)


def _use(session: Session, link: AccountLink, used_by: str) -> None:
    """Mark the link used, unless another request used it first (then LinkGone: the caller's
    unit of work rolls back what it did)."""
    done = session.execute(
        update(AccountLink)
        .where(AccountLink.id == link.id, AccountLink.used_at.is_(None), AccountLink.revoked_at.is_(None))
        .values(used_at=db_now(session), used_by=used_by)
    )
    if cast(CursorResult[Any], done).rowcount != 1:  # an UPDATE's result is a cursor result
        raise LinkGone(link.kind, "used")


def accept_invite(
    engine: Engine, code: str, *, name: str, password: str, context: AppContext | None = None
) -> UserView:
    """The account an invite makes: its role and team, the chosen name and password. Refused as a
    whole (the invite stays open) when the name is taken."""
    check_user_name(name)
    access.check_new_password(password)
    open_link(engine, code, "invite")  # a dead link is told before the password's hashing
    hashed = passwords.hash_password(password, context_for(engine, context))
    try:
        with unit_of_work(engine) as session:
            link = _find(session, code, "invite")
            user = User(name=name, role=str(link.role), team=link.team, password_hash=hashed)
            session.add(user)
            session.flush()
            _use(session, link, name)
            access.audit(session, name, "users.join", name, {"role": link.role, "team": link.team, "link": link.id})
            return access.user_view(user)
    except IntegrityError:
        raise ConflictError(f"The user name '{name}' is taken; choose another.") from None


def reset_password(engine: Engine, code: str, *, password: str, context: AppContext | None = None) -> UserView:
    """The reset link's user gets ``password``; their browser sessions end (as any password change)."""
    access.check_new_password(password)
    open_link(engine, code, "reset")
    hashed = passwords.hash_password(password, context_for(engine, context))
    with unit_of_work(engine) as session:
        link = _find(session, code, "reset")
        user = session.get(User, link.user_id)
        if user is None or user.disabled_at is not None:
            raise NotFoundError(_BAD_LINK["reset"])
        user.password_hash = hashed
        session.execute(
            update(ApiToken)
            .where(ApiToken.user_id == user.id, ApiToken.purpose == "session", ApiToken.revoked_at.is_(None))
            .values(revoked_at=db_now(session))
        )
        _use(session, link, user.name)
        access.audit(session, user.name, "users.reset_password", user.name, {"link": link.id})
        return access.user_view(user)


def list_links(engine: Engine, *, limit: int = 200, link_id: int | None = None) -> list[LinkView]:
    """The newest ``limit`` links, newest first (``link_id``: that one only, if it exists)."""
    now = datetime.now(UTC)
    statement = (
        select(AccountLink, User.name)
        .outerjoin(User, User.id == AccountLink.user_id)
        .order_by(AccountLink.id.desc())
        .limit(limit)
    )
    if link_id is not None:
        statement = statement.where(AccountLink.id == link_id)
    with read_only(engine) as session:
        rows = session.execute(statement)
        return [
            LinkView(
                link.id,
                link.kind,
                link.role,
                link.team,
                name,
                link.created_by,
                link.created_at,
                link.expires_at,
                link.used_at,
                link.used_by,
                link.revoked_at,
                _state(link, now),
            )
            for link, name in rows
        ]


def revoke_link(engine: Engine, link_id: int, *, by: str | None = None) -> None:
    """An open link stops working at once; a used one stays as it was (its account is made)."""
    with unit_of_work(engine) as session:
        link = session.get(AccountLink, link_id)
        if link is None:
            raise NotFoundError(f"No link {link_id}; the people page lists the links.")
        if link.used_at is None:
            link.revoked_at = link.revoked_at or db_now(session)
        access.audit(session, by, "links.revoke", str(link_id))


# --- teams ------------------------------------------------------------------------------------------


def list_teams(engine: Engine) -> list[Team]:
    """Every team with its members (not those still asking for an account), by name."""
    teams: dict[str, list[UserView]] = {}
    with read_only(engine) as session:
        users = session.scalars(
            select(User).where(User.team.is_not(None), User.requested_at.is_(None)).order_by(User.name)
        ).all()
        for user in users:
            teams.setdefault(str(user.team), []).append(access.user_view(user))
    return [Team(name, members) for name, members in sorted(teams.items())]


def set_team(engine: Engine, user_name: str, team: str | None, *, by: str | None = None) -> UserView:
    """Move a user into ``team`` (None: out of any). Their runs so far stay their old team's; what
    they submit from now on is the new team's, within its quota."""
    team = check_team(team) if team and team.strip() else None
    with unit_of_work(engine) as session:
        user = access.get_user(session, user_name)
        if user.role == "participant" and team is None:
            raise InvalidParameterError(f"'{user_name}' is a participant: a participant belongs to a team.")
        before = user.team
        user.team = team
        access.audit(session, by, "users.set_team", user_name, {"from": before, "to": team})
        return access.user_view(user)


def team_tokens(engine: Engine, principal: Principal) -> list[access.TokenView]:
    """The API tokens of the caller's teammates (a participant's team), never their secrets."""
    if principal.role != "participant" or not principal.team:
        return []
    with read_only(engine) as session:
        names = session.scalars(
            select(User.name).where(
                User.team == principal.team, User.role == "participant", User.id != principal.user_id
            )
        ).all()
    return [t for name in sorted(names) for t in access.list_tokens(engine, name)]


# --- open sign-up (EVALSTORE_OPEN_SIGN_UP) -------------------------------------------------------------


@dataclass(frozen=True)
class AccountRequest:
    """An account asked for at /sign-up: it cannot sign in until an admin approves it."""

    name: str
    team: str | None
    requested_at: datetime


def request_account(
    engine: Engine, *, name: str, password: str, team: str | None = None, context: AppContext | None = None
) -> AccountRequest:
    """An account that waits for an admin's approval (disabled until then), with the team its
    asker names (the admin may change it)."""
    check_user_name(name)
    team = check_team(team) if team and team.strip() else None
    access.check_new_password(password)
    hashed = passwords.hash_password(password, context_for(engine, context))
    try:
        with unit_of_work(engine) as session:
            now = db_now(session)
            user = User(name=name, role="viewer", team=team, password_hash=hashed, disabled_at=now, requested_at=now)
            session.add(user)
            session.flush()
            access.audit(session, name, "users.request", name, {"team": team})
            return AccountRequest(name, team, now)
    except IntegrityError:
        raise ConflictError(f"The user name '{name}' is taken; choose another.") from None


def list_requests(engine: Engine) -> list[AccountRequest]:
    with read_only(engine) as session:
        users = session.scalars(select(User).where(User.requested_at.is_not(None)).order_by(User.requested_at))
        return [AccountRequest(u.name, u.team, as_utc(u.requested_at)) for u in users if u.requested_at]


def _requested(session: Session, name: str) -> User:
    user = session.scalar(select(User).where(User.name == name, User.requested_at.is_not(None)))
    if user is None:
        raise NotFoundError(f"Nobody named '{name}' is asking for an account; the people page lists who is.")
    return user


def approve_request(
    engine: Engine, name: str, *, role: str, team: str | None = None, by: str | None = None
) -> UserView:
    """The asked-for account, with ``role`` and ``team``, may sign in from now on."""
    if role not in ROLES:
        raise InvalidParameterError(f"Unknown role '{role}'; choose one of {', '.join(ROLES)}.")
    team = check_team(team) if team and team.strip() else None
    if role == "participant" and team is None:
        raise InvalidParameterError("A participant belongs to a team: give them a team.")
    with unit_of_work(engine) as session:
        user = _requested(session, name)
        user.role, user.team, user.disabled_at, user.requested_at = role, team, None, None
        access.audit(session, by, "users.approve", name, {"role": role, "team": team})
        return access.user_view(user)


def reject_request(engine: Engine, name: str, *, by: str | None = None) -> None:
    """The asked-for account is deleted (it never signed in: nothing of it is kept but the audit)."""
    with unit_of_work(engine) as session:
        session.delete(_requested(session, name))
        access.audit(session, by, "users.reject", name)
