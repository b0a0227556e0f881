#!/usr/bin/env python3
"""Benchmark the metric engine side by side with trec_eval, pytrec_eval, ir_measures and ranx.

    python scripts/bench_metrics.py [--rounds 5] [--no-warm-up] [--settle S] [--big-topics 6980]
        [--ranx-topics 5000] [--skip-pytrec] [--skip-ranx] [--only large,ordinary,campaign,in-process,api]

Every tool runs as its own process on the same files, wall time from process start to exit (so
start-up counts) and peak RSS of that process; the tools alternate within each round (the order
rotating a tool a round), over ``--rounds`` rounds, since this machine's speed drifts, each timed
run right after an untimed one of the same command (see side_by_side); medians and ratios are
printed.

1. large: `-m all_trec` on a 7-million-row run (6,980 topics x 1,000, 1-2 relevant per topic, tied
   scores): trec_eval 10.0 (built by ../shared/tools/build, or $EVALSTORE_TREC_EVAL) against
   `evalstore trec-eval`; pytrec_eval computing every measure it supports from the same files.
2. ordinary: `-q -m all_trec` on five of robust03's runs (100 topics x up to 1,000 each, from
   ../shared/data; ORDINARY_RUNS), one at a time: trec_eval against `evalstore trec-eval`, with the
   qrels kept from the command before (as in a loop over runs, evalstore.io.parsed_cache) and read
   anew (EVALSTORE_CACHE_DIR=off).
3. API: map, ndcg_cut_10, P_10, recall_1000, recip_rank on a 5,000 x 1,000 run, loading included:
   `evalstore.evaluate` against ir_measures and ranx (its process includes compiling its Numba kernels).
4. in one process: the 17 robust03 runs (gzipped, as distributed), every measure each tool has
   (evalstore: all_trec's; pytrec_eval: its supported_measures), `evalstore.metrics.evaluate` in a
   loop against pytrec_eval's RelevanceEvaluator in a loop, each reading the files itself.
5. campaign: `-q -m all_trec` on the 17 robust03 runs: one `evalstore trec-eval QRELS RUN...`
   command (and with --jobs 2) against trec_eval once a run (a shell loop, as people script it)
   and `evalstore trec-eval` once a run; every output checked to be the trec_eval loop's first.
Where trec_eval cannot be built the script says so and compares the others. Needs the bench
extra: pip install -e '.[bench]' (ir_measures comes with the test extra).
"""

from __future__ import annotations

import argparse
import compileall
import gzip
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

IR_MEASURES = r"""
import sys, time
import ir_measures
from ir_measures import AP, P, R, RR, nDCG
t = time.perf_counter()
qrels = ir_measures.read_trec_qrels(sys.argv[1])
run = ir_measures.read_trec_run(sys.argv[2])
scores = ir_measures.calc_aggregate([AP, nDCG @ 10, P @ 10, R @ 1000, RR], qrels, run)
print(time.perf_counter() - t, scores[AP])
"""

EVALSTORE_API = r"""
import sys, time
import evalstore.metrics as m
t = time.perf_counter()
r = m.evaluate(sys.argv[1], sys.argv[2], ["map", "ndcg_cut_10", "P_10", "recall_1000", "recip_rank"],
               per_query=True, missing_topics="zero")
print(time.perf_counter() - t, r.aggregates["AP"])
"""


# 4. the 17 robust03 runs in one process, every measure each tool has (evalstore: all_trec's; pytrec_eval:
# its supported_measures, which are trec_eval's), files read by the tool, the qrels once
EVALSTORE_MANY = r"""
import sys, time
import evalstore.metrics as m
from evalstore.io.formats import read_qrels
t = time.perf_counter()
measures = [measure for _, measure in m.expand_trec_spec("all_trec") if measure is not None]
qrels = read_qrels(sys.argv[1], strict=False).table
for path in sys.argv[2:]:
    m.evaluate(qrels, path, measures, per_query=True)
print(time.perf_counter() - t)
"""

