"""The worker outlives 'database is locked' (a long write of someone else's holding SQLite's
lock) and other operational errors, as the README promises: it waits and goes on, it does not exit."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import Engine
from sqlalchemy.exc import OperationalError

from evalstore.services import jobs
from evalstore.services.worker import Worker, WorkerSettings
from tests.http.conftest import World


def test_the_worker_waits_out_a_locked_database(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    job = world.submit("open", "red-later", evaluate=False)
    real_claim = jobs.claim_batch
    refusals = iter(range(2))

    def locked_twice(engine: Engine, *args: Any, **kwargs: Any) -> Any:
        if next(refusals, None) is not None:
            raise OperationalError("BEGIN IMMEDIATE", {}, Exception("database is locked"))
        return real_claim(engine, *args, **kwargs)

    monkeypatch.setattr(jobs, "claim_batch", locked_twice)
    worker = Worker(world.engine, WorkerSettings(until_empty=True, poll_interval=0.01, index_runs=False))
    assert worker.run() == 1
    assert list(worker.done) == [job]
