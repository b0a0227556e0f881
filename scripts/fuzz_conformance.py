"""Run the conformance fuzzer (tests/differential/fuzz_cases.py) for longer than CI does and print
how many generated cases ended in each outcome.

    python scripts/fuzz_conformance.py [--examples 2000] [--api-examples 500] [--seed 0]
        [--trec-eval /tmp/evalstore-reference-tools/trec_eval]

An undocumented difference stops the run with the case that shows it (hypothesis shrinks it
first). The seed makes a run repeatable; it is printed with the counts.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hypothesis import HealthCheck, given, seed, settings  # noqa: E402

from tests.differential.fuzz_cases import ApiCase, Case, api_cases, api_outcome, cases, trec_eval_outcome  # noqa: E402

DEFAULT_BINARY = os.environ.get("EVALSTORE_TREC_EVAL", "/tmp/evalstore-reference-tools/trec_eval")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=int, default=2000, help="trec-eval cases (default 2000)")
    parser.add_argument("--api-examples", type=int, default=500, help="evaluate() file/memory cases (default 500)")
    parser.add_argument("--seed", type=int, default=0, help="hypothesis' seed (default 0)")
    parser.add_argument("--trec-eval", default=DEFAULT_BINARY, help="the trec_eval 10.0 program")
    options = parser.parse_args()
    binary = Path(options.trec_eval)
    if not os.access(binary, os.X_OK):
        sys.exit(f"{binary} is not an executable; build it with ../shared/tools/build or pass --trec-eval")
    counts: Counter[str] = Counter()
    flags: Counter[str] = Counter()
    backends: Counter[str] = Counter()
    started = time.perf_counter()

    @seed(options.seed)
    @settings(max_examples=options.examples, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(cases())
    def against_trec_eval(case: Case) -> None:
        outcome = trec_eval_outcome(case, binary)
        counts[outcome] += 1
        backends[case.backend] += 1
        flags.update({flag.split("=")[0] for flag in case.flags if flag.startswith("-")})

    @seed(options.seed)
    @settings(max_examples=options.api_examples, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(api_cases())
    def file_against_memory(case: ApiCase) -> None:
        counts[api_outcome(case)] += 1

    against_trec_eval()
    file_against_memory()
    print(f"seed {options.seed}; {sum(counts.values())} cases in {time.perf_counter() - started:.0f} s")
    for outcome, count in counts.most_common():
        print(f"{count:7d}  {outcome}")
    print("backends: " + ", ".join(f"{name} {count}" for name, count in backends.most_common()))
    print("flags: " + ", ".join(f"{name} {count}" for name, count in flags.most_common()))


if __name__ == "__main__":
    main()
