"""Strict readers for runs and qrels: TREC text (plain or .gz), CSV/TSV with a header, Parquet.

Every reader returns a pyarrow Table with fixed column names and types:

    run:   topic (string), doc (string), rank (int64), score (float64)   [+ tag on TREC input]
    qrels: topic (string), iteration (string), doc (string), relevance (int64)

Design: the whole file is parsed at once by pyarrow's multi-threaded CSV reader into columnar
arrays (no per-line Python objects), and validated with vectorised checks. Only when something is
wrong do we re-read the file line by line (:func:`_first_trec_error`) to report the exact
``path:line``. The fast path and the precise path implement the same rules, and a property test
checks that they agree. Files that trec_eval accepts but we refuse in strict mode (extra columns
after the run tag; ranks and relevance values beyond the stored 32- and 16-bit integer columns)
are read when ``strict=False`` (``evalstore trec-eval``, which stores nothing).
"""

from __future__ import annotations

import gzip
import io
import math
import re
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import IO, BinaryIO, Literal

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv

from evalstore import _kernels as pc
from evalstore.errors import InputFormatError
from evalstore.io._hashing import has_repeated_pair, pair_hashes
from evalstore.io.cnumbers import atof, atol, strict_float

Kind = Literal["run", "qrels"]
FORMATS = ("trec", "csv", "tsv", "parquet")

RUN_LAYOUT = "qid Q0 docno rank score tag"
QRELS_LAYOUT = "qid iter docno rel"
_TREC_NAMES = {
    "run": ["topic", "q0", "doc", "rank", "score", "tag"],
    "qrels": ["topic", "iteration", "doc", "relevance"],
}
# Accepted header names for CSV/TSV/Parquet input, canonical name first.
COLUMN_ALIASES = {
    "topic": ("topic", "query_id", "qid", "query"),
    "doc": ("doc", "doc_id", "docno", "docid"),
    "score": ("score", "sim"),
    "rank": ("rank",),
    "relevance": ("relevance", "rel", "label", "judgment"),
    "iteration": ("iteration", "iter"),
    "tag": ("tag", "run_id", "runid"),
}

# The stored integer columns' ranges (run_rows.rank INTEGER, judgments.relevance SMALLINT, in
# both databases): a value outside is bad input, refused with its line like any other.
_STORED_RANGE = {"rank": (-(2**31), 2**31 - 1), "relevance": (-(2**15), 2**15 - 1)}


def _out_of_range(label: str, text: object) -> str:
    low, high = _STORED_RANGE[label]
    return f"{label} '{text}' is out of range; it must be between {low} and {high}"


def _in_range(label: str, value: int) -> bool:
    low, high = _STORED_RANGE[label]
    return low <= value <= high


RUN_SCHEMA = pa.schema([("topic", pa.string()), ("doc", pa.string()), ("rank", pa.int64()), ("score", pa.float64())])
QRELS_SCHEMA = pa.schema(
    [
        ("topic", pa.string()),
        ("iteration", pa.string()),
        ("doc", pa.string()),
        ("relevance", pa.int64()),
    ]
)


@dataclass(frozen=True)
class ParsedFile:
    """A validated run or qrels file."""

    table: pa.Table
    content_hash: str  # sha256 of the decompressed bytes (TREC) or of the file (tables)
    tag: str | None  # TREC run tag of the last line, as trec_eval reports it
    warnings: tuple[str, ...] = ()

    @property
    def topic_count(self) -> int:
        return int(pc.count_distinct(self.table["topic"]).as_py()) if self.table.num_rows else 0


