"""Reading a usage error (exit code 2) as typer prints it: the usage line, then the message in a
box whose lines wrap at the terminal's width."""

from __future__ import annotations


def usage_message(stderr: str) -> str:
    """The message of the error box, its lines joined with single spaces."""
    inside = [line.strip("│ ").rstrip() for line in stderr.splitlines() if line.startswith("│")]
    return " ".join(part for part in inside if part)
