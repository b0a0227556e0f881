#!/usr/bin/env python3
"""Benchmark the out-of-core backends (issue #23): evaluations larger than one process's memory.

    python scripts/bench_backends.py [--topics 100000] [--depth 1000] [--predictions 100000000]
        [--groups 1000000] [--memory-limit 2GB] [--data DIR] [--skip-spark] [--sample-topics 10000]

1. ranking: a run of topics x depth rows (default 100,000 x 1,000 = 100M) written as Parquet, with
   qrels of ~12 judgments a topic (8 of them retrieved, tied scores included), evaluated by
   `evalstore trec-eval --backend duckdb --memory-limit 2GB -m all_trec` as its own process: wall
   time and peak RSS. Then the first --sample-topics topics (10M rows at the default) through both
   the DuckDB backend and the local engine in one process: their per-topic values must be equal.
2. predictions: --predictions binary predictions (default 100M) in --groups groups (1M), Parquet;
   AUC, GAUC and log loss by `evalstore.backends.duckdb_engine.evaluate_predictions` and by
   `evalstore.spark.evaluate_predictions` on Spark local[2], each as its own process: wall time and
   peak RSS (for Spark: the driver's and its JVM's, the JVM being a child process).
3. with --postgres URL (an empty database): the same 100M-row run stored with `runs register
   --backend duckdb` and evaluated by `evaluate --wait` (all_trec) from the store: time and peak RSS.
4. with --postgres URL: --stored-predictions binary predictions (default 10M, in --stored-groups
   groups, 100k) registered in the store and evaluated by `evaluate --labels ... --wait --force`
   with --backend local, duckdb and spark (local[2]), each as its own process: time, peak RSS
   (Spark: with its JVM) and whether AUC and GAUC are equal to the bit.
The data is generated once into --data (default build/bench-backends) and reused.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
CHUNK_TOPICS = 1000


def make_run(folder: Path, topics: int, depth: int) -> tuple[Path, Path]:
    """A Parquet run (topic, doc, score) and its TREC qrels, seeded."""
    run_path, qrels_path = folder / f"run-{topics}x{depth}.parquet", folder / f"qrels-{topics}x{depth}.txt"
    if run_path.exists() and qrels_path.exists():
        return run_path, qrels_path
    rng = np.random.default_rng(23)
    schema = pa.schema([("topic", pa.string()), ("doc", pa.string()), ("score", pa.float64())])
    qrels_lines = []
    with pq.ParquetWriter(run_path, schema) as writer:
        for first in range(0, topics, CHUNK_TOPICS):
            count = min(CHUNK_TOPICS, topics - first)
            topic_ids = np.repeat(np.arange(first, first + count), depth)
            position = np.tile(np.arange(depth), count)
            doc_numbers = (topic_ids * 7919 + position * 104729) % 50_000_000
            # descending scores rounded to 2 places: about one tie in ten
            score = np.round(depth - position + rng.random(len(position)) * 0.5, 2)
            topic_text = pc.binary_join_element_wise("q", pc.cast(pa.array(topic_ids), pa.string()), "")
            doc_text = pc.binary_join_element_wise("D", pc.cast(pa.array(doc_numbers), pa.string()), "")
            writer.write_table(pa.table({"topic": topic_text, "doc": doc_text, "score": score}, schema=schema))
            for t in range(first, first + count):
                retrieved = rng.choice(depth, 8, replace=False)
                for p in retrieved:
                    qrels_lines.append(f"q{t} 0 D{(t * 7919 + int(p) * 104729) % 50_000_000} {rng.integers(0, 3)}\n")
                for extra in range(4):
                    qrels_lines.append(f"q{t} 0 X{t}-{extra} {rng.integers(1, 3)}\n")
    qrels_path.write_text("".join(qrels_lines))
    return run_path, qrels_path


def make_predictions(folder: Path, n: int, groups: int) -> Path:
    path = folder / f"predictions-{n}-{groups}.parquet"
    if path.exists():
        return path
    rng = np.random.default_rng(29)
    schema = pa.schema([("group", pa.int64()), ("label", pa.int8()), ("score", pa.float64())])
    chunk = 10_000_000
    with pq.ParquetWriter(path, schema) as writer:
        for first in range(0, n, chunk):
            size = min(chunk, n - first)
            group = rng.integers(0, groups, size)
            label = (rng.random(size) < 0.1).astype(np.int8)
            # scores in (0, 1) on a 1e-4 grid: ties, as real click models produce
            score = np.clip(np.round(rng.beta(2, 8, size) + label * 0.08, 4), 1e-4, 1 - 1e-4)
            writer.write_table(pa.table({"group": group, "label": label, "score": score}, schema=schema))
    return path


def timed(command: list[str], env: dict[str, str] | None = None) -> tuple[float, float, float, str]:
    """(wall seconds, peak RSS MiB of the process and its children, of a JVM it started, stdout)."""
    wrapped = [sys.executable, "-c", MEASURE, *command]
    started = time.perf_counter()
    done = subprocess.run(wrapped, capture_output=True, text=True, check=False, env=env)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stderr[-3000:]}")
    *out, peaks = done.stdout.rstrip("\n").rsplit("\n", 1)
    peak, jvm = (float(v) for v in peaks.split())
    return wall, peak, jvm, "\n".join(out)


# runs a command and prints, last, the peak RSS in MiB of it and its descendants, and of any JVM that ran
# meanwhile (pyspark's is started by its launcher scripts, not a child the command waits for)
MEASURE = r"""
import os, resource, subprocess, sys, threading, time
peak = {"jvm": 0.0}
stop = threading.Event()
def watch():
    while not stop.is_set():
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                status = open(f"/proc/{pid}/status").read()
            except OSError:
                continue
            fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
            if "java" in fields.get("Name", "") and "VmHWM" in fields:
                peak["jvm"] = max(peak["jvm"], int(fields["VmHWM"].split()[0]) / 1024)
        time.sleep(0.5)
