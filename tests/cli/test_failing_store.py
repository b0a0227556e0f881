"""The real `evalstore` command on a store that fails it: a SQLite writer of another process that
holds the write lock, a store this user cannot write. Each failure is one `Error:` line saying
what to do, exit code 1, nothing half-stored; reads work on a read-only store."""

from __future__ import annotations

import json
import os
import re
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.conftest import Cli, fill_disk
from tests.factories import SAMPLE

EVALSTORE = str(Path(sys.executable).parent / "evalstore")
RUN, QRELS = SAMPLE / "results.test", SAMPLE / "qrels.test"


def _run(store: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [EVALSTORE, "--database-url", f"sqlite:///{store}", *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "EVALSTORE_HOME": str(store.parent), "EVALSTORE_MLFLOW": "off", **env},
    )


def test_a_stalled_writer_is_named_within_the_busy_setting_and_nothing_is_stored(cli: Cli) -> None:
    store = cli.upgrade().folder / "cli.db"
    holder = sqlite3.connect(store, isolation_level=None)  # another process's writer, stalled
    holder.execute("BEGIN IMMEDIATE")
    try:
        started = time.monotonic()
        refused = _run(store, "runs", "register", str(RUN), "--name", "late", EVALSTORE_SQLITE_BUSY_SECONDS="1")
        took = time.monotonic() - started
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert refused.returncode == 1
    assert refused.stderr == (
        f"Error: the database {store} is locked: another process has held its write lock for more than 1 s. "
        "Try again when it has finished, or let writers wait longer with EVALSTORE_SQLITE_BUSY_SECONDS.\n"
    )
    assert 1 <= took < 30, took  # the setting bounds the wait (it was 60 s)
    listed = _run(store, "runs", "list", "--format", "json")
    assert (listed.returncode, json.loads(listed.stdout)) == (0, [])  # nothing half-stored


def test_a_bad_busy_setting_is_one_error_line(cli: Cli) -> None:
    store = cli.upgrade().folder / "cli.db"
    refused = _run(store, "runs", "list", EVALSTORE_SQLITE_BUSY_SECONDS="soon")
    assert (refused.returncode, refused.stdout) == (1, "")
    assert refused.stderr == (
        "Error: EVALSTORE_SQLITE_BUSY_SECONDS='soon' is not a number of seconds from 0.1 to 3600; "
        "unset it for the default (15).\n"
    )


@contextmanager
def _read_only(folder: Path) -> Iterator[Path]:
    """``folder`` where this user cannot write: a read-only bind mount for root (whom file modes
    do not stop), else the folder and its files made read-only by their modes (0555, 0444)."""
    if os.geteuid() == 0:
        mounted = Path(tempfile.mkdtemp(prefix="evalstore-test-ro-"))
        subprocess.run(["mount", "--bind", str(folder), str(mounted)], check=True)
        try:
            subprocess.run(["mount", "-o", "remount,bind,ro", str(mounted)], check=True)
            yield mounted
        finally:
            subprocess.run(["umount", str(mounted)], check=True)
            mounted.rmdir()
        return
    files = [path for path in folder.iterdir() if path.is_file()]
    for path in files:
        path.chmod(0o444)
    folder.chmod(0o555)
    try:
        yield folder
    finally:
        folder.chmod(0o755)
        for path in files:
            path.chmod(0o644)


def test_a_read_only_store_answers_reads_and_refuses_writes_in_one_line(cli: Cli, tmp_path: Path) -> None:
    cli.upgrade()
    assert cli("qrels", "import", str(QRELS), "--name", "q").exit_code == 0
    assert cli("runs", "register", str(RUN), "--name", "std").exit_code == 0
    assert cli("evaluate", "--qrels", "q", "--run", "std", "--wait", env={"EVALSTORE_MLFLOW": "off"}).exit_code == 0
    folder = tmp_path / "store"
    folder.mkdir()
    with sqlite3.connect(cli.folder / "cli.db") as connection:  # one file, as a copied store is
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        connection.execute("VACUUM INTO ?", (str(folder / "evalstore.db"),))
    with _read_only(folder) as readable:
        store = readable / "evalstore.db"
        board = _run(store, "leaderboard", "--qrels", "q", "--format", "json")
        assert (board.returncode, board.stderr) == (0, "")
        [row] = json.loads(board.stdout)
        assert row["run"] == "std"
        runs = _run(store, "runs", "list", "--format", "json")
        assert [run["name"] for run in json.loads(runs.stdout)] == ["std"]
        refused = _run(store, "runs", "register", str(RUN), "--name", "again")
        assert (refused.returncode, refused.stdout) == (1, "")
        assert refused.stderr == (
            f"Error: the database {store} is read-only for this user (its file, folder or mount), and this "
            "command writes to it. Commands that only read still work; run this one where the store can be "
            "written.\n"
        )
        assert not list(readable.glob("evalstore.db-*"))  # no -wal or -shm left behind by a reader


