"""The workers' register: who started, is alive (a heartbeat) or stopped."""

from __future__ import annotations

import os
import socket
from datetime import timedelta

from sqlalchemy import Engine, select, update

from evalstore.db.models import Worker
from evalstore.db.session import read_only, unit_of_work
from evalstore.services.jobs.options import db_now


def register_worker(engine: Engine, worker_id: str) -> None:
    with unit_of_work(engine) as session:
        now = db_now(session)
        session.add(
            Worker(
                id=worker_id,
                hostname=socket.gethostname(),
                pid=os.getpid(),
                state="running",
                started_at=now,
                heartbeat_at=now,
                jobs_done=0,
            )
        )


def worker_alive(engine: Engine, worker_id: str, *, jobs_done: int) -> None:
    with unit_of_work(engine) as session:
        session.execute(
            update(Worker).where(Worker.id == worker_id).values(heartbeat_at=db_now(session), jobs_done=jobs_done)
        )


def worker_stopped(engine: Engine, worker_id: str) -> None:
    with unit_of_work(engine) as session:
        session.execute(update(Worker).where(Worker.id == worker_id).values(state="stopped"))


def live_workers(engine: Engine, *, within: timedelta) -> list[Worker]:
    """Workers that said they were alive within ``within`` (a killed one just stops saying so)."""
    with read_only(engine) as session:
        since = db_now(session) - within
        return list(session.scalars(select(Worker).where(Worker.state == "running", Worker.heartbeat_at >= since)))
