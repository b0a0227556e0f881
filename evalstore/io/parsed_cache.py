"""Qrels as `evalstore trec-eval` read them, kept between commands (an Arrow IPC file each).

Why: a TREC campaign is evaluated as a loop, one ``trec_eval QRELS RUN`` per run, and every
command reads the same qrels again. Parsing and checking robust03's 128k judgments took 35-80 ms
of a fresh process's ~240 (numpy's and pyarrow's first calls are slow in a new process);
memory-mapping the checked table takes ~1 ms. trec_eval keeps nothing: it reads them every time.

What is kept: the table, tag and warnings the reader returned, beside what they were read from:
the file's identity and state as ``os.stat`` tells them (device, inode, size, modification and
change times in nanoseconds), the reader's options, and the reader's code (this package's modules'
sizes and times, pyarrow's version). A kept copy is used only when all of that is the same again.
Writing a file moves both its times; ``touch -d`` can set the modification time back, not the
change time. A file is kept only when it was last changed more than :data:`SETTLED_SECONDS` before
it was read, and did not change while it was read: a file system's clock ticks coarsely (ext4 every
few milliseconds, FAT every two seconds), and a change within the tick of the read would leave
the state as it was (git's index guards against the same "racy" case). A network or FUSE file
system whose times do not move is the one case this cannot see: ``EVALSTORE_CACHE_DIR=off``.

Where: ``$EVALSTORE_CACHE_DIR`` (``off`` turns it off), else ``$XDG_CACHE_HOME/evalstore``, else
``~/.cache/evalstore`` (made for its user alone, and not used when others can write to it); at
most :data:`KEPT_FILES` qrels, the least recently used dropped. A
failure to read or write the cache (a full disk, a read-only home, a damaged file) reads the
qrels as if there were none, and says nothing: it can only be slower.
"""

from __future__ import annotations

import contextlib
import os
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from evalstore.io.parsed import ParsedFile

CACHE_DIR_ENV = "EVALSTORE_CACHE_DIR"
# a file changed less than this long before it is read is read, not kept (see the module's text)
SETTLED_SECONDS = 3.0
KEPT_FILES = 8
ABANDONED_SECONDS = 3600.0
# qrels larger than this (some 3M judgments) are read every time: a kept copy is ~4x its file with
# what prepare works out, and KEPT_FILES of them should not fill a disk unasked (at most ~2 GB)
LARGEST_KEPT_BYTES = 1 << 26
# changes when what is kept changes shape
FORMAT = "evalstore-parsed-qrels-2"
# the kept file's column names: the table's, and the derived arrays'
TABLE, DERIVED = "table:", "derived:"
# between the warnings kept in one metadata value (no reader's message has it)
_SEPARATOR = "\x1f"


def cache_dir() -> Path | None:
    """The folder of kept qrels, or None when ``EVALSTORE_CACHE_DIR=off``."""
    chosen = os.environ.get(CACHE_DIR_ENV)
    if chosen is not None and chosen.strip().lower() in ("off", "0", "false", "no", ""):
        return None
    if chosen:
        return Path(chosen)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "evalstore"


