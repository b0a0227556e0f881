"""Reading runs and qrels: real-world quirks accepted, every bad input refused with path:line."""

from __future__ import annotations

import gzip
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from evalstore.errors import InputFormatError
from evalstore.io.formats import read_qrels, read_run
from tests.conftest import shared_path


def refused(call, path: Path) -> str:  # type: ignore[no-untyped-def]
    with pytest.raises(InputFormatError) as info:
        call(path)
    return str(info.value)


# ---------------------------------------------------------------- real files


def test_trec_eval_results_test_tab_separated_with_padded_scores() -> None:
    parsed = read_run(shared_path("trec_eval_test", "results.test"))
    assert parsed.table.num_rows == 1500
    assert parsed.topic_count == 3
    assert parsed.tag == "STANDARD"
    assert parsed.table["score"][0].as_py() == pytest.approx(2.129133)


def test_qrels_with_comment_lines_equal_qrels_without() -> None:
    plain = read_qrels(shared_path("trec_eval_test", "qrels.test"))
    commented = read_qrels(shared_path("trec_eval_test", "qrels.test.with-comments"))
    # the commented copy also renames one docno to hold a '#' ("# comment in docno")
    docs = plain.table["doc"].to_pylist()
    docs[docs.index("CR93E-1860")] = "CR#93E-1860"
    assert commented.table["doc"].to_pylist() == docs
    assert commented.table["relevance"].equals(plain.table["relevance"])


def test_hash_inside_msmarco_docids_is_not_a_comment() -> None:
    parsed = read_run(shared_path("trec_eval_test", "results.comment.test"))
    assert parsed.table.num_rows == 30100
    assert parsed.table["doc"][0].as_py() == "msmarco_v2.1_doc_50_2286987788#13_3087841662"
    qrels = read_qrels(shared_path("trec_eval_test", "qrels.comment.test"))
    assert qrels.table.num_rows == 5890


def test_gzipped_run_with_negative_scores_and_qrels_without_final_newline() -> None:
    run = read_run(shared_path("robust03", "runs", "input.UIUC03Rd1.gz"))
    assert run.topic_count == 100
    assert run.table["score"][0].as_py() < 0
    qrels = read_qrels(shared_path("dl-hard", "dl_hard-passage.qrels"))
    assert qrels.table.num_rows == 4256
    assert qrels.table["doc"][-1].as_py() == "8739207"


def test_zero_based_ranks_are_kept_as_given() -> None:
    run = read_run(shared_path("dl-hard", "runs", "passage", "bm25+bert-zs.run.gz"))
    assert run.table.num_rows == 50000
    assert min(run.table["rank"].to_pylist()) == 0


def test_graded_and_negative_relevance() -> None:
    qrels = read_qrels(shared_path("trec_eval_test", "qrels.rel_level"))
    assert set(qrels.table["relevance"].to_pylist()) == {-1, 0, 1, 2, 3, 4}


def test_lenient_mode_reads_extra_columns_like_trec_eval(tmp_path: Path) -> None:
    trunc = shared_path("trec_eval_test", "results.trunc")
    assert read_run(trunc, strict=False).table.num_rows == 584
    assert refused(read_run, trunc) == (f"{trunc}:1: expected 6 columns (qid Q0 docno rank score tag), found 9")


# ---------------------------------------------------------------- white space


def test_spaces_tabs_and_crlf_are_all_white_space(write) -> None:  # type: ignore[no-untyped-def]
    path = write("mixed.run", "1 Q0\td1  1 2.5 t\r\n  1\tQ0 d2 2 1.5 t \r\n\n1 Q0 d3 3 -1e3 t")
    table = read_run(path).table
    assert table["doc"].to_pylist() == ["d1", "d2", "d3"]
    assert table["score"].to_pylist() == [2.5, 1.5, -1000.0]


def test_comment_line_with_six_fields_is_still_a_comment(write) -> None:  # type: ignore[no-untyped-def]
    path = write("c.run", "# 0 doc 1 2.0 x\n1 Q0 d1 1 2.5 t\n")
    assert read_run(path).table["topic"].to_pylist() == ["1"]


