"""Reading an untrusted upload with bounded resources: a .gz is inflated as a stream and stopped
at a limit (a 400 KiB gzip bomb otherwise inflates to gigabytes in memory), and text lines and
fields are bounded (one 20 MB docno otherwise costs its hashing and storing inside the write
transaction that every other writer waits on). The readers (evalstore.io.formats) then read a
plain file that is known to be bounded.

The checks are vectorised over each chunk (numpy finds the separators), so a limit costs a few
percent of the copy, not a Python loop over every byte."""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

import numpy as np

from evalstore.errors import InputFormatError, LimitExceeded

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.parquet as pq

GZIP_MAGIC = b"\x1f\x8b"
PARQUET_MAGIC = b"PAR1"
CHUNK = 2**20
MAX_LINE_BYTES = 16 * 2**10  # a TREC run or qrels line is ~60 bytes; 16 KiB leaves room for URLs as docnos
MAX_FIELD_BYTES = 4 * 2**10  # a docno, topic id, tag or label: the longest real ones are URLs (~2 KiB)
# real runs and qrels inflate 2-6 times (the robust03 runs, TREC DL qrels) and a table's column
# chunks a few times more; whitespace or one repeated line inflates ~1000 times, so past the grace
# a higher ratio is a bomb, refused before the readers load what it inflates to
MAX_INFLATE_RATIO = 100
RATIO_GRACE = 2**20  # a small file's ratio says little (a header, a footer, a few repeated lines)
_IS_SEPARATOR = np.zeros(256, dtype=bool)
_IS_SEPARATOR[list(b" \t,\r\n")] = True
_NEWLINE = ord("\n")
_TEXT_SLICE = 64 * 2**10
NUL_PROBLEM = "holds a NUL character (byte 0), which no docno, topic id, tag or label has"


@dataclass(frozen=True)
class Bounds:
    max_inflated: int
    max_line: int = MAX_LINE_BYTES
    max_field: int = MAX_FIELD_BYTES


@dataclass
class _TextCheck:
    """Line and field lengths across chunks: the open line's and field's lengths carry over."""

    path: str
    bounds: Bounds
    line_number: int = 1
    line_length: int = 0
    field_length: int = 0

    def feed(self, chunk: bytes) -> None:
        # a slice at a time: a chunk of blank lines is a million newlines, and the positions of
        # each (8 bytes) in four arrays would be ~32 MiB per chunk
        for start in range(0, len(chunk), _TEXT_SLICE):
            self._feed(chunk[start : start + _TEXT_SLICE])

    def _feed(self, chunk: bytes) -> None:
        data = np.frombuffer(chunk, dtype=np.uint8)
        if data.size == 0:
            return
        newlines = np.flatnonzero(data == _NEWLINE)
        # each line's stretch: the first continues the open line of the last chunk, the last is open
        starts = np.concatenate(([-1 - self.line_length], newlines))
        stops = np.concatenate((newlines, [data.size]))
        lengths = stops - starts - 1
        nul = np.flatnonzero(data == 0)
        if nul.size:  # PostgreSQL's text cannot hold one, and no id does: refused on both databases
            line = self.line_number + int(np.searchsorted(newlines, nul[0]))
            raise InputFormatError(self.path, line, f"the line {NUL_PROBLEM}")
        if int(lengths.max()) > self.bounds.max_line:
            line = self.line_number + int(np.argmax(lengths > self.bounds.max_line))
            raise InputFormatError(
                self.path, line, f"a line is longer than this server's limit of {self.bounds.max_line} bytes"
            )
        # only a line longer than max_field can hold a field longer than it: those few are split
        for i in np.flatnonzero(lengths > self.bounds.max_field):
            segment = data[max(int(starts[i]) + 1, 0) : int(stops[i])]
            self._check_fields(segment, self.field_length if i == 0 else 0, self.line_number + int(i))
        tail = data[int(newlines[-1]) + 1 :] if newlines.size else data
        separators = np.flatnonzero(_IS_SEPARATOR[tail])
        if separators.size:
            self.field_length = tail.size - 1 - int(separators[-1])
        else:
            self.field_length = (0 if newlines.size else self.field_length) + tail.size
        self.line_number += int(newlines.size)
        self.line_length = int(lengths[-1])

    def _check_fields(self, segment: np.ndarray, carried: int, line: int) -> None:
        separators = np.flatnonzero(_IS_SEPARATOR[segment])
        starts = np.concatenate(([-1 - carried], separators))
        stops = np.concatenate((separators, [segment.size]))
        if int((stops - starts - 1).max()) > self.bounds.max_field:
            raise InputFormatError(
                self.path,
                line,
                "a field (a docno, topic id, tag or label) is longer than this "
                f"server's limit of {self.bounds.max_field} bytes",
            )