PYTREC_MANY = r"""
import sys, time, gzip, pytrec_eval
t = time.perf_counter()
qrels = {}
with open(sys.argv[1]) as fh:
    for line in fh:
        q, _, d, r = line.split()
        qrels.setdefault(q, {})[d] = int(r)
evaluator = pytrec_eval.RelevanceEvaluator(qrels, pytrec_eval.supported_measures)
for path in sys.argv[2:]:
    run = {}
    with gzip.open(path, "rt") as fh:
        for line in fh:
            q, _, d, _, s, _ = line.split()
            run.setdefault(q, {})[d] = float(s)
    evaluator.evaluate(run)
print(time.perf_counter() - t)
"""


def timed(cmd: list[str], cpu: list[float] | None = None) -> tuple[float, float, str]:
    """Wall seconds, peak RSS (MB) of that one child process, and its stdout; its CPU seconds
    (user + system, as wait4 reports them: with the processes it waited for, a shell loop's)
    appended to ``cpu``."""
    start = time.perf_counter()
    with tempfile.TemporaryFile() as out:
        child = subprocess.Popen(cmd, stdout=out)
        _, status, usage = os.wait4(child.pid, 0)
        seconds = time.perf_counter() - start
        if status != 0:
            raise SystemExit(f"{cmd[0]} failed with status {status}")
        if cpu is not None:
            cpu.append(usage.ru_utime + usage.ru_stime)
        out.seek(0)
        return seconds, usage.ru_maxrss / 1024, out.read().decode()


def trec_eval_binary() -> str | None:
    """trec_eval 10.0: $EVALSTORE_TREC_EVAL, else built by ../shared/tools/build (None if neither)."""
    if os.environ.get("EVALSTORE_TREC_EVAL"):
        return os.environ["EVALSTORE_TREC_EVAL"]
    build = HERE.parent.parent / "shared" / "tools" / "build"
    if not build.exists():
        return None
    built = subprocess.run([str(build)], capture_output=True, text=True, check=False)
    return built.stdout.splitlines()[0] if built.returncode == 0 and built.stdout else None


