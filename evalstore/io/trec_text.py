"""TREC text runs and qrels (plain or .gz, and -R qrels_jg's judgment groups), as trec_eval reads
them.

Design: the whole file is parsed at once by pyarrow's multi-threaded CSV reader into columnar
arrays (no per-line Python objects), and validated with vectorised checks. Only when something is
wrong do we re-read the file line by line (:func:`_first_trec_error`) to report the exact
``path:line``. The fast path and the precise path implement the same rules, and a property test
checks that they agree. Files that trec_eval accepts but we refuse in strict mode (extra columns
after the run tag; ranks and relevance values beyond the stored 32- and 16-bit integer columns)
are read when ``strict=False`` (``evalstore trec-eval``, which stores nothing).
"""

from __future__ import annotations

import io
import math
import re
import threading
from functools import cache
from pathlib import Path
from typing import IO, Any, BinaryIO

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv

from evalstore import _kernels as pc
from evalstore.errors import InputFormatError, NoRowsError
from evalstore.io.cnumbers import atof, atol, strict_float
from evalstore.io.parsed import (
    QRELS_LAYOUT,
    RUN_LAYOUT,
    TREC_NAMES,
    Kind,
    ParsedFile,
    distinct_values,
    empty_message,
    fast_checks_pass,
    finish_table,
    has_duplicate_pairs,
    in_range,
    out_of_range,
    read_bytes,
    repeated_judgment,
    sha256_hex,
)


def read_qrels_jg(path: Path, strict: bool) -> ParsedFile:
    """Each judgment group is validated as a qrels file of its own; the groups are then stacked."""
    if not path.is_file():
        raise InputFormatError(str(path), None, "no such file; check the path")
    data = read_bytes(path)
    whole = _fast_trec_table(data, "qrels")
    if whole is None:
        error, whole = _first_trec_error(str(path), data, "qrels", strict, keyed_by_group=True)
        if error is not None:
            raise error
    assert whole is not None
    for group in distinct_values(whole["iteration"]):
        part = pc.filter(whole, pc.equal(whole["iteration"], group))
        if has_duplicate_pairs(part, "qrels", identical_too=not strict):
            error, _ = _first_trec_error(str(path), data, "qrels", strict, keyed_by_group=True)
            if error is not None:
                raise error
    return ParsedFile(whole.select(["topic", "iteration", "doc", "relevance"]), sha256_hex(data), None)


# The patterns below are compiled when first used, not at import (~0.1 ms a pattern): an ordinary
# `trec-eval` uses none of them when its qrels are kept, one when it reads them.


@cache
def _comment_lines() -> re.Pattern[bytes]:
    return re.compile(rb"(?m)^[ \t]*#[^\n]*(\n|$)")


# pyarrow reads an integer field '0x3' as hexadecimal (3) where C's atol reads 0: such files
# (a docno beginning 0x, too) go the precise way
@cache
def _hex_prefix() -> re.Pattern[bytes]:
    return re.compile(rb"(?:^|[ \t])[+-]?0[xX]", re.MULTILINE)


# qrels lines the precise reader must see: blank ones, comments (indented or not). Three
# scans, not one multiline pattern (^...|^...\Z, tried at every byte: 27 ms of robust03's 2.7 MB
# qrels, a tenth of an ordinary trec-eval; these take 3 ms): the first line, every line after a
# newline, and the last line when it is white space only.
@cache
def _first_line_irregular() -> re.Pattern[bytes]:
    return re.compile(rb"[ \t\r\f\v]*[#\n]")


@cache
def _later_line_irregular_pattern() -> re.Pattern[bytes]:
    return re.compile(rb"\n[ \t\r\f\v]*[#\n]")


def _qrels_irregular(data: bytes) -> bool:
    last = data[data.rfind(b"\n") + 1 :]
    return bool(
        _first_line_irregular().match(data) or _later_line_irregular(data) or (last and not last.strip(b" \t\r\f\v"))
    )


