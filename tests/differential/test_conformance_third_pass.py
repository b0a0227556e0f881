"""Issue #40, item by item: each edge either gives trec_eval 10.0's output and exit status (checked
against the program) or is refused with a message naming the difference (asserted exactly; the
table of deliberate differences in docs/conformance.md lists each)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pandas as pd
import pytest

from evalstore import evaluate
from evalstore.errors import InputFormatError
from evalstore.io.cnumbers import atof, atol
from tests.differential.fuzz_cases import Result, run_evalstore

QRELS = "1 0 a 1\n1 0 b 0\n1 0 c 2\n2 0 a 1\n2 0 x 1\n"
RUN = "1 Q0 a 1 3 r\n1 Q0 b 2 2 r\n1 Q0 c 3 1 r\n2 Q0 x 1 1 r\n2 Q0 y 2 1 r\n"


def _files(tmp_path: Path, qrels: str | bytes = QRELS, run: str | bytes = RUN) -> tuple[str, str]:
    q, r = tmp_path / "qrels", tmp_path / "run"
    q.write_bytes(qrels.encode() if isinstance(qrels, str) else qrels)
    r.write_bytes(run.encode() if isinstance(run, str) else run)
    return str(q), str(r)


def _both(binary: Path, args: list[str], backend: str = "local") -> tuple[subprocess.CompletedProcess[str], Result]:
    theirs = subprocess.run([str(binary), *args], capture_output=True, text=True, check=False)
    ours = run_evalstore([*(["--backend", "duckdb"] if backend == "duckdb" else []), *args])
    return theirs, ours


def _same(binary: Path, args: list[str], backend: str = "local") -> str:
    theirs, ours = _both(binary, args, backend)
    assert theirs.returncode == 0, theirs.stderr
    assert (ours.code, ours.stdout) == (0, theirs.stdout), ours.stderr
    return ours.stdout


# --- atof / atol ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1_000", 1.0),
        ("1e1", 10.0),
        ("+.5", 0.5),
        ("5.", 5.0),
        ("0x1p3", 8.0),
        ("0x10", 16.0),
        ("3abc", 3.0),
        ("1e", 1.0),
        ("-0", -0.0),
        ("\u0663", None),
        ("abc", None),
        ("", None),
        ("inf", float("inf")),
    ],
)
def test_atof_reads_the_prefix_c_reads(text: str, value: float | None) -> None:
    assert atof(text) == value


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("0x3", 0),
        ("1.9", 1),
        ("2e3", 2),
        ("+7", 7),
        ("-3x", -3),
        ("\u0663", None),
        ("x1", None),
        ("99999999999999999999", 2**63 - 1),
    ],
)
def test_atol_reads_the_prefix_c_reads(text: str, value: int | None) -> None:
    assert atol(text) == value


# --- numbers in files and options -----------------------------------------------------------------


@pytest.mark.parametrize("backend", ["local", "duckdb"])
def test_scores_are_read_with_atof(trec_eval_binary: Path, tmp_path: Path, backend: str) -> None:
    q, r = _files(tmp_path, run="1 Q0 a 1 1_000 r\n1 Q0 b 2 2 r\n1 Q0 c 3 0x1p0 r\n2 Q0 x 1 1 r\n")
    out = _same(trec_eval_binary, ["-q", "-m", "recip_rank", "-m", "num_ret", q, r], backend)
    assert "recip_rank            \t1\t0.5000\n" in out  # 1_000 is 1, 0x1p0 is 1: b, then c before a


def test_a_score_with_no_leading_number_is_refused_naming_atof(trec_eval_binary: Path, tmp_path: Path) -> None:
    q, r = _files(tmp_path, run="1 Q0 a 1 3 r\n1 Q0 c 3 \u0663 r\n2 Q0 x 1 1 r\n")
    theirs, ours = _both(trec_eval_binary, ["-m", "map", q, r])
    assert theirs.returncode == 0  # trec_eval reads it as 0
    assert (ours.code, ours.stderr) == (
        1,
        f"{r}:2: score '\u0663' is not a number; trec_eval's atof would read "
        "it as 0 (no leading digits), evalstore refuses it\n",
    )


def test_qrels_relevance_is_read_with_atol(trec_eval_binary: Path, tmp_path: Path) -> None:
    q, r = _files(tmp_path, qrels="1 0 a 0x3\n1 0 b 1.9\n1 0 c 2e1\n2 0 x 1\n")
    _same(trec_eval_binary, ["-q", "-m", "num_rel", "-m", "ndcg", q, r])


@pytest.mark.parametrize(
    "args",
    [
        ["-l", "1.5"],
        ["-M", "2.5"],
        ["-N", "1e3", "-m", "utility"],
        ["-l", "abc"],
        ["--level_for_rel=2"],
        ["--Max_retrieved_per_topic", "1"],
    ],
)
def test_option_values_are_read_with_atol(trec_eval_binary: Path, tmp_path: Path, args: list[str]) -> None:
    _same(trec_eval_binary, [*args, "-q", *_files(tmp_path)])


@pytest.mark.parametrize(
    "spec",
    [
        "P.1e1",
        "P.5abc",
        "iprec_at_recall.2",
        "map_cut.1e1,3",
        "P.3,5x",
        "set_F.abc",
        "rbp.p=0.5,p=0.7",
        "ndcg.1=3,2=5",
        "relstring.5",
    ],
)
def test_measure_parameters_are_read_as_meas_init_reads_them(trec_eval_binary: Path, tmp_path: Path, spec: str) -> None:
    args = ["-q", "-m", spec, *_files(tmp_path)]
    theirs, ours = _both(trec_eval_binary, args)
    assert (ours.code, ours.stdout) == (theirs.returncode, theirs.stdout), (theirs.stderr, ours.stderr)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("P.5,5", "Error: -m P.5,5 names a cutoff twice (trec_eval: 'duplicate cutoffs detected'); name each once.\n"),
        (
            "rbp.0.5",
            "Error: -m rbp.0.5: malformed pair parameters (trec_eval: 'malformed pair parameters in '0.5''); "
            "write them as level=gain,level=gain (or p=0.8).\n",
        ),
        (
            "ndcg.1=3,,2=4",
            "Error: -m ndcg.1=3,,2=4: malformed pair parameters (trec_eval: 'malformed pair parameters in "
            "'1=3,,2=4''); write them as level=gain,level=gain (or p=0.8).\n",
        ),
        (
            "ndcg.",
            "Error: -m ndcg.: the parameters after '.' are empty (trec_eval refuses them too); write -m ndcg for "
            "the defaults or give parameters after the '.'.\n",
        ),
        (
            "P.0",
            "Error: Cutoffs of P must be positive integers. Got 0 (from '0', read as C's atol reads it, as trec_eval "
            "does).\n",
        ),
    ],
)
def test_parameters_trec_eval_refuses_are_refused(
    trec_eval_binary: Path, tmp_path: Path, spec: str, message: str
) -> None:
    theirs, ours = _both(trec_eval_binary, ["-m", spec, *_files(tmp_path)])
    assert theirs.returncode != 0 and theirs.stdout == ""
    assert (ours.code, ours.stdout, ours.stderr) == (1, "", message)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["-m", "ndcg.1=3,1=5"],
            "Error: -m ndcg.1=3,1=5 gives relevance level 1 two gains; trec_eval 10.0 then mixes "
            "them (one for the ranking, another for the ideal ranking), which evalstore does not "
            "copy: give each level one gain.\n",
        ),
        (
            ["-m", "ideal_dcg.1=5", "-m", "all_trec"],
            "Error: trec_eval 10.0 shares one gain parameter set between dcg, ideal_dcg and ndcg: with ideal_dcg.1=5 it "
            "would apply those gains to ndcg as well (or crash); evalstore does not copy that. Ask for one of them with "
            "gains at a time, or for all of them without.\n",
        ),
        (
            ["-m", "rbp.p=nan"],
            "Error: The parameter 'nan' is not a finite number; trec_eval computes with it (printing "
            "nan, or converting it to an integer, which C leaves undefined), evalstore refuses it.\n",
        ),
        (
            ["-D", "1", "-m", "ndcg"],
            "Error: -D 1: trec_eval prints a debugging trace of ndcg among its results at this "
            "level, which evalstore does not; use -D 0 (or 0.QID for one topic), or leave those "
            "measures out.\n",
        ),
    ],
)
def test_deliberate_refusals_name_the_difference(tmp_path: Path, args: list[str], message: str) -> None:
    ours = run_evalstore([*args, *_files(tmp_path)])
    assert (ours.code, ours.stdout, ours.stderr) == (1, "", message)


def test_shared_gains_without_parameters_match(trec_eval_binary: Path, tmp_path: Path) -> None:
    _same(trec_eval_binary, ["-q", "-m", "dcg", "-m", "ideal_dcg", "-m", "ndcg", *_files(tmp_path)])


# --- options --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ["-o", "-m", "map"],
        ["--measure=map", "--nosummary", "-q"],
        ["--nosum", "-q"],
        ["-D", "0.2", "-q"],
        ["-D", "1", "-m", "map", "-m", "P.5"],
        ["-m", "yaap", "-q"],
        ["--query_eval_wanted", "--complete_rel_info_wanted", "-m", "map"],
        ["--Judged_docs_only", "--Number_docs_in_coll=100", "-m", "utility"],
    ],
)
def test_trec_evals_other_options_print_as_it_prints(trec_eval_binary: Path, tmp_path: Path, args: list[str]) -> None:
    _same(trec_eval_binary, [*args, *_files(tmp_path)])


def test_version_is_trec_evals_line_on_stderr_and_exit_0(trec_eval_binary: Path) -> None:
    theirs, ours = _both(trec_eval_binary, ["-v"])
    assert (theirs.returncode, theirs.stdout, theirs.stderr) == (0, "", "trec_eval version 10.0-rc3\n")
    assert (ours.code, ours.stdout) == (0, "")
    assert ours.stderr.startswith("trec_eval version 10.0-rc3 (evalstore trec-eval ")


def test_a_run_named_dash_is_read_from_stdin(trec_eval_binary: Path, tmp_path: Path) -> None:
    q, _ = _files(tmp_path)
    theirs = subprocess.run(
        [str(trec_eval_binary), "-q", q, "-"], input=RUN, capture_output=True, text=True, check=False
    )
    ours = subprocess.run(
        [str(Path(__file__).parents[2] / ".venv" / "bin" / "python"), "-m", "evalstore", "trec-eval", "-q", q, "-"],
        input=RUN,
        capture_output=True,
        text=True,
        check=False,
    )
    assert (ours.returncode, ours.stdout) == (0, theirs.stdout)
    refused = subprocess.run(
        [str(Path(__file__).parents[2] / ".venv" / "bin" / "python"), "-m", "evalstore", "trec-eval", q, "-"],
        input="1 Q0 a 1 1 r\n1 Q0 a 2 1 r\n",
        capture_output=True,
        text=True,
        check=False,
    )
    assert (refused.returncode, refused.stderr) == (
        1,
        "-:2: docno 'a' appears twice in topic '1' (first at line 1); "
        "trec_eval refuses duplicate documents, so remove one of them\n",
    )


# --- lines ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", ["local", "duckdb"])
@pytest.mark.parametrize(
    ("args", "more"),
    [
        (["-c", "-m", "num_ret"], "3 Q0 z 1 1 r\n3 Q0 z 2 1 r\n"),  # topic 3 is not in the qrels
        (["-M", "2", "-m", "num_ret", "-m", "map"], "1 Q0 c 4 0 r\n"),  # in topic 1, c is twice below the -M 2 cut
    ],
)
def test_a_docno_twice_where_trec_eval_does_not_look_is_read(
    trec_eval_binary: Path, tmp_path: Path, backend: str, args: list[str], more: str
) -> None:
    _same(trec_eval_binary, ["-q", *args, *_files(tmp_path, run=RUN + more)], backend)
    theirs, ours = _both(
        trec_eval_binary, ["-q", "-m", "num_ret", *_files(tmp_path, run=RUN + "1 Q0 c 4 0 r\n")], backend
    )  # counted: both refuse
    assert theirs.returncode == 4
    assert (ours.code, ours.stderr) == (
        1,
        f"{tmp_path / 'run'}:6: docno 'c' appears twice in topic '1' (first at "
        "line 3); trec_eval refuses duplicate documents, so remove one of them\n",
    )


@pytest.mark.parametrize("backend", ["local", "duckdb"])
def test_duckdb_reads_irregular_lines_as_the_local_reader(trec_eval_binary: Path, tmp_path: Path, backend: str) -> None:
    run = (
        "1 Q0 a 1 3 r\n\t1 Q0 b 2 2 r\n   # an indented comment\n1\tQ0\tc 3 1 r # c x\n\n"
        "2 Q0 x 1 1 r extra fields\n2 Q0 y 2 1 r # trailing x\n"
    )
    out = _same(
        trec_eval_binary, ["-q", "-m", "num_ret", "-m", "runid", "-m", "map", *_files(tmp_path, run=run)], backend
    )
    assert "runid                 \tall\tr\n" in out and "num_ret               \tall\t5\n" in out


@pytest.mark.parametrize(
    ("qrels", "line", "problem"),
    [
        (
            "1 0 a 1\n\n2 0 x 1\n",
            2,
            "a blank line; trec_eval 10.0 refuses blank lines in qrels (a malformed line), so remove it",
        ),
        (
            "1 0 a 1\n1 0 a 1\n2 0 x 1\n",
            2,
            "docno 'a' is judged twice in topic '1' (first at line 1); trec_eval refuses "
            "a repeated judgment (duplicate docs), so remove one of them",
        ),
        (
            "1 0 a 1\n# c\n# d\n2 0 x 1\n",
            3,
            "a comment line right after a comment line; trec_eval 10.0 skips one comment "
            "line at a time and reads the next one as a judgment, so join the comments "
            "into one line or remove one",
        ),
        (
            "1 0 a 1\n2 0 x 1\n# end\n",
            3,
            "a comment line ends the file; trec_eval 10.0 reads past the end of its buffer "
            "there (it crashes), so move the comment up or remove it",
        ),
    ],
)
def test_qrels_lines_trec_eval_fails_on_are_refused(
    trec_eval_binary: Path, tmp_path: Path, qrels: str, line: int, problem: str
) -> None:
    q, r = _files(tmp_path, qrels=qrels)
    theirs, ours = _both(trec_eval_binary, ["-m", "map", q, r])
    assert theirs.returncode != 0 and theirs.stdout == ""
    assert (ours.code, ours.stdout, ours.stderr) == (1, "", f"{q}:{line}: {problem}\n")


def test_an_indented_hash_in_qrels_is_a_topic(trec_eval_binary: Path, tmp_path: Path) -> None:
    _same(
        trec_eval_binary,
        [
            "-c",
            "-q",
            "-m",
            "num_rel",
            "-m",
            "num_ret",
            *_files(tmp_path, qrels="1 0 a 1\n  # 0 x 1\n2 0 x 1\n# one comment\n2 0 y 0\n"),
        ],
    )


# --- -R qrels_jg ----------------------------------------------------------------------------------


def test_qrels_jg_keeps_the_first_parameters(trec_eval_binary: Path, tmp_path: Path) -> None:
    out = _same(trec_eval_binary, ["-R", "qrels_jg", "-m", "P_avgjg.5", "-m", "P_avgjg.10", *_files(tmp_path)])
    assert out.startswith("P_avgjg_5 ")


def test_qrels_jg_without_measures_is_refused_as_trec_eval_fails(trec_eval_binary: Path, tmp_path: Path) -> None:
    theirs, ours = _both(trec_eval_binary, ["-R", "qrels_jg", *_files(tmp_path)])
    assert theirs.returncode == 4
    assert (ours.code, ours.stderr) == (
        1,
        "Error: -R qrels_jg needs -m: trec_eval's default measures (official) "
        "are not computed from judgment groups, so trec_eval fails without one; "
        "pass -m qrels_jg (or map_avgjg, P_avgjg, Rprec_mult_avgjg).\n",
    )


def test_qrels_jg_warns_of_a_missing_topic_as_qrels_mode(tmp_path: Path) -> None:
    ours = run_evalstore(["-R", "qrels_jg", "-m", "map_avgjg", *_files(tmp_path, run="1 Q0 a 1 3 r\n")])
    assert (ours.code, ours.stdout) == (0, "map_avgjg             \tall\t0.5000\n")
    assert ours.stderr == "warning: qrels topic 2 has no results in the run; skipped (pass -c to score it as 0)\n"


# --- -Z -------------------------------------------------------------------------------------------


def test_zscores_with_nan_statistics_print_as_trec_eval(trec_eval_binary: Path, tmp_path: Path) -> None:
    z = tmp_path / "z"
    z.write_text("1 map nan 1\n2 map 0 nan\n1 P_5 0.1 0\n")
    out = _same(trec_eval_binary, ["-q", "-m", "map", "-m", "P.5", "-Z", str(z), *_files(tmp_path)])
    assert "Zmap                   \t1\t   nan\n" in out


# --- the API --------------------------------------------------------------------------------------

QRELS_FRAME = pd.DataFrame({"query_id": ["1", "1", "2"], "doc_id": ["a", "c", "a"], "relevance": [1, 2, 1]})


@pytest.mark.parametrize(
    ("run", "qrels", "message"),
    [
        (
            pd.DataFrame({"query_id": ["1", "1"], "doc_id": ["a", "a"], "score": [2.0, 1.0]}),
            QRELS_FRAME,
            "run DataFrame: row 2: docno 'a' appears twice in topic '1' (first at row 1); trec_eval refuses duplicate "
            "documents, so remove one of them",
        ),
        (
            pd.DataFrame({"query_id": ["1", "1"], "doc_id": ["a", "b"], "score": [2.0, float("nan")]}),
            QRELS_FRAME,
            "run DataFrame: row 2: score 'nan' is not a finite number; scores must be finite",
        ),
        (
            pd.DataFrame({"query_id": ["1", "1"], "doc_id": ["a", "b"], "score": [2.0, "high"]}),
            QRELS_FRAME,
            "run DataFrame: row 2: score 'high' is not a number",
        ),
        (
            pd.DataFrame({"query_id": ["1", None], "doc_id": ["a", "b"], "score": [2.0, 1.0]}),
            QRELS_FRAME,
            "run DataFrame: row 2: topic is missing; every row needs a topic",
        ),
        (
            {"1": {"a": 1.0}},
            pd.DataFrame({"query_id": ["1", "1"], "doc_id": ["a", "a"], "relevance": [1, 0]}),
            "qrels DataFrame: row 2: conflicting judgments for docno 'a' in topic '1': relevance 0 here, 1 at row 1; keep "
            "one of them",
        ),
        ({"1": {"a": 1.0}}, {"1": {"a": 1.5}}, "qrels dict: row 1: relevance '1.5' is not an integer"),
    ],
)
def test_evaluate_validates_in_memory_input_as_files(run: object, qrels: object, message: str) -> None:
    with pytest.raises(InputFormatError) as refused:
        evaluate(qrels, run, ["AP", "P@2"])  # type: ignore[arg-type]
    assert str(refused.value) == message


def test_evaluate_reads_a_frame_as_the_same_file(tmp_path: Path) -> None:
    run = pd.DataFrame(
        {
            "query_id": ["1", "1", "1", "2", "3", "3"],
            "doc_id": ["a", "b", "c", "x", "z", "z"],
            "score": [3.0, 2.0, 1.0, 1.0, 1.0, 1.0],
        }
    )  # z twice in a topic the qrels lack: read
    q, r = _files(
        tmp_path,
        qrels="".join(f"{t} 0 {d} {rel}\n" for t, d, rel in QRELS_FRAME.itertuples(index=False)),
        run="".join(f"{t} Q0 {d} 1 {s} r\n" for t, d, s in run.itertuples(index=False)),
    )
    assert evaluate(QRELS_FRAME, run, ["AP", "P@2"]).aggregates == evaluate(q, r, ["AP", "P@2"]).aggregates


def test_debug_topic_skips_the_checks_of_other_topics(trec_eval_binary: Path, tmp_path: Path) -> None:
    # a repeated judgment is an error where trec_eval evaluates the topic (form_res_rels.c), not elsewhere
    q, r = _files(tmp_path, qrels="1 0 a 1\n2 0 x 1\n2 0 x 1\n")
    _same(trec_eval_binary, ["-D", "0.1", "-q", "-m", "map", q, r])
    theirs, ours = _both(trec_eval_binary, ["-D", "0.2", "-q", "-m", "map", q, r])
    assert theirs.returncode == 4
    assert (ours.code, ours.stderr) == (
        1,
        f"{q}:3: docno 'x' is judged twice in topic '2' (first at line 2); "
        "trec_eval refuses a repeated judgment (duplicate docs), so remove one of "
        "them\n",
    )
