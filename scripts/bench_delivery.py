#!/usr/bin/env python3
"""What one MLflow delivery costs (docs/benchmarks.md, "MLflow delivery").

--results DL-sized runs (43 topics x 1,000 documents, the default measures) are evaluated with
MLflow off, so their deliveries stay pending, as a worker leaves them; then `tracking.deliver`
(what `evalstore mlflow sync` and the deliverer threads run) delivers them to a local SQLite
MLflow store, after one untimed delivery for the imports. Prints the CPU time (user + system)
and wall time per delivery; with --parts, the CPU time of each part of a delivery (its thread's,
counted around the calls); with --profile FILE, a cProfile of the deliveries' CPU time (its
overhead inflates Python-heavy code: read its shares with care). Run it with PYTHONPATH at another
checkout to measure that checkout's code.

    python scripts/bench_delivery.py [--results 40] [--parts] [--profile FILE]
"""

from __future__ import annotations

import argparse
import collections
import cProfile
import importlib
import os
import random
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench_server import cli, write_qrels, write_run  # scripts/bench_server.py

# the calls a delivery's CPU is counted in: (module, owner in it or None, function) by part
PARTS = {
    "read back": [("evalstore.services.tracking.deliverer", None, "results_for")],
    "payload": [("evalstore.services.kinds.ranking.kind", "RankingKind", "mlflow_run")],
    "artifact files (figures included)": [("evalstore.services.tracking.client", None, "_write_artifacts")],
    "MLflow create_run": [("mlflow", "MlflowClient", "create_run")],
    "MLflow log_batch": [("mlflow", "MlflowClient", "log_batch")],
    "MLflow log_artifacts": [("mlflow", "MlflowClient", "log_artifacts")],
    "MLflow set_terminated": [("mlflow", "MlflowClient", "set_terminated")],
    "claims and records (our database)": [
        ("evalstore.services.tracking.states", None, name)
        for name in ("claim_many", "still_held", "confirm", "mark_all_logged", "undelivered")
    ],
}


def counted(spent: dict[str, float], part: str, call: Callable[..., Any]) -> Callable[..., Any]:
    """``call``, its thread's CPU time added to ``spent[part]`` (not the deliverer's lease
    thread's; not nested parts twice: none of them calls another)."""

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        started = time.thread_time()
        try:
            return call(*args, **kwargs)
        finally:
            spent[part] += time.thread_time() - started

    return wrapper


def count_parts(spent: dict[str, float]) -> None:
    for part, calls in PARTS.items():
        for module_name, owner_name, name in calls:
            module = importlib.import_module(module_name)
            owner = getattr(module, owner_name) if owner_name else module
            if hasattr(owner, name):
                setattr(owner, name, counted(spent, part, getattr(owner, name)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results", type=int, default=40)
    parser.add_argument("--parts", action="store_true", help="the CPU time of each part of a delivery")
    parser.add_argument("--profile", metavar="FILE", help="cProfile the deliveries (their CPU time) into FILE")
    args = parser.parse_args()
    # the cyclic collector as the `evalstore` command sets it in the processes that deliver (serve,
    # the worker, `mlflow sync`): at Python's default threshold its collections, which a delivery's
    # ORM objects set off, were counted in whichever part was running (two thirds of create_run's)
    from evalstore._entry import tune_collector

    tune_collector()

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        os.environ["EVALSTORE_HOME"] = str(folder)  # nothing of the user's is touched
        os.environ["MLFLOW_TRACKING_URI"] = f"sqlite:///{folder / 'mlflow.db'}"
        os.environ["EVALSTORE_MLFLOW"] = "off"  # the jobs leave their deliveries pending
        from evalstore.db.engine import make_engine, upgrade
        from evalstore.services import access, tasks, tracking
        from evalstore.services.orchestration import work_on

        url = f"sqlite:///{folder / 'store.db'}"
        engine = make_engine(url)
        upgrade(engine)
        rng = random.Random(7)
        write_qrels(folder / "qrels", 43, rng)
        cli(url, "qrels", "import", str(folder / "qrels"), "--name", "dl-qrels")
        tasks.create_task(engine, "dl", qrels_name="dl-qrels", measures=[])
        access.add_user(engine, "member", role="participant", team="team")
        principal = access.authenticate(engine, access.create_token(engine, "member").token)
        ids = []
        for index in range(args.results + 1):
            write_run(folder / f"run{index}", 43, 1000, rng, f"dl{index}")
            ids.append(
                tasks.submit_run(engine, principal, "dl", folder / f"run{index}", name=f"dl{index}").job.evaluation_id
            )
        work_on(engine, ids, mlflow=False)

        os.environ["EVALSTORE_MLFLOW"] = "on"
        first = tracking.deliver(engine, limit=1)  # MLflow's store, imports and first use, untimed
        assert len(first.logged) == 1, first
        spent: dict[str, float] = collections.defaultdict(float)
        if args.parts:
            count_parts(spent)
        # the deliverer's own CPU (its thread's), not the wall time it waits on fsyncs and locks
        profile = cProfile.Profile(time.thread_time) if args.profile else None
        times = os.times()
        started = time.perf_counter()
        if profile is not None:
            profile.enable()
        report = tracking.deliver(engine)
        if profile is not None:
            profile.disable()
            profile.dump_stats(args.profile)
        wall = time.perf_counter() - started
        done = os.times()
        assert len(report.logged) == args.results and not report.failed, report
        user, system = done.user - times.user, done.system - times.system
        print(
            f"{args.results} deliveries: CPU {(user + system) / args.results * 1000:.1f} ms a delivery "
            f"(user {user / args.results * 1000:.1f}, system {system / args.results * 1000:.1f}), "
            f"wall {wall / args.results * 1000:.0f} ms a delivery"
        )
        for part, seconds in spent.items():
            print(f"  {part:36} {seconds / args.results * 1000:6.1f} ms  {seconds / (user + system):4.0%}")
        engine.dispose()


if __name__ == "__main__":
    sys.exit(main())