# ---------------------------------------------------------------- bad input, exact messages

BAD_RUNS = {
    "short line": ("1 Q0 d1 1 2.5 t\n1 Q0 d2 2 1.5\n", ":2: expected 6 columns (qid Q0 docno rank score tag), found 5"),
    "long line": ("1 Q0 d1 1 2.5 t x\n", ":1: expected 6 columns (qid Q0 docno rank score tag), found 7"),
    "score text": ("1 Q0 d1 1 2.5 t\n1 Q0 d2 2 high t\n", ":2: score 'high' is not a number"),
    "score nan": ("1 Q0 d1 1 nan t\n", ":1: score 'nan' is not a finite number; scores must be finite"),
    "score inf": (
        "1 Q0 d1 1 2 t\n1 Q0 d2 2 -inf t\n",
        ":2: score '-inf' is not a finite number; scores must be finite",
    ),
    "rank text": ("1 Q0 d1 first 2.5 t\n", ":1: rank 'first' is not an integer"),
    "rank beyond 32 bits": (
        "1 Q0 d1 1 2.5 t\n1 Q0 d2 2147483648 1.5 t\n",
        ":2: rank '2147483648' is out of range; it must be between -2147483648 and 2147483647",
    ),
    "duplicate doc": (
        "1 Q0 d1 1 2.5 t\n2 Q0 d1 1 2.5 t\n1 Q0 d1 2 1.5 t\n",
        ":3: docno 'd1' appears twice in topic '1' (first at line 1); "
        "trec_eval refuses duplicate documents, so remove one of them",
    ),
    "empty": ("", ": the file has no run lines; expected lines of the form 'qid Q0 docno rank score tag'"),
    "only comments": (
        "# nothing\n\n",
        ": the file has no run lines; expected lines of the form 'qid Q0 docno rank score tag'",
    ),
}


@pytest.mark.parametrize("case", list(BAD_RUNS))
def test_bad_run_is_refused_with_its_line(case: str, write) -> None:  # type: ignore[no-untyped-def]
    content, expected = BAD_RUNS[case]
    path = write("bad.run", content)
    assert refused(read_run, path) == f"{path}{expected}"


BAD_QRELS = {
    "relevance float": ("1 0 d1 1\n1 0 d2 0.5\n", ":2: relevance '0.5' is not an integer"),
    "three columns": ("1 0 d1\n", ":1: expected 4 columns (qid iter docno rel), found 3"),
    "relevance beyond 16 bits": (
        "1 0 d1 1\n1 0 d2 -32769\n",
        ":2: relevance '-32769' is out of range; it must be between -32768 and 32767",
    ),
    "conflict": (
        "1 0 d1 1\n1 0 d2 0\n1 0 d1 2\n",
        ":3: conflicting judgments for docno 'd1' in topic '1': relevance 2 here, 1 at line 1; keep one of them",
    ),
}


@pytest.mark.parametrize("case", list(BAD_QRELS))
def test_bad_qrels_is_refused_with_its_line(case: str, write) -> None:  # type: ignore[no-untyped-def]
    content, expected = BAD_QRELS[case]
    path = write("bad.qrels", content)
    assert refused(read_qrels, path) == f"{path}{expected}"


def test_values_the_store_cannot_hold_are_refused_in_tables_and_accepted_by_trec_eval(write) -> None:  # type: ignore[no-untyped-def]
    run = write("r.csv", "topic,doc,score,rank\nq1,d1,2.5,1\nq1,d2,1.5,-2147483649\n")
    assert refused(read_run, run) == (
        f"{run}:3: rank '-2147483649' is out of range; it must be between -2147483648 and 2147483647"
    )
    qrels = write("q.tsv", "topic\tdoc\trelevance\nq1\td1\t32768\n")
    assert (
        refused(read_qrels, qrels)
        == f"{qrels}:2: relevance '32768' is out of range; it must be between -32768 and 32767"
    )
    # trec_eval reads such files (it ignores the rank; relevance is a long), and so does `evalstore trec-eval`
    assert read_run(write("r.run", "1 Q0 d1 2147483648 2.5 t\n"), strict=False).table.num_rows == 1
    assert read_qrels(write("q.qrels", "1 0 d1 40000\n"), strict=False).table["relevance"].to_pylist() == [40000]


