"""Scratch folders in the temporary directory ($TMPDIR), named for what they hold and for the
process that made them, so that what a killed process left behind is found and removed.

A folder is ``evalstore-KIND-PID.START-RANDOM``: KIND says what it is for (``stage``: a run's or
qrels set's rows on their way into a SQLite store, ``upload``: a file sent to the server), PID and
START the process that made it (START is its start time, so a process id used again later by
another process is not mistaken for the maker). A process removes its folder when done; one killed
(SIGKILL, out of memory, power loss) cannot, and left tens of MB per registration. Every process
that makes scratch folders, and ``evalstore serve`` and ``evalstore worker`` at start, call
:func:`clean_stale`, which removes this user's folders whose maker is no longer running.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from pathlib import Path

_NAME = re.compile(r"^evalstore-[a-z]+-(\d+)\.(\d+)-")


@dataclass(frozen=True)
class Cleaned:
    """What :func:`clean_stale` removed: folders, and the bytes they held."""

    folders: int = 0
    bytes: int = 0


@contextmanager
def folder(kind: str) -> Iterator[Path]:
    """A new scratch folder for ``kind`` (lower-case letters) in the temporary directory, removed
    with what it holds when the block ends."""
    made = Path(tempfile.mkdtemp(prefix=f"evalstore-{kind}-{os.getpid()}.{_started(os.getpid()) or 0}-"))
    try:
        yield made
    finally:
        shutil.rmtree(made, ignore_errors=True)


def clean_stale(directory: Path | None = None) -> Cleaned:
    """Remove this user's scratch folders in ``directory`` (default: the temporary directory)
    whose maker is no longer running. Never raises: a folder that cannot be removed stays."""
    where = directory or Path(tempfile.gettempdir())
    folders = size = 0
    try:
        entries = list(os.scandir(where))
    except OSError:
        return Cleaned()
    for entry in entries:
        found = _NAME.match(entry.name)
        if found is None:
            continue
        try:
            if not entry.is_dir(follow_symlinks=False) or entry.stat(follow_symlinks=False).st_uid != os.getuid():
                continue
        except OSError:
            continue
        if _running(int(found.group(1)), int(found.group(2))):
            continue
        held = _size(Path(entry.path))
        shutil.rmtree(entry.path, ignore_errors=True)
        if not os.path.lexists(entry.path):
            folders, size = folders + 1, size + held
    return Cleaned(folders, size)


def _running(pid: int, started: int) -> bool:
    """Whether the process that made a folder runs still: ``pid`` exists and, where the system
    tells start times (Linux's /proc), started when the folder's name says."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # another user's process holds the id: it exists
    now = _started(pid)
    return now is None or started == 0 or now == started


def _started(pid: int) -> int | None:
    """The start time of process ``pid`` in clock ticks since boot (/proc/PID/stat's 22nd
    field), or None where there is no /proc."""
    return _own_start(pid) if pid == os.getpid() else _read_start(pid)


@cache
def _own_start(pid: int) -> int | None:  # keyed by the id: a forked child has its own
    return _read_start(pid)


def _read_start(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # the command name (2nd field) is in parentheses and may hold spaces: count after its end
    fields = stat[stat.rfind(")") + 2 :].split()
    try:
        return int(fields[19])
    except (IndexError, ValueError):
        return None


def _size(path: Path) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                pass
    return total
