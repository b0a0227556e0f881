"""Exceptions to exit codes, in one place.

Exit codes: 0 success; 1 an evalstore error (bad input, not found, conflict, schema out of
date...), printed on stderr; 2 a usage error (unknown option, bad value), printed by typer.
"""

import sys
from enum import IntEnum
from typing import Any

import typer
from typer.core import TyperGroup

from evalstore.errors import EvalstoreError, InputFormatError


class ExitCode(IntEnum):
    OK = 0
    ERROR = 1
    USAGE = 2


def message_for(exc: EvalstoreError) -> str:
    # Input errors read like a compiler's, `path:line: problem`, so editors and greps find them.
    return str(exc) if isinstance(exc, InputFormatError) else f"Error: {exc}"


class ErrorMappingGroup(TyperGroup):
    """The root command group: every subcommand runs inside this handler."""

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except EvalstoreError as exc:
            sys.stderr.write(message_for(exc) + "\n")
            raise typer.Exit(ExitCode.ERROR) from None


class UsageConflict(typer.BadParameter):
    """Options given together that cannot be, or neither of two when one is needed: a usage error
    (exit 2, printed by typer under the command's usage line), raised by the command itself."""

    def format_message(self) -> str:
        return self.message  # not "Invalid value: ...": no single value is wrong


def usage_conflict(ctx: typer.Context, message: str) -> UsageConflict:
    return UsageConflict(message, ctx=ctx)