def detect_format(path: Path, explicit: str | None = None) -> str:
    """The input format from ``explicit`` or the file name; TREC text is the default."""
    if explicit is not None:
        if explicit not in FORMATS:
            raise InputFormatError(str(path), None, f"unknown format '{explicit}'; use one of {', '.join(FORMATS)}")
        return explicit
    suffixes = [s.lower() for s in path.suffixes if s.lower() != ".gz"]
    last = suffixes[-1].lstrip(".") if suffixes else ""
    if last in ("parquet", "pq"):
        return "parquet"
    if last == "csv":
        return "csv"
    if last == "tsv":
        return "tsv"
    if last in ("xlsx", "xls", "json", "jsonl", "zip", "feather", "arrow", "pkl"):
        raise InputFormatError(
            str(path),
            None,
            f"unknown format '.{last}'; use TREC text, CSV, TSV or Parquet (or name the format with --format)",
        )
    return "trec"


def read_run(
    path: str | Path,
    *,
    fmt: str | None = None,
    strict: bool = True,
    content_hash: bool = True,
    check_duplicates: bool = True,
    coded_topics: bool = False,
) -> ParsedFile:
    """Read and validate a run file. ``strict=False`` accepts trec_eval's leniencies;
    ``content_hash=False`` skips hashing the bytes (for one-off evaluation, nothing stored);
    ``check_duplicates=False`` leaves the duplicate-docno check to the caller
    (:func:`has_duplicate_docs`), which may run it alongside other work; ``coded_topics=True``
    lets the topic column be dictionary-coded (a 7M-row run's topics in 28 MB, not 77 MB), for a
    caller that only groups rows by topic."""
    return _read(Path(path), "run", fmt, strict, content_hash, check_duplicates, coded_topics)


def duplicate_docno_error(path: str | Path, topic: str, doc: str) -> InputFormatError:
    """The refusal of a docno twice in a topic of a TREC run file, at its second line, naming the
    first (the file is read again, line by line: an error path only)."""
    places: list[int] = []
    with gzip.open(path, "rb") if _is_gzip_file(Path(path)) else open(path, "rb") as handle:
        for number, raw in enumerate(handle, start=1):
            fields = raw.split()
            if (
                len(fields) >= 6
                and not fields[0].startswith(b"#")
                and fields[0].decode("utf-8", "replace") == topic
                and fields[2].decode("utf-8", "replace") == doc
            ):
                places.append(number)
                if len(places) == 2:
                    break
    problem = (
        f"docno '{doc}' appears twice in topic '{topic}'"
        + (f" (first at line {places[0]})" if places else "")
        + "; trec_eval refuses duplicate documents, so remove one of them"
    )
    return InputFormatError(str(path), places[1] if len(places) == 2 else None, problem)


def _is_gzip_file(path: Path) -> bool:
    with path.open("rb") as handle:
        return handle.read(2) == b"\x1f\x8b"


def has_duplicate_docs(table: pa.Table, topic_codes: np.ndarray | None = None) -> bool:
    """Whether a (topic, doc) pair *may* repeat in a run table; re-read with check_duplicates=True
    to get the exact error (a 64-bit hash collision then passes). ``topic_codes``: the topics as
    integer codes, when the caller has them."""
    return has_repeated_pair(table["topic"], table["doc"], topic_codes)


def read_qrels(
    path: str | Path,
    *,
    fmt: str | None = None,
    judgment_groups: bool = False,
    strict: bool = True,
    content_hash: bool = True,
    evaluated_topic: str | None = None,
) -> ParsedFile:
    """Read and validate a qrels file (conflicting duplicate judgments are refused).

    With ``judgment_groups`` the second column names a judgment group (trec_eval ``-R qrels_jg``):
    the same document may then be judged once per group. ``strict=False`` accepts relevance
    values the store could not hold, as trec_eval does (for evaluating files, storing nothing);
    ``content_hash=False`` skips hashing a TREC file's bytes (nothing stored). ``strict=False``
    refuses a repeated identical judgment, as trec_eval does when it evaluates the topic; with
    ``evaluated_topic`` (trec_eval ``-D LEVEL.QID``) only in that topic (others are kept once).
    """
    if judgment_groups:
        return _read_qrels_jg(Path(path), strict)
    return _read(Path(path), "qrels", fmt, strict, content_hash, evaluated_topic=evaluated_topic)