def median(values: list[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def side_by_side(name: str, tools: dict[str, list[str]], args: argparse.Namespace, results: dict[str, object]) -> None:
    """Run every tool once a round, alternating (the order rotating by one tool a round), and print
    medians, peaks and ratios to evalstore. Each timed run follows an untimed one of the same
    command (hyperfine's warm-up, done before every timed run, not once): this VM's kernel pages
    cold memory out (DAMON, action pageout), so the files a tool reads, its input and its
    program's libraries (60 MB of libarrow for evalstore, 100 kB for trec_eval), were partly on
    disk again whenever other tools had run in between (`cat` of the 7M-row run: 0.19 s, then
    0.04 s), and the process after pytrec_eval's 1.25 GB exit ran slower, whichever tool it was.
    ``settle`` seconds of rest may be put before each run."""
    seconds: dict[str, list[float]] = {tool: [] for tool in tools}
    peaks: dict[str, list[float]] = {tool: [] for tool in tools}
    cpu: dict[str, list[float]] = {tool: [] for tool in tools}
    names = list(tools)
    rounds = args.rounds
    for round_number in range(rounds):
        # each round starts one tool further on, so that each tool follows each other one alike: the
        # process after pytrec_eval's 1.25 GB exit ran slower, whichever it was
        for tool in names[round_number % len(names) :] + names[: round_number % len(names)]:
            command = tools[tool]
            time.sleep(args.settle)
            if args.warm_up:
                timed(command)
            secs, peak, _ = timed(command, cpu[tool])
            seconds[tool].append(secs)
            peaks[tool].append(peak)
    ours = median(seconds["evalstore"])
    print(f"{name} (medians of {rounds} alternating rounds, whole processes)")
    row: dict[str, object] = {}
    for tool in tools:
        ratio = median(seconds[tool]) / ours
        print(
            f"  {tool:<22s} {median(seconds[tool]):7.2f} s  cpu {median(cpu[tool]):6.2f} s  peak "
            f"{max(peaks[tool]):6.0f} MB  ({ratio:.2f}x evalstore's time)   rounds: "
            f"{', '.join(f'{t:.2f}' for t in seconds[tool])}",
            flush=True,
        )
        row[tool] = {
            "median_seconds": round(median(seconds[tool]), 3),
            "median_cpu_seconds": round(median(cpu[tool]), 3),
            "peak_mb": round(max(peaks[tool])),
            "vs_evalstore": round(ratio, 2),
        }
    results[name] = row


SECTIONS = ("large", "ordinary", "campaign", "in-process", "api")
# five runs of different sizes and score shapes, so that one run's quirks do not make the figure
ORDINARY_RUNS = ("pircRBa1", "fub03IeOLKe3", "aplrob03a", "THUIRr0301", "uwmtCR0")


def campaign(
    qrels: Path,
    runs: list[str],
    binary: str | None,
    evalstore: str,
    tmp: Path,
    args: argparse.Namespace,
    results: dict[str, object],
) -> None:
    """5. A campaign: the 17 robust03 runs, `-q -m all_trec`, in one `evalstore trec-eval` command
    (one process; and with --jobs 2) against trec_eval run once a run (a shell loop, as people
    script it) and against `evalstore trec-eval` once a run. Every command's output is checked to
    be the trec_eval loop's, byte for byte, before timing."""
    plain = []
    for run in runs:  # trec_eval reads no gzip: every tool reads the same text files
        path = tmp / Path(run).stem
        path.write_bytes(__import__("gzip").decompress(Path(run).read_bytes()))
        plain.append(str(path))
    flags = ["-q", "-m", "all_trec"]
    loop = 'for run in "$@"; do "$0" {} "{}" "$run" || exit 1; done'.format(" ".join(flags), qrels)
    wrapper = tmp / "evalstore-trec-eval"  # the loop's "$0" is one word
    wrapper.write_text(f'#!/bin/sh\nexec "{evalstore}" trec-eval "$@"\n')
    wrapper.chmod(0o755)
    tools = {
        "evalstore": [evalstore, "trec-eval", *flags, str(qrels), *plain],
        "evalstore --jobs 2": [evalstore, "trec-eval", "--jobs", "2", *flags, str(qrels), *plain],
        "evalstore, a process a run": ["sh", "-c", loop, str(wrapper), *plain],
    }
    if binary:
        tools["trec_eval 10.0, a process a run"] = ["sh", "-c", loop, binary, *plain]
        expected = timed(tools["trec_eval 10.0, a process a run"])[2]
        for tool, command in tools.items():
            if timed(command)[2] != expected:
                raise SystemExit(f"{tool}'s output differs from the trec_eval loop's")
    side_by_side(
        f"-q -m all_trec, the {len(runs)} robust03 runs (one command against a process a run)", tools, args, results
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--big-topics", type=int, default=6980)
    parser.add_argument("--ranx-topics", type=int, default=5000)
    parser.add_argument("--skip-pytrec", action="store_true")
    parser.add_argument("--skip-ranx", action="store_true")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--settle", type=float, default=0.0, help="seconds of rest before each run")
    parser.add_argument(
        "--no-warm-up",
        dest="warm_up",
        action="store_false",
        help="time each command cold, without an untimed run of it just before",
    )
    parser.add_argument(
        "--only",
        type=lambda text: set(text.split(",")),
        default=set(SECTIONS),
        help=f"the comparisons to run, comma-separated: {','.join(SECTIONS)} (default: all)",
    )
    args = parser.parse_args()
    if args.only - set(SECTIONS):
        parser.error(f"--only: unknown {','.join(sorted(args.only - set(SECTIONS)))}; choose from {','.join(SECTIONS)}")
    results: dict[str, object] = {}
    # as an installed package is (pip writes the bytecode at install): an editable checkout under
    # PYTHONDONTWRITEBYTECODE would otherwise compile every module edited since, in every process
    compileall.compile_dir(str(HERE.parent / "evalstore"), quiet=1)
    binary = trec_eval_binary()
    if binary is None:
        print(
            "trec_eval cannot be built here (no ../shared/tools/build and no $EVALSTORE_TREC_EVAL): comparing the "
            "other tools only",
            flush=True,
        )
    evalstore = str(Path(sys.executable).with_name("evalstore"))
    with tempfile.TemporaryDirectory() as tmp:
        # `trec-eval` keeps the qrels it reads (evalstore.io.parsed_cache): here, not in the user's cache
        os.environ["EVALSTORE_CACHE_DIR"] = str(Path(tmp, "cache"))
        if "large" in args.only:
            big = Path(tmp, "big")
            subprocess.run(
                [sys.executable, str(HERE / "make_synthetic.py"), str(big), "--topics", str(args.big_topics)],
                check=True,
            )
            big_files = [str(big / "qrels.txt"), str(big / "run.txt")]
            large = {"evalstore": [evalstore, "trec-eval", "-m", "all_trec", *big_files]}
            if binary:
                large["trec_eval 10.0"] = [binary, "-m", "all_trec", *big_files]
            if not args.skip_pytrec:
                large["pytrec_eval (all)"] = [sys.executable, "-c", PYTREC, *big_files]
            side_by_side(f"-m all_trec, {args.big_topics} x 1,000 run", large, args, results)
        robust = HERE.parent.parent / "shared" / "data" / "robust03"
        if not (robust / "runs" / "input.pircRBa1.gz").exists():
            print(f"robust03 not found under {robust}: the ordinary-run comparisons are skipped", flush=True)
        else:
            runs = sorted(str(p) for p in (robust / "runs").glob("input.*.gz"))
            if "ordinary" in args.only:
                for run_name in ORDINARY_RUNS:
                    plain = Path(tmp, f"{run_name}.txt")  # trec_eval reads no gzip: both tools read the same text
                    plain.write_bytes(gzip.decompress((robust / "runs" / f"input.{run_name}.gz").read_bytes()))
                    ordinary_files = [str(robust / "robust03_qrels.txt"), str(plain)]
                    ordinary = {
                        "evalstore": [evalstore, "trec-eval", "-q", "-m", "all_trec", *ordinary_files],
                        # the qrels read anew each time, as the first command after they change reads
                        # them (`env` adds its exec, ~1 ms)
                        "evalstore, qrels not kept": [
                            "env",
                            "EVALSTORE_CACHE_DIR=off",
                            evalstore,
                            "trec-eval",
                            "-q",
                            "-m",
                            "all_trec",
                            *ordinary_files,
                        ],
                    }
                    if binary:
                        ordinary["trec_eval 10.0"] = [binary, "-q", "-m", "all_trec", *ordinary_files]
                    side_by_side(f"-q -m all_trec, robust03 {run_name} (100 topics)", ordinary, args, results)
            if "campaign" in args.only:
                campaign(robust / "robust03_qrels.txt", runs, binary, evalstore, Path(tmp), args, results)
            if "in-process" in args.only:
                qrels = str(robust / "robust03_qrels.txt")
                many = {"evalstore": [sys.executable, "-c", EVALSTORE_MANY, qrels, *runs]}
                if not args.skip_pytrec:
                    many["pytrec_eval"] = [sys.executable, "-c", PYTREC_MANY, qrels, *runs]
                side_by_side(f"the {len(runs)} robust03 runs in one process, every measure", many, args, results)
        if "api" in args.only:
            small = Path(tmp, "small")
            subprocess.run(
                [
                    sys.executable,
                    str(HERE / "make_synthetic.py"),
                    str(small),
                    "--topics",
                    str(args.ranx_topics),
                    "--seed",
                    "1",
                ],
                check=True,
            )
            small_files = [str(small / "qrels.txt"), str(small / "run.txt")]
            api = {
                "evalstore": [sys.executable, "-c", EVALSTORE_API, *small_files],
                "ir_measures": [sys.executable, "-c", IR_MEASURES, *small_files],
            }
            if not args.skip_ranx:
                api["ranx (incl. Numba JIT)"] = [sys.executable, "-c", RANX, *small_files]
            side_by_side(f"5 measures, {args.ranx_topics} x 1,000, Python API, loading included", api, args, results)
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
