"""Registering runs and qrels: all or nothing, idempotent, round-trippable, safe under concurrency."""

from __future__ import annotations

import multiprocessing
import re
import tempfile
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from sqlalchemy import Engine, func, select, text

from evalstore.db import repositories
from evalstore.db.engine import make_engine, upgrade
from evalstore.db.models import Judgment, QrelsSet, Run, RunRow
from evalstore.db.session import read_only, unit_of_work
from evalstore.db.staging import STAGE_SCHEMA, StagedRows
from evalstore.errors import ConflictError, EvalstoreError, InputFormatError, NotFoundError, Remedy
from evalstore.io.formats import read_qrels, read_run
from evalstore.io.writers import write_run
from evalstore.services import store
from tests.conftest import shared_path

RUN = "1 Q0 d1 1 2.5 bm25\n1 Q0 d2 2 1.5 bm25\n2 Q0 d1 1 0.5 bm25\n"


def counts(engine: Engine) -> tuple[int, int, int, int]:
    with read_only(engine) as session:
        return tuple(  # type: ignore[return-value]
            session.scalar(select(func.count()).select_from(model)) or 0 for model in (Run, RunRow, QrelsSet, Judgment)
        )


def test_register_show_list_delete(engine: Engine, write) -> None:  # type: ignore[no-untyped-def]
    result = store.register_run(engine, write("a.run", RUN), name="bm25", system="anserini", metadata={"k1": "0.9"})
    assert result.created
    summary = store.show_run(engine, "bm25")
    assert (summary.rows, summary.topics, summary.details["tag"]) == (3, 2, "bm25")
    assert summary.details["metadata"] == {"k1": "0.9"} and summary.details["system"] == "anserini"
    assert [s.name for s in store.list_runs(engine)] == ["bm25"]
    store.delete_run(engine, "bm25")
    assert counts(engine) == (0, 0, 0, 0)
    with pytest.raises(NotFoundError, match="No run named 'bm25'"):
        store.show_run(engine, "bm25")


def test_same_content_again_stores_nothing(engine: Engine, write) -> None:  # type: ignore[no-untyped-def]
    path = write("a.run", RUN)
    store.register_run(engine, path, name="bm25")
    again = store.register_run(engine, path, name="bm25")
    assert not again.created
    assert counts(engine)[:2] == (1, 3)


def test_other_content_same_name_needs_replace(engine: Engine, write) -> None:  # type: ignore[no-untyped-def]
    store.register_run(engine, write("a.run", RUN), name="bm25")
    other = write("b.run", "1 Q0 d9 1 9.0 x\n")
    with pytest.raises(
        ConflictError,
        match=r"^A run named 'bm25' already exists with different content \(registered [^)]*\)\.$",
    ) as refused:
        store.register_run(engine, other, name="bm25")
    assert refused.value.remedy == Remedy(
        cli="Pass --replace to replace it, or choose another --name.", web="Choose another name."
    )
    assert counts(engine)[:2] == (1, 3)
    store.register_run(engine, other, name="bm25", replace=True)
    assert counts(engine)[:2] == (1, 1)


def test_bad_file_leaves_database_unchanged(engine: Engine, write) -> None:  # type: ignore[no-untyped-def]
    store.register_run(engine, write("a.run", RUN), name="bm25")
    before = counts(engine)
    with pytest.raises(InputFormatError):
        store.register_run(engine, write("bad.run", RUN + "3 Q0 d1 1 oops t\n"), name="bad")
    with pytest.raises(InputFormatError):
        store.import_qrels(engine, write("bad.qrels", "1 0 d1 1\n1 0 d1 0\n"), name="bad")
    # the duplicate-docno check runs while the rows are stored: it must roll them back, and a
    # bad file under a taken name is reported as bad input, not as a name conflict
    twice = write("twice.run", RUN + "1 Q0 d1 3 0.1 bm25\n")
    for name in ("new", "bm25"):
        with pytest.raises(InputFormatError, match=r"twice\.run:4: .*d1"):
            store.register_run(engine, twice, name=name)
    assert counts(engine) == before


