"""`evalstore trec-eval` reproduces trec_eval 10.0's own test suite byte for byte.

Expected outputs and the commands that produce them: ../shared/data/trec_eval_test/PROVENANCE.md
(usnistgov/trec_eval tag v10.0, Makefile target quicktest). The files ship in tests/data (NIST
notice in its NOTICE.md), so these run on every machine; the comment-format cases read the
larger files from ../shared/data and skip without it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from evalstore.cli import app
from evalstore.errors import InputFormatError
from tests.conftest import shared_path

VENDORED = Path(__file__).resolve().parents[1] / "data" / "trec_eval_test"


def suite_file(name: str) -> Path:
    """One of trec_eval's test files: shipped with the tests, or else from ../shared/data."""
    shipped = VENDORED / name
    return shipped if shipped.exists() else shared_path("trec_eval_test", name)


CASES = {
    "out.test": ["qrels.test", "results.test"],
    "out.test.with-comments": ["qrels.test.with-comments", "results.test"],
    "out.comment.test": ["qrels.comment.test", "results.comment.test"],
    "out.test.a": ["-m", "all_trec", "qrels.test", "results.test"],
    "out.test.aq": ["-m", "all_trec", "-q", "qrels.test", "results.test"],
    "out.test.aqc": ["-m", "all_trec", "-q", "-c", "qrels.test", "results.trunc"],
    "out.test.aqcM": ["-m", "all_trec", "-q", "-c", "-M100", "qrels.test", "results.trunc"],
    "out.test.aql": ["-m", "all_trec", "-mrelstring.20", "-q", "-l2", "qrels.rel_level", "results.test"],
    "out.test.meas_params": [
        "-q",
        "-miprec_at_recall..10,.20,.25,.75,.50",
        "-m",
        "P.5,7,3",
        "-m",
        "recall.20,2000",
        "-m",
        "Rprec_mult.5.0,0.2,0.35",
        "-mutility.2,-1,0,0",
        "-m",
        "11pt_avg..25,.5,.75",
        "-mndcg.1=3,2=9,4=4.5",
        "-mndcg_cut.10,20,23.4",
        "-msuccess.2,5,20",
        "qrels.test",
        "results.test",
    ],
    "out.test.qrels_jg": ["-m", "qrels_jg", "-q", "-R", "qrels_jg", "qrels.123", "results.test"],
    "out.test.qrels_jg.comments": ["-m", "qrels_jg", "-q", "-R", "qrels_jg", "qrels.comments.123", "results.test"],
    "out.test.aqZ": ["-q", "-m", "all_trec", "-Z", "zscores_file", "qrels.test", "results.test"],
    "out.test.prefs": ["-m", "all_prefs", "-q", "-R", "prefs", "prefs.test", "prefs.results.test"],
    "out.test.prefs.comments": ["-m", "all_prefs", "-q", "-R", "prefs", "prefs.comment.test", "prefs.results.test"],
    "out.test.qrels_prefs": ["-m", "all_prefs", "-q", "-R", "qrels_prefs", "qrels.test", "results.test"],
}
DATA_OPTIONS = {"zscores_file"}  # option values that name a file of the test suite
SAME_AS = {
    "out.test.with-comments": "out.test",
    "out.test.qrels_jg.comments": "out.test.qrels_jg",
    "out.test.prefs.comments": "out.test.prefs",
}


@pytest.mark.parametrize("case", list(CASES))
def test_output_is_byte_identical(case: str) -> None:
    expected_file = SAME_AS.get(case, case)
    expected = suite_file(expected_file).read_text()
    *options, qrels, run = CASES[case]
    options = [str(suite_file(o)) if o in DATA_OPTIONS else o for o in options]
    args = [*options, str(suite_file(qrels)), str(suite_file(run))]
    result = CliRunner().invoke(app, ["trec-eval", *args])
    assert result.exit_code == 0, result.stderr
    assert result.stdout == expected


def test_missing_topic_without_c_is_skipped_with_a_warning() -> None:
    result = CliRunner().invoke(
        app, ["trec-eval", "-m", "map", str(suite_file("qrels.test")), str(suite_file("results.trunc"))]
    )
    assert result.exit_code == 0
    assert result.stderr == "warning: qrels topic 302 has no results in the run; skipped (pass -c to score it as 0)\n"
    # the mean of topics 301 and 303 only (their APs, 0.0324 and 0.2723, are in out.test.aqc)
    assert result.stdout == "map                   \tall\t0.1523\n"


def test_unknown_measure_suggests_the_closest() -> None:
    result = CliRunner().invoke(app, ["trec-eval", "-m", "ndcg_cutt.10", "a", "b"])
    assert result.exit_code == 1
    assert result.stderr == (
        "Error: Unknown measure 'ndcg_cutt'. Did you mean 'ndcg_cut'? Run 'evalstore measures --trec' for the list.\n"
    )


def test_malformed_zscores_file_is_refused_with_its_line(tmp_path) -> None:  # type: ignore[no-untyped-def]
    zscores = tmp_path / "z"
    zscores.write_text("301 map 0.2 0.1\n301 P_5 high 0.1\n")
    result = CliRunner().invoke(
        app, ["trec-eval", "-Z", str(zscores), str(suite_file("qrels.test")), str(suite_file("results.test"))]
    )
    assert result.exit_code == 1
    assert result.stderr == (
        f"{zscores}:2: expected 4 columns (qid measure mean stddev) with numbers for the "
        "mean and standard deviation, found '301 P_5 high 0.1'\n"
    )
    assert result.stdout == ""


