"""The other kinds of judgments trec_eval reads: preferences (-R prefs, qrels_prefs) and subtopic
qrels (ndeval's).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

from evalstore.errors import InputFormatError
from evalstore.io.cnumbers import atof
from evalstore.io.parsed import QRELS_LAYOUT, ParsedFile, read_bytes, sha256_hex
from evalstore.io.readers import read_qrels

PREFS_LAYOUT = "qid jg jsg docno rel_level"


@dataclass(frozen=True)
class Preferences:
    """Preference judgment lines, column-wise (one entry per line, in file order)."""

    topic: np.ndarray  # str
    group: np.ndarray  # str: the judgment group
    subgroup: np.ndarray  # str: the judgment sub-group
    doc: np.ndarray  # str
    level: np.ndarray  # float64
    line: np.ndarray | None = None  # each judgment's line in its file, when read from one


def read_prefs(path: str | Path, *, qrels_layout: bool = False) -> Preferences:
    """trec_eval's preference judgments (``-R prefs``: lines ``qid jg jsg docno rel_level``), or a
    qrels file read as preferences (``-R qrels_prefs``: ``qid jg docno rel_level``, one sub-group
    per judgment group). Lines starting with ``#`` are comments; every other line must have exactly
    the columns of its layout and a numeric level, or the file is refused at that line.

    Preference files hold a few thousand lines, so they are read line by line."""
    file = Path(path)
    if not file.is_file():
        raise InputFormatError(str(file), None, "no such file; check the path")
    layout = QRELS_LAYOUT.replace("iter", "jg") if qrels_layout else PREFS_LAYOUT
    width = len(layout.split())
    try:
        text = read_bytes(file).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputFormatError(str(file), None, f"not UTF-8 text ({exc}); save the judgments as UTF-8") from None
    columns: list[list[str]] = [[] for _ in range(width)]
    levels: list[float] = []
    numbers: list[int] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if line.startswith("#"):
            continue
        fields = line.split()
        level = atof(fields[-1]) if len(fields) == width else None  # get_prefs.c: atof
        if level is None or math.isnan(level):
            found = f"{len(fields)} columns" if len(fields) != width else f"the level '{fields[-1]}'"
            raise InputFormatError(
                str(file), number, f"expected {width} columns '{layout}' with a numeric level, found {found}"
            )
        for column, value in zip(columns, fields, strict=False):
            column.append(value)
        levels.append(level)
        numbers.append(number)
    if not levels:
        raise InputFormatError(str(file), None, f"no judgments; expected lines '{layout}'")
    if qrels_layout:  # trec_eval's get_qrels_prefs.c: every line in sub-group "0"
        columns.insert(2, ["0"] * len(levels))
    topic, group, subgroup, doc = (np.array(column, dtype=object) for column in columns[:4])
    return Preferences(topic, group, subgroup, doc, np.array(levels, dtype=np.float64), np.array(numbers))


def preferences_layout(path: str | Path) -> bool:
    """Whether a preference file is laid out as qrels (4 columns: -R qrels_prefs) rather than as
    trec_eval's prefs (5 columns), judging by its first judgment line."""
    for line in read_bytes(Path(path)).decode("utf-8", errors="replace").splitlines():
        if not line.startswith("#") and line.strip():
            return len(line.split()) == 4
    return False


def read_preferences(path: str | Path) -> tuple[ParsedFile, Preferences]:
    """Preference judgments to store (``qrels import --kind preferences``): read as trec_eval reads
    them (:func:`read_prefs`, either layout), each document once per judgment sub-group. That the
    groups are consistent (no document both relevant and not, no cycle), which trec_eval checks
    only when it evaluates, is :func:`evalstore.metrics.preferences.check_consistent`'s to say."""
    file = Path(path)
    prefs = read_prefs(file, qrels_layout=preferences_layout(file) if file.is_file() else False)
    assert prefs.line is not None
    first_line: dict[tuple[str, str, str, str], int] = {}
    for key, line in zip(
        zip(prefs.topic, prefs.group, prefs.subgroup, prefs.doc, strict=True), prefs.line.tolist(), strict=True
    ):
        if key in first_line:
            topic, group, subgroup, doc = key
            raise InputFormatError(
                str(file),
                line,
                f"document {doc} is judged again in topic {topic}, group "
                f"{group}, sub-group {subgroup} (first on line {first_line[key]}); "
                "keep one line",
            )
        first_line[key] = line
    table = pa.table(
        {
            "topic": pa.array(prefs.topic.astype(str)),
            "iteration": pa.array(prefs.group.astype(str)),
            "subgroup": pa.array(prefs.subgroup.astype(str)),
            "doc": pa.array(prefs.doc.astype(str)),
            "relevance": pa.array((prefs.level > 0).astype(np.int64)),
            "level": pa.array(prefs.level),
        }
    )
    return ParsedFile(table, sha256_hex(read_bytes(file)), None), prefs


def read_subtopic_qrels(path: str | Path) -> ParsedFile:
    """Subtopic qrels to store (``qrels import --kind subtopics``): ``topic subtopic docno
    judgment``, each document judged once per subtopic, with ndeval's numbering (whole-number
    topics and subtopics) and judgments of 0 or more."""
    parsed = read_qrels(path, judgment_groups=True)
    table = parsed.table
    bad_number = ~np.array(
        [
            t.isdigit() and t.isascii() and s.isdigit() and s.isascii()
            for t, s in zip(table["topic"].to_pylist(), table["iteration"].to_pylist(), strict=True)
        ],
        dtype=bool,
    )
    negative = table["relevance"].to_numpy() < 0
    if bad_number.any() or negative.any():
        row = int(np.flatnonzero(bad_number | negative)[0])
        problem = (
            "the topic and subtopic must be whole numbers (ndeval's numbering)"
            if bad_number[row]
            else "a subtopic judgment is 0 or more"
        )
        raise InputFormatError(str(path), _judgment_line(Path(path), row), problem)
    return parsed


def _judgment_line(path: Path, row: int) -> int | None:
    """The line of the ``row``-th judgment (0-based) of a TREC text file, comments skipped."""
    seen = -1
    for number, line in enumerate(read_bytes(path).decode("utf-8", errors="replace").splitlines(), start=1):
        if line.strip() and not line.lstrip().startswith("#"):
            seen += 1
            if seen == row:
                return number
    return None