# a line's first byte: '#' or a newline makes it irregular, white space may (the pattern decides)
_LINE_START = np.zeros(256, dtype=np.int8)
_LINE_START[[ord("#"), ord("\n")]] = 1
_LINE_START[[ord(c) for c in " \t\r\f\v"]] = 2


def _later_line_irregular(data: bytes) -> bool:
    """``_later_line_irregular_pattern().search(data)``, answered from the first byte of every
    line after the first in numpy; the pattern runs only when a line begins with white space
    (~0.5 ms where the pattern's scan took ~2 of robust03's qrels)."""
    codes = np.frombuffer(data, dtype=np.uint8)
    starts = _LINE_START[codes[np.flatnonzero(codes[:-1] == 0x0A) + 1]]
    if (starts == 1).any():
        return True
    return bool((starts == 2).any()) and _later_line_irregular_pattern().search(data) is not None


def _has_hex_prefix(data: bytes) -> bool:
    # the pattern only where '0x' or '0X' occurs at all, found in numpy (the pattern's scan of a
    # file without them took 59 ms of robust03's qrels, two substring tests 4.5, this 0.5); and
    # that pass only when an 'x' or 'X' occurs at all: a one-byte search is memchr (0.06 ms of
    # robust03's qrels, against the numpy pass's ~2.5 ms), and docnos rarely hold one
    if b"x" not in data and b"X" not in data:
        return False
    codes = np.frombuffer(data, dtype=np.uint8)
    maybe = ((codes[:-1] == 0x30) & ((codes[1:] | 0x20) == 0x78)).any()
    return bool(maybe) and _hex_prefix().search(data) is not None


@cache
def _whitespace_runs() -> re.Pattern[bytes]:
    return re.compile(rb"[ \t\r\f\v]+")


def parse_trec_file(
    path: Path,
    kind: Kind,
    strict: bool,
    hash_content: bool = True,
    check_duplicates: bool = True,
    evaluated_topic: str | None = None,
) -> ParsedFile:
    """Parse a TREC file; the raw bytes are released before the (memory-hungry) validation."""
    data = read_bytes(path)
    if hash_content:  # to be stored: no id holds a NUL (evaluating a file reads it as trec_eval does)
        from evalstore.io.limits import refuse_nul  # here: the upload limits are no `trec-eval` start-up's

        refuse_nul(data, str(path))
    content_hash = sha256_hex(data) if hash_content else ""
    if not data.strip():
        raise NoRowsError(str(path), empty_message(kind), zero_bytes=not data)
    table = _fast_trec_table(data, kind)
    del data
    if table is not None and fast_checks_pass(table, kind, check_duplicates, strict):
        return finish_table(table, kind, content_hash, str(path))
    del table
    # Something is off: find the exact line (or, in lenient mode, parse it the slow way).
    error, table = _first_trec_error(
        str(path), read_bytes(path), kind, strict, check_duplicates=check_duplicates, evaluated_topic=evaluated_topic
    )
    if error is not None:
        raise error
    assert table is not None
    return finish_table(table, kind, content_hash, str(path))


def stream_trec_run(path: Path, coded_topics: bool) -> ParsedFile | None:
    """A plain (not compressed) TREC run's topic, doc and score, for evaluating it: pyarrow reads
    the file in blocks, so its bytes are never held whole, and converts only those three columns
    (Q0, rank and tag are not read by trec_eval either). A 7M-row run: ~0.4 s and ~0.3 GB, where
    the storing path takes ~1.2 s and ~1 GB. None when the file is not regular (compressed, comment
    lines, white space other than one delimiter between fields, a bad score): the precise path
    then reads it and finds the line."""
    with path.open("rb") as handle:
        head = handle.read(65536)
        if head[:2] == b"\x1f\x8b" or not head:
            return None
        delimiter = b"\t" if b"\t" in head.split(b"\n", 1)[0] else b" "
        handle.seek(max(path.stat().st_size - 65536, 0))
        last_line = handle.read().rstrip(b"\n").rsplit(b"\n", 1)[-1]
        handle.seek(0)
        # pyarrow parses on its own threads (it lets go of the GIL) while this one scans the bytes
        parsing = _Beside(_read_run_columns, path, delimiter.decode(), coded_topics)
        regular = regular_trec_text(handle, delimiter)
        table = parsing.result()
    if (
        not regular
        or table is None
        or table.num_rows == 0
        or _has_comment_rows(table)
        or not np.isfinite(table["score"].to_numpy()).all()
    ):
        return None
    tag = last_line.split(delimiter)[-1].decode("utf-8", errors="replace")  # trec_eval's runid: the last line's
    return ParsedFile(table, "", tag)