def _read_qrels_jg(path: Path, strict: bool) -> ParsedFile:
    """Each judgment group is validated as a qrels file of its own; the groups are then stacked."""
    if not path.is_file():
        raise InputFormatError(str(path), None, "no such file; check the path")
    data = _read_bytes(path)
    whole = _fast_trec_table(data, "qrels")
    if whole is None:
        error, whole = _first_trec_error(str(path), data, "qrels", strict, keyed_by_group=True)
        if error is not None:
            raise error
    assert whole is not None
    for group in _distinct_values(whole["iteration"]):
        part = pc.filter(whole, pc.equal(whole["iteration"], group))
        if _has_duplicate_pairs(part, "qrels", identical_too=not strict):
            error, _ = _first_trec_error(str(path), data, "qrels", strict, keyed_by_group=True)
            if error is not None:
                raise error
    return ParsedFile(whole.select(["topic", "iteration", "doc", "relevance"]), _sha256(data), None)


def _read(
    path: Path,
    kind: Kind,
    fmt: str | None,
    strict: bool,
    content_hash: bool = True,
    check_duplicates: bool = True,
    coded_topics: bool = False,
    evaluated_topic: str | None = None,
) -> ParsedFile:
    if not path.is_file():
        raise InputFormatError(str(path), None, "no such file; check the path")
    resolved = detect_format(path, fmt)
    if resolved == "trec":
        if kind == "run" and not strict and not content_hash:  # read to evaluate, nothing stored
            streamed = _stream_trec_run(path, coded_topics)
            if streamed is not None and not (check_duplicates and has_duplicate_docs(streamed.table)):
                return streamed
        return _parse_trec_file(path, kind, strict, content_hash, check_duplicates, evaluated_topic)
    return _parse_table(path, resolved, kind, check_duplicates)


def _sha256(data: bytes) -> str:
    import hashlib  # ~3 ms of start-up (OpenSSL), which evaluating a file never needs

    return hashlib.sha256(data).hexdigest()


def _read_bytes(path: Path) -> bytes:
    with path.open("rb") as handle:
        data = handle.read()
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as exc:
            raise InputFormatError(
                str(path), None, f"the file looks gzip-compressed but cannot be read ({exc})"
            ) from None
    return data


# --------------------------------------------------------------------------- TREC text

_COMMENT_LINES = re.compile(rb"(?m)^[ \t]*#[^\n]*(\n|$)")
# pyarrow reads an integer field '0x3' as hexadecimal (3) where C's atol reads 0: such files
# (a docno beginning 0x, too) go the precise way
_HEX_PREFIX = re.compile(rb"(?:^|[ \t])[+-]?0[xX]", re.MULTILINE)
# qrels lines the precise reader must see: blank ones, comments (indented or not)
_QRELS_IRREGULAR = re.compile(rb"(?m)^[ \t\r\f\v]*[#\n]|^[ \t\r\f\v]+\Z")
_WHITESPACE_RUNS = re.compile(rb"[ \t\r\f\v]+")


def _parse_trec_file(
    path: Path,
    kind: Kind,
    strict: bool,
    hash_content: bool = True,
    check_duplicates: bool = True,
    evaluated_topic: str | None = None,
) -> ParsedFile:
    """Parse a TREC file; the raw bytes are released before the (memory-hungry) validation."""
    data = _read_bytes(path)
    content_hash = _sha256(data) if hash_content else ""
    if not data.strip():
        raise InputFormatError(str(path), None, _empty_message(kind))
    table = _fast_trec_table(data, kind)
    del data
    if table is not None and _fast_checks_pass(table, kind, check_duplicates, strict):
        return _finish(table, kind, content_hash, str(path))
    del table
    # Something is off: find the exact line (or, in lenient mode, parse it the slow way).
    error, table = _first_trec_error(
        str(path), _read_bytes(path), kind, strict, check_duplicates=check_duplicates, evaluated_topic=evaluated_topic
    )
    if error is not None:
        raise error
    assert table is not None
    return _finish(table, kind, content_hash, str(path))