def copy_bounded(source: BinaryIO, target: BinaryIO, bounds: Bounds, shown: str) -> bool:
    """Copy an upload from ``source`` to ``target``, inflating it if it is gzip-compressed (True
    then), refusing it past ``bounds.max_inflated`` bytes inflated (413) and, unless it is Parquet,
    at the first line or field past its limit (422, with the line)."""
    head = source.read(4)
    gzipped = head[:2] == GZIP_MAGIC
    check: _TextCheck | None = None
    written = consumed = 0

    def put(data: bytes) -> None:
        nonlocal written, check
        if not written and data:  # Parquet (a gzipped one too) is bounded by check_parquet instead
            check = None if data[:4] == PARQUET_MAGIC else _TextCheck(shown, bounds)
        written += len(data)
        if gzipped and written > bounds.max_inflated:
            raise LimitExceeded(
                "size",
                f"{shown} inflates to more than this server's limit of {bounds.max_inflated / 2**20:g} MiB; split it.",
            )
        if gzipped and written > RATIO_GRACE and written > MAX_INFLATE_RATIO * consumed:
            raise LimitExceeded("size", _ratio_refusal(shown))
        if check is not None:
            check.feed(data)
        target.write(data)

    if not gzipped:
        put(head)
        while chunk := source.read(CHUNK):
            put(chunk)
        return False
    inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    pending = head
    while True:
        if not pending:
            pending = source.read(CHUNK)
            if not pending:
                break
        try:
            # at most CHUNK bytes out per call: memory stays bounded whatever the ratio
            out = inflater.decompress(pending, CHUNK)
        except zlib.error as error:
            raise InputFormatError(
                shown, None, f"the file looks gzip-compressed but cannot be read ({error})"
            ) from None
        consumed += len(pending) - len(inflater.unconsumed_tail)
        put(out)
        pending = inflater.unconsumed_tail
        if inflater.eof:  # a gzip file may hold several members, one after the other
            pending = inflater.unused_data
            consumed -= len(pending)  # the next member's bytes, counted when they are inflated
            inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
            if not pending:
                pending = source.read(CHUNK)
                if not pending:
                    return True
    put(inflater.flush())
    if not inflater.eof:
        raise InputFormatError(shown, None, "the file looks gzip-compressed but is cut short")
    return True


def _ratio_refusal(shown: str) -> str:
    return (
        f"{shown} inflates to more than {MAX_INFLATE_RATIO} times its size; this server refuses "
        "such files (real runs and qrels inflate less than 10 times): remove the repeated or blank content."
    )


# a Parquet run or qrels file has a handful of columns; thousands make its metadata the attack
MAX_PARQUET_COLUMNS = 64
# writers group a million rows or ~128 MB at a time: thousands of groups are metadata to walk
MAX_PARQUET_ROW_GROUPS = 10_000
# a decoded row costs at least this much (a TREC run line is ~20-60 bytes): with the inflated
# limit it bounds the rows, as dictionary and run-length encoding let a few bytes stand for
# millions of rows that the compressed and even the uncompressed page sizes never show
MIN_ROW_BYTES = 32
_PARQUET_BATCH_ROWS = 8192


def longest_field_row(array: pa.Array, limit: int) -> int | None:
    """The first row of ``array`` holding a text or binary value longer than ``limit`` bytes, or
    None: whatever the Arrow type says it is (string, large, view, fixed size or binary; dictionary
    encoded, where the values the rows refer to count; inside lists, maps, structs), so that no
    encoding of a Parquet or Arrow file carries a field past the bound."""
    import pyarrow as pa
    import pyarrow.compute as pc

    kind = array.type
    if isinstance(kind, pa.ExtensionType):
        return longest_field_row(array.storage, limit)
    if pa.types.is_dictionary(kind):
        over = longest_rows(array.dictionary, limit)
        if over is None:
            return None
        hits = pc.is_in(array.indices, value_set=pa.array(over, type=array.indices.type))
        found = pc.index(hits, True).as_py()
        return None if found < 0 else int(found)
    if pa.types.is_fixed_size_binary(kind):
        return 0 if len(array) and kind.byte_width > limit else None
    if pa.types.is_string_view(kind) or pa.types.is_binary_view(kind):
        # each value's view is 16 bytes, its length the first 4 (little-endian); no kernel reads it
        views = np.frombuffer(array.buffers()[1], dtype="<i4")[4 * array.offset : 4 * (array.offset + len(array)) : 4]
        return _first_over(views, array, limit)
    if (
        pa.types.is_string(kind)
        or pa.types.is_large_string(kind)
        or pa.types.is_binary(kind)
        or pa.types.is_large_binary(kind)
    ):
        lengths = pc.binary_length(array).to_numpy(zero_copy_only=False)
        return _first_over(lengths, array, limit)
    if pa.types.is_struct(kind):
        rows = [longest_field_row(array.field(i), limit) for i in range(kind.num_fields)]
        found = [row for row in rows if row is not None]
        return min(found) if found else None
    if (
        pa.types.is_list(kind)
        or pa.types.is_large_list(kind)
        or pa.types.is_fixed_size_list(kind)
        or pa.types.is_map(kind)
        or pa.types.is_list_view(kind)
        or pa.types.is_large_list_view(kind)
    ):
        values = array.flatten()
        row = longest_field_row(values, limit)
        if row is None:
            return None
        return int(pc.list_parent_indices(array)[row].as_py())
    if pa.types.is_union(kind) or pa.types.is_run_end_encoded(kind):
        rows = [
            longest_field_row(array.field(i) if pa.types.is_union(kind) else array.values, limit)
            for i in range(kind.num_fields if pa.types.is_union(kind) else 1)
        ]
        return 0 if any(row is not None for row in rows) else None
    return None  # numbers, dates, booleans: fixed width, bounded by the rows