def test_failure_during_insert_rolls_back_everything(engine: Engine, write, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    real = repositories._bulk_insert

    def fail_after_rows(session, *args, **kwargs):  # type: ignore[no-untyped-def]
        real(session, *args, **kwargs)
        session.flush()
        raise RuntimeError("disk full")

    monkeypatch.setattr(repositories, "_bulk_insert", fail_after_rows)
    with pytest.raises(RuntimeError, match="disk full"):
        store.register_run(engine, write("a.run", RUN), name="bm25")
    assert counts(engine) == (0, 0, 0, 0)


def test_run_round_trip_through_export(engine: Engine, tmp_path: Path) -> None:
    source = shared_path("robust03", "runs", "input.UIUC03Rd1.gz")
    store.register_run(engine, source, name="uiuc")
    summary, table = store.run_rows(engine, "uiuc")
    original = read_run(source).table
    assert table.equals(original)
    exported = tmp_path / "out.run"
    with exported.open("wb") as handle:
        write_run(table, handle, "trec", tag=summary.details["tag"])
    assert read_run(exported).table.equals(original)


def test_stored_values_are_exactly_the_files(engine: Engine, write) -> None:  # type: ignore[no-untyped-def]
    # On SQLite the rows travel through a scratch database (ADBC) before the store: nothing may
    # change on the way (last-bit doubles, integral and extreme scores, UTF-8, ranks as given).
    run = (
        "q\u00e9 Q0 d\u00e9j\u00e0-vu 0 0.30000000000000004 t\n"
        "q\u00e9 Q0 #MARCO#1 7 3.0 t\n"
        "q\u00e9 Q0 d3 -2 -1e-300 t\n"
        "2 Q0 d1 1 1.7976931348623157e308 t\n"
        "2 Q0 d2 2 9007199254740993 t\n"
    )
    store.register_run(engine, write("a.run", run), name="r")
    assert store.run_rows(engine, "r")[1].equals(read_run(write("b.run", run)).table)
    qrels = "q\u00e9 0 d\u00e9j\u00e0-vu 2\nq\u00e9 x #MARCO#1 -1\n2 0 d1 0\n"
    store.import_qrels(engine, write("a.qrels", qrels), name="q")
    assert store.qrels_rows(engine, "q")[1].equals(read_qrels(write("b.qrels", qrels)).table)


def test_sqlite_scratch_files_are_gone_and_detached_after_each_registration(
    sqlite_engine: Engine, write, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    store.register_run(sqlite_engine, write("a.run", RUN), name="bm25")
    store.import_qrels(sqlite_engine, write("a.qrels", "1 0 d1 1\n"), name="q")
    with pytest.raises(ConflictError):  # staged, then refused inside the transaction
        store.register_run(sqlite_engine, write("b.run", "1 Q0 d9 1 9.0 x\n"), name="bm25")
    assert list(scratch.iterdir()) == []
    with sqlite_engine.connect() as connection:  # the pooled connection those units of work used
        assert STAGE_SCHEMA not in [row[1] for row in connection.exec_driver_sql("PRAGMA database_list")]
        assert connection.exec_driver_sql("PRAGMA page_size").scalar() == 16384


def test_sqlite_scratch_space_missing_is_a_clear_error_and_stores_nothing(
    sqlite_engine: Engine, write, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    missing = tmp_path / "no-such-dir"
    monkeypatch.setattr(tempfile, "tempdir", str(missing))
    with pytest.raises(
        EvalstoreError,
        match=(
            rf"^Could not write the 3 rows to a scratch file in {re.escape(str(missing))} \(\[Errno 2\] No such file "
            r"or directory: '.*'\)\. Nothing was stored\. Free space there, or set TMPDIR to a directory with room "
            r"for them\.$"
        ),
    ):
        store.register_run(sqlite_engine, write("a.run", RUN), name="bm25")
    assert counts(sqlite_engine) == (0, 0, 0, 0)


@pytest.mark.parametrize("listing", ["trec order", "shuffled"])
def test_stored_trec_rank_is_trec_eval_order_whatever_the_file_order(engine: Engine, write, listing: str) -> None:  # type: ignore[no-untyped-def]
    # topic 1: d3 and d1 tie at 2.0 (d3 first: docno descending); the rank column says otherwise
    lines = ["1 Q0 d2 1 3.0 t", "1 Q0 d3 2 2.0 t", "1 Q0 d1 3 2.0 t", "1 Q0 D9 4 2.0 t", "2 Q0 d1 9 -1.0 t"]
    if listing == "shuffled":
        lines = [lines[i] for i in (4, 2, 0, 3, 1)]
    store.register_run(engine, write("a.run", "\n".join(lines) + "\n"), name="r")
    with read_only(engine) as session:
        stored = session.execute(select(RunRow.topic, RunRow.doc, RunRow.trec_rank)).all()
    assert sorted((t, d, r) for t, d, r in stored) == [
        ("1", "D9", 4),
        ("1", "d1", 3),
        ("1", "d2", 1),
        ("1", "d3", 2),
        ("2", "d1", 1),
    ]


def test_qrels_import_and_round_trip(engine: Engine) -> None:
    source = shared_path("trec_eval_test", "qrels.rel_level")
    result = store.import_qrels(engine, source, name="rel_level", description="graded")
    assert (result.summary.rows, result.summary.topics) == (3681, 3)
    _, table = store.qrels_rows(engine, "rel_level")
    assert table.equals(read_qrels(source).table)
    with pytest.raises(ConflictError):
        store.import_qrels(engine, shared_path("trec_eval_test", "qrels.test"), name="rel_level")


def _register_in_child(url: str, path: str, name: str, queue) -> None:  # type: ignore[no-untyped-def]
    engine = make_engine(url)
    try:
        result = store.register_run(engine, path, name=name)
        queue.put(("created" if result.created else "existing", result.summary.rows))
    except ConflictError:
        queue.put(("conflict", 0))
    finally:
        engine.dispose()


@pytest.mark.parametrize("same_content", [True, False])
def test_concurrent_registration_never_leaves_a_partial_run(
    engine: Engine, database_url: str, same_content: bool
) -> None:
    path_a = str(shared_path("robust03", "runs", "input.humR03dc.gz"))
    path_b = path_a if same_content else str(shared_path("robust03", "runs", "input.NLPR03vb10.gz"))
    # each child is forked from multiprocessing's fork server, which has imported this module (and
    # with it evalstore) once for the test process, instead of being a new interpreter importing
    # them again (~1.5 s of CPU a child); the server holds no connection and no thread of this
    # process, so the two children share nothing but the code, as two spawned ones did
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload([__name__])
    queue = context.Queue()
    children = [
        context.Process(target=_register_in_child, args=(database_url, p, "race", queue)) for p in (path_a, path_b)
    ]
    for child in children:
        child.start()
    for child in children:
        child.join(120)
        assert child.exitcode == 0
    outcomes = sorted(queue.get(timeout=5)[0] for _ in children)
    assert outcomes == (["created", "existing"] if same_content else ["conflict", "created"])
    with read_only(engine) as session:
        run = repositories.get_run(session, "race")
        assert repositories.count_run_rows(session, run) == run.row_count


@pytest.mark.postgres
def test_storing_a_run_on_postgres_does_not_lock_out_readers_of_other_runs(postgres_server_url: str, write) -> None:  # type: ignore[no-untyped-def]
    # Workers read stored runs while others are registered: the new run's partition is loaded
    # apart and then attached, which takes a lock that readers do not wait for.
    from tests.conftest import _reset_postgres

    _reset_postgres(postgres_server_url)
    engine = make_engine(postgres_server_url)
    try:
        upgrade(engine)
        store.register_run(engine, write("a.run", RUN), name="a")
        rows, counts = repositories.run_rows_to_store(read_run(write("b.run", "1 Q0 d7 1 1.0 b\n")).table)
        with unit_of_work(engine) as session:
            run = Run(name="b", tag="b", content_hash="0" * 64, row_count=1, topic_count=1, metadata_={})
            session.add(run)
            session.flush()
            repositories.insert_run_rows(session, run.id, StagedRows(rows), counts)
            with engine.connect() as reader:  # while that transaction is still open
                reader.execute(text("SET lock_timeout = '2s'"))
                assert reader.execute(text("SELECT count(*) FROM run_rows")).scalar() == 3
        assert store.run_rows(engine, "b")[0].rows == 1
    finally:
        engine.dispose()


def _stored(engine: Engine, name: str) -> tuple[list[tuple], list[tuple], tuple]:  # type: ignore[type-arg]
    with read_only(engine) as session:
        run = session.scalar(select(Run).where(Run.name == name))
        assert run is not None
        rows = session.execute(
            select(RunRow.position, RunRow.topic, RunRow.doc, RunRow.score, RunRow.rank, RunRow.trec_rank)
            .where(RunRow.run_id == run.id)
            .order_by(RunRow.position)
        ).all()
        counts = session.execute(
            text("SELECT topic, retrieved FROM run_topics WHERE run_id = :id ORDER BY topic"), {"id": run.id}
        ).all()
        return (
            [tuple(r) for r in rows],
            [tuple(c) for c in counts],
            (run.row_count, run.topic_count, run.content_hash, run.tag),
        )


@pytest.mark.parametrize("source", ["shuffled.run", "robust03", "run.parquet"])
def test_a_run_stored_through_duckdb_is_the_run_stored_in_memory(
    engine: Engine,
    write,
    source: str,  # type: ignore[no-untyped-def]
    tmp_path: Path,
) -> None:
    """runs register --backend duckdb (a run larger than memory): the same rows in the same file
    order, the same trec_eval ranks, counts, hash and tag as the in-memory path stores."""
    if source == "robust03":
        path = shared_path("robust03", "runs", "input.pircRBa1.gz")
    elif source == "run.parquet":
        path = tmp_path / "run.parquet"
        table = read_run(shared_path("robust03", "runs", "input.uwmtCR0.gz")).table
        pq.write_table(
            table.select(["topic", "doc", "rank", "score"]).rename_columns(["query_id", "docno", "rank", "score"]), path
        )
    else:  # ties, a topic split over the file, a rank column that says otherwise
        path = write(
            source,
            "2 Q0 d1 9 -1.0 t\n1 Q0 d1 3 2.0 t\n1 Q0 d2 1 3.0 t\n2 Q0 e 1 -1.0 t\n1 Q0 D9 4 2.0 t\n1 Q0 d3 2 2.0 t\n",
        )
    store.register_run(engine, path, name="in-memory")
    done = store.register_run(engine, path, name="duckdb", backend="duckdb")
    assert done.created and done.summary.rows == _stored(engine, "in-memory")[2][0]
    assert _stored(engine, "duckdb") == _stored(engine, "in-memory")
    again = store.register_run(engine, path, name="duckdb", backend="duckdb")
    assert not again.created


@pytest.mark.parametrize(
    ("text_", "message"),
    [
        (
            "1 Q0 a 1 2.0 t\n1 Q0 b 2 1.0 t\n1 Q0 a 3 0.5 t\n",
            ":3: docno 'a' appears twice in topic '1' (first at line 1); trec_eval refuses duplicate documents, so remove "
            "one of them",
        ),
        (
            "1 Q0 a 1 2.0 t\n1 Q0 a first 2.0 t\n",
            ":2: rank 'first' is not an integer between -2147483648 and 2147483647",
        ),
        ("1 Q0 a 1 2.0 t\n1 Q0 b 2 high t\n", ":2: score 'high' is not a number"),
        ("# nothing but a comment\n", "the file has no rows"),
    ],
)
def test_a_bad_run_through_duckdb_stores_nothing(engine: Engine, write, text_: str, message: str) -> None:  # type: ignore[no-untyped-def]
    path = write("bad.run", text_)
    with pytest.raises(InputFormatError) as raised:
        store.register_run(engine, path, name="bad", backend="duckdb")
    assert str(raised.value).startswith(str(path)) and message in str(raised.value)
    with read_only(engine) as session:
        assert session.scalar(select(func.count()).select_from(Run)) == 0
        assert session.scalar(select(func.count()).select_from(RunRow)) == 0
