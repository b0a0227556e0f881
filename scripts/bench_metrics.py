#!/usr/bin/env python3
"""Benchmark the metric engine side by side with pytrec_eval and ranx, from files to results.

    python scripts/bench_metrics.py [--big-topics 6980] [--ranx-topics 5000] [--skip-pytrec]

1. `evalstore trec-eval -m all_trec` on a 7-million-row run (6,980 topics x 1,000 docs, 1-2
   relevant per topic, tied scores) vs pytrec_eval computing every measure it supports from the
   same files (its loading, into the dicts it needs, included). Wall time and peak memory, each in
   its own process.
2. map, ndcg_cut_10, P_10, recall_1000, recip_rank on a 5,000 x 1,000 run: evalstore's Python API
   vs ranx (Qrels/Run.from_file + evaluate) after its Numba JIT has been warmed up on a small
   run; loading included for both.
Needs the bench extra: pip install -e '.[bench]'.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

PYTREC = r"""
import sys, time, resource, pytrec_eval
t = time.perf_counter()
qrels, run = {}, {}
with open(sys.argv[1]) as fh:
    for line in fh:
        q, _, d, r = line.split()
        qrels.setdefault(q, {})[d] = int(r)
with open(sys.argv[2]) as fh:
    for line in fh:
        q, _, d, _, s, _ = line.split()
        run.setdefault(q, {})[d] = float(s)
loaded = time.perf_counter() - t
result = pytrec_eval.RelevanceEvaluator(qrels, pytrec_eval.supported_measures).evaluate(run)
print(loaded, time.perf_counter() - t, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
"""

RANX = r"""
import sys, time, warnings
warnings.filterwarnings("ignore")
from ranx import Qrels, Run, evaluate
metrics = ["map", "ndcg@10", "precision@10", "recall@1000", "mrr"]
evaluate(Qrels({"q": {"a": 1}}), Run({"q": {"a": 1.0, "b": 0.5}}), metrics)  # JIT warm-up
t = time.perf_counter()
qrels = Qrels.from_file(sys.argv[1], kind="trec")
run = Run.from_file(sys.argv[2], kind="trec")
scores = evaluate(qrels, run, metrics, make_comparable=True)
print(time.perf_counter() - t, scores["map"])
"""

EVALSTORE_API = r"""
import sys, time
import evalstore.metrics as m
t = time.perf_counter()
r = m.evaluate(sys.argv[1], sys.argv[2], ["map", "ndcg_cut_10", "P_10", "recall_1000", "recip_rank"],
               per_query=True, missing_topics="zero")
print(time.perf_counter() - t, r.aggregates["AP"])
"""


def timed(cmd: list[str]) -> tuple[float, float, str]:
    """Wall seconds, peak RSS (MB) of that one child process, and its stdout."""
    start = time.perf_counter()
    with tempfile.TemporaryFile() as out:
        child = subprocess.Popen(cmd, stdout=out)
        _, status, usage = os.wait4(child.pid, 0)
        seconds = time.perf_counter() - start
        if status != 0:
            raise SystemExit(f"{cmd[0]} failed with status {status}")
        out.seek(0)
        return seconds, usage.ru_maxrss / 1024, out.read().decode()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--big-topics", type=int, default=6980)
    parser.add_argument("--ranx-topics", type=int, default=5000)
    parser.add_argument("--skip-pytrec", action="store_true")
    args = parser.parse_args()
    results: dict[str, object] = {}
    with tempfile.TemporaryDirectory() as tmp:
        big, small = Path(tmp, "big"), Path(tmp, "small")
        subprocess.run([sys.executable, str(HERE / "make_synthetic.py"), str(big), "--topics", str(args.big_topics)],
                       check=True)
        subprocess.run([sys.executable, str(HERE / "make_synthetic.py"), str(small), "--topics",
                        str(args.ranx_topics), "--seed", "1"], check=True)
        evalstore = str(Path(sys.executable).with_name("evalstore"))
        secs, peak, _ = timed([evalstore, "trec-eval", "-m", "all_trec", str(big / "qrels.txt"), str(big / "run.txt")])
        results["evalstore trec-eval -m all_trec (7M rows)"] = {"seconds": round(secs, 2), "peak_mb": round(peak)}
        print(f"evalstore trec-eval -m all_trec: {secs:.2f} s, peak {peak:.0f} MB", flush=True)
        if not args.skip_pytrec:
            secs, _, out = timed([sys.executable, "-c", PYTREC, str(big / "qrels.txt"), str(big / "run.txt")])
            loaded, total, peak = (float(x) for x in out.split())
            results["pytrec_eval all supported measures (7M rows)"] = {
                "seconds": round(secs, 2), "load_seconds": round(loaded, 2), "peak_mb": round(peak)}
            print(f"pytrec_eval all measures: {secs:.2f} s (loading {loaded:.2f} s), peak {peak:.0f} MB", flush=True)
        small_files = [str(small / "qrels.txt"), str(small / "run.txt")]
        secs_e, _, out_e = timed([sys.executable, "-c", EVALSTORE_API, *small_files])
        inner_e = float(out_e.split()[0])
        secs_r, _, out_r = timed([sys.executable, "-c", RANX, *small_files])
        inner_r = float(out_r.split()[0])
        results["5 measures, 5000x1000, loading included"] = {
            "evalstore_seconds": round(inner_e, 2), "ranx_seconds_after_jit": round(inner_r, 2),
            "evalstore_map": float(out_e.split()[1]), "ranx_map": float(out_r.split()[1])}
        print(f"5 measures on {args.ranx_topics}x1000: evalstore {inner_e:.2f} s, ranx {inner_r:.2f} s "
              f"(after JIT warm-up); MAP {out_e.split()[1]} vs {out_r.split()[1]}")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
