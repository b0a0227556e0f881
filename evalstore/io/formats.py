"""Strict readers for runs and qrels: TREC text (plain or .gz), CSV/TSV with a header, Parquet;
and the other judgment kinds trec_eval reads (preferences, subtopic qrels).

The readers live in modules by job, and this module names them all, as callers have imported
them from here: :mod:`evalstore.io.readers` (the format told, then read),
:mod:`evalstore.io.trec_text` (TREC text), :mod:`evalstore.io.tables` (CSV, TSV, Parquet, frames),
:mod:`evalstore.io.judgment_kinds` (preferences, subtopic qrels) and :mod:`evalstore.io.parsed`
(what they all return, and the checks they share).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from evalstore.io.parsed import (
    QRELS_LAYOUT,
    QRELS_SCHEMA,
    RUN_LAYOUT,
    RUN_SCHEMA,
    Kind,
    ParsedFile,
    duplicate_docno_error,
    has_duplicate_docs,
    is_gzip_file,
)
from evalstore.io.readers import (
    FORMATS,
    detect_format,
    read_qrels,
    read_run,
)
from evalstore.io.trec_text import (
    regular_trec_text,
)

if TYPE_CHECKING:
    from evalstore.io.judgment_kinds import (
        PREFS_LAYOUT,
        Preferences,
        preferences_layout,
        read_preferences,
        read_prefs,
        read_subtopic_qrels,
    )
    from evalstore.io.tables import (
        COLUMN_ALIASES,
        check_in_memory,
        choose_columns,
        duplicate_row_error,
    )

# named here, imported when first asked for: reading a TREC run and qrels to evaluate them
# (`evalstore trec-eval`) needs neither the other judgment kinds nor the CSV, TSV and Parquet
# readers, whose modules (and io.limits) were ~3 ms of its start-up
_ELSEWHERE = {
    **dict.fromkeys(
        ("PREFS_LAYOUT", "Preferences", "preferences_layout", "read_preferences", "read_prefs", "read_subtopic_qrels"),
        "evalstore.io.judgment_kinds",
    ),
    **dict.fromkeys(
        ("COLUMN_ALIASES", "check_in_memory", "choose_columns", "duplicate_row_error"), "evalstore.io.tables"
    ),
}


def __getattr__(name: str) -> Any:
    module = _ELSEWHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "COLUMN_ALIASES",
    "FORMATS",
    "Kind",
    "PREFS_LAYOUT",
    "ParsedFile",
    "Preferences",
    "QRELS_LAYOUT",
    "QRELS_SCHEMA",
    "RUN_LAYOUT",
    "RUN_SCHEMA",
    "check_in_memory",
    "choose_columns",
    "detect_format",
    "duplicate_docno_error",
    "duplicate_row_error",
    "has_duplicate_docs",
    "is_gzip_file",
    "preferences_layout",
    "read_preferences",
    "read_prefs",
    "read_qrels",
    "read_run",
    "read_subtopic_qrels",
    "regular_trec_text",
]
