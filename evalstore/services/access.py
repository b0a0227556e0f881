"""Who may do what through the HTTP service: users, their roles, passwords, tokens and sessions,
and the audit log.

Roles (docs/service/index.md): admin (everything), organiser (their own tasks: qrels, release,
every run and result), participant (their team's runs), assessor (the pools they are assigned) and
viewer (public leaderboards). What a role may do is one table, :data:`ACTIONS`; which object it may
do it to (this task, that team's run) is decided by the service that owns the object.

Passwords and token secrets are stored as argon2 hashes (argon2-cffi), never as given.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError
from sqlalchemy import Engine, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from evalstore.db.models import ROLES, ApiToken, AuditEntry, User
from evalstore.db.session import read_only, unit_of_work
from evalstore.errors import (
    AccessDenied,
    AuthenticationError,
    ConflictError,
    InvalidParameterError,
    NotFoundError,
    Remedy,
)
from evalstore.services import passwords
from evalstore.services.context import AppContext, context_for
from evalstore.services.jobs import as_utc, db_now

# What each role may do; the HTTP routes name one of these each (tests walk every route x role).
ACTIONS: dict[str, frozenset[str]] = {
    "leaderboard:read": frozenset(ROLES),
    "tasks:read": frozenset(ROLES),
    "tasks:manage": frozenset({"admin", "organiser"}),  # create; release and export their own
    "runs:submit": frozenset({"admin", "organiser", "participant"}),
    "runs:register": frozenset({"admin"}),  # a run in the store, outside any task
    "runs:read": frozenset({"admin", "organiser", "participant"}),  # participants: their team's
    "jobs:read": frozenset({"admin", "organiser", "participant"}),  # participants: their team's
    "queue:read": frozenset({"admin", "organiser"}),
    "collections:read": frozenset({"admin", "organiser"}),  # organisers: the qrels of their tasks
    "pools:judge": frozenset({"admin", "assessor"}),  # assessors: the pools assigned to them
    "pools:manage": frozenset({"admin", "organiser"}),
    "nuggets:assess": frozenset({"admin", "assessor"}),  # assessors: the nugget banks assigned to them
    "nuggets:manage": frozenset({"admin", "organiser"}),  # organisers: the banks they organise
    "tokens:manage": frozenset(ROLES),  # their own; admins anyone's
    "users:manage": frozenset({"admin"}),
    "audit:read": frozenset({"admin"}),
}

# Passwords are guessable: argon2's recommended cost (services.passwords). Tokens are 256
# random bits: their hash only keeps a copied database from yielding them, so it can be cheap.
_SECRETS = PasswordHasher(time_cost=1, memory_cost=1024, parallelism=1)


TOKEN_PREFIX = "es"
SESSION_HOURS = 12
MAX_EXPIRES_DAYS = 36_500  # a century: beyond it timedelta overflows (a 500, before)
NAME_MAX = 200  # users.name's width: a longer sign-in name is refused before it reaches the database
PASSWORD_MAX = 1024  # argon2 hashes any length; a megabyte of password is only a way to spend CPU
_TOKEN_ID_DIGITS = 18  # ASCII digits; more would not fit the id column (and int() of "²" raises)


@dataclass(frozen=True)
class Principal:
    """Who is asking: a user (through a token or a browser session) or nobody (``user_id`` None)."""

    user_id: int | None
    name: str | None
    role: str | None
    team: str | None = None
    token_id: int | None = None
    via: str = "anonymous"  # anonymous | token | session

    @property
    def is_admin(self) -> bool:
        return self.role == "admin"

    def may(self, action: str) -> bool:
        return self.role is not None and self.role in ACTIONS[action]

    def require(self, action: str) -> None:
        """Refuse unless the role may do ``action`` (401 for nobody, 403 for a role without it)."""
        if self.role is None:
            raise AuthenticationError(
                "This needs a token: send 'Authorization: Bearer TOKEN'.",
                remedy=Remedy(
                    cli="An admin makes one with 'evalstore tokens create --user NAME'.",
                    web="Sign in, and make a token on your profile page.",
                ),
            )
        if not self.may(action):
            allowed = ", ".join(r for r in ROLES if r in ACTIONS[action])
            raise AccessDenied(f"Your role ({self.role}) may not do this; it is for: {allowed}.")


ANONYMOUS = Principal(None, None, None)


@dataclass(frozen=True)
class UserView:
    name: str
    role: str
    team: str | None
    created_at: datetime
    disabled: bool

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "role": self.role,
            "team": self.team,
            "created_at": self.created_at.isoformat(timespec="seconds"),
            "disabled": self.disabled,
        }


def user_view(user: User) -> UserView:
    return UserView(user.name, user.role, user.team, user.created_at, user.disabled_at is not None)


def get_user(session: Session, name: str) -> User:
    user = session.scalar(select(User).where(User.name == name))
    if user is None:
        raise NotFoundError(f"No user named '{name}'.", remedy=Remedy(cli="See 'evalstore users list'."))
    return user


def add_user(
    engine: Engine, name: str, *, role: str, team: str | None = None, password: str | None = None, by: str | None = None
) -> UserView:
    """A new user. Participants belong to a team (their runs are the team's); passwords are for
    the web pages' sign-in, tokens for everything else."""
    if role not in ROLES:
        raise InvalidParameterError(f"Unknown role '{role}'; use one of {', '.join(ROLES)}.")
    if role == "participant" and not team:
        raise InvalidParameterError(
            "A participant belongs to a team.", remedy=Remedy(cli="Give --team TEAM.", web="Name their team.")
        )
    if password is not None:
        check_new_password(password)
    hashed = passwords.hash_password(password, context_for(engine, None)) if password is not None else None
    try:
        with unit_of_work(engine) as session:
            user = User(name=name, role=role, team=team, password_hash=hashed)
            session.add(user)
            session.flush()
            audit(session, by, "users.add", name, {"role": role, "team": team})
            return user_view(user)
    except IntegrityError:
        raise ConflictError(f"A user named '{name}' exists already; choose another name.") from None


def set_password(
    engine: Engine, name: str, password: str, *, by: str | None = None, context: AppContext | None = None
) -> UserView:
    """Give a user a (new) password for the web pages' sign-in; their signed-in sessions end, so
    a password changed because it leaked locks out whoever used it. API tokens stay valid."""
    check_new_password(password)
    hashed = passwords.hash_password(password, context_for(engine, context))
    with unit_of_work(engine) as session:
        user = get_user(session, name)
        user.password_hash = hashed
        session.execute(
            update(ApiToken)
            .where(ApiToken.user_id == user.id, ApiToken.purpose == "session", ApiToken.revoked_at.is_(None))
            .values(revoked_at=db_now(session))
        )
        audit(session, by, "users.set_password", name)
        return user_view(user)


def check_new_password(password: str) -> None:
    if len(password) > PASSWORD_MAX:
        raise InvalidParameterError(f"A password has at most {PASSWORD_MAX} characters.")
    if len(password) < 8:
        raise InvalidParameterError("A password needs at least 8 characters.")


def list_users(engine: Engine) -> list[UserView]:
    with read_only(engine) as session:
        return [user_view(u) for u in session.scalars(select(User).order_by(User.name))]


def disable_user(engine: Engine, name: str, *, by: str | None = None) -> UserView:
    """Disable a user: their tokens and sessions stop working at once; what they did stays."""
    with unit_of_work(engine) as session:
        user = get_user(session, name)
        user.disabled_at = user.disabled_at or db_now(session)
        audit(session, by, "users.disable", name)
        return user_view(user)


# --- tokens and sessions ------------------------------------------------------------------------


@dataclass(frozen=True)
class IssuedToken:
    """A token as made: ``token`` is shown this once and kept only as a hash."""

    id: int
    user: str
    token: str
    expires_at: datetime | None


def create_token(
    engine: Engine, user_name: str, *, expires_days: float | None = 90, purpose: str = "api", by: str | None = None
) -> IssuedToken:
    """A bearer token for ``user_name`` (``expires_days`` None: it never expires)."""
    if expires_days is not None and not 0 < expires_days <= MAX_EXPIRES_DAYS:  # also refuses NaN
        raise InvalidParameterError(
            f"A token lives a positive number of days, at most {MAX_EXPIRES_DAYS}; not {expires_days}.",
            remedy=Remedy(cli="Give --expires DAYS, or --never-expires.", web=f"Give 1 to {MAX_EXPIRES_DAYS} days."),
        )
    secret = secrets.token_urlsafe(32)
    with unit_of_work(engine) as session:
        user = get_user(session, user_name)
        if user.disabled_at is not None:
            raise InvalidParameterError(f"User '{user_name}' is disabled; they get no new tokens.")
        expires = db_now(session) + timedelta(days=expires_days) if expires_days is not None else None
        row = ApiToken(user_id=user.id, purpose=purpose, secret_hash=_SECRETS.hash(secret), expires_at=expires)
        session.add(row)
        session.flush()
        if purpose == "api":
            audit(session, by or user_name, "tokens.create", user_name, {"token": row.id})
        return IssuedToken(row.id, user.name, f"{TOKEN_PREFIX}_{row.id}_{secret}", expires)


def revoke_token(engine: Engine, token_id: int, *, by: Principal | None = None) -> None:
    """Revoke a token: it stops working at once. A user may revoke their own; an admin any."""
    with unit_of_work(engine) as session:
        row = session.get(ApiToken, token_id)
        if row is None or (by is not None and not by.is_admin and not _may_revoke(session, by, row)):
            raise NotFoundError(
                f"No token {token_id} of yours.",
                remedy=Remedy(
                    cli="'evalstore tokens list' shows the tokens.", web="Your profile page lists your tokens."
                ),
            )
        row.revoked_at = row.revoked_at or db_now(session)
        audit(session, by.name if by else None, "tokens.revoke", str(token_id))


def _may_revoke(session: Session, by: Principal, row: ApiToken) -> bool:
    """Their own token, or (a participant) a teammate's API token: a team's scripts are the team's,
    and a leaked one must not wait for its owner to be revoked."""
    if row.user_id == by.user_id:
        return True
    if by.role != "participant" or not by.team or row.purpose != "api":
        return False
    owner = session.get(User, row.user_id)
    return owner is not None and owner.role == "participant" and owner.team == by.team


@dataclass(frozen=True)
class TokenView:
    """An API token as its owner and admins see it: never its secret."""

    id: int
    user: str
    created_at: datetime
    expires_at: datetime | None
    revoked_at: datetime | None

    def as_dict(self) -> dict[str, object]:
        return {
            "id": self.id,
            "user": self.user,
            "created_at": _iso(self.created_at),
            "expires_at": _iso(self.expires_at),
            "revoked_at": _iso(self.revoked_at),
        }


def list_tokens(engine: Engine, user_name: str | None = None) -> list[TokenView]:
    """Tokens (never their secrets): id, user, created, expires, revoked."""
    with read_only(engine) as session:
        statement = (
            select(ApiToken, User.name)
            .join(User, User.id == ApiToken.user_id)
            .where(ApiToken.purpose == "api")
            .order_by(ApiToken.id)
        )
        if user_name is not None:
            statement = statement.where(User.name == user_name)
        return [
            TokenView(t.id, name, t.created_at, t.expires_at, t.revoked_at) for t, name in session.execute(statement)
        ]


def _iso(value: datetime | None) -> str | None:
    return value.isoformat(timespec="seconds") if value else None


def _secret_matches(context: AppContext, token: str, secret: str, secret_hash: str) -> bool:
    """Whether the token's secret matches its stored hash. A passed check is remembered in
    ``context.verified_secrets`` (by a digest of the token and the hash), so a client's every
    request does not pay for argon2 again. Only the secret's check is remembered: expiry,
    revocation and a disabled user are read from the database on every request."""
    digest = hashlib.sha256(f"{token}\0{secret_hash}".encode()).hexdigest()
    if context.verified_secrets.get(digest):
        return True
    try:
        _SECRETS.verify(secret_hash, secret)
    except (VerificationError, InvalidHashError):
        return False
    context.verified_secrets.put(digest, True)
    return True


_BAD_TOKEN = "The token is not valid: it is wrong, expired or revoked."
_NEW_TOKEN = Remedy(
    cli="Ask an admin for a new one ('evalstore tokens create --user NAME').",
    web="Sign in and make a new one on your profile page, or ask an admin for one.",
)


def authenticate(engine: Engine, token: str, *, purpose: str = "api", context: AppContext | None = None) -> Principal:
    """The user a token (or a session cookie's value, ``purpose`` session) belongs to. Every way it
    can be wrong gets the same message, so a caller learns nothing about which tokens exist. A
    server passes its ``context``, where passed secret checks are remembered."""
    context = context_for(engine, context)
    prefix, _, rest = token.partition("_")
    token_id, _, secret = rest.partition("_")
    if (
        prefix != TOKEN_PREFIX
        or not secret
        or not token_id.isascii()
        or not token_id.isdigit()
        or len(token_id) > _TOKEN_ID_DIGITS
        or int(token_id) >= 2**31
    ):
        raise AuthenticationError(_BAD_TOKEN, remedy=_NEW_TOKEN)
    with read_only(engine) as session:  # one round trip: this runs on every request that has a token
        row = session.execute(
            select(
                ApiToken.purpose,
                ApiToken.secret_hash,
                ApiToken.expires_at,
                ApiToken.revoked_at,
                User.id,
                User.name,
                User.role,
                User.team,
                User.disabled_at,
            )
            .join(User, User.id == ApiToken.user_id)
            .where(ApiToken.id == int(token_id))
        ).first()
    if row is None:
        raise AuthenticationError(_BAD_TOKEN, remedy=_NEW_TOKEN)
    # this host's clock, not the database's (which costs a round trip on PostgreSQL): a token's
    # expiry is hours or days away, and hosts' clocks differ by far less
    expired = row.expires_at is not None and as_utc(row.expires_at) <= datetime.now(UTC)
    if (
        row.purpose != purpose
        or row.revoked_at is not None
        or expired
        or row.disabled_at is not None
        or not _secret_matches(context, token, secret, row.secret_hash)
    ):
        raise AuthenticationError(_BAD_TOKEN, remedy=_NEW_TOKEN)
    via = "session" if purpose == "session" else "token"
    return Principal(row.id, row.name, row.role, row.team, int(token_id), via)


def check_password(engine: Engine, name: str, password: str, *, context: AppContext | None = None) -> None:
    """Whether ``password`` is the user's: AuthenticationError if not (audited), whatever the
    reason (no such user, none set, disabled). A hash made at another cost than the one set now
    is made again at it. The argon2 work runs in one of ``context.password_slots``."""
    if len(name) > NAME_MAX or len(password) > PASSWORD_MAX:
        raise InvalidParameterError(
            f"A user name has at most {NAME_MAX} characters and a password at most {PASSWORD_MAX}."
        )
    with read_only(engine) as session:
        user = session.scalar(select(User).where(User.name == name))
    usable = user is not None and user.disabled_at is None
    valid, rehashed = passwords.verify(
        user.password_hash if user is not None and usable else None, password, context_for(engine, context)
    )
    if not valid:
        with unit_of_work(engine) as session:
            audit(session, name, "sessions.refused", name)
        raise AuthenticationError("Wrong user name or password.")
    if rehashed is not None and user is not None:
        with unit_of_work(engine) as session:
            changed = update(User).where(User.id == user.id, User.password_hash == user.password_hash)
            session.execute(changed.values(password_hash=rehashed))


def sign_in(engine: Engine, name: str, password: str, *, context: AppContext | None = None) -> IssuedToken:
    """A browser session for a user's name and password (the cookie holds its token)."""
    check_password(engine, name, password, context=context)
    return create_token(engine, name, expires_days=SESSION_HOURS / 24, purpose="session")


# --- audit log ----------------------------------------------------------------------------------


def audit(
    session: Session,
    user_name: str | None,
    action: str,
    target: str | None = None,
    detail: dict[str, Any] | None = None,
) -> None:
    """Record who did what, in the transaction that does it (so the log and the deed agree)."""
    session.add(AuditEntry(at=db_now(session), user_name=user_name, action=action, target=target, detail=detail or {}))


@dataclass(frozen=True)
class AuditRecord:
    """One entry of the audit log; ``detail`` is the JSON document stored with it."""

    id: int
    at: datetime
    user: str | None
    action: str
    target: str | None
    detail: Mapping[str, object]

    def as_dict(self) -> dict[str, object]:
        return {
            "id": self.id,
            "at": _iso(self.at),
            "user": self.user,
            "action": self.action,
            "target": self.target,
            "detail": self.detail,
        }


def audit_log(engine: Engine, *, limit: int = 200, actions: Sequence[str] = ()) -> list[AuditRecord]:
    """The newest ``limit`` entries, newest first."""
    with read_only(engine) as session:
        statement = select(AuditEntry).order_by(AuditEntry.id.desc()).limit(limit)
        if actions:
            statement = statement.where(AuditEntry.action.in_(actions))
        return [AuditRecord(e.id, e.at, e.user_name, e.action, e.target, e.detail) for e in session.scalars(statement)]