class _Beside(threading.Thread):
    """``function(*args)`` on a thread of its own, its result (or exception) given by
    :meth:`result`. Not concurrent.futures: it imports logging, ~4 ms of every `trec-eval`."""

    def __init__(self, function: Any, *args: Any) -> None:
        super().__init__(daemon=True)
        self._call = (function, args)
        self._outcome: Any = None
        self._error: BaseException | None = None
        self.start()

    def run(self) -> None:
        function, args = self._call
        try:
            self._outcome = function(*args)
        except BaseException as error:  # given to the caller in result()
            self._error = error

    def result(self) -> Any:
        self.join()
        if self._error is not None:
            raise self._error
        return self._outcome


_CODES = pa.dictionary(pa.int32(), pa.string())


def _has_empty_code(column: pa.ChunkedArray) -> bool:
    """Whether a dictionary-coded column holds an empty value (each chunk has its dictionary)."""
    return any(
        len(chunk.dictionary) and pc.min(pc.binary_length(chunk.dictionary)).as_py() == 0 for chunk in column.chunks
    )


def _read_run_columns(path: Path, delimiter: str, coded_topics: bool) -> pa.Table | None:
    try:
        return pacsv.read_csv(
            str(path),
            read_options=pacsv.ReadOptions(column_names=TREC_NAMES["run"], block_size=1 << 22),
            parse_options=pacsv.ParseOptions(
                delimiter=delimiter, quote_char=False, escape_char=False, double_quote=False
            ),
            # every row must still have six fields; only these three are converted
            convert_options=pacsv.ConvertOptions(
                include_columns=["topic", "doc", "score"],
                column_types={
                    "topic": _CODES if coded_topics else pa.string(),
                    "doc": pa.string(),
                    "score": pa.float64(),
                },
                null_values=[],
                strings_can_be_null=False,
                quoted_strings_can_be_null=False,
            ),
        )
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return None


# Each piece is read into new memory and makes two arrays its size; the next piece reuses what the
# last one freed. A piece of 4 MB would make a 4 MB run (robust03's) take 12 MB of new memory, each page a
# fault on first touch (~2,900 faults, ~6 ms of CPU of an ordinary trec-eval); a piece of 256 kB takes
# ~250 faults, and a 300 MB file ~1,200 passes of a few numpy calls.
SCANNED_PIECE = 1 << 18


def regular_trec_text(handle: BinaryIO | IO[bytes], delimiter: bytes) -> bool:
    """Whether the rest of ``handle`` has no white space but ``delimiter`` and line ends, and no
    empty field: no two of those side by side, none at the start (byte searches and one numpy
    pass, in :data:`SCANNED_PIECE` pieces; a file with Windows line ends or blank lines is read
    the precise way). With that, a row pyarrow parses into six fields has six non-empty ones."""
    others = [white for white in (b" ", b"\t", b"\r", b"\v", b"\f") if white != delimiter]
    before = b"\n"
    while piece := handle.read(SCANNED_PIECE):
        if any(white in piece for white in others):
            return False
        # bytes up to 32 are now the delimiter, line ends and control characters (never in a regular file)
        separator = np.frombuffer(before + piece, dtype=np.uint8) <= 32
        if (separator[1:] & separator[:-1]).any():
            return False
        before = piece[-1:]
    return before == b"\n" or before > b" "  # not a delimiter before the end: an empty last field


