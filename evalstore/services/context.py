"""The application context: what one process (a CLI command, the server, a worker) keeps while it
runs, owned in one place instead of in module globals.

An :class:`AppContext` holds the engine, the settings (:class:`evalstore.config.Settings`), every
cache the services use, each with an explicit size, and the detached MLflow delivery processes
it started. The CLI makes one per command
(:mod:`evalstore.cli._context`), the server one at start-up (:mod:`evalstore.web.app`) and a worker
one for its life (:class:`evalstore.services.worker.Worker`). Services take it as ``context=``;
called without one they make a short-lived one, so a library caller or a test gets the same
answers with nothing remembered between calls.

Every cache is keyed so that a change in the database shows: a board by its task's fingerprint of
finished evaluations, qrels and gold labels by their content hash, a verified token secret by its
stored hash.
"""

from __future__ import annotations

import subprocess
import threading
from collections import OrderedDict
from typing import Any, Generic, TypeVar

from sqlalchemy import Engine

from evalstore.config import Settings

K = TypeVar("K")
V = TypeVar("V")

# The sizes, each the reason it has: a server runs for months, so nothing grows without bound.
BOARDS_KEPT = 64  # computed task leaderboards (their bootstrap intervals cost ~10 ms a run), newest kept
BOARD_STATES_KEPT = 1024  # tasks whose state (visibility, fingerprint) was read in the last second
TIER_BOARDS_KEPT = 64  # significance tiers of the newest boards (a board's numbers change with each result)
# a worker evaluates run after run against the same qrels; a server stores submissions to a few
# open tasks (store.judged_ranks_to_keep): the last four read
QRELS_KEPT = 4
GOLD_KEPT = 1  # ... and set after set against the same gold labels
VERIFIED_SECRETS_KEPT = 4096  # token strings whose argon2 check passed (one per client, roughly)
MLFLOW_CLIENTS_KEPT = 8  # one per tracking URI; a process talks to one, tests to a few
# bootstrap draws (10,000 x topics) by topic count: a worker summarises job after job on the same
# qrels (one topic count; a split task's public and private topics two more); 20 MB at 250 topics
BOOTSTRAP_DRAWS_KEPT = 3
QUANTILES_KEPT = 64  # the studentized range's quantiles by (runs, degrees of freedom): a float each
RESOLVED_OPTIONS_KEPT = 64  # evaluation options resolved for a kind of judgments: a task's, upload after upload
MLFLOW_EXPERIMENTS_KEPT = 64  # experiment ids by (tracking URI, name): one per qrels or label set delivered to


class Lru(Generic[K, V]):
    """A bounded map that forgets the least recently used entry first; safe across threads (the
    server answers requests on a thread pool)."""

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError(f"a cache keeps at least one entry, not {size}")
        self.size = size
        self._items: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        with self._lock:
            value = self._items.get(key)
            if value is not None:
                self._items.move_to_end(key)
            return value

    def put(self, key: K, value: V) -> V:
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self.size:
                self._items.popitem(last=False)
        return value

    def clear(self) -> None:
        with self._lock:
            self._items.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._items


