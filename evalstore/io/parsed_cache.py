"""Qrels as `evalstore trec-eval` read them, kept between commands (an Arrow IPC file each).

Why: a TREC campaign is evaluated as a loop, one ``trec_eval QRELS RUN`` per run, and every
command reads the same qrels again. Parsing and checking robust03's 128k judgments took 35-80 ms
of a fresh process's ~240 (numpy's and pyarrow's first calls are slow in a new process);
memory-mapping the checked table takes ~1 ms. trec_eval keeps nothing: it reads them every time.

What is kept: the table, tag and warnings the reader returned, beside what they were read from:
the file's identity and state as ``fstat`` tells them once it is opened (device, inode, size,
modification and change times in nanoseconds; opened, so that NFS asks its server, where a bare
``stat`` may answer from a cache for up to a minute), the reader's options, and the code that made
the copy (the modules of this package, of ``evalstore.metrics.preparation`` and of the kernels, by size
and time; pyarrow's version). A kept copy is used only when all of that is the same again.
Writing a file moves both its times; ``touch -d`` can set the modification time back, not the
change time. A file is kept only when it was last changed more than :data:`SETTLED_SECONDS` before
it was read, and did not change while it was read: a file system's clock ticks coarsely (ext4 every
few milliseconds, FAT every two seconds), and a change within the tick of the read would leave
the state as it was (git's index guards against the same "racy" case). A network or FUSE file
system whose times do not move is the one case this cannot see: ``EVALSTORE_CACHE_DIR=off``.

Where: ``$EVALSTORE_CACHE_DIR`` (``off`` turns it off), else ``$XDG_CACHE_HOME/evalstore``, else
``~/.cache/evalstore`` (made for its user alone; a folder or a kept file that is not the user's
alone is not used); at most :data:`KEPT_FILES` qrels, the least recently used dropped (only files
named as this module names them are ever deleted). A failure to read or write the cache (a full
disk, a read-only home, no home at all, a damaged file) reads the qrels as if there were none, and
says nothing: it can only be slower. A kept file has no checksum: a bit flipped on the disk inside
a value goes unseen, as it would in the qrels file itself; a damaged structure is found.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import re
import stat
import time
import zlib
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa

from evalstore import config
from evalstore.io.parsed import ParsedFile

CACHE_DIR_ENV = "EVALSTORE_CACHE_DIR"
# a file changed less than this long before it is read is read, not kept (see the module's text)
SETTLED_SECONDS = 3.0
KEPT_FILES = 8
ABANDONED_SECONDS = 3600.0
# qrels whose table is larger than this (some 3M judgments) are read every time: a kept copy is
# ~2.5x the table with what prepare works out, and KEPT_FILES of them should not fill a disk unasked
LARGEST_KEPT_BYTES = 1 << 26
# changes when what is kept changes shape
FORMAT = "evalstore-parsed-qrels-2"
# the kept file's column names: the table's, and the derived arrays'
TABLE, DERIVED = "table:", "derived:"
# between the warnings kept in one metadata value (no reader's message has it)
_SEPARATOR = "\x1f"
# the only names this module writes, and so the only ones it deletes (patterns compiled by re when
# first used: a command that finds its qrels kept deletes nothing)
_ENTRY = r"qrels-[0-9]+-[0-9]+-[0-9a-f]{8}\.arrow"
_PARTIAL = r"\.qrels-[0-9]+-[0-9]+-[0-9a-f]{8}\.arrow\.[0-9]+\.partial"
# the code whose work is kept: its modules' sizes and times are part of what a copy was made from
_CODE = ("io", "metrics/preparation.py", "_kernels.py", "trec_order.py")


def cache_dir() -> Path | None:
    """The folder of kept qrels, or None when ``EVALSTORE_CACHE_DIR=off`` (or there is no home)."""
    try:
        return config.cache_dir()
    except (RuntimeError, KeyError):  # no $HOME and no passwd entry (a container's bare uid)
        return None


class ParsedCache:
    """Parsed files kept in ``folder`` (see the module's text). A plain class, not a dataclass: a
    frozen dataclass compiles six methods from source text each time its module is imported (~0.1
    ms each, in every `trec-eval` process), and a cache is never compared, hashed or printed."""

    def __init__(self, folder: Path, settled_seconds: float | None = None) -> None:
        self.folder = folder
        self.settled_seconds = settled_seconds  # None: SETTLED_SECONDS

    def read(
        self,
        path: str | Path,
        options: dict[str, object],
        reader: Callable[[], ParsedFile],
        derive: Callable[[ParsedFile], dict[str, pa.Array]] | None = None,
    ) -> tuple[ParsedFile, dict[str, pa.Array] | None]:
        """What ``reader()`` returns for ``path`` read with ``options``: the kept copy when the file
        is as it was then, else read (and kept when it has settled). ``derive`` works out arrays to
        keep beside it (when it is kept); they come back with the kept copy, and are None when the
        file was read and not kept. The reader's errors are its own."""
        before = _state(path)
        if before is None or not _private(self.folder):  # the reader says what is wrong with the file
            return reader(), None
        source = _source(before, options)
        named = f"{before[0]}-{before[1]}-{zlib.crc32(repr(sorted(options.items())).encode()):08x}"
        entry = self.folder / f"qrels-{named}.arrow"
        kept = _load(entry, source) if self.folder.is_dir() else None
        if kept is not None:
            return kept
        parsed = reader()
        settled = SETTLED_SECONDS if self.settled_seconds is None else self.settled_seconds
        if not (
            _state(path) == before
            and time.time() - max(before[3], before[4]) / 1e9 > settled
            and parsed.table.nbytes <= LARGEST_KEPT_BYTES
        ):
            return parsed, None
        derived = derive(parsed) if derive is not None else {}
        self._keep(entry, source, parsed, derived)
        return parsed, derived

    def _keep(self, entry: Path, source: str, parsed: ParsedFile, derived: dict[str, pa.Array]) -> None:
        partial = entry.with_name(f".{entry.name}.{os.getpid()}.partial")
        try:
            metadata = {
                b"evalstore": FORMAT.encode(),
                b"source": _bytes(source),
                b"warnings": _bytes(_SEPARATOR.join(parsed.warnings)),
                b"tag": b"" if parsed.tag is None else b"=" + _bytes(parsed.tag),
                b"content_hash": _bytes(parsed.content_hash),
            }
            # one row, each column a list: the table's columns and the derived arrays, of any lengths
            columns = {f"{TABLE}{name}": parsed.table[name].combine_chunks() for name in parsed.table.column_names}
            columns.update({f"{DERIVED}{name}": array for name, array in derived.items()})
            offsets = {length: pa.array([0, length], pa.int64()) for length in {len(a) for a in columns.values()}}
            table = pa.table(
                {name: pa.LargeListArray.from_arrays(offsets[len(array)], array) for name, array in columns.items()}
            ).replace_schema_metadata(metadata)
            self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            if not _private(self.folder):  # made by someone else meanwhile: leave it alone
                return
            with pa.OSFile(str(partial), "wb") as out, pa.ipc.new_file(out, table.schema) as writer:
                writer.write_table(table)
            os.replace(partial, entry)  # whole or not at all: a reader never sees half a file
            self._prune()
        except (OSError, ValueError, pa.ArrowException):
            with contextlib.suppress(OSError):
                partial.unlink()

    def _prune(self) -> None:
        """At most KEPT_FILES kept, the most recently used; and no partial file of a process that
        died while writing one (an hour is longer than any write takes). Only this module's names."""
        entries, stale = [], []
        for child in self.folder.iterdir():
            with contextlib.suppress(OSError):
                if re.fullmatch(_ENTRY, child.name):
                    entries.append((child.stat().st_mtime_ns, child))
                elif re.fullmatch(_PARTIAL, child.name) and time.time() - child.stat().st_mtime > ABANDONED_SECONDS:
                    stale.append(child)
        for child in [child for _, child in sorted(entries, reverse=True)[KEPT_FILES:]] + stale:
            with contextlib.suppress(OSError):
                child.unlink()


def _bytes(text: str) -> bytes:
    # a file name that is not UTF-8 (a warning may name it) comes back as it was
    return text.encode("utf-8", "surrogateescape")


def _text(value: bytes) -> str:
    return value.decode("utf-8", "surrogateescape")


def _private(folder: Path) -> bool:
    """Whether ``folder`` is this user's alone (or not made yet): a kept copy is trusted as the
    file it was read from, so a folder that someone else can write to (``EVALSTORE_CACHE_DIR=/tmp``)
    could be given another user's made-up qrels. Such a folder is not used (ssh treats its keys'
    folder the same way)."""
    try:
        state = folder.stat()
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return state.st_uid == os.getuid() and not state.st_mode & 0o022


def _state(path: str | Path) -> tuple[int, int, int, int, int] | None:
    """The file's state once opened (None: no regular file to open; the reader will say why)."""
    try:
        handle = os.open(path, os.O_RDONLY)
    except (OSError, ValueError):
        return None
    try:
        state = os.fstat(handle)
    finally:
        os.close(handle)
    if not stat.S_ISREG(state.st_mode):  # a regular file (stdin's copy is one too)
        return None
    return (state.st_dev, state.st_ino, state.st_size, state.st_mtime_ns, state.st_ctime_ns)


def _source(state: tuple[int, ...], options: dict[str, object]) -> str:
    """What a kept copy was read from, all of it: the file's state, the options, the code."""
    package = Path(__file__).parents[1]
    code = []
    for part in _CODE:
        place = package / part
        files = sorted(place.glob("*.py")) if place.is_dir() else [place]
        for module in files:
            with contextlib.suppress(OSError):
                found = module.stat()
                code.append((part, module.name, found.st_size, found.st_mtime_ns))
    return repr((FORMAT, list(state), sorted(options.items()), code, pa.__version__))


def _load(entry: Path, source: str) -> tuple[ParsedFile, dict[str, pa.Array]] | None:
    try:
        handle = os.open(entry, os.O_RDONLY)
    except OSError:
        return None
    try:
        try:
            state = os.fstat(handle)
            if state.st_uid != os.getuid() or not stat.S_ISREG(state.st_mode) or not state.st_size:
                raise ValueError("not a kept file of this user's")
            mapped = mmap.mmap(handle, 0, access=mmap.ACCESS_READ)  # the buffers below keep it open
        finally:
            os.close(handle)
        kept = pa.ipc.open_file(pa.BufferReader(pa.py_buffer(mapped))).read_all()
        metadata = kept.schema.metadata or {}
        if metadata.get(b"evalstore") != FORMAT.encode() or metadata.get(b"source") != _bytes(source):
            return None  # kept of the file as it was, or by other code: read it, and keep it anew
        text = _text(metadata[b"warnings"])
        warnings = tuple(text.split(_SEPARATOR)) if text else ()
        tag = _text(metadata[b"tag"])[1:] if metadata[b"tag"] else None
        content_hash = _text(metadata[b"content_hash"])
        kept.validate()
        # each column's one list, its values as they lie in the mapped file (no copy)
        arrays = {name: kept[name].chunk(0).values for name in kept.column_names}
        table = pa.table({name[len(TABLE) :]: array for name, array in arrays.items() if name.startswith(TABLE)})
        derived = {name[len(DERIVED) :]: array for name, array in arrays.items() if name.startswith(DERIVED)}
        table.validate()
    except (OSError, KeyError, ValueError, IndexError, pa.ArrowException):
        with contextlib.suppress(OSError):
            entry.unlink()  # damaged (or not ours): read the file instead, and keep it afresh
        return None
    with contextlib.suppress(OSError):
        os.utime(entry)  # used now: the last to be dropped
    return ParsedFile(table, content_hash, tag, warnings), derived
