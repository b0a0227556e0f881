#!/usr/bin/env python3
"""Benchmark: register a large TREC run (parse + validate + store) into SQLite and PostgreSQL.

    python scripts/bench_ingest.py [--topics 6980] [--depth 1000] [--postgres URL]

Generates the MS MARCO dev-shaped synthetic run (scripts/make_synthetic.py) unless --run is
given, registers it through the same service the CLI uses, and prints rows/s and peak memory
(each database in a fresh child process, so peaks do not mix).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def measure(url: str, run: Path) -> dict[str, float]:
    from evalstore.db.engine import make_engine, upgrade
    from evalstore.io.formats import read_run
    from evalstore.services import store

    engine = make_engine(url)
    upgrade(engine)
    if any(summary.name == "bench" for summary in store.list_runs(engine)):
        store.delete_run(engine, "bench")  # identical content would otherwise be a no-op
    start = time.perf_counter()
    parsed_rows = read_run(run).table.num_rows  # parse + validate alone, for the breakdown
    parse_seconds = time.perf_counter() - start
    start = time.perf_counter()
    result = store.register_run(engine, run, name="bench", replace=True)
    seconds = time.perf_counter() - start
    assert result.created and result.summary.rows == parsed_rows
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {
        "rows": parsed_rows,
        "seconds": seconds,
        "rows_per_s": parsed_rows / seconds,
        "parse_validate_seconds": parse_seconds,
        "peak_rss_mb": peak_mb,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--topics", type=int, default=6980)
    parser.add_argument("--depth", type=int, default=1000)
    parser.add_argument("--run", type=Path, help="an existing TREC run instead of the synthetic one")
    parser.add_argument("--postgres", default=os.environ.get("EVALSTORE_TEST_DATABASE_URL"))
    parser.add_argument("--child", nargs=2, metavar=("URL", "RUN"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(args.child[0], Path(args.child[1]))))
        return
    with tempfile.TemporaryDirectory() as tmp:
        run = args.run
        if run is None:
            subprocess.run(
                [
                    sys.executable,
                    str(HERE / "make_synthetic.py"),
                    tmp,
                    "--topics",
                    str(args.topics),
                    "--depth",
                    str(args.depth),
                ],
                check=True,
            )
            run = Path(tmp) / "run.txt"
        targets = {"sqlite": f"sqlite:///{tmp}/bench.db"}
        if args.postgres:
            targets["postgresql"] = args.postgres
        for label, url in targets.items():
            child = subprocess.run([sys.executable, __file__, "--child", url, str(run)], capture_output=True, text=True)
            if child.returncode != 0:
                raise SystemExit(f"{label} benchmark failed:\n{child.stderr}")
            out = child.stdout
            r = json.loads(out.strip().splitlines()[-1])
            print(
                f"{label:10s} {r['rows']:>9,} rows  {r['seconds']:6.2f} s  {r['rows_per_s']:>10,.0f} rows/s  "
                f"(parse+validate {r['parse_validate_seconds']:.2f} s)  peak {r['peak_rss_mb']:,.0f} MB"
            )


if __name__ == "__main__":
    main()