class AppContext:
    """The engine, the settings, the caches and the background processes of one process (see the
    module's docstring). Values are typed ``Any`` here: this module sits below the services whose types it
    keeps (boards, tiers, qrels tables, gold labels, MLflow clients)."""

    def __init__(self, engine: Engine, settings: Settings | None = None) -> None:
        self.engine = engine
        self.settings = settings if settings is not None else Settings()
        self.boards: Lru[tuple[Any, ...], Any] = Lru(BOARDS_KEPT)
        self.board_states: Lru[str, Any] = Lru(BOARD_STATES_KEPT)
        self.tiers: Lru[tuple[Any, ...], dict[str, str]] = Lru(TIER_BOARDS_KEPT)
        self.qrels: Lru[tuple[int, str], Any] = Lru(QRELS_KEPT)
        self.gold: Lru[tuple[int, str], Any] = Lru(GOLD_KEPT)
        self.verified_secrets: Lru[str, bool] = Lru(VERIFIED_SECRETS_KEPT)
        self.mlflow_clients: Lru[str, Any] = Lru(MLFLOW_CLIENTS_KEPT)
        self.mlflow_experiments: Lru[tuple[str, str], str] = Lru(MLFLOW_EXPERIMENTS_KEPT)
        self.bootstrap_draws: Lru[int, Any] = Lru(BOOTSTRAP_DRAWS_KEPT)
        self.quantiles: Lru[tuple[int, int], float] = Lru(QUANTILES_KEPT)
        self.resolved_options: Lru[tuple[Any, str], dict[str, Any]] = Lru(RESOLVED_OPTIONS_KEPT)
        self._password_slots: threading.BoundedSemaphore | None = None
        self._upload_slots: threading.BoundedSemaphore | None = None
        self._slots_lock = threading.Lock()
        # detached `mlflow sync` processes this process started (`evaluate --wait`): a CLI leaves
        # without waiting for them (os._exit); a longer-lived caller reaps them with wait_for_background
        self.background: list[subprocess.Popen[bytes]] = []

    @property
    def password_slots(self) -> threading.BoundedSemaphore:
        """The argon2 password checks this process runs at once (each takes 64 MiB and its lanes'
        threads at the default cost): one more is refused, not queued (``access.password_slot``).
        Made at the first check, so a command that checks none never reads the setting."""
        with self._slots_lock:
            if self._password_slots is None:
                self._password_slots = threading.BoundedSemaphore(self.settings.password_checks)
            return self._password_slots

    @property
    def upload_slots(self) -> threading.BoundedSemaphore:
        """The run files this process validates and stores at once (a task's submissions); one
        more waits for a slot, woken in the order they came (``tasks.submit_run``). Thirty uploads
        run at once took each ~1.5-2x the CPU of one alone (threads taking turns at the GIL) and
        all queued for the write lock together at the end. Made at the first upload."""
        with self._slots_lock:
            if self._upload_slots is None:
                self._upload_slots = threading.BoundedSemaphore(self.settings.upload_slots)
            return self._upload_slots

    def bootstrap_counts(self, topics: int) -> Any:
        """:func:`evalstore.statistics.significance.bootstrap_counts` for ``topics`` topics, drawn
        once per topic count while kept (the same seed: the same draws)."""
        counts = self.bootstrap_draws.get(topics)
        if counts is None:
            from evalstore.statistics import significance  # numpy, only for a process that summarises

            drawn = significance.bootstrap_counts(topics)
            # at most `topics` draws of a topic: the counts fit in 16 bits where the topics do
            counts = self.bootstrap_draws.put(topics, drawn.astype("uint16") if topics < 65536 else drawn)
        return counts

    def studentized_quantile(self, runs: int, df: int) -> float:
        """The studentized range's 95% quantile for ``runs`` systems and ``df`` degrees of freedom
        (Tukey's HSD decides every pair of a board by it), computed once per pair of numbers while
        kept."""
        quantile = self.quantiles.get((runs, df))
        if quantile is None:
            from evalstore.statistics import studentized_range  # only a process that draws tiers

            quantile = self.quantiles.put((runs, df), studentized_range.ppf(0.95, runs, df))
        return quantile

    def started(self, process: subprocess.Popen[bytes]) -> None:
        """Keep a background process, and let go of the ones that have finished. A daemon thread
        waits for it too, so it is reaped when it ends even if this context is dropped first (a
        library caller that passed no context): a Popen collected while its process runs warns."""
        self.background[:] = [p for p in self.background if p.poll() is None]
        self.background.append(process)
        threading.Thread(target=process.wait, name=f"reap-{process.pid}", daemon=True).start()

    def wait_for_background(self, timeout: float = 120.0) -> list[int]:
        """Wait for the background processes this context started; their exit codes."""
        codes = [process.wait(timeout) for process in self.background]
        self.background.clear()
        return codes

    def close(self) -> None:
        """Close the engine's pooled connections (the server's shutdown, a worker's end)."""
        self.engine.dispose()


def context_for(engine: Engine, context: AppContext | None) -> AppContext:
    """``context`` if the caller has one, else a short-lived one over ``engine`` (nothing kept)."""
    if context is None:
        return AppContext(engine)
    if context.engine is not engine:
        raise ValueError("the context given is another database's")
    return context