@contextmanager
def _read_only_file(path: Path) -> Iterator[Path]:
    """``path`` (in a folder this user may write) made read-only: bound read-only over itself for
    root, else its mode 0444."""
    if os.geteuid() == 0:
        subprocess.run(["mount", "--bind", str(path), str(path)], check=True)
        try:
            subprocess.run(["mount", "-o", "remount,bind,ro", str(path)], check=True)
            yield path
        finally:
            subprocess.run(["umount", str(path)], check=True)
        return
    path.chmod(0o444)
    try:
        yield path
    finally:
        path.chmod(0o644)


def test_a_read_only_file_in_a_writable_folder_is_read(cli: Cli) -> None:
    store = cli.upgrade().folder / "cli.db"
    assert cli("runs", "register", str(RUN), "--name", "std").exit_code == 0
    with sqlite3.connect(store) as connection:
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    with _read_only_file(store):
        listed = _run(store, "runs", "list", "--format", "json")
        assert (listed.returncode, listed.stderr) == (0, "")
        assert [run["name"] for run in json.loads(listed.stdout)] == ["std"]
        refused = _run(store, "qrels", "import", str(QRELS), "--name", "q")
        assert refused.returncode == 1
        assert refused.stderr.startswith(f"Error: the database {store} is read-only for this user")


def test_a_database_that_is_not_there_is_one_error_line(tmp_path: Path) -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"postgresql+psycopg://evalstore:secret@127.0.0.1:{port}/evalstore"
    refused = subprocess.run(
        [EVALSTORE, "--database-url", url, "runs", "list"],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "EVALSTORE_HOME": str(tmp_path)},
    )
    assert (refused.returncode, refused.stdout) == (1, "")
    assert refused.stderr == (
        f"Error: the database postgresql+psycopg://evalstore:***@127.0.0.1:{port}/evalstore is not answering "
        f'(connection failed: connection to server at "127.0.0.1", port {port} failed: Connection refused). '
        "Check that it is running and reachable, then try again.\n"
    )


def test_a_full_disk_under_the_store_is_named_and_nothing_is_stored(cli: Cli, small_disk: Path) -> None:
    cli.upgrade()
    store = small_disk / "evalstore.db"
    with sqlite3.connect(cli.folder / "cli.db") as connection:
        connection.execute("VACUUM INTO ?", (str(store),))
    fill_disk(small_disk)
    refused = _run(store, "qrels", "import", str(QRELS), "--name", "q", TMPDIR=str(cli.folder))
    assert (refused.returncode, refused.stdout) == (1, "")
    assert refused.stderr == (
        f"Error: the disk holding {store} is full (database or disk is full, 0 bytes free). Nothing was stored. "
        "Free space there, then try again.\n"
    )
    (small_disk / "filler").unlink()
    listed = _run(store, "qrels", "list", "--format", "json")
    assert (listed.returncode, json.loads(listed.stdout)) == (0, [])


def test_a_full_temporary_directory_is_named_and_nothing_is_stored(cli: Cli, small_disk: Path) -> None:
    store = cli.upgrade().folder / "cli.db"
    run = cli.folder / "run"
    run.write_text("".join(f"{t} Q0 d{t}_{d} {d + 1} {1000 - d} r\n" for t in range(100) for d in range(1000)))
    # room for Python's look at the directory (it would choose another one that it cannot write
    # to), not for the 100,000 rows staged there
    filler = fill_disk(small_disk)
    os.truncate(filler, filler.stat().st_size - (256 << 10))
    refused = _run(store, "runs", "register", str(run), "--name", "big", TMPDIR=str(small_disk))
    assert (refused.returncode, refused.stdout) == (1, "")
    assert re.fullmatch(
        f"Error: Could not write the 100,000 rows to a scratch file in {re.escape(str(small_disk))} "
        r"\(the disk is full: [\d,]+ bytes free\)\. Nothing was stored\. Free space there, or set TMPDIR to a "
        r"directory with room for them\.\n",
        refused.stderr,
    ), refused.stderr
    assert [path.name for path in small_disk.iterdir()] == ["filler"]  # no scratch folder left behind
    listed = _run(store, "runs", "list", "--format", "json")
    assert (listed.returncode, json.loads(listed.stdout)) == (0, [])