@dataclass(frozen=True)
class ParsedCache:
    """Parsed files kept in ``folder`` (see the module's text)."""

    folder: Path
    settled_seconds: float | None = None  # SETTLED_SECONDS

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
        kept = _load(entry, source)
        if kept is not None:
            return kept
        parsed = reader()
        settled = SETTLED_SECONDS if self.settled_seconds is None else self.settled_seconds
        if not (
            _state(path) == before
            and time.time() - max(before[3], before[4]) / 1e9 > settled
            and before[2] <= LARGEST_KEPT_BYTES
        ):
            return parsed, None
        derived = derive(parsed) if derive is not None else {}
        self._keep(entry, source, parsed, derived)
        return parsed, derived

    def _keep(self, entry: Path, source: str, parsed: ParsedFile, derived: dict[str, pa.Array]) -> None:
        metadata = {
            b"evalstore": FORMAT.encode(),
            b"source": source.encode(),
            b"warnings": _SEPARATOR.join(parsed.warnings).encode(),
            b"tag": b"" if parsed.tag is None else b"=" + parsed.tag.encode(),
            b"content_hash": parsed.content_hash.encode(),
        }
        # one row, each column a list: the table's columns and the derived arrays, of any lengths
        columns = {f"{TABLE}{name}": parsed.table[name].combine_chunks() for name in parsed.table.column_names}
        columns.update({f"{DERIVED}{name}": array for name, array in derived.items()})
        table = pa.table(
            {
                name: pa.LargeListArray.from_arrays(pa.array([0, len(array)], pa.int64()), array)
                for name, array in columns.items()
            }
        ).replace_schema_metadata(metadata)
        partial = entry.with_name(f".{entry.name}.{os.getpid()}.partial")
        try:
            self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            with pa.OSFile(str(partial), "wb") as out, pa.ipc.new_file(out, table.schema) as writer:
                writer.write_table(table)
            os.replace(partial, entry)  # whole or not at all: a reader never sees half a file
            self._prune()
        except (OSError, pa.ArrowException):
            with contextlib.suppress(OSError):
                partial.unlink()

    def _prune(self) -> None:
        """At most KEPT_FILES kept, the most recently used; and no partial file of a process that
        died while writing one (an hour is longer than any write takes)."""
        entries = []
        for child in self.folder.glob("qrels-*.arrow"):
            with contextlib.suppress(OSError):
                entries.append((child.stat().st_mtime_ns, child))
        stale = [child for child in self.folder.glob(".qrels-*.partial") if _age(child) > ABANDONED_SECONDS]
        for child in [child for _, child in sorted(entries, reverse=True)[KEPT_FILES:]] + stale:
            with contextlib.suppress(OSError):
                child.unlink()


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


def _age(path: Path) -> float:
    try:
        return time.time() - path.stat().st_mtime
    except OSError:
        return 0.0


def _state(path: str | Path) -> tuple[int, int, int, int, int] | None:
    try:
        state = os.stat(path)
    except (OSError, ValueError):
        return None
    if not (state.st_mode & 0o170000 == 0o100000):  # a regular file (stdin's copy is one too)
        return None
    return (state.st_dev, state.st_ino, state.st_size, state.st_mtime_ns, state.st_ctime_ns)


def _source(state: tuple[int, ...], options: dict[str, object]) -> str:
    """What a kept copy was read from, all of it: the file's state, the options, the reader."""
    folder = Path(__file__).parent
    reader = sorted(
        (entry.name, entry.stat().st_size, entry.stat().st_mtime_ns)
        for entry in os.scandir(folder)
        if entry.name.endswith(".py")
    )
    return repr((FORMAT, list(state), sorted(options.items()), reader, pa.__version__))


def _load(entry: Path, source: str) -> tuple[ParsedFile, dict[str, pa.Array]] | None:
    if not entry.exists():
        return None
    try:
        with pa.memory_map(str(entry)) as mapped:
            kept = pa.ipc.open_file(mapped).read_all()
        metadata = kept.schema.metadata or {}
        if metadata.get(b"evalstore") != FORMAT.encode() or metadata.get(b"source") != source.encode():
            return None  # kept of the file as it was, or by other code: read it, and keep it anew
        text = metadata[b"warnings"].decode()
        warnings = tuple(text.split(_SEPARATOR)) if text else ()
        tag = metadata[b"tag"].decode()[1:] if metadata[b"tag"] else None
        content_hash = metadata[b"content_hash"].decode()
        # each column's one list, its values as they lie in the mapped file (no copy)
        arrays = {name: kept[name].chunk(0).values for name in kept.column_names}
        table = pa.table({name[len(TABLE) :]: array for name, array in arrays.items() if name.startswith(TABLE)})
        derived = {name[len(DERIVED) :]: array for name, array in arrays.items() if name.startswith(DERIVED)}
    except (OSError, KeyError, ValueError, IndexError, pa.ArrowException):
        with contextlib.suppress(OSError):
            entry.unlink()  # damaged (or not ours): read the file instead, and keep it afresh
        return None
    with contextlib.suppress(OSError):
        os.utime(entry)  # used now: the last to be dropped
    return ParsedFile(table, content_hash, tag, warnings), derived