def test_results_format_other_than_trec_results_is_a_clear_error() -> None:
    result = CliRunner().invoke(app, ["trec-eval", "-T", "json", "a", "b"])
    assert result.exit_code == 1
    assert result.stderr == "Error: -T json is not a results format; trec_eval has only -T trec_results.\n"


def test_malformed_preference_line_is_refused_with_its_line(tmp_path) -> None:  # type: ignore[no-untyped-def]
    prefs = tmp_path / "prefs"
    prefs.write_text("# user 1\n1 u1 s1 d1 2\n1 u1 s1 d2\n")
    result = CliRunner().invoke(
        app, ["trec-eval", "-R", "prefs", "-m", "all_prefs", str(prefs), str(suite_file("prefs.results.test"))]
    )
    assert result.exit_code == 1
    assert (
        result.stderr
        == f"{prefs}:3: expected 5 columns 'qid jg jsg docno rel_level' with a numeric level, found 4 columns\n"
    )


def test_contradicting_preferences_in_one_group_are_refused(tmp_path) -> None:  # type: ignore[no-untyped-def]
    prefs, run = tmp_path / "prefs", tmp_path / "run"
    # sub-group s1 says d1 > d2 > d3, s2 says d3 > d1: a cycle within judgment group u1 (trec_eval aborts)
    prefs.write_text("1 u1 s1 d1 3\n1 u1 s1 d2 2\n1 u1 s1 d3 1\n1 u1 s2 d3 2\n1 u1 s2 d1 1\n")
    run.write_text("1 Q0 d1 1 3 r\n1 Q0 d2 2 2 r\n")
    result = CliRunner().invoke(app, ["trec-eval", "-R", "prefs", "-m", "all_prefs", str(prefs), str(run)])
    assert result.exit_code == 1
    assert result.stderr == (
        "Error: topic 1: the preferences of one judgment group contradict each other (d1 and d2 are each preferred "
        "to the other, through its sub-groups); put contradicting judgments in different judgment groups\n"
    )


def test_a_qrels_measure_in_preference_mode_names_the_mode_it_needs() -> None:
    result = CliRunner().invoke(
        app,
        ["trec-eval", "-R", "qrels_prefs", "-m", "map", str(suite_file("qrels.test")), str(suite_file("results.test"))],
    )
    assert result.exit_code == 1
    assert result.stderr == (
        "Error: Measure 'map' needs -R qrels; with -R prefs or -R qrels_prefs use all_prefs, prefs or a prefs_* "
        "measure. 'evalstore measures --trec' lists them.\n"
    )


def test_zscores_given_twice_for_a_topic_and_measure_are_refused(tmp_path) -> None:  # type: ignore[no-untyped-def]
    zscores = tmp_path / "z"
    zscores.write_text("301 map 0.2 0.1\n302 map 0.2 0.1\n301 map 0.3 0.1\n")
    result = CliRunner().invoke(
        app,
        ["trec-eval", "-Z", str(zscores), "-m", "map", str(suite_file("qrels.test")), str(suite_file("results.test"))],
    )
    assert result.exit_code == 1
    assert result.stderr == (
        f"{zscores}:3: statistics for topic 301 and measure map are given twice; keep one line per topic and measure\n"
    )


def test_preference_measures_print_as_z_scores() -> None:
    """-Z with -R prefs: every value standardised, counts printed with 4 decimals like the rest (the
    prefs topics have no statistics in zscores_file: trec_eval's missing value, summed for counts).
    trec_eval 10.0 itself crashes on this input: its z-score lookup (convert_zscores.c) searches
    one entry past the statistics it has."""
    result = CliRunner().invoke(
        app,
        [
            "trec-eval",
            "-R",
            "prefs",
            "-m",
            "prefs_simp",
            "-m",
            "prefs_num_prefs_poss",
            "-Z",
            str(suite_file("zscores_file")),
            str(suite_file("prefs.test")),
            str(suite_file("prefs.results.test")),
        ],
    )
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[:2] == ["Zprefs_num_prefs_poss  \tall\t-24000000.0000", "Zprefs_simp            \tall\t-1000000.0000"]


@pytest.mark.parametrize("parallel_from_rows", [0, 1_000_000])  # the check on a thread of its own, and in turn
def test_a_document_twice_in_a_topic_is_refused_with_its_line(
    tmp_path,
    monkeypatch: pytest.MonkeyPatch,  # type: ignore[no-untyped-def]
    parallel_from_rows: int,
) -> None:
    import evalstore.metrics

    monkeypatch.setattr(evalstore.metrics, "PARALLEL_CHECK_ROWS", parallel_from_rows)
    run = tmp_path / "twice.run"
    run.write_text("301 Q0 a 1 3.0 t\n301 Q0 b 2 2.0 t\n301 Q0 a 3 1.0 t\n")
    result = CliRunner().invoke(app, ["trec-eval", "-m", "map", str(suite_file("qrels.test")), str(run)])
    assert result.exit_code == 1
    message = (
        f"{run}:3: docno 'a' appears twice in topic '301' (first at line 1); trec_eval refuses duplicate "
        "documents, so remove one of them"
    )
    assert result.stderr == message + "\n"
    with pytest.raises(InputFormatError) as refused:  # the Python API reads files the same way
        evalstore.metrics.evaluate(suite_file("qrels.test"), run, ["AP"])
    assert str(refused.value) == message