def longest_rows(array: pa.Array, limit: int) -> list[int] | None:
    """The rows of a flat array (a dictionary's values) holding a value longer than ``limit``."""
    if longest_field_row(array, limit) is None:
        return None
    return [i for i in range(len(array)) if longest_field_row(array.slice(i, 1), limit) is not None]


def _first_over(lengths: np.ndarray, array: pa.Array, limit: int) -> int | None:
    over = lengths > limit
    if array.null_count:
        over &= array.is_valid().to_numpy(zero_copy_only=False)
    return int(np.argmax(over)) if over.any() else None


def check_fields(
    table: pa.Table | pa.RecordBatch,
    shown: str,
    limit: int = MAX_FIELD_BYTES,
    *,
    first_line: int | None = None,
    first_row: int = 1,
) -> None:
    """Refuse a table (a file read, a batch of one) with a field longer than ``limit`` bytes in
    any column, of any type (:func:`longest_field_row`), naming the row (``first_row`` is row 0's
    number) or, for a text file whose row 0 is on line ``first_line``, the line: the bound every
    reader of runs, qrels, labels and predictions applies to what it decoded."""
    import pyarrow as pa

    for name, column in zip(table.schema.names, table.columns, strict=True):
        chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
        before = 0
        for chunk in chunks:
            row = longest_field_row(chunk, limit)
            if row is not None:
                problem = (
                    f"column '{name}' holds a field longer than this server's limit of {limit} bytes "
                    "(a docno, topic id, tag or label)"
                )
                if first_line is not None:
                    raise InputFormatError(shown, first_line + before + row, problem)
                raise InputFormatError(shown, None, f"row {first_row + before + row}: {problem}")
            before += len(chunk)
    _check_nul(table, shown, first_line, first_row)


