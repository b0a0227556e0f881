"""The conformance fuzzer (tests/differential/fuzz_cases.py) under CI: a bounded number of
generated cases against the trec_eval 10.0 program, and of the API's in-memory path against its
file path. scripts/fuzz_conformance.py runs the same for longer and prints the outcome counts."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings

from tests.differential.fuzz_cases import ApiCase, Case, api_cases, api_outcome, cases, trec_eval_outcome

# ~0.1 s a case (a trec_eval process, an in-process evalstore, sometimes a DuckDB connection)
CI_EXAMPLES = 60


def test_generated_cases_match_trec_eval_or_a_documented_difference(trec_eval_binary: Path) -> None:
    @settings(
        max_examples=CI_EXAMPLES,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(cases())
    def check(case: Case) -> None:
        trec_eval_outcome(case, trec_eval_binary)

    check()


@settings(max_examples=CI_EXAMPLES, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(api_cases())
def test_the_api_in_memory_reads_what_its_files_read(case: ApiCase) -> None:
    api_outcome(case)