def _stream_trec_run(path: Path, coded_topics: bool) -> ParsedFile | None:
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
        with ThreadPoolExecutor(max_workers=1) as pool:
            parsing = pool.submit(_read_run_columns, path, delimiter.decode(), coded_topics)
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
            read_options=pacsv.ReadOptions(column_names=_TREC_NAMES["run"], block_size=1 << 22),
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


def regular_trec_text(handle: BinaryIO | IO[bytes], delimiter: bytes) -> bool:
    """Whether the rest of ``handle`` has no white space but ``delimiter`` and line ends, and no
    empty field: no two of those side by side, none at the start (byte searches and one numpy
    pass, in 4 MB pieces; a file with Windows line ends or blank lines is read the precise way).
    With that, a row pyarrow parses into six fields has six non-empty ones."""
    others = [white for white in (b" ", b"\t", b"\r", b"\v", b"\f") if white != delimiter]
    before = b"\n"
    while piece := handle.read(1 << 22):
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
    if kind == "qrels" and (_QRELS_IRREGULAR.search(data) or _HEX_PREFIX.search(data)):
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
    data = _COMMENT_LINES.sub(b"", data)
    data = _WHITESPACE_RUNS.sub(b"\t", data).replace(b"\n\t", b"\n").replace(b"\t\n", b"\n")
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
    names = _TREC_NAMES[kind]
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


def _fast_checks_pass(table: pa.Table, kind: Kind, check_duplicates: bool = True, strict: bool = True) -> bool:
    if table.num_rows == 0:
        return False
    if kind == "run":
        score = table["score"].to_numpy()
        if not np.isfinite(score).all():
            return False
    label = "rank" if kind == "run" else "relevance"
    extremes = pc.min_max(table[label])
    if strict and not (_in_range(label, extremes["min"].as_py()) and _in_range(label, extremes["max"].as_py())):
        return False
    return not (check_duplicates and _has_duplicate_pairs(table, kind, identical_too=not strict))