def check_parquet(path: Path, bounds: Bounds, shown: str) -> None:
    """Refuse a Parquet upload that decodes past the server's limits before any reader loads it
    whole: its metadata's rows (413 past ``max_inflated / MIN_ROW_BYTES``), uncompressed size and
    columns first, then, reading it a batch of rows at a time (memory: one batch), every text
    field's length (422 naming the row and column) and the decoded bytes (413). A file that is
    not Parquet is left alone (the readers say what it is)."""
    with path.open("rb") as file:
        if file.read(4) != PARQUET_MAGIC:
            return
    import pyarrow as pa
    import pyarrow.parquet as pq  # ~40 ms; Parquet uploads only

    limit_mib = f"{bounds.max_inflated / 2**20:g} MiB"
    max_rows = bounds.max_inflated // MIN_ROW_BYTES
    try:
        # the footer's own strings and lists are bounded too (pyarrow's defaults are ~100 MB)
        parquet = pq.ParquetFile(
            path, thrift_string_size_limit=bounds.max_field * 64, thrift_container_size_limit=100_000
        )
        meta = parquet.metadata
        if meta.num_columns > MAX_PARQUET_COLUMNS:
            raise InputFormatError(
                shown, None, f"has {meta.num_columns} columns; this server reads at most {MAX_PARQUET_COLUMNS}"
            )
        if meta.num_row_groups > MAX_PARQUET_ROW_GROUPS:
            raise InputFormatError(
                shown,
                None,
                f"has {meta.num_row_groups} row groups; this server reads at most {MAX_PARQUET_ROW_GROUPS}",
            )
        if meta.num_rows > max_rows:
            raise LimitExceeded(
                "size",
                f"{shown} has {meta.num_rows} rows; this server takes at most {max_rows} "
                f"({MIN_ROW_BYTES} bytes a row within its limit of {limit_mib}); split it.",
            )
        uncompressed = sum(
            max(meta.row_group(g).column(c).total_uncompressed_size, 0)
            for g in range(meta.num_row_groups)
            for c in range(meta.num_columns)
        )
        if uncompressed > bounds.max_inflated:
            raise LimitExceeded("size", f"{shown} inflates to more than this server's limit of {limit_mib}; split it.")
        if uncompressed > RATIO_GRACE and uncompressed > MAX_INFLATE_RATIO * path.stat().st_size:
            raise LimitExceeded("size", _ratio_refusal(shown))
        _check_statistics(meta, bounds.max_field, shown)
        decoded, first_row = 0, 1
        for batch in parquet.iter_batches(batch_size=_PARQUET_BATCH_ROWS, use_threads=False):
            decoded += batch.nbytes
            if decoded > bounds.max_inflated or first_row - 1 + batch.num_rows > max_rows:
                raise LimitExceeded(
                    "size", f"{shown} decodes to more than this server's limit of {limit_mib}; split it."
                )
            check_fields(batch, shown, bounds.max_field, first_row=first_row)
            first_row += batch.num_rows
    except (pa.ArrowException, OSError) as error:
        raise InputFormatError(shown, None, f"cannot be read as PARQUET: {error}".rstrip()) from None


def _check_nul(table: pa.Table | pa.RecordBatch, shown: str, first_line: int | None, first_row: int) -> None:
    """A text column's value with a NUL character, refused naming its line or row and column."""
    import pyarrow as pa

    for name, column in zip(table.schema.names, table.columns, strict=True):
        chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
        before = 0
        for chunk in chunks:
            row = _nul_row(chunk)
            if row is not None:
                problem = f"column '{name}' {NUL_PROBLEM}"
                if first_line is not None:
                    raise InputFormatError(shown, first_line + before + row, problem)
                raise InputFormatError(shown, None, f"row {first_row + before + row}: {problem}")
            before += len(chunk)


def _nul_row(array: pa.Array) -> int | None:
    import pyarrow as pa
    import pyarrow.compute as pc

    values = array.dictionary if pa.types.is_dictionary(array.type) else array
    if pa.types.is_string_view(values.type):
        values = values.cast(pa.large_string())
    if not (pa.types.is_string(values.type) or pa.types.is_large_string(values.type)):
        return None
    hits = pc.match_substring(values, "\x00")
    if not pc.any(hits).as_py():
        return None
    if values is not array:  # the rows that refer to a dictionary value holding one
        holding = np.flatnonzero(hits.to_numpy(zero_copy_only=False))
        hits = pc.is_in(array.indices, value_set=pa.array(holding, array.indices.type))
    return int(pc.index(hits, True).as_py())


def holds_nul(value: object) -> bool:
    """Whether a decoded JSON value (a record, its lists, keys and strings) holds a NUL anywhere;
    walked without recursion, so no nesting depth makes it fail."""
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            if "\x00" in item:
                return True
        elif isinstance(item, dict):
            pending.extend(item.keys())
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
    return False


def refuse_nul(data: bytes, shown: str, first_line: int = 1) -> None:
    """Refuse text (a file's bytes, or one line of it) holding a NUL, naming its line."""
    at = data.find(b"\x00")
    if at >= 0:
        raise InputFormatError(shown, first_line + data.count(b"\n", 0, at), f"the line {NUL_PROBLEM}")


def _check_statistics(meta: pq.FileMetaData, limit: int, shown: str) -> None:
    """A row group's text statistics (its least and greatest value, when the writer kept them)
    longer than the bound: refused from the footer, before a page is decoded."""
    for g in range(meta.num_row_groups):
        group = meta.row_group(g)
        for c in range(group.num_columns):
            column = group.column(c)
            stats = column.statistics
            if (
                stats is None
                or not stats.has_min_max
                or column.physical_type not in ("BYTE_ARRAY", "FIXED_LEN_BYTE_ARRAY")
            ):
                continue
            if any(
                isinstance(v, (str, bytes)) and len(v.encode() if isinstance(v, str) else v) > limit
                for v in (stats.min, stats.max)
            ):
                raise InputFormatError(
                    shown,
                    None,
                    f"row group {g + 1}: column '{column.path_in_schema}' holds a field longer than this "
                    f"server's limit of {limit} bytes (a docno, topic id, tag or label)",
                )
