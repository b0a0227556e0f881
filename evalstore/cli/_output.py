"""Rendering: results to stdout (rich table, JSON or CSV); diagnostics to stderr."""

import csv
import json
import sys
from collections.abc import Callable, Sequence
from enum import StrEnum
from pathlib import Path
from typing import Any, BinaryIO

from rich.console import Console
from rich.table import Table

from evalstore.io.inert import latex_cell

stdout = Console(soft_wrap=True)
if not stdout.is_terminal:
    # piped or captured output: do not squeeze tables into 80 columns
    stdout = Console(soft_wrap=True, width=200)
stderr = Console(stderr=True, soft_wrap=True)


class OutputFormat(StrEnum):
    table = "table"
    json = "json"
    csv = "csv"


class ReportFormat(StrEnum):
    """Formats of tables meant for papers and reports as well (leaderboards, comparisons)."""

    table = "table"
    json = "json"
    csv = "csv"
    markdown = "markdown"
    latex = "latex"


def format_p(value: float) -> str:
    """A p-value as tables print it, in one style: 4 decimals, and below that '<0.0001' (machine
    formats carry the value itself)."""
    return f"{value:.4f}" if value >= 0.0001 else "<0.0001"


def warn(message: str) -> None:
    """A diagnostic on stderr, printed verbatim (no markup, no wrapping)."""
    sys.stderr.write(f"warning: {message}\n")


def info(message: str) -> None:
    sys.stderr.write(f"{message}\n")


def render(
    rows: Sequence[dict[str, Any]], columns: Sequence[str], fmt: OutputFormat | ReportFormat, title: str | None = None
) -> None:
    """Print ``rows`` (dicts; extra keys appear in JSON only) in the chosen format."""
    if fmt == "markdown":
        sys.stdout.write("| " + " | ".join(columns) + " |\n|" + "---|" * len(columns) + "\n")
        for row in rows:
            sys.stdout.write("| " + " | ".join(_cell(row.get(c)).replace("|", "\\|") for c in columns) + " |\n")
        return
    if fmt == "latex":
        sys.stdout.write(_latex(rows, columns, title))
        return
    if fmt == "json":
        sys.stdout.write(json.dumps(list(rows), indent=2, default=str) + "\n")
        return
    if fmt == "csv":
        writer = csv.writer(sys.stdout, lineterminator="\n")
        writer.writerow(columns)
        for row in rows:
            writer.writerow([_machine_cell(row.get(c)) for c in columns])
        return
    table = Table(title=title)
    for column in columns:
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*(_cell(row.get(c)) for c in columns))
    stdout.print(table)


def render_record(row: dict[str, Any], fmt: OutputFormat, title: str) -> None:
    """One object: a field/value table, or the object itself as JSON/CSV."""
    if fmt is OutputFormat.table:
        render([{"field": k, "value": v} for k, v in row.items()], ["field", "value"], fmt, title=title)
    else:
        render([row], list(row), fmt)


def write_output(output: Path | None, write: Callable[[BinaryIO], None]) -> None:
    """Call ``write`` with the file at ``output``, or with stdout when no file is given."""
    if output is None:
        write(sys.stdout.buffer)
        sys.stdout.flush()
        return
    with output.open("wb") as handle:
        write(handle)


def _latex(rows: Sequence[dict[str, Any]], columns: Sequence[str], caption: str | None) -> str:
    """A booktabs table, cells escaped, ready for \\input."""

    escape = latex_cell
    lines = [r"\begin{table}[t]", r"\centering"]
    if caption:
        lines.append(rf"\caption{{{escape(caption)}}}")
    lines += [
        rf"\begin{{tabular}}{{l{'r' * (len(columns) - 1)}}}",
        r"\toprule",
        " & ".join(escape(c) for c in columns) + r" \\",
        r"\midrule",
    ]
    lines += [" & ".join(escape(_cell(row.get(c))) for c in columns) + r" \\" for row in rows]
    lines += [r"\bottomrule", r"\end{tabular}", r"\end{table}"]
    return "\n".join(lines) + "\n"


def _machine_cell(value: Any) -> str:
    """A CSV cell: numbers at full precision (the shortest text that reads back as the same float),
    as JSON carries them; tables and reports round to 4 decimals for people."""
    return repr(value) if isinstance(value, float) else _cell(value)


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.4f}"
    if isinstance(value, dict):
        return ", ".join(f"{k}={v}" for k, v in value.items())
    return str(value)