def _has_duplicate_pairs(table: pa.Table, kind: Kind, identical_too: bool = False) -> bool:
    """Whether a (topic, doc) pair occurs twice (qrels: with different relevance only, unless
    ``identical_too``: trec_eval refuses any repeated judgment)."""
    if kind == "run":
        # a hash match is a candidate only: the precise path confirms it (or finds a collision)
        return has_repeated_pair(table["topic"], table["doc"])
    if _pairs_increase(table):
        return False
    # pair hashes, not pyarrow's group_by: that loads pyarrow.acero, pyarrow.dataset and pandas
    # (0.2 s of an ordinary `trec-eval`); a hash match is a candidate, confirmed by the precise path
    keys = pair_hashes(table["topic"], table["doc"])
    order = np.argsort(keys, kind="stable")
    same = keys[order][1:] == keys[order][:-1]
    if not same.any():
        return False
    if identical_too:
        return True
    relevance = table["relevance"].to_numpy()[order]
    return bool((relevance[1:][same] != relevance[:-1][same]).any())


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
    columns: dict[str, list[object]] = {name: [] for name in _TREC_NAMES[kind]}
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
        if kind == "qrels":  # get_qrels.c: stricter than the run reader (docs/conf.md)
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
        topic, doc = fields[0], fields[2]
        if kind == "run":
            rank_text, score_text = fields[3], fields[4]
            score = strict_float(score_text) if strict else atof(score_text)
            if score is None:
                return InputFormatError(
                    path,
                    number,
                    f"score '{score_text}' is not a number"
                    + (
                        ""
                        if strict
                        else "; trec_eval's atof would read it as 0 (no leading digits), evalstore refuses it"
                    ),
                ), None
            if not math.isfinite(score):
                return InputFormatError(
                    path, number, f"score '{score_text}' is not a finite number; scores must be finite"
                ), None
            rank = _parse_int(rank_text)
            if rank is None or (strict and not _in_range("rank", rank)):
                if strict:
                    return InputFormatError(
                        path,
                        number,
                        f"rank '{rank_text}' is not an integer" if rank is None else _out_of_range("rank", rank_text),
                    ), None
                rank = 0  # trec_eval never reads the rank column
            key = (topic, doc)
            if key in seen and check_duplicates:
                return InputFormatError(
                    path,
                    number,
                    f"docno '{doc}' appears twice in topic '{topic}' (first at line {seen[key][0]}); "
                    "trec_eval refuses duplicate documents, so remove one of them",
                ), None
            seen[key] = (number, 0)
            row: tuple[str | int | float, ...] = (topic, fields[1], doc, rank, score, fields[5])
        else:
            rel_text = fields[3]
            relevance = _parse_int(rel_text) if strict else _parse_int_as_atol(rel_text)
            if relevance is None:
                return InputFormatError(
                    path,
                    number,
                    f"relevance '{rel_text}' is not an integer"
                    + (
                        ""
                        if strict
                        else "; trec_eval's atol would read it as 0 (no leading digits), evalstore refuses it"
                    ),
                ), None
            if strict and not _in_range("relevance", relevance):
                return InputFormatError(path, number, _out_of_range("relevance", rel_text)), None
            key = (topic, doc) if not keyed_by_group else (topic, f"{fields[1]}\0{doc}")
            if key in seen and seen[key][1] != relevance:
                first_line, first_rel = seen[key]
                return InputFormatError(
                    path,
                    number,
                    f"conflicting judgments for docno '{doc}' in topic '{topic}': relevance "
                    f"{relevance} here, {first_rel} at line {first_line}; keep one of them",
                ), None
            if key in seen and not strict:
                if evaluated_topic is None or topic == evaluated_topic:  # trec_eval: "duplicate docs" (exit 4)
                    return InputFormatError(path, number, _repeated_judgment(doc, topic, seen[key][0])), None
                continue  # a topic trec_eval skips (-D): kept once
            seen.setdefault(key, (number, relevance))
            row = (topic, fields[1], doc, relevance)
        for name, value in zip(_TREC_NAMES[kind], row, strict=True):
            columns[name].append(value)
    if not seen:
        return InputFormatError(path, None, _empty_message(kind)), None
    types = {"rank": pa.int64(), "score": pa.float64(), "relevance": pa.int64()}
    return None, pa.table(
        {name: pa.array(values, type=types.get(name, pa.string())) for name, values in columns.items()}
    )


_INT_PATTERN = re.compile(r"[+-]?[0-9]+\Z")  # ASCII digits: \d would take other scripts' digits


def _parse_int(text: str) -> int | None:
    # Same grammar as pyarrow's int64 conversion: optional sign and decimal digits.
    if not _INT_PATTERN.match(text):
        return None
    value = int(text)
    return value if -(2**63) <= value < 2**63 else None


def _parse_int_as_atol(text: str) -> int | None:
    """trec_eval's reading of a relevance value (lenient mode): C's atol, the leading integer
    ("1.9" and "2e3" are 1 and 2, "0x3" is 0); text with no leading digit at all (which atol would
    silently read as 0) is refused."""
    return atol(text)


def _repeated_judgment(doc: str, topic: str, first: int | str) -> str:
    first_at = f"line {first}" if isinstance(first, int) else first
    return (
        f"docno '{doc}' is judged twice in topic '{topic}' (first at {first_at}); trec_eval refuses "
        "a repeated judgment (duplicate docs), so remove one of them"
    )


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


def _empty_message(kind: Kind) -> str:
    layout = RUN_LAYOUT if kind == "run" else QRELS_LAYOUT
    return f"the file has no {kind} lines; expected lines of the form '{layout}'"


def _finish(table: pa.Table, kind: Kind, content_hash: str, path: str) -> ParsedFile:
    if kind == "run":
        tags = table["tag"]
        tag = str(tags[-1].as_py()) if len(tags) else None
        warnings: tuple[str, ...] = ()
        if len(_distinct_values(tags)) > 1:
            warnings = (
                f"{path}: the run tag is not the same on every line; using '{tag}' from the last "
                "line, as trec_eval does",
            )
        return ParsedFile(table.select(["topic", "doc", "rank", "score"]), content_hash, tag, warnings)
    return _dedupe_qrels(table.select(["topic", "iteration", "doc", "relevance"]), content_hash, path)


