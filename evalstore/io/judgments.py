"""Assessors' judgment files: a filled-in pool sheet (TSV or CSV with a header naming topic,
doc and relevance) or TREC qrels lines; refused with ``path:line`` on the first bad row."""

from __future__ import annotations

from pathlib import Path

from evalstore.errors import InputFormatError

# what a qrels file says of a pooled document nobody judged: relevance -1 (trec_eval reads a
# negative relevance as "pooled but not judged"; metrics.preparation codes it internally as UNJUDGED)
TREC_UNJUDGED = -1


def read_judgments(path: Path) -> list[tuple[int, str, str, int]]:
    """(line, topic, doc, relevance) rows of a filled-in sheet: TSV/CSV with a header naming topic,
    doc and relevance (or label), or TREC qrels lines (topic iteration doc relevance)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputFormatError(str(path), None, "no such file") from None
    except UnicodeDecodeError as exc:
        raise InputFormatError(str(path), None, f"not UTF-8 text ({exc.reason})") from None
    lines = text.splitlines()
    first = next((line for line in lines if line.strip() and not line.startswith("#")), None)
    if first is None:
        raise InputFormatError(str(path), None, "the file holds no judgments")
    delimiter = "\t" if "\t" in first else "," if "," in first else None
    header = [h.strip().lower() for h in (first.split(delimiter) if delimiter else first.split())]
    rows = []
    if {"topic", "doc"} <= set(header) and ({"relevance"} & set(header) or {"label"} & set(header)):
        columns = {name: header.index(name) for name in header}
        label = columns["relevance"] if "relevance" in columns else columns["label"]
        start = lines.index(first) + 1
        for number, line in enumerate(lines[start:], start=start + 1):
            if not line.strip() or line.startswith("#"):
                continue
            parts = [p.strip() for p in line.split(delimiter)] if delimiter else line.split()
            if len(parts) != len(header):
                raise InputFormatError(
                    str(path), number, f"expected {len(header)} columns ({', '.join(header)}), found {len(parts)}"
                )
            rows.append((number, parts[columns["topic"]], parts[columns["doc"]], _label(path, number, parts[label])))
        return rows
    for number, line in enumerate(lines, start=1):
        if not line.strip() or line.startswith("#"):
            continue
        parts = line.split()
        if len(parts) != 4:
            raise InputFormatError(
                str(path),
                number,
                f"expected 4 columns (topic iteration doc relevance) or a "
                f"header naming topic, doc and relevance; found {len(parts)}",
            )
        rows.append((number, parts[0], parts[2], _label(path, number, parts[3])))
    return rows


def _label(path: Path, line: int, text: str) -> int:
    if text == "":
        raise InputFormatError(str(path), line, "no relevance label: fill in every row (0 = not relevant)")
    try:
        value = int(text)
    except ValueError:
        raise InputFormatError(str(path), line, f"relevance '{text}' is not an integer") from None
    if value < 0:
        raise InputFormatError(
            str(path), line, f"relevance {value} is negative; labels are 0 (not relevant) or higher (graded)"
        )
    return value
