"""A job's heavy part on DuckDB or Spark (``evaluate --backend duckdb|spark``): a stored run or
prediction set too large for this process is read from the store a batch at a time and handed to
the backend, which reduces it to the few rows per topic or group the local engine's kernels take
(a run's judged ranks, a prediction set's pair and confusion counts). The kinds then compute,
store and log the measures from those as from a local read: one code path for the numbers.

DuckDB takes the batches straight in and spills past its memory limit. Spark reads them from
Parquet written under the backend's staging folder (on a cluster: one every executor can read),
removed after the job.
"""

from __future__ import annotations

import tempfile
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from sqlalchemy.orm import Session

from evalstore.backends import Backend
from evalstore.db import repositories as repo
from evalstore.db.models import LabelSet, PredictionSet, Run
from evalstore.errors import InvalidParameterError, Remedy
from evalstore.metrics.classification import BinaryCounts

if TYPE_CHECKING:
    import duckdb
    from pyspark.sql import DataFrame, SparkSession

WHAT_IT_TAKES = (
    "binary predictions with one score per item (it computes AUC, GAUC, average precision, log "
    "loss, Brier score and the confusion-matrix measures)"
)


def check_label_set(label_set: LabelSet, options: dict[str, Any], backend: Backend) -> None:
    """Refuse, before queueing, gold labels or options the out-of-core suite cannot honour."""
    problem = None
    remedy = "Leave --backend out: the local engine computes the whole suite."
    if label_set.multilabel:
        problem = f"gold labels '{label_set.name}' are multilabel"
    elif len(label_set.classes) != 2:
        problem = f"gold labels '{label_set.name}' have {len(label_set.classes)} classes"
    elif label_set.weighted:
        problem = f"gold labels '{label_set.name}' carry sample weights"
    elif options["baseline"] is not None:
        problem = "a baseline compares two prediction sets item by item"
    elif isinstance(options["threshold"], str):
        problem = f"the threshold rule '{options['threshold']}' searches the whole ROC curve"
        remedy = "Give --threshold a number, or leave --backend out: the local engine computes the whole suite."
    if problem is not None:
        raise InvalidParameterError(
            f"The {backend.name} backend evaluates {WHAT_IT_TAKES}, and {problem}.", remedy=Remedy(cli=remedy)
        )


def check_prediction_set(prediction_set: PredictionSet, backend: Backend) -> None:
    if prediction_set.kind != "classifier" or not prediction_set.has_score:
        what = "a clustering" if prediction_set.kind != "classifier" else "predictions without a score column"
        raise InvalidParameterError(
            f"The {backend.name} backend evaluates {WHAT_IT_TAKES}; '{prediction_set.name}' is {what}.",
            remedy=Remedy(cli="Leave --backend out: the local engine evaluates it."),
        )


def judged_ranks(
    session: Session, run: Run, judgments: list[pa.Table], backend: Backend
) -> tuple[pa.Table, list[pa.Table]]:
    """(topic, retrieved) of the stored run and, for each qrels table, (topic, rank, relevance)
    of the run rows it judges (what :func:`evalstore.db.repositories.judged_ranks` gets from the
    database), worked out by the backend from the run's rows."""
    rows = repo.run_batches(session, run)
    where = f"run '{run.name}'"
    if backend.name == "duckdb":
        from evalstore.backends import duckdb_engine

        with _duckdb_table(backend, repo.RUN_BATCH_SCHEMA, rows, "run_rows") as con:
            found = [duckdb_engine.judged_ranks(con, "run_rows", qrels, where) for qrels in judgments]
    else:
        from evalstore import spark as on_spark

        with _spark_frame(backend, repo.RUN_BATCH_SCHEMA, rows) as run_df:
            spark = run_df.sparkSession
            found = [
                on_spark.judged_ranks(run_df, spark.createDataFrame(qrels.select(["topic", "doc", "relevance"])))
                for qrels in judgments
            ]
    return found[0][0], [judged for _, judged in found]


def binary_counts(
    session: Session,
    prediction_set: PredictionSet,
    positive: str,
    threshold: float,
    backend: Backend,
    *,
    by_label: bool,
) -> BinaryCounts:
    """The stored set's :class:`BinaryCounts`, counted by the backend; an item is predicted
    positive when its predicted label is ``positive`` (``by_label``) or its score is at least
    ``threshold``."""
    rows = repo.binary_prediction_batches(session, prediction_set, positive, None if by_label else threshold)
    if backend.name == "duckdb":
        from evalstore.backends import duckdb_engine

        with _duckdb_table(backend, repo.BINARY_BATCH_SCHEMA, rows, "prediction_rows") as con:
            return duckdb_engine.binary_counts(con, "prediction_rows")
    from evalstore import spark as on_spark

    with _spark_frame(backend, repo.BINARY_BATCH_SCHEMA, rows) as frame:
        return on_spark.binary_counts(frame)


@contextmanager
def _duckdb_table(
    backend: Backend, schema: pa.Schema, batches: Iterator[pa.RecordBatch], name: str
) -> Iterator[duckdb.DuckDBPyConnection]:
    """A DuckDB connection holding ``batches`` as the temporary table ``name`` (streamed in; past
    the memory limit DuckDB spills it to its temp directory)."""
    from evalstore.backends import duckdb_engine

    con = duckdb_engine.connect(duckdb_engine.DuckDBSettings(backend.memory_limit or "2GB", backend.temp_directory))
    try:
        con.register("incoming", pa.RecordBatchReader.from_batches(schema, batches))
        con.execute(f"CREATE TEMP TABLE {name} AS SELECT * FROM incoming")
        con.unregister("incoming")
        yield con
    finally:
        con.close()


def spark_session(master: str | None) -> SparkSession:
    """This process's Spark session: the one running (when it runs on ``master``, or no master
    is asked for), else a new one on ``master`` (default ``local[*]``)."""
    # pyspark 4.0 warns on every DataFrame made from Arrow that it does not fully support pandas 3;
    # this module hands Spark Arrow tables and takes Arrow back, never a pandas object
    warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas", category=FutureWarning)
    try:
        from pyspark.sql import SparkSession
    except ImportError:  # an optional extra
        raise InvalidParameterError(
            "The spark backend needs pyspark, which is not installed here.",
            remedy=Remedy(cli="Install it with pip install 'evalstore[spark]'."),
        ) from None
    running = SparkSession.getActiveSession()
    if running is not None:
        if master is not None and running.sparkContext.master != master:
            raise InvalidParameterError(
                f"This process already runs Spark on {running.sparkContext.master}, not "
                f"{master}; one process holds one Spark session. Run a worker per master."
            )
        return running
    # a session of our own says nothing on the console but errors: evalstore's stderr carries its
    # own progress and diagnostics, and Spark's stage bars and INFO/WARN lines would bury them
    session = (
        SparkSession.builder.master(master or "local[*]")
        .appName("evalstore")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    return session


@contextmanager
def _spark_frame(backend: Backend, schema: pa.Schema, batches: Iterator[pa.RecordBatch]) -> Iterator[DataFrame]:
    """``batches`` as a Spark DataFrame, through Parquet written to a fresh folder under the
    staging folder and removed afterwards."""
    import pyarrow.parquet as pq

    spark = spark_session(backend.master)
    if backend.staging is not None:
        Path(backend.staging).mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="evalstore-spark-", dir=backend.staging) as folder:
        with pq.ParquetWriter(Path(folder) / "part-00000.parquet", schema) as writer:
            for batch in batches:
                writer.write_batch(batch)
        yield spark.read.parquet(folder)
