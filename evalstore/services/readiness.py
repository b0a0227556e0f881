"""Whether the service can answer: a quick database query under a short deadline (the readiness
check of `GET /api/v1/health/ready`; liveness, `GET /api/v1/health`, asks nothing of the database).

A database that does not answer at all (a host gone silent, a connection attempt hanging until
the kernel's TCP timeout) would hold the check's caller for minutes: the query runs on a thread of
its own and the caller waits ``timeout`` for it. At most one such query is out at a time, so a
load balancer asking every second during an outage does not pile up threads and connections."""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass

from sqlalchemy import Engine, text

from evalstore.db.outages import Outage, outage

log = logging.getLogger("evalstore.web")
READY_TIMEOUT = 2.0  # seconds; load balancers usually allow a check 2-5 s


@dataclass(frozen=True)
class Readiness:
    """``ready``: the database answered within the deadline, in ``seconds``; else ``problem``
    says what failed (an :class:`Outage`, or a sentence when there was no answer in time)."""

    ready: bool
    seconds: float
    problem: Outage | str | None = None


class ReadinessCheck:
    """The server's check, kept for its life (one query out at a time: the module's docstring)."""

    def __init__(self, engine: Engine, timeout: float = READY_TIMEOUT) -> None:
        self.engine, self.timeout = engine, timeout
        self._lock = threading.Lock()
        self._out: _Query | None = None
        self._was_ready = True

    def check(self) -> Readiness:
        """The database's answer, within ``timeout``; the server's log says when it changes."""
        found = self._check()
        if found.ready != self._was_ready:
            self._was_ready = found.ready
            problem = found.problem.describe() if isinstance(found.problem, Outage) else found.problem
            log.warning("readiness: %s", "the database answers again" if found.ready else f"not ready, {problem}")
        return found

    def _check(self) -> Readiness:
        started = time.monotonic()
        with self._lock:
            if self._out is None or self._out.finished.is_set():
                self._out = _Query(self.engine)
            query = self._out
        if not query.finished.wait(self.timeout):
            waited = time.monotonic() - query.started
            return Readiness(False, time.monotonic() - started, f"the database has not answered for {waited:.1f}s")
        if query.error is not None:
            found = outage(query.error, str(self.engine.url))
            problem: Outage | str = found if found is not None else f"{type(query.error).__name__}"
            return Readiness(False, time.monotonic() - started, problem)
        return Readiness(True, time.monotonic() - started)


class _Query:
    def __init__(self, engine: Engine) -> None:
        self.started = time.monotonic()
        self.finished = threading.Event()
        self.error: Exception | None = None
        threading.Thread(target=self._run, args=(engine,), name="readiness", daemon=True).start()

    def _run(self, engine: Engine) -> None:
        try:
            with engine.connect() as connection:
                connection.execute(text("SELECT 1"))
        except Exception as error:  # reported by check(), whatever it is
            self.error = error
        finally:
            self.finished.set()
