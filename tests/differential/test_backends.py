"""Every backend gives the local engine's numbers: DuckDB (out of core) and Spark (local[2]), on
trec_eval's golden inputs, real runs from ../shared/data, tie-heavy generated runs, and 100k
groups of predictions with single-class groups among them.

Ranking values are compared to the bit (the backends hand the local kernels the same judged
positions); AUC and GAUC to the bit too (exact pair counts, exactly rounded sums); log loss, a
floating sum in each engine's own order and logarithm, to 1e-12.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evalstore.backends import duckdb_engine
from evalstore.io.formats import read_qrels, read_run
from evalstore.metrics import classification, compute, resolve_measures
from evalstore.metrics.preparation import PrepareOptions, Ranking, prepare
from evalstore.metrics.trec_names import expand, parse_trec_specs
from tests.conftest import shared_path
from tests.property.test_ranked_prepare_agrees import run_and_qrels

GOLDEN = Path(__file__).resolve().parents[1] / "data" / "trec_eval_test"
ALL_TREC = list(dict.fromkeys(m for spec in parse_trec_specs(["all_trec"]) for _, m in expand(spec) if m is not None))
MORE = resolve_measures(["nDCG@10", "RR@10", "RBP(p=0.8)", "ERR@20", "Judged@10", "infAP"])
OPTIONS = [PrepareOptions(), PrepareOptions(complete=True, max_docs=100), PrepareOptions(judged_only=True)]


def _trec_eval(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "evalstore", "trec-eval", *args], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _same_rankings(a: Ranking, b: Ranking) -> None:
    assert a.topics == b.topics and a.missing_topics == b.missing_topics
    assert np.array_equal(a.rel, b.rel) and np.array_equal(a.num_ret, b.num_ret)
    assert np.array_equal(a.stand_in, b.stand_in)


def _same_values(a: dict, b: dict) -> None:  # type: ignore[type-arg]
    for measure, values in a.items():
        if values.dtype == object:
            assert values.tolist() == b[measure].tolist(), measure
        else:
            assert np.array_equal(values, b[measure], equal_nan=True), measure


# --- DuckDB -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "flags",
    [
        ["-q", "-m", "all_trec"],
        ["-q", "-c", "-M", "100", "-m", "all_trec"],
        ["-q", "-J", "-m", "all_trec"],
        ["-q", "-l", "2", "-m", "ndcg_cut.10"],
    ],
)
def test_duckdb_prints_what_the_local_engine_prints_on_the_golden_files(flags: list[str]) -> None:
    files = [str(GOLDEN / "qrels.test"), str(GOLDEN / "results.test")]
    local = _trec_eval(*flags, *files)
    assert _trec_eval("--backend", "duckdb", "--memory-limit", "500MB", *flags, *files) == local
    assert local.count("\n") > 3  # not an empty output twice


@pytest.mark.parametrize(
    ("collection", "qrels", "runs"),
    [
        ("robust03", "robust03_qrels.txt", ["runs/input.pircRBa1.gz"]),  # 100k rows; dl-hard gives a second shape
        (
            "dl-hard",
            "dl_hard-passage.qrels",
            ["runs/passage/bm25+bert-zs.run.gz", "runs/passage/bm25+rm3+t5-zs.run.gz"],
        ),
    ],
)
def test_duckdb_equals_the_local_engine_on_real_runs(
    collection: str, qrels: str, runs: list[str], tmp_path: Path
) -> None:
    qrels_path = shared_path(collection, qrels)
    paths = [shared_path(collection, run) for run in runs]
    judgments = read_qrels(qrels_path, strict=False).table
    for path in paths:
        table = read_run(path, strict=False).table
        # as Parquet too: the file a run too large for memory would be
        parquet = tmp_path / f"{path.name}.parquet"
        pq.write_table(table.select(["topic", "doc", "score"]), parquet)
        for options in OPTIONS:
            local = prepare(judgments, table, options)
            expected = compute(local, ALL_TREC + MORE)
            for source in (path, parquet):
                duck, _ = duckdb_engine.prepare_file(judgments, source, options, duckdb_engine.DuckDBSettings())
                _same_rankings(local, duck)
                _same_values(expected, compute(duck, ALL_TREC + MORE))


@settings(max_examples=40, deadline=None)
@given(data=run_and_qrels(), options=st.sampled_from(OPTIONS))
def test_duckdb_ranks_tie_heavy_runs_as_the_local_engine(
    data: tuple[pa.Table, pa.Table], options: PrepareOptions, tmp_path_factory: pytest.TempPathFactory
) -> None:
    run, qrels = data
    if not len(run) or not set(run["topic"].to_pylist()) & set(qrels["topic"].to_pylist()):
        return  # nothing to evaluate: both engines refuse it (tested on the command line above)
    path = tmp_path_factory.mktemp("tie") / "run.parquet"
    pq.write_table(run, path)
    local = prepare(qrels, run, options)
    duck, _ = duckdb_engine.prepare_file(qrels, path, options, duckdb_engine.DuckDBSettings(memory_limit="200MB"))
    _same_rankings(local, duck)


def test_duckdb_refuses_a_document_twice_and_a_bad_line(tmp_path: Path) -> None:
    twice = tmp_path / "twice.run"
    twice.write_text("1 Q0 a 1 2.0 t\n1 Q0 b 2 1.0 t\n1 Q0 a 3 0.5 t\n")
    qrels = tmp_path / "q"
    qrels.write_text("1 0 b 1\n")
    done = subprocess.run(
        [sys.executable, "-m", "evalstore", "trec-eval", "--backend", "duckdb", str(qrels), str(twice)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 1
    assert done.stderr == (
        f"{twice}:3: docno 'a' appears twice in topic '1' (first at line 1); trec_eval refuses "
        "duplicate documents, so remove one of them\n"
    )
    bad = tmp_path / "bad.run"
    bad.write_text("1 Q0 a 1 2.0 t\n1 Q0 b 2 high t\n")
    done = subprocess.run(
        [sys.executable, "-m", "evalstore", "trec-eval", "--backend", "duckdb", str(qrels), str(bad)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert (done.returncode, done.stderr) == (
        1,
        f"{bad}:2: score 'high' is not a number; trec_eval's atof would read "
        "it as 0 (no leading digits), evalstore refuses it\n",
    )


@pytest.mark.parametrize(
    ("name", "rows", "message"),
    [
        (
            "twice.csv",
            "query_id,docno,score\n1,a,2.0\n1,b,1.0\n1,a,0.5\n",
            ":4: docno 'a' appears twice in topic '1' (first at line 2); trec_eval refuses duplicate documents, so remove "
            "one of them",
        ),
        (
            "inf.tsv",
            "qid\tdocno\tscore\n1\ta\t2.0\n1\tb\tinf\n",
            ":3: score 'inf' is not a finite number; scores must be finite",
        ),
        (
            "nan.run",
            "1 Q0 a 1 2.0 t\n# a comment\n1 Q0 b 2 NaN t\n",
            ":3: score 'NaN' is not a finite number; scores must be finite",
        ),
        (
            "twice.parquet",
            None,
            ": row 3: docno 'a' appears twice in topic '1' (first at row 1); trec_eval refuses "
            "duplicate documents, so remove one of them",
        ),
    ],
)
def test_duckdb_names_the_line_or_row_of_a_refused_row_as_the_local_reader_does(
    tmp_path: Path, name: str, rows: str | None, message: str
) -> None:
    path = tmp_path / name
    if rows is None:
        pq.write_table(pa.table({"topic": ["1", "1", "1"], "doc": ["a", "b", "a"], "score": [2.0, 1.0, 0.5]}), path)
    else:
        path.write_text(rows)
    qrels = tmp_path / "q"
    qrels.write_text("1 0 b 1\n")
    done = subprocess.run(
        [sys.executable, "-m", "evalstore", "trec-eval", "--backend", "duckdb", str(qrels), str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert (done.returncode, done.stderr) == (1, f"{path}{message}\n")


def _predictions(n: int = 400_000, groups: int = 100_000, seed: int = 3) -> pa.Table:
    rng = np.random.default_rng(seed)
    group = rng.integers(0, groups, n)
    label = (rng.random(n) < 0.15).astype(np.int64)
    score = np.round(np.clip(rng.beta(2, 6, n) + label * 0.1, 0, 1), 3)  # 1,000 distinct scores: ties
    return pa.table({"user_id": group, "label": label, "score": score})


def _local_suite(table: pa.Table) -> dict[str, float]:
    names, group = np.unique(table["user_id"].to_numpy(), return_inverse=True)  # codes of the groups present
    suite = classification.evaluate(
        table["label"].to_numpy(), ["0", "1"], score=table["score"].to_numpy(), groups=group, n_groups=len(names)
    )
    return suite.aggregates


def test_duckdb_predictions_equal_the_local_engine(tmp_path: Path) -> None:
    table = _predictions()
    local = _local_suite(table)
    path = tmp_path / "p.parquet"
    pq.write_table(table, path)
    values = duckdb_engine.evaluate_predictions(
        path, group_col="user_id", settings=duckdb_engine.DuckDBSettings(memory_limit="500MB")
    )
    assert values["auc"] == local["auc"] and values["gauc"] == local["gauc"]
    assert values["gauc_groups_skipped"] == local["gauc_groups_skipped"] > 1000  # single-class groups
    assert values["log_loss"] == pytest.approx(local["log_loss"], rel=1e-12)


# --- Spark --------------------------------------------------------------------------------------


def test_spark_ranking_equals_the_local_engine(spark) -> None:  # type: ignore[no-untyped-def]
    from evalstore.spark import evaluate_ranking

    qrels = read_qrels(GOLDEN / "qrels.test", strict=False).table
    run = read_run(GOLDEN / "results.test", strict=False).table
    measures = ALL_TREC + MORE
    for options in OPTIONS:
        per_query, aggregates = evaluate_ranking(
            spark.createDataFrame(run.select(["topic", "doc", "score"])),
            spark.createDataFrame(qrels.select(["topic", "doc", "relevance"]).rename_columns(["qid", "docno", "rel"])),
            [str(m) for m in measures],
            complete=options.complete,
            judged_only=options.judged_only,
            max_docs=options.max_docs,
        )
        local = prepare(qrels, run, options)
        expected = compute(local, measures)
        got = per_query.toArrow()
        assert got.column_names == ["query_id", "measure", "value", "text_value"]  # as evalstore.evaluate's
        for measure in measures:
            if expected[measure].dtype == object:
                continue  # text values (relstring) are not numbers: trec-eval prints them
            mine = got.filter(pa.compute.equal(got["measure"], str(measure)))
            order = np.argsort(mine["query_id"].to_numpy(zero_copy_only=False))
            topics = np.asarray(mine["query_id"].to_pylist())[order].tolist()
            assert topics == sorted(local.topics)
            values = mine["value"].to_numpy()[order]
            want = np.asarray(expected[measure], dtype=np.float64)[np.argsort(np.asarray(local.topics))]
            assert np.array_equal(values, want, equal_nan=True), measure
        assert aggregates.count() == len({str(m) for m in measures if expected[m].dtype != object})


def test_spark_predictions_equal_the_local_engine(spark) -> None:  # type: ignore[no-untyped-def]
    from evalstore.spark import evaluate_predictions

    # a quarter of the DuckDB test's rows, with the same ties and single-class groups: local[2]
    # Spark's time grows with the rows, and what is checked (the pair counts per group) does not
    table = _predictions(n=100_000, groups=10_000)
    local = _local_suite(table)
    per_group, aggregates = evaluate_predictions(spark.createDataFrame(table), group_col="user_id")
    values = aggregates.first().asDict()
    assert values["auc"] == local["auc"] and values["gauc"] == local["gauc"]
    assert values["gauc_groups_skipped"] == local["gauc_groups_skipped"]
    assert values["log_loss"] == pytest.approx(local["log_loss"], rel=1e-12)
    assert per_group is not None
    groups = per_group.toArrow()
    assert len(groups) == len(np.unique(table["user_id"].to_numpy()))
    # the one group with most items, AUC from the per-group counts against scikit-learn's
    from sklearn.metrics import roc_auc_score

    users = table["user_id"].to_numpy()
    biggest = int(np.bincount(users).argmax())
    mine = users == biggest
    row = groups.filter(pa.compute.equal(groups["user_id"], biggest))
    assert row["auc"][0].as_py() == pytest.approx(
        roc_auc_score(table["label"].to_numpy()[mine], table["score"].to_numpy()[mine]), abs=1e-12
    )


def test_duckdb_reads_comments_and_mixed_white_space_as_the_local_reader(tmp_path: Path) -> None:
    run = tmp_path / "mixed.run"
    run.write_text(
        "# a comment line\n1 Q0 a#1 1 2.0 t\n1\tQ0  b 2 2.0   t\n  # another\n2 Q0 c 1 0.5 t\n\n2 Q0 d 2 0.75 last\n"
    )
    qrels = tmp_path / "q"
    qrels.write_text("1 0 b 1\n1 0 a#1 2\n2 0 c 1\n")
    local = _trec_eval("-q", "-m", "all_trec", str(qrels), str(run))
    assert _trec_eval("--backend", "duckdb", "-q", "-m", "all_trec", str(qrels), str(run)) == local
    assert "runid                 \tall\tlast\n" in local


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (
            ["--backend", "duckdb", "-R", "qrels_jg", "-m", "map_avgjg"],
            "Error: --backend duckdb evaluates -R qrels judgments only; drop --backend for -R qrels_jg.\n",
        ),
        (
            ["--backend", "duckdb", "--memory-limit", "lots"],
            "Error: DuckDB refused its settings (Parser Error: Memory must have a number (e.g. 1GB)); --memory-limit takes "
            "DuckDB's syntax, e.g. 2GB.\n",
        ),
    ],
)
def test_duckdb_options_that_cannot_work_say_why(flags: list[str], message: str) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "evalstore",
            "trec-eval",
            *flags,
            str(GOLDEN / "qrels.test"),
            str(GOLDEN / "results.test"),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert (done.returncode, done.stdout, done.stderr) == (1, "", message)


def test_a_run_written_by_spark_is_stored_and_evaluated_like_its_file(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A run that lives in Spark reaches the store by Spark's own Parquet writer and `runs
    register --backend duckdb` (a folder of part files): then it is evaluated, listed and logged
    like any run, with the values of the same run registered from its file."""
    from evalstore.db.engine import make_engine, upgrade
    from evalstore.services import orchestration, store
    from evalstore.services.kinds import ranking

    run = read_run(GOLDEN / "results.test", strict=False).table
    folder = tmp_path / "spark-run"
    spark.createDataFrame(run.select(["topic", "doc", "rank", "score"])).coalesce(2).write.parquet(str(folder))
    engine = make_engine(f"sqlite:///{tmp_path / 'store.db'}")
    try:
        upgrade(engine)
        store.import_qrels(engine, GOLDEN / "qrels.test", name="q")
        store.register_run(engine, GOLDEN / "results.test", name="from-file")
        done = store.register_run(engine, folder, name="from-spark", backend="duckdb")
        assert done.created and done.summary.rows == run.num_rows
        measures = ["AP", "nDCG@10", "P@5"]
        orchestration.evaluate_runs(engine, qrels_name="q", run_names=["from-file", "from-spark"], measures=measures)
        frames = [
            ranking.results(engine, qrels_name="q", run_name=name, measures=measures).frame
            for name in ("from-file", "from-spark")
        ]
        assert frames[0].equals(frames[1]) and len(frames[0]) == 3
    finally:
        engine.dispose()


def test_spark_refuses_a_document_twice_in_a_topic(spark) -> None:  # type: ignore[no-untyped-def]
    from evalstore.errors import InputFormatError
    from evalstore.spark import evaluate_ranking

    run = spark.createDataFrame(pa.table({"topic": ["1", "1", "1"], "doc": ["a", "b", "a"], "score": [2.0, 1.0, 0.5]}))
    qrels = spark.createDataFrame(pa.table({"topic": ["1"], "doc": ["b"], "relevance": [1]}))
    with pytest.raises(InputFormatError) as refused:
        evaluate_ranking(run, qrels)
    assert str(refused.value) == (
        "the run DataFrame: docno 'a' appears twice in topic '1'; trec_eval refuses "
        "duplicate documents, so remove one of them"
    )