def test_identical_repeated_judgments_are_kept_once(write) -> None:  # type: ignore[no-untyped-def]
    parsed = read_qrels(write("rep.qrels", "1 0 d1 1\n1 0 d1 1\n1 0 d2 0\n"))
    assert parsed.table["doc"].to_pylist() == ["d1", "d2"]
    assert parsed.warnings and "1 repeated identical judgments" in parsed.warnings[0]


def test_non_utf8_bytes(write) -> None:  # type: ignore[no-untyped-def]
    path = write("latin1.run", b"1 Q0 d1 1 2.5 t\n1 Q0 caf\xe9 2 1.5 t\n")
    assert refused(read_run, path) == (
        f"{path}:2: bytes that are not UTF-8 at column 9; convert the file to UTF-8 (e.g. iconv -f latin1 -t utf-8)"
    )


def test_unknown_format(write) -> None:  # type: ignore[no-untyped-def]
    path = write("run.xlsx", b"PK\x03\x04")
    assert refused(read_run, path) == f"{path}: unknown format '.xlsx'; use TREC text, CSV, TSV or Parquet"
    with pytest.raises(InputFormatError) as info:
        read_run(path)
    assert info.value.on_the_command_line() == (
        f"{path}: unknown format '.xlsx'; use TREC text, CSV, TSV or Parquet (or name the format with --format)"
    )


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "nope.run"
    assert refused(read_run, path) == f"{path}: no such file; check the path"


def test_gzip_run_equals_plain(write) -> None:  # type: ignore[no-untyped-def]
    text = "1 Q0 d1 1 2.5 t\n1 Q0 d2 2 1.5 t\n"
    plain = read_run(write("a.run", text))
    packed = read_run(write("a.run.gz", gzip.compress(text.encode())))
    assert packed.table.equals(plain.table) and packed.content_hash == plain.content_hash


# ---------------------------------------------------------------- CSV / TSV / Parquet


def test_csv_run_with_named_columns(write) -> None:  # type: ignore[no-untyped-def]
    path = write("r.csv", "query_id,doc_id,score\nq1,d1,2.5\nq1,d2,1.5\n")
    table = read_run(path).table
    assert table["topic"].to_pylist() == ["q1", "q1"] and table["rank"].to_pylist() == [0, 0]


def test_csv_bad_score_names_its_line(write) -> None:  # type: ignore[no-untyped-def]
    path = write("r.csv", "qid,docno,score,rank\nq1,d1,2.5,1\nq1,d2,abc,2\n")
    assert refused(read_run, path) == f"{path}:3: score 'abc' is not a number"


def test_tsv_qrels_missing_column(write) -> None:  # type: ignore[no-untyped-def]
    path = write("q.tsv", "qid\tdocno\nq1\td1\n")
    assert refused(read_qrels, path) == (
        f"{path}: no 'relevance' column (looked for relevance or rel or label or judgment); found qid, docno"
    )


def test_parquet_duplicate_doc_names_its_row(tmp_path: Path) -> None:
    path = tmp_path / "r.parquet"
    pq.write_table(pa.table({"topic": ["1", "1"], "doc": ["a", "a"], "score": [1.0, 0.5]}), path)
    assert refused(read_run, path) == (
        f"{path}: row 2: docno 'a' appears twice in topic '1' (first at row 1); "
        "trec_eval refuses duplicate documents, so remove one of them"
    )


def test_csv_qrels_round_trip(write) -> None:  # type: ignore[no-untyped-def]
    path = write("q.csv", "topic,doc,relevance\n1,d1,2\n1,d2,-1\n")
    table = read_qrels(path).table
    assert table["relevance"].to_pylist() == [2, -1] and table["iteration"].to_pylist() == ["0", "0"]