def _distinct_values(column: pa.ChunkedArray) -> set[object]:
    values: set[object] = set()
    for chunk in column.chunks:
        unique = pc.unique(chunk)
        if pa.types.is_dictionary(unique.type):
            unique = pc.take(unique.dictionary, unique.indices)
        values.update(unique.to_pylist())
    return values


def _pairs_increase(table: pa.Table) -> bool:
    """Whether (topic, doc) strictly increases from row to row (byte order), so that no pair
    repeats: NIST writes qrels so, and comparing neighbours costs a tenth of hashing every pair."""
    if table.num_rows < 2:
        return True
    topic, doc = (table[name].combine_chunks() for name in ("topic", "doc"))
    before, after = slice(0, table.num_rows - 1), slice(1, table.num_rows)
    topic_before, topic_after = topic[before], topic[after]
    increasing = pc.or_(
        pc.less(topic_before, topic_after),
        pc.and_(pc.equal(topic_before, topic_after), pc.less(doc[before], doc[after])),
    )
    return bool(pc.all(increasing).as_py())


def _dedupe_qrels(table: pa.Table, content_hash: str, path: str) -> ParsedFile:
    """Identical repeated judgments are kept once (conflicting ones were refused already). Rows
    whose (topic, doc) hash is shared are compared as strings: a hash collision keeps both."""
    if _pairs_increase(table):
        return ParsedFile(table, content_hash, None)
    keys = pair_hashes(table["topic"], table["doc"])
    order = np.argsort(keys, kind="stable")
    shared = np.flatnonzero(keys[order][1:] == keys[order][:-1])
    if not len(shared):
        return ParsedFile(table, content_hash, None)
    candidates = np.unique(np.concatenate([order[shared], order[shared + 1]]))
    taken = pa.array(candidates)
    seen: set[tuple[str, str]] = set()
    repeated = []
    topics, docs = pc.take(table["topic"], taken).to_pylist(), pc.take(table["doc"], taken).to_pylist()
    for row, topic, doc in zip(candidates, topics, docs, strict=True):  # in file order: the first of a pair is kept
        if (topic, doc) in seen:
            repeated.append(row)
        seen.add((topic, doc))
    if not repeated:
        return ParsedFile(table, content_hash, None)
    keep = np.setdiff1d(np.arange(table.num_rows), np.array(repeated))
    return ParsedFile(
        pc.take(table, pa.array(keep)),
        content_hash,
        None,
        (f"{path}: {len(repeated)} repeated identical judgments were kept once",),
    )


# --------------------------------------------------------------------------- CSV/TSV/Parquet


def _parse_table(path: Path, fmt: str, kind: Kind, check_duplicates: bool = True) -> ParsedFile:
    raw = _read_bytes(path)
    content_hash = _sha256(raw)
    if not raw.strip():
        raise InputFormatError(str(path), None, _empty_message(kind))
    try:
        if fmt == "parquet":
            import pyarrow.parquet as pq  # ~40 ms with the file systems it loads; Parquet input only

            table = pq.read_table(io.BytesIO(raw))
        else:
            table = pacsv.read_csv(
                io.BytesIO(raw),
                parse_options=pacsv.ParseOptions(delimiter="," if fmt == "csv" else "\t"),
                convert_options=pacsv.ConvertOptions(strings_can_be_null=False),
            )
    except (pa.ArrowInvalid, OSError) as exc:
        raise InputFormatError(str(path), None, f"cannot be read as {fmt.upper()}: {exc}".rstrip()) from None
    header_offset = 0 if fmt == "parquet" else 2  # 1-based line of row 0, after the header
    table = _select_columns(path, table, kind)
    table = _coerce_columns(path, table, kind, header_offset)
    if table.num_rows == 0:
        raise InputFormatError(str(path), None, _empty_message(kind))
    if check_duplicates or kind != "run":
        _check_duplicates(path, table, kind, header_offset)
    if kind == "run":
        return ParsedFile(table.select(["topic", "doc", "rank", "score"]), content_hash, None)
    return _dedupe_qrels(table.select(["topic", "iteration", "doc", "relevance"]), content_hash, str(path))


