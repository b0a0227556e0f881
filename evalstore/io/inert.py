"""Cells of downloaded files that cannot attack whoever opens them: a spreadsheet does not run a
formula from a CSV cell, a Markdown viewer shows a run's name as text (not HTML, not a link), a
LaTeX document compiles whatever the name holds. Run, team and task names come from participants,
who may be adversaries."""

from __future__ import annotations

import csv
import io
import re

# OWASP's "CSV injection" rule: a cell that begins with one of these is read as a formula by
# Excel, LibreOffice or Google Sheets; a leading apostrophe makes it text (and is not shown)
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


def csv_cell(text: str) -> str:
    """``text`` as a spreadsheet shows it, never as a formula (a plain number stays a number)."""
    if text.startswith(_FORMULA_START) and not _NUMBER.fullmatch(text):
        return "'" + text
    return text


# CommonMark: any ASCII punctuation may be backslash-escaped; < > & become entities, so no
# renderer (GitHub's, pandoc's, a browser's through a Markdown library) reads them as HTML
_MD_ENTITIES = {"<": "&lt;", ">": "&gt;", "&": "&amp;"}
# the punctuation that starts emphasis, code, links, images, tables, strike-through or math
# (numbers and ordinary text keep their look in the raw file)
_MD_PUNCTUATION = frozenset("\\`*_{}[]()#+!|~$")


def markdown_cell(text: str) -> str:
    """``text`` shown literally in a Markdown table cell (one line: line breaks become spaces)."""
    out = []
    for char in " ".join(text.splitlines()):
        if char in _MD_ENTITIES:
            out.append(_MD_ENTITIES[char])
        elif char in _MD_PUNCTUATION:
            out.append("\\" + char)
        elif ord(char) < 32 or ord(char) == 127:
            out.append(" ")
        else:
            out.append(char)
    return "".join(out)


_TEX = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    "<": r"\textless{}",
    ">": r"\textgreater{}",
    "|": r"\textbar{}",
}


def latex_cell(text: str) -> str:
    """``text`` typeset literally in a LaTeX document: its special characters escaped, line breaks
    and other control characters (which end a paragraph or a table row) made spaces."""
    return "".join(_TEX.get(c, " " if ord(c) < 32 or ord(c) == 127 else c) for c in text)


def table(header: list[str], rows: list[list[str]], fmt: str, *, right: frozenset[int] = frozenset()) -> str:
    """A downloadable table, every cell made inert: CSV, a Markdown table, or a LaTeX tabular
    (booktabs rules; the columns in ``right`` right-aligned, for numbers)."""
    if fmt == "csv":
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow([csv_cell(h) for h in header])
        writer.writerows([csv_cell(cell) for cell in row] for row in rows)
        return out.getvalue()
    if fmt == "md":
        lines = ["| " + " | ".join(markdown_cell(h) for h in header) + " |", "|" + "---|" * len(header)]
        lines += ["| " + " | ".join(markdown_cell(cell) for cell in row) + " |" for row in rows]
        return "\n".join(lines) + "\n"
    if fmt != "tex":
        raise ValueError(f"no table format '{fmt}'")
    columns = "".join("r" if i in right else "l" for i in range(len(header)))
    lines = [rf"\begin{{tabular}}{{{columns}}}", r"\toprule", " & ".join(latex_cell(h) for h in header) + r" \\"]
    lines += [r"\midrule", *(" & ".join(latex_cell(cell) for cell in row) + r" \\" for row in rows)]
    lines += [r"\bottomrule", r"\end{tabular}"]
    return "\n".join(lines) + "\n"
