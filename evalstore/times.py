"""Times as people read them: always in UTC, and saying so ("2026-12-01 12:00 UTC"): the pages,
the CLI and error messages alike (a page's script may then show the reader's own zone)."""

from __future__ import annotations

from datetime import UTC, datetime


def as_utc(value: datetime) -> datetime:
    """``value`` in UTC; a time without a zone is taken as UTC (SQLite hands stored times back so)."""
    return value.astimezone(UTC) if value.tzinfo is not None else value.replace(tzinfo=UTC)


def utc_text(value: datetime) -> str:
    """``value`` to the minute, in UTC, with the zone said."""
    return as_utc(value).strftime("%Y-%m-%d %H:%M UTC")
