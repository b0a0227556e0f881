"""`evalstore trec-eval QRELS RUN [RUN ...]`: each run's output as the one-run command prints it,
in the order given, on trec_eval's own test files (shipped with the tests, so these run
everywhere). The real campaigns against the trec_eval program: tests/differential/test_multi_run.py."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from evalstore.errors import EvaluationError, InputFormatError
from evalstore.trec_eval.command_line import run as trec_eval
from tests.golden.test_trec_eval_golden import suite_file

# runs of different depths and topics: results.trunc is results.test cut short, results-302.test
# has one topic of its own
RUNS = ["results.test", "results.trunc", "results.test", "results-302.test"]
FLAG_SETS = [
    [],
    ["-q", "-m", "all_trec"],
    ["-q", "-c", "-m", "all_trec"],
    ["-q", "-c", "-J", "-M", "5", "-m", "all_trec", "-m", "P.3,7"],
    ["-c", "-M", "0", "-m", "all_trec"],
    ["-q", "-c", "-l", "2", "-m", "official", "-m", "ndcg.1=3,2=9"],
    ["-q", "-c", "-l", "-1", "-m", "map", "-m", "G.-1=1", "-m", "relstring.5", "-m", "rbp_resid"],
    ["-n", "-q", "-c", "-m", "utility.2,-1,0,0", "-m", "utility", "-m", "num_ret", "-m", "relstring"],
    ["-q", "-c", "-m", "all_trec", "-Z", "zscores_file"],
    ["-q", "-c", "-m", "qrels_jg", "-R", "qrels_jg"],  # the judgments formats: one run after another
    ["-q", "-c", "-m", "all_prefs", "-R", "qrels_prefs"],
]


def _files(flags: list[str], runs: list[str]) -> list[str]:
    qrels = "qrels.123" if "qrels_jg" in flags else "qrels.test"
    flags = [str(suite_file(f)) if f == "zscores_file" else f for f in flags]
    return [*flags, str(suite_file(qrels)), *(str(suite_file(r)) for r in runs)]


def _output(args: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    trec_eval(args)
    return capsys.readouterr().out


@pytest.mark.parametrize("flags", FLAG_SETS, ids=" ".join)
def test_each_runs_output_in_turn_as_one_run_prints_it(flags: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    expected = [_output(_files(flags, [run]), capsys) for run in RUNS]
    # the runs differ (but under -M 0): a run printed in another's place would show
    assert len(set(expected)) == (1 if "0" in flags else 3)
    assert _output(_files(flags, RUNS), capsys) == "".join(expected)


@pytest.mark.parametrize(
    "flags", [["-q", "-c", "-m", "all_trec"], ["-q", "-c", "-m", "qrels_jg", "-R", "qrels_jg"]], ids=" ".join
)
def test_several_processes_print_the_same_as_one(flags: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    one = _output(_files(flags, RUNS), capsys)
    assert _output(["--jobs", "2", *_files(flags, RUNS)], capsys) == one
    assert _output(["--jobs", "9", *_files(flags, RUNS)], capsys) == one  # more processes than runs


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_bad_run_stops_the_command_after_the_runs_before_it(
    jobs: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.run"
    bad.write_text("401 Q0 d1 1 0.5 t\n401 Q0 d2 2 zero t\n")
    first = _output(_files(["-q", "-m", "all_trec"], ["results.test"]), capsys)
    args = _files(["-q", "-m", "all_trec"], ["results.test", "results.trunc"])
    with pytest.raises(InputFormatError) as raised:
        trec_eval(["--jobs", jobs, *args[:-1], str(bad), args[-1]])
    assert str(raised.value) == (
        f"{bad}:2: score 'zero' is not a number; trec_eval's atof would read it as 0 (no "
        "leading digits), evalstore refuses it"
    )
    assert capsys.readouterr().out == first
    with pytest.raises(InputFormatError, match=r"^no/such/run: no such file; check the path$"):
        trec_eval(["--jobs", jobs, *args, "no/such/run"])
    outputs = capsys.readouterr().out
    assert outputs == first + _output(_files(["-q", "-m", "all_trec"], ["results.trunc"]), capsys)


def test_a_run_sharing_no_topic_with_the_qrels_is_an_error_in_its_turn(
    write: object, capsys: pytest.CaptureFixture[str]
) -> None:
    other = write("other.run", "999 Q0 d1 1 0.5 t\n")  # type: ignore[operator]
    args = _files(["-m", "map"], ["results.test"])
    first = _output(args, capsys)
    with pytest.raises(EvaluationError, match=r"^No queries with both results and relevance info"):
        trec_eval([*args, str(other), args[-1]])
    assert capsys.readouterr().out == first
    assert first.startswith("map                   \tall\t0.")


def test_warnings_name_the_run_they_are_about(capsys: pytest.CaptureFixture[str]) -> None:
    warnings: list[str] = []
    args = _files(["-m", "num_q"], ["results.test", "results-302.test"])
    trec_eval(args, warn=warnings.append)
    assert capsys.readouterr().out == "num_q                 \tall\t3\nnum_q                 \tall\t1\n"
    assert warnings == [
        f"{args[-1]}: qrels topic {topic} has no results in the run; skipped (pass -c to score it as 0)"
        for topic in ("301", "303")
    ]


def test_jobs_must_be_a_number_of_processes(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        trec_eval(["--jobs", "0", *_files([], RUNS)])
    assert stop.value.code == 2
    assert capsys.readouterr().err.endswith("argument --jobs: 0 is not a number of processes (1 or more)\n")


def test_the_installed_command_reads_several_runs() -> None:
    args = _files(["-q", "-m", "all_trec"], RUNS)
    many = subprocess.run(
        [sys.executable, "-m", "evalstore", "trec-eval", "--jobs", "2", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    ones = [
        subprocess.run(
            [sys.executable, "-m", "evalstore", "trec-eval", *args[: -len(RUNS)], run],
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        ).stdout
        for run in args[-len(RUNS) :]
    ]
    assert many.stdout == "".join(ones)


def test_stacked_rankings_give_each_rankings_own_values() -> None:
    """compute_stacked against compute, ranking by ranking, bit for bit: rankings of three depths,
    the stacks bounded to a few cells so that one depth makes several stacks."""
    from evalstore.io.formats import read_qrels, read_run
    from evalstore.metrics import compute, prepare, resolve_measures
    from evalstore.metrics.preparation import PrepareOptions
    from evalstore.metrics.stacked import compute_stacked

    qrels = read_qrels(suite_file("qrels.test"), strict=False).table
    measures = resolve_measures(["all_trec", "P@3", "nDCG(gains={-1:1})@5", "G(gains={-1:1})", "AP(rel=-1)"])
    rankings = [
        prepare(qrels, read_run(suite_file(run), strict=False).table, PrepareOptions(complete=True, max_docs=m))
        for run in RUNS
        for m in (None, 7, 30)
    ]
    assert len({rk.depth for rk in rankings}) == 3
    stacked = compute_stacked(compute, rankings, measures, stack_cells=12_000)
    for rk, values in zip(rankings, stacked, strict=True):
        alone = compute(rk, measures)
        assert list(values) == list(alone)
        for measure in measures:
            ours, theirs = np.asarray(values[measure]), np.asarray(alone[measure])
            if ours.dtype == object:  # relstring's texts
                assert ours.tolist() == theirs.tolist(), measure
            else:
                assert ours.tobytes() == theirs.tobytes(), measure


def test_an_ordinary_run_imports_no_masked_arrays_no_shutil_and_no_multiprocessing(write: object) -> None:
    """What the one-run start-up no longer pays for: numpy.ma (numpy 2's np.unique asks whether an
    array is masked; evalstore._entry's stand-in answers), shutil with bz2 and lzma (argparse's
    formatter looks for the terminal's width), multiprocessing (--jobs only)."""
    qrels = write("qrels", "".join(f"{t} 0 d{d} {d % 3}\n" for t in (1, 2, 3) for d in range(30)))  # type: ignore[operator]
    run = write("run", "".join(f"{t} Q0 d{d} {d} {100 - d} r\n" for t in (1, 2, 3) for d in range(40)))  # type: ignore[operator]
    result = subprocess.run(
        [
            sys.executable,
            "-X",
            "importtime",
            "-m",
            "evalstore",
            "trec-eval",
            "-q",
            "-m",
            "all_trec",
            str(qrels),
            str(run),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    loaded = {line.split("|")[-1].strip() for line in result.stderr.splitlines() if line.startswith("import time:")}
    assert "numpy" in loaded
    assert not {"numpy.ma", "numpy.ma.core", "shutil", "lzma", "bz2", "multiprocessing"} & loaded


def test_nothing_is_evaluated_after_a_failing_run(write: object) -> None:
    """Batches of one run each: a run that fails in its batch ends the outcomes (a --jobs worker
    stops there too, not computing runs whose output will never be printed)."""
    from evalstore.trec_eval.many_runs import _Stacked

    other = write("other.run", "999 Q0 d1 1 0.5 t\n")  # type: ignore[operator]
    campaign = _Stacked.read(
        str(suite_file("qrels.test")),
        measures=["map"],
        per_query=False,
        complete=False,
        no_summary=False,
        judged_only=False,
        relevance_level=1,
        max_docs=None,
        collection_size=0,
    )
    campaign.batch_cells = 1
    runs = [str(suite_file("results.test")), str(other), str(suite_file("results.trunc"))]
    outcomes = list(campaign.outcomes(runs))
    assert [outcome.error is None for outcome in outcomes] == [True, False]
    assert outcomes[1].error is not None
    assert outcomes[1].error.message.startswith("No queries with both results and relevance info")


@pytest.mark.parametrize("limit", [0, 1 << 26])
def test_the_next_run_is_read_while_one_is_ranked_unless_it_is_large(
    limit: int, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A campaign reads each run after the first on a thread of its own while the run before it is
    ranked (a file over READ_AHEAD_BYTES in its turn, on the main thread); the output is the same."""
    import threading

    from evalstore import metrics
    from evalstore.trec_eval import many_runs

    read_on: list[bool] = []
    real = many_runs.read_run_to_evaluate

    def recorded(path: str) -> object:
        read_on.append(threading.current_thread() is threading.main_thread())
        return real(path)

    expected = _output(_files(["-q", "-m", "all_trec"], RUNS), capsys)
    monkeypatch.setattr(many_runs, "READ_AHEAD_BYTES", limit)
    monkeypatch.setattr(many_runs, "read_run_to_evaluate", recorded)
    monkeypatch.setattr(metrics, "read_run_to_evaluate", recorded)
    assert _output(_files(["-q", "-m", "all_trec"], RUNS), capsys) == expected
    assert read_on == ([False] * len(RUNS) if limit else [True] * len(RUNS))


def test_a_gzipped_run_counts_at_its_inflated_size(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A gzipped run is read ahead only if GZIP_INFLATION times its size on disk is within
    READ_AHEAD_BYTES: here it is not, so it is read in its turn, on the main thread."""
    import gzip
    import threading

    from evalstore import metrics
    from evalstore.trec_eval import many_runs

    packed = tmp_path / "results.test.gz"
    packed.write_bytes(gzip.compress(suite_file("results.test").read_bytes()))
    runs = [str(suite_file("results.trunc")), str(packed)]
    monkeypatch.setattr(many_runs, "READ_AHEAD_BYTES", packed.stat().st_size * (many_runs.GZIP_INFLATION - 1))
    read_on: dict[str, bool] = {}
    real = many_runs.read_run_to_evaluate

    def recorded(path: str) -> object:
        read_on[Path(path).name] = threading.current_thread() is threading.main_thread()
        return real(path)

    monkeypatch.setattr(many_runs, "read_run_to_evaluate", recorded)
    monkeypatch.setattr(metrics, "read_run_to_evaluate", recorded)
    trec_eval([str(suite_file("qrels.test")), *runs])
    assert capsys.readouterr().out
    assert read_on == {"results.trunc": False, "results.test.gz": True}