watcher = threading.Thread(target=watch, daemon=True)
watcher.start()
done = subprocess.run(sys.argv[1:], stdout=subprocess.PIPE, text=True)
stop.set()
sys.stdout.write(done.stdout)
if done.returncode:
    sys.exit(done.returncode)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, peak["jvm"])
"""


PREDICTIONS_DUCKDB = r"""
import json, sys
from evalstore.backends import duckdb_engine as de
values = de.evaluate_predictions(sys.argv[1], label_col="label", score_col="score", group_col="group",
                                 settings=de.DuckDBSettings(memory_limit=sys.argv[2]))
print(json.dumps(values))
"""

PREDICTIONS_SPARK = r"""
import json, sys
from pyspark.sql import SparkSession
from evalstore.spark import evaluate_predictions
spark = (SparkSession.builder.master("local[2]").config("spark.driver.memory", "6g")
         .config("spark.sql.shuffle.partitions", "64").getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
df = spark.read.parquet(sys.argv[1])
_, aggregates = evaluate_predictions(df, label_col="label", score_col="score", group_col="group")
values = aggregates.first().asDict()
print(json.dumps(values))
spark.stop()
"""

SAMPLE_EQUAL = r"""
import sys
import numpy as np
import pyarrow.parquet as pq
import pyarrow.compute as pc
from evalstore.backends import duckdb_engine as de
from evalstore.io.formats import read_qrels
from evalstore.metrics import compute, resolve_measures
from evalstore.metrics.preparation import PrepareOptions, prepare
from evalstore.metrics.trec_names import expand, parse_trec_specs
run_path, qrels_path, sample, limit = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
table = pq.read_table(run_path)
keep = pc.less(pc.cast(pc.utf8_slice_codeunits(table["topic"], 1), "int64"), sample)
sample_path = run_path.replace(".parquet", f"-sample{sample}.parquet")
pq.write_table(table.filter(keep), sample_path)
del table
qrels = read_qrels(qrels_path, strict=False).table
measures = list(dict.fromkeys(m for r in parse_trec_specs(["all_trec"]) for _, m in expand(r) if m is not None))
local = prepare(qrels, pq.read_table(sample_path).rename_columns(["topic", "doc", "score"]), PrepareOptions())
duck, _ = de.prepare_file(qrels, sample_path, PrepareOptions(), de.DuckDBSettings(memory_limit=limit))
a, b = compute(local, measures), compute(duck, measures)
assert local.topics == duck.topics
def same(x, y):
    return x.tolist() == y.tolist() if x.dtype == object else np.array_equal(x, y, equal_nan=True)
unequal = [str(m) for m in measures if not same(a[m], b[m])]
print(f"{len(local.topics)} topics, {len(measures)} measures, unequal: {unequal or 'none'}")
"""


def stored(evalstore: str, url: str, run_path: Path, qrels_path: Path, memory_limit: str) -> None:
    """The large run through the store: registered by DuckDB, evaluated by the worker's path."""
    import os

    env = {**os.environ, "EVALSTORE_DATABASE_URL": url, "EVALSTORE_MLFLOW": "off"}
    subprocess.run([evalstore, "db", "upgrade"], env=env, check=True, capture_output=True)
    steps = {
        "runs register --backend duckdb": [
            "runs",
            "register",
            str(run_path),
            "--name",
            "big",
            "--backend",
            "duckdb",
            "--memory-limit",
            memory_limit,
        ],
        "qrels import": ["qrels", "import", str(qrels_path), "--name", "bigq"],
        "evaluate --wait (all_trec)": [
            "evaluate",
            "--qrels",
            "bigq",
            "--run",
            "big",
            "--measures",
            "all_trec",
            "--wait",
        ],
    }
    for label, command in steps.items():
        wall, peak, _, _ = timed([evalstore, *command], env)
        print(f"stored path, {label}: {wall:.1f} s, peak RSS {peak:,.0f} MiB", flush=True)


def make_stored_predictions(folder: Path, n: int, groups: int) -> tuple[Path, Path]:
    """Gold labels (item_id, label, group) and predictions (item_id, score) as CSV, to register."""
    gold_path, predicted_path = folder / f"gold-{n}-{groups}.csv", folder / f"scores-{n}-{groups}.csv"
    if gold_path.exists() and predicted_path.exists():
        return gold_path, predicted_path
    rng = np.random.default_rng(31)
    import pyarrow.csv as pacsv

    item = pc.binary_join_element_wise("i", pa.array(np.arange(n).astype(str)), "")
    label = rng.random(n) < 0.1
    score = np.clip(np.round(rng.beta(2, 8, n) + label * 0.08, 4), 1e-4, 1 - 1e-4)
    group = pc.binary_join_element_wise("u", pa.array(rng.integers(0, groups, n).astype(str)), "")
    pacsv.write_csv(
        pa.table({"item_id": item, "label": pa.array(np.where(label, "yes", "no")), "group": group}),
        gold_path,
        pacsv.WriteOptions(quoting_style="none"),
    )
    pacsv.write_csv(
        pa.table({"item_id": item, "score": score}), predicted_path, pacsv.WriteOptions(quoting_style="none")
    )
    return gold_path, predicted_path


def stored_predictions(evalstore: str, url: str, gold: Path, predicted: Path, memory_limit: str) -> None:
    """A prediction set through the store, evaluated from it by each backend."""
    import os

    env = {**os.environ, "EVALSTORE_DATABASE_URL": url, "EVALSTORE_MLFLOW": "off"}
    subprocess.run([evalstore, "db", "upgrade"], env=env, check=True, capture_output=True)
    for command in (
        ["labels", "import", str(gold), "--name", "clicks"],
        ["predictions", "register", str(predicted), "--name", "model", "--labels", "clicks", "--probabilities"],
    ):
        wall, peak, _, _ = timed([evalstore, *command], env)
        print(f"stored predictions, {command[0]} {command[1]}: {wall:.1f} s, peak RSS {peak:,.0f} MiB", flush=True)
    backends = [
        ("local", []),
        ("duckdb", ["--memory-limit", memory_limit]),
        ("duckdb", ["--memory-limit", "500MB"]),
        ("spark", ["--spark-master", "local[2]"]),
    ]
    first: dict[str, float] = {}
    for name, flags in backends:
        wall, python_peak, jvm_peak, out = timed(
            [
                evalstore,
                "evaluate",
                "--labels",
                "clicks",
                "--predictions",
                "model",
                "--wait",
                "--force",
                "--format",
                "json",
                "--backend",
                name,
                *flags,
            ],
            env,
        )
        [row] = json.loads(out)
        values = {m: row[m] for m in ("auc", "gauc")}
        first = first or values
        print(
            f"stored predictions, evaluate --backend {name} {' '.join(flags)}: "
            f"{wall:.1f} s, peak RSS {python_peak:,.0f} MiB"
            + (f" + {jvm_peak:,.0f} MiB (JVM)" if jvm_peak else "")
            + f": {values}, equal to local: {values == first}",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--topics", type=int, default=100_000)
    parser.add_argument("--depth", type=int, default=1000)
    parser.add_argument("--predictions", type=int, default=100_000_000)
    parser.add_argument("--groups", type=int, default=1_000_000)
    parser.add_argument("--memory-limit", default="2GB")
    parser.add_argument("--sample-topics", type=int, default=10_000)
    parser.add_argument("--data", type=Path, default=ROOT / "build" / "bench-backends")
    parser.add_argument("--skip-spark", action="store_true")
    parser.add_argument("--skip-ranking", action="store_true")
    parser.add_argument("--skip-predictions", action="store_true")
    parser.add_argument("--skip-duckdb-predictions", action="store_true")
    parser.add_argument("--postgres", help="an empty PostgreSQL database to store and evaluate the large run in")
    parser.add_argument("--stored-predictions", type=int, default=10_000_000)
    parser.add_argument("--stored-groups", type=int, default=100_000)
    parser.add_argument("--skip-stored-predictions", action="store_true")
    args = parser.parse_args()
    args.data.mkdir(parents=True, exist_ok=True)
    evalstore = str(Path(sys.executable).with_name("evalstore"))
    if not args.skip_ranking:
        started = time.perf_counter()
        run_path, qrels_path = make_run(args.data, args.topics, args.depth)
        print(
            f"data: {run_path.name} ({run_path.stat().st_size / 2**30:.2f} GiB) in "
            f"{time.perf_counter() - started:.0f} s",
            flush=True,
        )
        wall, peak, _, out = timed(
            [
                evalstore,
                "trec-eval",
                "--backend",
                "duckdb",
                "--memory-limit",
                args.memory_limit,
                "-m",
                "all_trec",
                str(qrels_path),
                str(run_path),
            ]
        )
        num_q = next(line.split()[2] for line in out.splitlines() if line.startswith("num_q"))
        print(
            f"ranking, {args.topics:,} x {args.depth:,} rows, trec-eval --backend duckdb --memory-limit "
            f"{args.memory_limit} -m all_trec: {wall:.1f} s, peak RSS {peak:,.0f} MiB, num_q {num_q}",
            flush=True,
        )
        done = subprocess.run(
            [
                sys.executable,
                "-c",
                SAMPLE_EQUAL,
                str(run_path),
                str(qrels_path),
                str(args.sample_topics),
                args.memory_limit,
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        print(f"sample against the local engine: {done.stdout.strip()}", flush=True)
        if args.postgres:
            stored(evalstore, args.postgres, run_path, qrels_path, args.memory_limit)
    if not args.skip_predictions:
        started = time.perf_counter()
        path = make_predictions(args.data, args.predictions, args.groups)
        print(
            f"data: {path.name} ({path.stat().st_size / 2**30:.2f} GiB) in {time.perf_counter() - started:.0f} s",
            flush=True,
        )
        if not args.skip_duckdb_predictions:
            wall, peak, _, out = timed([sys.executable, "-c", PREDICTIONS_DUCKDB, str(path), args.memory_limit])
            print(
                f"predictions, {args.predictions:,} in {args.groups:,} groups, DuckDB (--memory-limit "
                f"{args.memory_limit}): {wall:.1f} s, peak RSS {peak:,.0f} MiB: {json.loads(out.splitlines()[-1])}",
                flush=True,
            )
        if not args.skip_spark:
            wall, peak, jvm, out = timed([sys.executable, "-c", PREDICTIONS_SPARK, str(path)])
            print(
                f"predictions, Spark local[2] (driver 6g): {wall:.1f} s, peak RSS {peak:,.0f} MiB (Python) + "
                f"{jvm:,.0f} MiB (JVM): {json.loads(out.splitlines()[-1])}",
                flush=True,
            )
    if args.postgres and not args.skip_stored_predictions:
        gold, predicted = make_stored_predictions(args.data, args.stored_predictions, args.stored_groups)
        stored_predictions(evalstore, args.postgres, gold, predicted, args.memory_limit)


if __name__ == "__main__":
    main()
