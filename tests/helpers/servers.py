"""Servers for tests and benchmarks: `evalstore serve` started on a free port, and MLflow servers
that hang or are down.

The benchmark scripts import this module too (``scripts/bench_*.py``, with the checkout's folder
appended to their path). It lives under ``tests`` rather than in ``evalstore`` because a script run
``--against`` an older checkout imports that checkout's ``evalstore``, which has no such module, and
it imports nothing of ``evalstore`` for the same reason.
"""

from __future__ import annotations

import socket
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO

import httpx


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on (yet)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def start_server(
    command: Sequence[str],
    env: Mapping[str, str],
    *,
    stderr: IO[bytes] | int | None = None,
    cwd: str | Path | None = None,
    seconds: float = 300,
) -> tuple[subprocess.Popen[bytes], str]:
    """``command`` (an ``evalstore serve ...``) started with ``--port`` on a free port, and its
    base URL once its health check answers 200; killed, and RuntimeError, if it does not within
    ``seconds`` (a shared, loaded machine can take minutes to start two server processes)."""
    port = free_port()
    process = subprocess.Popen([*command, "--port", str(port)], env=dict(env), stderr=stderr, cwd=cwd)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + seconds
    # one client for the probes: httpx.get makes a client, and with it a TLS context, each time
    # (~50 ms of CPU, a probe every 0.2 s while a loaded machine takes seconds to start a server)
    with httpx.Client() as http:
        while time.monotonic() < deadline:
            try:
                if http.get(f"{base}/api/v1/health", timeout=1).status_code == 200:
                    return process, base
            except httpx.TransportError:
                time.sleep(0.2)
    process.kill()
    process.wait()
    raise RuntimeError(f"the server did not start within {seconds:g} s")


class HungMlflow:
    """Accepts connections on 127.0.0.1 and never answers them (an MLflow server that hangs)."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.uri = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.accepted: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self.listener.accept()
            except OSError:  # closed
                return
            self.accepted.append(connection)

    def close(self) -> None:
        self.listener.close()
        for connection in self.accepted:
            connection.close()


def refusing_uri() -> str:
    """The URI of an MLflow server that is down: a free port, left with no listener."""
    with socket.create_server(("127.0.0.1", 0)) as closed:
        return f"http://127.0.0.1:{closed.getsockname()[1]}"
