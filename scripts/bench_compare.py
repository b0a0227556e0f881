#!/usr/bin/env python3
"""Benchmark `evalstore compare` on the 17 TREC 2003 Robust runs (the figures in docs/benchmarks.md).

All 136 pairs x 5 measures (AP, nDCG@10, P@10, RR, Rprec), 100 topics, randomization test with
10,000 resamples, Holm correction:

1. the whole command, `evalstore compare ... --test randomization --resamples 10000 --seed 1`,
   timed from process start to exit (per-query values already stored, as after `evaluate`);
2. the same through the service in-process, and every other procedure for comparison;
3. scipy's own implementation of each test on the same 680 pairs: its time, and how far its
   p-values are from ours (exactly equal for t, Wilcoxon and sign; within Monte Carlo error for
   the randomization test, whose expected spread is printed beside it).

    python scripts/bench_compare.py [--shared ../shared/data] [--repeat 3] [--skip-scipy]

Uses a scratch SQLite database and EVALSTORE_HOME in a temp folder.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
EVALSTORE = str(Path(sys.executable).parent / "evalstore")
MEASURES = ["AP", "nDCG@10", "P@10", "RR", "Rprec"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shared", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--resamples", type=int, default=10_000)
    parser.add_argument("--skip-scipy", action="store_true")
    args = parser.parse_args()
    robust = args.shared / "robust03"
    if not (robust / "runs").is_dir():
        sys.exit(f"robust03 runs not found under {robust}")

    from evalstore.db.engine import make_engine, upgrade
    from evalstore.services import comparisons, store
    from evalstore.services.orchestration import evaluate_runs

    with tempfile.TemporaryDirectory() as folder:
        os.environ["EVALSTORE_HOME"] = folder
        os.environ["EVALSTORE_MLFLOW"] = "off"
        url = f"sqlite:///{folder}/bench.db"
        engine = make_engine(url)
        upgrade(engine)
        started = time.perf_counter()
        store.import_qrels(engine, robust / "robust03_qrels.txt", name="robust03")
        runs = []
        for path in sorted((robust / "runs").glob("input.*.gz")):
            name = path.name.removeprefix("input.").removesuffix(".gz")
            store.register_run(engine, path, name=name)
            runs.append(name)
        evaluate_runs(engine, qrels_name="robust03", run_names=runs, measures=MEASURES)
        print(
            f"setup (register {len(runs)} runs, evaluate {len(MEASURES)} measures): "
            f"{time.perf_counter() - started:.1f} s"
        )
        pairs = len(runs) * (len(runs) - 1) // 2
        print(
            f"\n{pairs} pairs x {len(MEASURES)} measures = {pairs * len(MEASURES)} comparisons, 100 topics, "
            f"{args.resamples} resamples"
        )

        command = [
            EVALSTORE,
            "--database-url",
            url,
            "compare",
            "--qrels",
            "robust03",
            *runs,
            "--test",
            "randomization",
            "--resamples",
            str(args.resamples),
            "--seed",
            "1",
            "--correction",
            "holm",
            "--format",
            "json",
        ]
        for measure in MEASURES:
            command += ["--measure", measure]
        times = []
        for _ in range(args.repeat):
            start = time.perf_counter()
            subprocess.run(command, check=True, stdout=subprocess.DEVNULL, env=os.environ.copy())
            times.append(time.perf_counter() - start)
        print(
            f"evalstore compare (whole command, randomization + Holm): median {statistics.median(times):.2f} s, "
            f"min {min(times):.2f} s over {args.repeat}"
        )

        print("\nservice, in-process (median of 3):")
        outcomes = {}
        for test, multi in [
            ("t", None),
            ("randomization", None),
            ("bootstrap", None),
            ("wilcoxon", None),
            ("sign", None),
            ("t", "tukey"),
            ("t", "randomized-tukey"),
        ]:
            times = []
            for _ in range(3):
                start = time.perf_counter()
                result = comparisons.compare(
                    engine,
                    qrels_name="robust03",
                    run_names=runs,
                    measures=MEASURES,
                    test=test,
                    multi=multi,
                    resamples=args.resamples,
                    seed=1,
                )
                times.append(time.perf_counter() - start)
            outcomes[multi or test] = result
            significant = sum(p.significant for p in result.pairs)
            print(
                f"  {multi or test:17s} {statistics.median(times):6.2f} s   significant after correction: "
                f"{significant}/{len(result.pairs)}"
            )
        if not args.skip_scipy:
            against_scipy(outcomes, args.resamples)


def against_scipy(outcomes: dict, resamples: int) -> None:
    from scipy import stats

    print("\nscipy on the same pairs, one call per pair:")
    reference = outcomes["t"]
    diffs = [reference.differences(p) for p in reference.pairs]
    checks = [
        ("t", lambda d: stats.ttest_1samp(d, 0.0).pvalue),
        ("wilcoxon", lambda d: stats.wilcoxon(d).pvalue if np.any(d != 0) else 1.0),
        ("sign", lambda d: stats.binomtest(int((d > 0).sum()), int((d != 0).sum())).pvalue if np.any(d != 0) else 1.0),
        (
            "randomization",
            lambda d: (
                stats.permutation_test(
                    (d,),
                    np.mean,
                    permutation_type="samples",
                    n_resamples=resamples,
                    vectorized=True,
                    axis=-1,
                    rng=np.random.default_rng(2),
                ).pvalue
            ),
        ),
    ]
    for name, test in checks:
        start = time.perf_counter()
        theirs = np.array([test(d) for d in diffs])
        elapsed = time.perf_counter() - start
        ours = np.array([p.p_value for p in outcomes[name].pairs])
        gap = np.abs(ours - theirs)
        line = f"  {name:13s} scipy {elapsed:6.2f} s   max |p ours - p scipy| = {gap.max():.2e}"
        if name == "randomization":
            # two independent Monte Carlo estimates. Ours counts |mean| >= |observed| (variance
            # p(1-p)/R); scipy doubles the smaller tail (variance 4 t(1-t)/R, t = p/2), which is
            # much noisier near p = 1
            tail = theirs / 2
            sd = np.sqrt(ours * (1 - ours) / resamples + 4 * tail * (1 - tail) / resamples)
            z = gap / np.maximum(sd, 1 / resamples)
            line += f" (at most {z.max():.1f} standard errors; {np.mean(z <= 3):.1%} within 3 SE)"
        print(line)


if __name__ == "__main__":
    main()
