#!/usr/bin/env python3
"""Where one job's MLflow logging goes (docs/guide/many-runs.md, "A cheaper MLflow run per job").

One DL-sized run (43 topics x 1,000 documents, the default measures) is evaluated with MLflow
off, then logged --jobs times in a row to a local SQLite MLflow store, as a worker logs it
(the payload built, then `tracking.client.log_run`), after one untimed run for the imports. Prints the wall
and CPU time per job and the wall time of each MLflow client call and of the artifact files.

    python scripts/bench_mlflow_log.py [--jobs 10]
"""

from __future__ import annotations

import argparse
import collections
import os
import random
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench_server import cli, write_qrels, write_run  # scripts/bench_server.py

CALLS = ("create_run", "log_batch", "log_artifact", "log_artifacts", "log_table", "log_text", "log_dict")
CALLS += ("log_figure", "set_terminated")


def timed(spent: dict[str, float], name: str, call: Callable[..., Any]) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return call(*args, **kwargs)
        finally:
            spent[name] += time.perf_counter() - started

    return wrapper


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=10)
    args = parser.parse_args()

    from evalstore.db.engine import make_engine, upgrade
    from evalstore.services import access, kinds, tasks
    from evalstore.services.context import Lru
    from evalstore.services.orchestration import work_on
    from evalstore.services.tracking import client as tracking_client
    from evalstore.services.tracking import results_for

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        os.environ["EVALSTORE_HOME"] = str(folder)  # nothing of the user's is touched
        url = f"sqlite:///{folder / 'store.db'}"
        engine = make_engine(url)
        upgrade(engine)
        rng = random.Random(7)
        write_qrels(folder / "qrels", 43, rng)
        cli(url, "qrels", "import", str(folder / "qrels"), "--name", "dl-qrels")
        tasks.create_task(engine, "dl", qrels_name="dl-qrels", measures=[])
        access.add_user(engine, "member", role="participant", team="team")
        principal = access.authenticate(engine, access.create_token(engine, "member").token)
        write_run(folder / "run", 43, 1000, rng, "dl")
        evaluation_id = tasks.submit_run(engine, principal, "dl", folder / "run", name="dl").job.evaluation_id
        work_on(engine, [evaluation_id], mlflow=False)
        stored = results_for(engine, evaluation_id)

        uri = f"sqlite:///{folder / 'mlflow.db'}"
        client = tracking_client.open_client(uri, Lru(1))
        experiment_id = tracking_client.experiment_id(client, uri, "evalstore/dl-qrels")
        spent: dict[str, float] = collections.defaultdict(float)
        for name in CALLS:
            setattr(client, name, timed(spent, name, getattr(client, name)))
        if hasattr(tracking_client, "_write_artifacts"):  # the artifact files written by evalstore
            tracking_client._write_artifacts = timed(spent, "artifact files", tracking_client._write_artifacts)  # type: ignore[attr-defined]

        def log_one() -> None:
            tracking_client.log_run(client, experiment_id, kinds.get(stored.kind).mlflow_run(stored))

        log_one()  # MLflow's and matplotlib's imports and first use, as a running deliverer has them
        spent.clear()
        walls = []
        cpu = time.process_time()
        for _ in range(args.jobs):
            started = time.perf_counter()
            log_one()
            walls.append(time.perf_counter() - started)
        cpu = (time.process_time() - cpu) / args.jobs
        walls.sort()
        print(f"per job, {args.jobs} jobs: wall median {walls[len(walls) // 2] * 1000:.0f} ms, CPU {cpu * 1000:.0f} ms")
        for name, seconds in sorted(spent.items(), key=lambda item: -item[1]):
            print(f"  {name:16} {seconds / args.jobs * 1000:6.1f} ms")
        engine.dispose()


if __name__ == "__main__":
    sys.exit(main())
