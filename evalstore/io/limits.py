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
from typing import BinaryIO

import numpy as np

from evalstore.errors import InputFormatError, LimitExceeded

GZIP_MAGIC = b"\x1f\x8b"
PARQUET_MAGIC = b"PAR1"
CHUNK = 2**20
MAX_LINE_BYTES = 16 * 2**10  # a TREC run or qrels line is ~60 bytes; 16 KiB leaves room for URLs as docnos
MAX_FIELD_BYTES = 4 * 2**10  # a docno, topic id, tag or label: the longest real ones are URLs (~2 KiB)
_IS_SEPARATOR = np.zeros(256, dtype=bool)
_IS_SEPARATOR[list(b" \t,\r\n")] = True
_NEWLINE = ord("\n")


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
        data = np.frombuffer(chunk, dtype=np.uint8)
        if data.size == 0:
            return
        newlines = np.flatnonzero(data == _NEWLINE)
        # each line's stretch: the first continues the open line of the last chunk, the last is open
        starts = np.concatenate(([-1 - self.line_length], newlines))
        stops = np.concatenate((newlines, [data.size]))
        lengths = stops - starts - 1
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
    written = 0

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
            put(inflater.decompress(pending, CHUNK))
        except zlib.error as error:
            raise InputFormatError(
                shown, None, f"the file looks gzip-compressed but cannot be read ({error})"
            ) from None
        pending = inflater.unconsumed_tail
        if inflater.eof:  # a gzip file may hold several members, one after the other
            pending = inflater.unused_data
            inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
            if not pending:
                pending = source.read(CHUNK)
                if not pending:
                    return True
    put(inflater.flush())
    if not inflater.eof:
        raise InputFormatError(shown, None, "the file looks gzip-compressed but is cut short")
    return True


# a Parquet run or qrels file has a handful of columns; thousands make its metadata the attack
MAX_PARQUET_COLUMNS = 64
# writers group a million rows or ~128 MB at a time: thousands of groups are metadata to walk
MAX_PARQUET_ROW_GROUPS = 10_000
# a decoded row costs at least this much (a TREC run line is ~20-60 bytes): with the inflated
# limit it bounds the rows, as dictionary and run-length encoding let a few bytes stand for
# millions of rows that the compressed and even the uncompressed page sizes never show
MIN_ROW_BYTES = 32
_PARQUET_BATCH_ROWS = 8192


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
    import pyarrow.compute as pc
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
        decoded, first_row = 0, 1
        for batch in parquet.iter_batches(batch_size=_PARQUET_BATCH_ROWS, use_threads=False):
            decoded += batch.nbytes
            if decoded > bounds.max_inflated or first_row - 1 + batch.num_rows > max_rows:
                raise LimitExceeded(
                    "size", f"{shown} decodes to more than this server's limit of {limit_mib}; split it."
                )
            for name, column in zip(batch.schema.names, batch.columns, strict=True):
                if not (
                    pa.types.is_string(column.type)
                    or pa.types.is_large_string(column.type)
                    or pa.types.is_binary(column.type)
                    or pa.types.is_large_binary(column.type)
                ):
                    continue
                lengths = pc.binary_length(column)
                longest = pc.max(lengths).as_py()
                if longest is not None and longest > bounds.max_field:
                    row = first_row + pc.index(pc.greater(lengths, bounds.max_field), True).as_py()
                    raise InputFormatError(
                        shown,
                        None,
                        f"row {row}: column '{name}' holds a field longer than this server's limit of "
                        f"{bounds.max_field} bytes (a docno, topic id, tag or label)",
                    )
            first_row += batch.num_rows
    except (pa.ArrowException, OSError) as error:
        raise InputFormatError(shown, None, f"cannot be read as PARQUET: {error}".rstrip()) from None
