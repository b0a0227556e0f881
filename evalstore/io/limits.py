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
    check = None if head == PARQUET_MAGIC else _TextCheck(shown, bounds)
    written = 0

    def put(data: bytes) -> None:
        nonlocal written
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