def _select_columns(path: Path, table: pa.Table, kind: Kind) -> pa.Table:
    required = ["topic", "doc", "score"] if kind == "run" else ["topic", "doc", "relevance"]
    optional = ["rank"] if kind == "run" else ["iteration"]
    chosen = choose_columns(str(path), table.column_names, required, optional)
    return pa.table({canonical: table[source] for canonical, source in chosen.items()})


def choose_columns(
    path: str, names: Sequence[str], required: Sequence[str], optional: Sequence[str] = ()
) -> dict[str, str]:
    """For each canonical column (topic, doc, score, ...), the name a table gives it, found among
    its aliases (:data:`COLUMN_ALIASES`, any case): what every reader of named columns (this
    module, the DuckDB and Spark backends) looks up; a required one missing is refused."""
    lowered = {name.lower(): name for name in names}
    chosen: dict[str, str] = {}
    for canonical in [*required, *optional]:
        source = next((lowered[a] for a in COLUMN_ALIASES[canonical] if a in lowered), None)
        if source is not None:
            chosen[canonical] = source
        elif canonical in required:
            wanted = " or ".join(COLUMN_ALIASES[canonical])
            raise InputFormatError(
                path, None, f"no '{canonical}' column (looked for {wanted}); found {', '.join(names)}"
            )
    return chosen


def _row_location(offset: int, row: int) -> int | None:
    return None if offset == 0 else row + offset


def check_in_memory(table: pa.Table, kind: Kind, label: str, check_duplicates: bool = True) -> pa.Table:
    """In-memory input (``evaluate``'s DataFrame, dict or Table, columns named canonically)
    validated as the file readers validate a table file, with the same messages, naming the row
    (``row N``, 1-based) where they name the line: a missing or non-numeric value, a score that is
    not finite, a relevance that is not an integer, a docno twice in a topic of a run, and a
    docno judged twice in a topic of qrels (conflicting or not: trec_eval refuses both)."""
    path = Path(label)
    table = _coerce_columns(path, table, kind, 0)
    if table.num_rows == 0:
        raise InputFormatError(
            label,
            None,
            f"no {kind} rows; expected columns " + ("topic, doc, score" if kind == "run" else "topic, doc, relevance"),
        )
    if check_duplicates or kind != "run":
        _check_duplicates(path, table, kind, 0, identical_too=True)
    return table


def duplicate_row_error(label: str, table: pa.Table, topic: str, doc: str) -> InputFormatError:
    """The refusal of a docno twice in a topic of an in-memory run, at its second row, naming the first."""
    rows = np.flatnonzero(
        pc.and_(pc.equal(pc.cast(table["topic"], pa.string()), topic), pc.equal(table["doc"], doc)).to_numpy(
            zero_copy_only=False
        )
    )[:2]
    return InputFormatError(
        label,
        None,
        f"row {rows[1] + 1}: docno '{doc}' appears twice in topic '{topic}' (first at "
        f"row {rows[0] + 1}); trec_eval refuses duplicate documents, so remove one "
        "of them",
    )


