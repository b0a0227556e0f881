"""Scratch folders (evalstore.scratch): named for what they hold and who made them, and what a
killed process left behind is removed by the next one that makes scratch files, by `evalstore
serve` and by `evalstore worker` at start."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from evalstore import scratch
from evalstore.db.engine import make_engine
from evalstore.services import access
from evalstore.web.app import create_app
from evalstore.web.settings import ServerSettings
from tests.conftest import Templates, migrated_copy
from tests.factories import SAMPLE

EVALSTORE = str(Path(sys.executable).parent / "evalstore")


def _big_run(path: Path, topics: int = 400, docs: int = 1000) -> Path:
    with path.open("w") as out:
        for t in range(topics):
            out.write("".join(f"{t} Q0 d{t}_{d} {d + 1} {docs - d} big\n" for d in range(docs)))
    return path


def _cli(url: str, tmp: Path, *args: str) -> subprocess.Popen[str]:
    env = {"PATH": "/usr/bin:/bin", "TMPDIR": str(tmp), "EVALSTORE_HOME": str(tmp.parent), "EVALSTORE_MLFLOW": "off"}
    return subprocess.Popen(
        [EVALSTORE, "--database-url", url, *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def test_a_killed_registrations_scratch_is_removed_by_the_next_one(templates: Templates, tmp_path: Path) -> None:
    url = migrated_copy(templates, "sqlite", tmp_path)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    big = _big_run(tmp_path / "big.run")
    doomed = _cli(url, tmp, "runs", "register", str(big), "--name", "big")
    deadline = time.monotonic() + 120
    staged: list[Path] = []
    while not any(path.stat().st_size > 1 << 20 for path in staged):  # killed mid-way through staging
        assert doomed.poll() is None, doomed.communicate()
        assert time.monotonic() < deadline
        staged = list(tmp.glob("evalstore-stage-*/rows.db"))
        time.sleep(0.005)
    os.kill(doomed.pid, signal.SIGKILL)
    doomed.communicate()
    [left] = [path.parent for path in staged]
    assert left.name.startswith(f"evalstore-stage-{doomed.pid}.")  # says what and whose it is
    assert left.exists()  # a killed process cannot remove its own

    registered = _cli(url, tmp, "runs", "register", str(SAMPLE / "results.test"), "--name", "small")
    out, err = registered.communicate(timeout=120)
    assert registered.returncode == 0, err
    assert list(tmp.iterdir()) == []  # the stale folder is gone, and the new one too
    listed = _cli(url, tmp, "runs", "list", "--format", "csv")
    out, _ = listed.communicate(timeout=60)
    assert [line.split(",")[0] for line in out.splitlines()[1:]] == ["small"]  # nothing of the killed one


def test_only_folders_whose_maker_is_gone_are_removed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr("tempfile.tempdir", None)  # read TMPDIR again
    gone = subprocess.Popen(["true"])
    gone.wait()
    dead = tmp_path / f"evalstore-stage-{gone.pid}.1-abc"  # a process that has exited
    (dead / "sub").mkdir(parents=True)
    (dead / "sub" / "rows.db").write_bytes(b"x" * 1000)
    reused = tmp_path / f"evalstore-upload-{os.getpid()}.1-abc"  # this process's id, another start time
    reused.mkdir()
    other = tmp_path / "evalstore-notes"  # not a scratch folder's name
    other.mkdir()
    with scratch.folder("stage") as mine:
        assert mine.parent == tmp_path and mine.name.startswith(f"evalstore-stage-{os.getpid()}.")
        assert scratch.clean_stale() == scratch.Cleaned(folders=2, bytes=1000)
        assert sorted(path.name for path in tmp_path.iterdir()) == sorted([mine.name, "evalstore-notes"])
    assert not mine.exists()


def test_the_server_cleans_at_start(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, templates: Templates) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    monkeypatch.setattr("tempfile.tempdir", None)
    gone = subprocess.Popen(["true"])
    gone.wait()
    (tmp_path / "tmp" / f"evalstore-upload-{gone.pid}.5-xyz").mkdir(parents=True)
    create_app(ServerSettings(database_url=migrated_copy(templates, "sqlite", tmp_path)))
    assert list((tmp_path / "tmp").iterdir()) == []


def _serve(url: str, tmp: Path, port: int) -> subprocess.Popen[str]:
    env = {**os.environ, "EVALSTORE_DATABASE_URL": url, "TMPDIR": str(tmp), "EVALSTORE_MLFLOW": "off"}
    env.update(EVALSTORE_HOME=str(tmp.parent))
    server = subprocess.Popen(
        [EVALSTORE, "serve", "--port", str(port)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    deadline = time.monotonic() + 300  # only ends a server that would never answer (as start_server)
    with httpx.Client() as http:  # one client for the probes (httpx.get: a TLS context, ~50 ms of CPU, each)
        while True:
            try:
                http.get(f"http://127.0.0.1:{port}/api/v1/health", timeout=1)
                return server
            except httpx.TransportError:
                assert server.poll() is None and time.monotonic() < deadline
                time.sleep(0.1)


def test_a_killed_servers_upload_is_removed_when_it_starts_again(templates: Templates, tmp_path: Path) -> None:
    url = migrated_copy(templates, "sqlite", tmp_path)
    engine = make_engine(url)
    access.add_user(engine, "root", role="admin")
    token = access.create_token(engine, "root").token
    engine.dispose()
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    big = _big_run(tmp_path / "big.run")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = _serve(url, tmp, port)

    def upload() -> None:
        with big.open("rb") as body, contextlib.suppress(httpx.TransportError):
            httpx.post(
                f"http://127.0.0.1:{port}/api/v1/runs",
                headers={"Authorization": f"Bearer {token}"},
                files={"file": ("big.run", body)},
                data={"name": "big"},
                timeout=120,
            )

    sender = threading.Thread(target=upload)
    sender.start()
    try:
        deadline = time.monotonic() + 300  # only ends an upload that would never get in
        while not list(tmp.glob("evalstore-stage-*/rows.db")):  # the upload is in, being stored
            assert server.poll() is None and time.monotonic() < deadline
            time.sleep(0.005)
        os.kill(server.pid, signal.SIGKILL)
        server.wait()
    finally:
        sender.join()
    left = sorted(path.name.split("-")[1] for path in tmp.iterdir())
    assert left == ["stage", "upload"]  # a killed server cannot remove its own
    again = _serve(url, tmp, port)
    try:
        assert list(tmp.iterdir()) == []
    finally:
        again.send_signal(signal.SIGTERM)
        again.wait(timeout=60)