def _fast_trec_table(data: bytes, kind: Kind) -> pa.Table | None:
    """Parse well-formed TREC text with pyarrow; None when the precise path must take over.

    First try the file as it is, with one delimiter (no pre-scan: scanning 300 MB for
    irregularities costs more than parsing it). If that fails, normalise (drop '#' comment
    lines, fold runs of white space into one tab) and try once more.
    """
    if kind == "qrels" and (_qrels_irregular(data) or _has_hex_prefix(data)):
        return None  # comment or blank lines: get_qrels.c's rules are line by line (_qrels_line_problem)
    first_line = data[: data.find(b"\n")] if b"\n" in data[:65536] else data[:65536]
    delimiter = b"\t" if b"\t" in first_line else b" "
    other = b" " if delimiter == b"\t" else b"\t"
    if other not in data:
        table = _pyarrow_trec(data, kind, delimiter.decode())
        if table is not None and not _has_comment_rows(table) and not _has_empty_fields(table):
            return table
    # trec_eval 10.0: lines starting with '#' are comments ('#' inside a docno is not); fields
    # are separated by any run of white space.
    data = _comment_lines().sub(b"", data)
    data = _whitespace_runs().sub(b"\t", data).replace(b"\n\t", b"\n").replace(b"\t\n", b"\n")
    data = data.removeprefix(b"\t").removesuffix(b"\t")
    table = _pyarrow_trec(data, kind, "\t")
    return None if table is None or _has_comment_rows(table) else table


def _has_empty_fields(table: pa.Table) -> bool:
    # Two delimiters in a row ("1 0  d1") read as an empty field: white space runs are one
    # separator, so such a line has fewer fields than it seems; the normalised pass counts them.
    return table.num_rows > 0 and (
        any(
            pc.min(pc.binary_length(table[name])).as_py() == 0
            for name in ("topic", "iteration", "doc")
            if name in table.column_names
        )
        or any(
            _has_empty_code(table[name])
            for name in ("q0", "rank", "tag")
            if name in table.column_names and pa.types.is_dictionary(table[name].type)
        )
    )


def _has_comment_rows(table: pa.Table) -> bool:
    # A comment line that happens to have the right number of fields and types would parse.
    topic = table["topic"]
    if pa.types.is_dictionary(topic.type):  # each chunk's dictionary holds the values it has
        return any(
            len(chunk.dictionary) and pc.any(pc.starts_with(chunk.dictionary, "#")).as_py() for chunk in topic.chunks
        )
    return table.num_rows > 0 and bool(pc.any(pc.starts_with(topic, "#")).as_py())


def _pyarrow_trec(data: bytes, kind: Kind, delimiter: str) -> pa.Table | None:
    names = TREC_NAMES[kind]
    # The run tag is one value repeated, Q0 too: dictionary-encoded they cost almost nothing (Q0 is
    # read only to see that it is not empty)
    types = (
        {
            "topic": pa.string(),
            "q0": _CODES,
            "doc": pa.string(),
            "rank": pa.int64(),
            "score": pa.float64(),
            "tag": _CODES,
        }
        if kind == "run"
        else {"topic": pa.string(), "iteration": pa.string(), "doc": pa.string(), "relevance": pa.int64()}
    )
    try:
        return pacsv.read_csv(
            io.BytesIO(data),
            # threads pay off on large files only: on robust03's qrels (2 MB) they took 10-30 ms
            # where one thread takes 7
            read_options=pacsv.ReadOptions(column_names=names, block_size=1 << 22, use_threads=len(data) > 1 << 24),
            parse_options=pacsv.ParseOptions(
                delimiter=delimiter, quote_char=False, escape_char=False, double_quote=False
            ),
            convert_options=pacsv.ConvertOptions(
                column_types=types,
                include_columns=list(types),
                null_values=[],
                strings_can_be_null=False,
                quoted_strings_can_be_null=False,
            ),
        )
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return None