def _coerce_columns(path: Path, table: pa.Table, kind: Kind, offset: int) -> pa.Table:
    columns: dict[str, pa.ChunkedArray] = {}
    for name in ("topic", "doc", "iteration"):
        if name in table.column_names:
            columns[name] = pc.cast(table[name], pa.string())
            nulls = np.flatnonzero(columns[name].is_null().to_numpy(zero_copy_only=False))
            if len(nulls):
                raise _located(path, offset, int(nulls[0]), f"{name} is missing; every row needs a {name}")
    n = table.num_rows
    if kind == "run":
        columns["score"] = _numeric(path, table["score"], pa.float64(), "score", "a number", offset)
        score = columns["score"].to_numpy()
        bad = np.flatnonzero(~np.isfinite(score))
        if len(bad):
            raise _located(
                path, offset, int(bad[0]), f"score '{score[bad[0]]}' is not a finite number; scores must be finite"
            )
        if "rank" in table.column_names:
            columns["rank"] = _stored_integers(path, table["rank"], "rank", offset)
        else:
            columns["rank"] = pa.chunked_array([np.zeros(n, dtype=np.int64)])
    else:
        columns["relevance"] = _stored_integers(path, table["relevance"], "relevance", offset)
        if "iteration" not in columns:
            columns["iteration"] = pa.chunked_array([pa.array(["0"] * n, pa.string())])
    return pa.table(columns)


def _numeric(
    path: Path, column: pa.ChunkedArray, target: pa.DataType, label: str, what: str, offset: int
) -> pa.ChunkedArray:
    nulls = np.flatnonzero(column.is_null().to_numpy(zero_copy_only=False))
    if len(nulls):
        raise _located(path, offset, int(nulls[0]), f"{label} is missing; every row needs {what}")
    try:
        return pc.cast(column, target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        pass
    values = column.to_pylist()
    for row, value in enumerate(values):
        try:
            pc.cast(pa.array([value]), target)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            raise _located(path, offset, row, f"{label} '{value}' is not {what}") from None
    raise _located(path, offset, 0, f"{label} column is not {what}")


def _stored_integers(path: Path, column: pa.ChunkedArray, label: str, offset: int) -> pa.ChunkedArray:
    values = _numeric(path, column, pa.int64(), label, "an integer", offset)
    low, high = _STORED_RANGE[label]
    as_numpy = values.to_numpy()
    bad = np.flatnonzero((as_numpy < low) | (as_numpy > high))
    if len(bad):
        raise _located(path, offset, int(bad[0]), _out_of_range(label, as_numpy[bad[0]]))
    return values


def _located(path: Path, offset: int, row: int, problem: str) -> InputFormatError:
    line = _row_location(offset, row)
    if line is None:
        return InputFormatError(str(path), None, f"row {row + 1}: {problem}")
    return InputFormatError(str(path), line, problem)


def _check_duplicates(path: Path, table: pa.Table, kind: Kind, offset: int, identical_too: bool = False) -> None:
    if not _has_duplicate_pairs(table, kind, identical_too):
        return
    # Rare path: locate the first offending row.
    topics = table["topic"].to_pylist()
    docs = table["doc"].to_pylist()
    rels = table["relevance"].to_pylist() if kind == "qrels" else None
    first: dict[tuple[str, str], int] = {}
    for row, key in enumerate(zip(topics, docs, strict=True)):
        if key not in first:
            first[key] = row
            continue
        where = _row_location(offset, first[key])
        earlier = f"line {where}" if where is not None else f"row {first[key] + 1}"
        if rels is None:
            raise _located(
                path,
                offset,
                row,
                f"docno '{key[1]}' appears twice in topic '{key[0]}' (first at {earlier}); "
                "trec_eval refuses duplicate documents, so remove one of them",
            )
        if rels[row] != rels[first[key]]:
            raise _located(
                path,
                offset,
                row,
                f"conflicting judgments for docno '{key[1]}' in topic '{key[0]}': relevance "
                f"{rels[row]} here, {rels[first[key]]} at {earlier}; keep one of them",
            )
        if identical_too:
            raise _located(path, offset, row, _repeated_judgment(key[1], key[0], earlier))


# --------------------------------------------------------------------------- preference judgments

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
        text = _read_bytes(file).decode("utf-8")
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
    for line in _read_bytes(Path(path)).decode("utf-8", errors="replace").splitlines():
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
    return ParsedFile(table, _sha256(_read_bytes(file)), None), prefs


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
    for number, line in enumerate(_read_bytes(path).decode("utf-8", errors="replace").splitlines(), start=1):
        if line.strip() and not line.lstrip().startswith("#"):
            seen += 1
            if seen == row:
                return number
    return None
