"""Passwords' argon2 work: hashing at the cost set now (``config.password_cost``) and checking
against a stored hash, each in one of the process's few slots (``AppContext.password_slots``).

At the default cost a check takes 64 MiB and four lanes' threads for ~50-200 ms: without a bound,
16 anonymous clients signing in at once took +1 GB and made public pages 20-30 times slower. A
check waits a moment for a slot, then is refused (LimitExceeded "busy", with a Retry-After) rather
than queued without bound.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

from evalstore.config import password_cost
from evalstore.errors import InvalidParameterError, LimitExceeded
from evalstore.services.context import AppContext

# how long a check waits for a slot before it is refused: a few checks' time at the default cost, so
# an ordinary burst of sign-ins is served and a flood is answered at once
SLOT_WAIT = 0.25
RETRY_SECONDS = 1


def hasher() -> PasswordHasher:
    """argon2id at the cost set now; a check uses the cost its hash records, whatever this one's."""
    try:
        return PasswordHasher(*password_cost())
    except ValueError as bad:
        raise InvalidParameterError(str(bad)) from None


@contextmanager
def slot(context: AppContext) -> Iterator[None]:
    """One of the process's password slots for the block, or LimitExceeded ("busy")."""
    slots = context.password_slots
    if not slots.acquire(timeout=SLOT_WAIT):
        raise LimitExceeded(
            "busy",
            f"The server is checking too many passwords at once; try again in {RETRY_SECONDS} s.",
            retry_after=RETRY_SECONDS,
        )
    try:
        yield
    finally:
        slots.release()


def hash_password(password: str, context: AppContext) -> str:
    with slot(context):
        return hasher().hash(password)


def verify(stored: str | None, password: str, context: AppContext) -> tuple[bool, str | None]:
    """Whether ``password`` matches the ``stored`` hash (None: no usable one, and the same time is
    spent hashing, so whether a user exists does not show in timing), and the hash made again at
    the cost set now when the stored one has another (None when it need not be)."""
    argon2 = hasher()
    with slot(context):
        if stored is None:
            argon2.hash(password)
            return False, None
        try:
            argon2.verify(stored, password)  # True, or it raises
        except (VerificationError, InvalidHashError):
            return False, None
        # a hash made at another cost is made again at the one set now: its user's sign-in then
        # takes as long as an unknown name's, and timing tells nothing
        return True, argon2.hash(password) if argon2.check_needs_rehash(stored) else None
