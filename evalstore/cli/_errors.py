"""Exceptions to exit codes, in one place.

Exit codes: 0 success; 1 an evalstore error (bad input, not found, conflict, schema out of
date...), printed on stderr; 2 a usage error (unknown option, bad value), printed by typer.
"""

from __future__ import annotations

import sys
from enum import IntEnum
from typing import TYPE_CHECKING, Any

import typer
from typer.core import TyperGroup

from evalstore.errors import EvalstoreError, InputFormatError

if TYPE_CHECKING:
    from evalstore.db.outages import Outage


class ExitCode(IntEnum):
    OK = 0
    ERROR = 1
    USAGE = 2


def message_for(exc: EvalstoreError) -> str:
    """The fact, then what to do in the CLI's words (the command or option to use)."""
    said = exc.on_the_command_line()
    # Input errors read like a compiler's, `path:line: problem`, so editors and greps find them.
    return said if isinstance(exc, InputFormatError) else f"Error: {said}"


def outage_message(found: Outage, busy_seconds: float | None) -> str:
    """The database failing a command, in the CLI's words: one line, what to do."""
    if found.kind == "locked":
        waited = f" for more than {busy_seconds:g} s" if busy_seconds is not None else ""
        return (
            f"Error: the database {found.where} is locked: another process has held its write lock{waited}. "
            f"Try again when it has finished, or let writers wait longer with {found.busy_setting}."
        )
    if found.kind == "disk_full":
        free = f", {found.free_bytes:,} bytes free" if found.free_bytes is not None else ""
        return (
            f"Error: the disk holding {found.where} is full ({found.detail}{free}). Nothing was stored. "
            "Free space there, then try again."
        )
    if found.kind == "read_only":
        return (
            f"Error: the database {found.where} is read-only for this user (its file, folder or mount), and this "
            "command writes to it. Commands that only read still work; run this one where the store can be written."
        )
    return (
        f"Error: the database {found.where} is not answering ({found.detail}). "
        "Check that it is running and reachable, then try again."
    )


class ErrorMappingGroup(TyperGroup):
    """The root command group: every subcommand runs inside this handler."""

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except EvalstoreError as exc:
            sys.stderr.write(message_for(exc) + "\n")
            raise typer.Exit(ExitCode.ERROR) from None
        except Exception as exc:
            message = _database_trouble(ctx, exc)
            if message is None:
                raise
            sys.stderr.write(message + "\n")
            raise typer.Exit(ExitCode.ERROR) from None


def _database_trouble(ctx: Any, error: Exception) -> str | None:
    """The one line for a database that failed the command (None: not the database's doing)."""
    from evalstore.config import sqlite_busy_seconds
    from evalstore.db.outages import outage

    url = getattr(ctx.obj, "database_url", None)
    found = outage(error, url)
    if found is None:
        return None
    try:
        busy: float | None = sqlite_busy_seconds()
    except ValueError:
        busy = None
    return outage_message(found, busy)


class UsageConflict(typer.BadParameter):
    """Options given together that cannot be, or neither of two when one is needed: a usage error
    (exit 2, printed by typer under the command's usage line), raised by the command itself."""

    def format_message(self) -> str:
        return self.message  # not "Invalid value: ...": no single value is wrong


def usage_conflict(ctx: typer.Context, message: str) -> UsageConflict:
    return UsageConflict(message, ctx=ctx)