def _first_trec_error(
    path: str,
    data: bytes,
    kind: Kind,
    strict: bool,
    keyed_by_group: bool = False,
    check_duplicates: bool = True,
    evaluated_topic: str | None = None,
) -> tuple[InputFormatError | None, pa.Table | None]:
    """Read line by line; return the first error with its line, or the table if there is none.

    This is the reference implementation of the format rules; the fast path must agree with it.
    """
    ncols = 6 if kind == "run" else 4
    layout = RUN_LAYOUT if kind == "run" else QRELS_LAYOUT
    seen: dict[tuple[str, str], tuple[int, int]] = {}  # (topic, doc) -> (line, relevance)
    columns: dict[str, list[object]] = {name: [] for name in TREC_NAMES[kind]}
    lines = data.split(b"\n")
    if lines and not lines[-1]:  # the end of the last line, not a line
        lines.pop()
    after_comment = False
    for number, raw in enumerate(lines, start=1):
        try:
            raw.decode("utf-8")
            # C's isspace (space, \t, \n, \v, \f, \r) separates fields, as bytes.split() splits;
            # str.split() would also split on Unicode spaces (U+00A0, U+3000, ...), which C does not
            fields = [field.decode("utf-8") for field in raw.split()]
        except UnicodeDecodeError as exc:
            return InputFormatError(
                path,
                number,
                f"bytes that are not UTF-8 at column {exc.start + 1}; convert the file to UTF-8 "
                "(e.g. iconv -f latin1 -t utf-8)",
            ), None
        if kind == "qrels":  # get_qrels.c: stricter than the run reader (docs/conformance.md)
            problem = _qrels_line_problem(raw, after_comment, number == len(lines))
            if problem is not None:
                return InputFormatError(path, number, problem), None
            after_comment = raw.startswith(b"#")
            if after_comment:
                continue
        elif not fields or fields[0].startswith("#"):  # get_trec_results.c: '#' after any indentation
            continue
        if len(fields) != ncols and (strict or kind == "qrels" or len(fields) < ncols):
            return InputFormatError(path, number, f"expected {ncols} columns ({layout}), found {len(fields)}"), None
        found = (
            _run_row(path, number, fields, seen, strict, check_duplicates)
            if kind == "run"
            else _qrels_row(path, number, fields, seen, strict, keyed_by_group, evaluated_topic)
        )
        if isinstance(found, InputFormatError):
            return found, None
        if found is None:
            continue
        row = found
        for name, value in zip(TREC_NAMES[kind], row, strict=True):
            columns[name].append(value)
    if not seen:
        return NoRowsError(path, empty_message(kind)), None
    types = {"rank": pa.int64(), "score": pa.float64(), "relevance": pa.int64()}
    return None, pa.table(
        {name: pa.array(values, type=types.get(name, pa.string())) for name, values in columns.items()}
    )


Row = tuple[str | int | float, ...]


def _run_row(
    path: str,
    number: int,
    fields: list[str],
    seen: dict[tuple[str, str], tuple[int, int]],
    strict: bool,
    check_duplicates: bool,
) -> InputFormatError | Row:
    """A run line's row (its first sighting noted in ``seen``), or what is wrong with it."""
    topic, doc = fields[0], fields[2]
    rank_text, score_text = fields[3], fields[4]
    score = strict_float(score_text) if strict else atof(score_text)
    if score is None:
        lenient = "; trec_eval's atof would read it as 0 (no leading digits), evalstore refuses it"
        return InputFormatError(path, number, f"score '{score_text}' is not a number" + ("" if strict else lenient))
    if not math.isfinite(score):
        return InputFormatError(path, number, f"score '{score_text}' is not a finite number; scores must be finite")
    rank = _parse_int(rank_text)
    if rank is None or (strict and not in_range("rank", rank)):
        if strict:
            return InputFormatError(
                path,
                number,
                f"rank '{rank_text}' is not an integer" if rank is None else out_of_range("rank", rank_text),
            )
        rank = 0  # trec_eval never reads the rank column
    key = (topic, doc)
    if key in seen and check_duplicates:
        return InputFormatError(
            path,
            number,
            f"docno '{doc}' appears twice in topic '{topic}' (first at line {seen[key][0]}); "
            "trec_eval refuses duplicate documents, so remove one of them",
        )
    seen[key] = (number, 0)
    return (topic, fields[1], doc, rank, score, fields[5])


