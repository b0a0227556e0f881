#!/usr/bin/env python3
"""Benchmark building a depth-100 pool from PostgreSQL (the figure in docs/benchmarks.md).

100 synthetic runs x 250 topics x 1,000 documents (25 million stored rows; each topic has 5,000
candidate documents, each run retrieves 1,000 of them with random scores, listed by score as
run files are) are stored in a scratch
database, then `evalstore pool build --name bench --all-runs --depth 100` is timed as a whole
command, from process start to exit.

    python scripts/bench_pool.py --postgres postgresql+psycopg://postgres@127.0.0.1:5432/test
        [--runs 100] [--topics 250] [--depth 1000]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

import numpy as np
import pyarrow as pa
from bench_worker import EVALSTORE, scratch_database


def store_runs(url: str, runs: int, topics: int, depth: int) -> None:
    from evalstore.db import repositories as repo
    from evalstore.db.engine import make_engine, upgrade
    from evalstore.db.models import Run
    from evalstore.db.session import unit_of_work
    from evalstore.db.staging import StagedRows

    engine = make_engine(url)
    upgrade(engine)
    rng = np.random.default_rng(0)
    topic_ids = np.repeat(np.array([str(400 + t) for t in range(topics)], dtype=object), depth)
    started = time.perf_counter()
    for index in range(runs):
        docs = np.concatenate([rng.choice(5000, depth, replace=False) for _ in range(topics)])
        table = pa.table(
            {
                "topic": pa.array(topic_ids, pa.string()),
                "doc": pa.array([f"doc{d:05d}" for d in docs], pa.string()),
                "rank": pa.array(np.tile(np.arange(1, depth + 1), topics), pa.int64()),
                "score": pa.array(-np.sort(-rng.random((topics, depth)), axis=1).ravel()),
            }
        )
        with unit_of_work(engine) as session:
            run = Run(
                name=f"run{index:03d}",
                tag=f"run{index:03d}",
                content_hash=f"{index:064d}",
                row_count=table.num_rows,
                topic_count=topics,
                metadata_={},
            )
            session.add(run)
            session.flush()
            rows, counts = repo.run_rows_to_store(table)
            repo.insert_run_rows(session, run.id, StagedRows(rows), counts)  # PostgreSQL: COPY from the table
    print(
        f"stored {runs} runs x {topics} topics x {depth} docs = {runs * topics * depth:,} rows "
        f"in {time.perf_counter() - started:.0f} s (set-up, not timed)"
    )
    engine.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--postgres", required=True)
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--topics", type=int, default=250)
    parser.add_argument("--depth", type=int, default=1000)
    args = parser.parse_args()
    url, drop = scratch_database(args.postgres)
    try:
        store_runs(url, args.runs, args.topics, args.depth)
        env = {**os.environ, "EVALSTORE_DATABASE_URL": url}
        for attempt in range(2):
            start = time.perf_counter()
            done = subprocess.run(
                [EVALSTORE, "pool", "build", "--name", f"bench{attempt}", "--all-runs", "--depth", "100"],
                env=env,
                check=True,
                capture_output=True,
                text=True,
            )
            elapsed = time.perf_counter() - start
            print(
                f"evalstore pool build --depth 100 (whole command): {elapsed:.1f} s  "
                f"[{done.stderr.strip().splitlines()[-1]}]"
            )
    finally:
        drop()  # type: ignore[operator]


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(__file__))
    main()
