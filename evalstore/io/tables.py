"""Runs and qrels as tables: CSV/TSV with a header and Parquet, their columns found by name
(:data:`COLUMN_ALIASES`) and coerced to the stored types; also a table already in memory.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv

from evalstore import _kernels as pc
from evalstore.errors import InputFormatError, NoRowsError
from evalstore.io.limits import check_fields
from evalstore.io.parsed import (
    STORED_RANGE,
    Kind,
    ParsedFile,
    dedupe_qrels,
    empty_message,
    has_duplicate_pairs,
    out_of_range,
    read_bytes,
    repeated_judgment,
    sha256_hex,
)

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

_ID_ALIASES = frozenset(COLUMN_ALIASES["topic"] + COLUMN_ALIASES["doc"] + COLUMN_ALIASES["iteration"])


def parse_table(path: Path, fmt: str, kind: Kind, check_duplicates: bool = True) -> ParsedFile:
    raw = read_bytes(path)
    content_hash = sha256_hex(raw)
    if not raw.strip():
        raise NoRowsError(str(path), empty_message(kind), zero_bytes=not raw)
    try:
        if fmt == "parquet":
            import pyarrow.parquet as pq  # ~40 ms with the file systems it loads; Parquet input only

            table = pq.read_table(io.BytesIO(raw))
        else:
            parse = pacsv.ParseOptions(delimiter="," if fmt == "csv" else "\t")
            # ids are read as the text they are, as trec_eval reads them ("007", "1.0"), not as numbers
            header = pacsv.open_csv(io.BytesIO(raw), parse_options=parse).schema.names
            ids = {name: pa.string() for name in header if name.lower() in _ID_ALIASES}
            table = pacsv.read_csv(
                io.BytesIO(raw),
                parse_options=parse,
                convert_options=pacsv.ConvertOptions(strings_can_be_null=False, column_types=ids),
            )
    except (pa.ArrowInvalid, OSError) as exc:
        raise InputFormatError(str(path), None, f"cannot be read as {fmt.upper()}: {exc}".rstrip()) from None
    header_offset = 0 if fmt == "parquet" else 2  # 1-based line of row 0, after the header
    check_fields(table, str(path), first_line=header_offset or None)
    table = _select_columns(path, table, kind)
    table = _coerce_columns(path, table, kind, header_offset)
    if table.num_rows == 0:
        raise NoRowsError(str(path), empty_message(kind))
    if check_duplicates or kind != "run":
        _check_duplicates(path, table, kind, header_offset)
    if kind == "run":
        return ParsedFile(table.select(["topic", "doc", "rank", "score"]), content_hash, None)
    return dedupe_qrels(table.select(["topic", "iteration", "doc", "relevance"]), content_hash, str(path))


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
        raise NoRowsError(
            label,
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


# an integral float is written as the integer it is, below this (a float64 holds every integer
# up to 2**53 exactly); past it, and for the others, Python's shortest text of the number
_EXACT_INTEGERS = 2.0**53


def id_texts(values: pa.Array | pa.ChunkedArray) -> pa.ChunkedArray:
    """Topic ids and docnos as text, one way for every input (a file's columns, a Table's, a
    DataFrame's, a dict's keys): text stays as it is; an integer is its decimal digits; a float
    that is an integer is that integer's digits (``1.0`` is ``'1'``, as the id reads in a TREC
    file; pandas makes ids floats when a column has a gap); any other float Python's shortest
    text (``'1.5'``). Arrow's own cast writes large integral floats with an exponent
    (``'1.23456789012e+11'``) and pandas' ``astype(str)`` writes ``'1.0'``: a run and qrels given
    in two forms matched nothing."""
    column = values if isinstance(values, pa.ChunkedArray) else pa.chunked_array([values])
    if pa.types.is_dictionary(column.type):
        column = pc.cast(column, column.type.value_type)
    if not pa.types.is_floating(column.type):
        return pc.cast(column, pa.string())
    numbers = column.to_numpy(zero_copy_only=False).astype(np.float64)
    valid = ~np.isnan(numbers) if column.null_count == 0 else column.is_valid().to_numpy(zero_copy_only=False)
    integral = valid & np.isfinite(numbers) & (np.abs(numbers) < _EXACT_INTEGERS) & (numbers == np.round(numbers))
    texts = np.empty(len(numbers), dtype=object)
    texts[integral] = numbers[integral].astype(np.int64).astype(str)
    others = valid & ~integral
    texts[others] = [repr(float(v)) for v in numbers[others]]
    return pa.chunked_array([pa.array(texts, pa.string(), mask=~valid)])


def id_texts_of(values: Sequence[object] | np.ndarray) -> pa.Array:
    """:func:`id_texts` of Python values (a frame's column, a dict's keys): a column of one kind
    is read by Arrow and converted as a Table's would be; a mixed one value by value."""
    try:
        array = pa.array(values, from_pandas=True)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        texts = [
            None if _missing(v) else (v if isinstance(v, str) else id_texts(pa.array([v]))[0].as_py()) for v in values
        ]
        return pa.array(texts, pa.string())
    return id_texts(array).combine_chunks()


def _missing(value: object) -> bool:
    return value is None or (isinstance(value, float) and value != value)


def _coerce_columns(path: Path, table: pa.Table, kind: Kind, offset: int) -> pa.Table:
    columns: dict[str, pa.ChunkedArray] = {}
    for name in ("topic", "doc", "iteration"):
        if name in table.column_names:
            columns[name] = id_texts(table[name])
            if columns[name].null_count:  # the rows only when there is one to name
                nulls = np.flatnonzero(columns[name].is_null().to_numpy(zero_copy_only=False))
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
            columns["iteration"] = pa.chunked_array([pa.repeat(pa.scalar("0", pa.string()), n)])
    return pa.table(columns)


def _numeric(
    path: Path, column: pa.ChunkedArray, target: pa.DataType, label: str, what: str, offset: int
) -> pa.ChunkedArray:
    if column.null_count:
        nulls = np.flatnonzero(column.is_null().to_numpy(zero_copy_only=False))
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
    low, high = STORED_RANGE[label]
    as_numpy = values.to_numpy()
    bad = np.flatnonzero((as_numpy < low) | (as_numpy > high))
    if len(bad):
        raise _located(path, offset, int(bad[0]), out_of_range(label, as_numpy[bad[0]]))
    return values


def _located(path: Path, offset: int, row: int, problem: str) -> InputFormatError:
    line = _row_location(offset, row)
    if line is None:
        return InputFormatError(str(path), None, f"row {row + 1}: {problem}")
    return InputFormatError(str(path), line, problem)


def _check_duplicates(path: Path, table: pa.Table, kind: Kind, offset: int, identical_too: bool = False) -> None:
    if not has_duplicate_pairs(table, kind, identical_too):
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
            raise _located(path, offset, row, repeated_judgment(key[1], key[0], earlier))