def _qrels_row(
    path: str,
    number: int,
    fields: list[str],
    seen: dict[tuple[str, str], tuple[int, int]],
    strict: bool,
    keyed_by_group: bool,
    evaluated_topic: str | None,
) -> InputFormatError | Row | None:
    """A qrels line's row (its first sighting noted in ``seen``), None for a repeated judgment of a
    topic trec_eval skips (kept once), or what is wrong with it."""
    topic, doc = fields[0], fields[2]
    rel_text = fields[3]
    relevance = _parse_int(rel_text) if strict else _parse_int_as_atol(rel_text)
    if relevance is None:
        lenient = "; trec_eval's atol would read it as 0 (no leading digits), evalstore refuses it"
        return InputFormatError(path, number, f"relevance '{rel_text}' is not an integer" + ("" if strict else lenient))
    if strict and not in_range("relevance", relevance):
        return InputFormatError(path, number, out_of_range("relevance", rel_text))
    key = (topic, doc) if not keyed_by_group else (topic, f"{fields[1]}\0{doc}")
    if key in seen and seen[key][1] != relevance:
        first_line, first_rel = seen[key]
        return InputFormatError(
            path,
            number,
            f"conflicting judgments for docno '{doc}' in topic '{topic}': relevance "
            f"{relevance} here, {first_rel} at line {first_line}; keep one of them",
        )
    if key in seen and not strict:
        if evaluated_topic is None or topic == evaluated_topic:  # trec_eval: "duplicate docs" (exit 4)
            return InputFormatError(path, number, repeated_judgment(doc, topic, seen[key][0]))
        return None  # a topic trec_eval skips (-D): kept once
    seen.setdefault(key, (number, relevance))
    return (topic, fields[1], doc, relevance)


@cache
def _int_pattern() -> re.Pattern[str]:
    return re.compile(r"[+-]?[0-9]+\Z")  # ASCII digits: \d would take other scripts' digits


def _parse_int(text: str) -> int | None:
    # Same grammar as pyarrow's int64 conversion: optional sign and decimal digits.
    if not _int_pattern().match(text):
        return None
    value = int(text)
    return value if -(2**63) <= value < 2**63 else None


def _parse_int_as_atol(text: str) -> int | None:
    """trec_eval's reading of a relevance value (lenient mode): C's atol, the leading integer
    ("1.9" and "2e3" are 1 and 2, "0x3" is 0); text with no leading digit at all (which atol would
    silently read as 0) is refused."""
    return atol(text)


# get_qrels.c reads a qrels file strictly: only a '#' in column 0 starts a comment (an indented '#'
# is a topic id), and it skips one comment line at a time; a blank line is a malformed line
def _qrels_line_problem(raw: bytes, after_comment: bool, last: bool) -> str | None:
    if raw.startswith(b"#"):
        if after_comment:
            return (
                "a comment line right after a comment line; trec_eval 10.0 skips one comment line at a time "
                "and reads the next one as a judgment, so join the comments into one line or remove one"
            )
        if last:
            return (
                "a comment line ends the file; trec_eval 10.0 reads past the end of its buffer there "
                "(it crashes), so move the comment up or remove it"
            )
        return None
    if not raw.split():
        return "a blank line; trec_eval 10.0 refuses blank lines in qrels (a malformed line), so remove it"
    return None
