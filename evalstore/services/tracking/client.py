"""Talking to MLflow, through its public client (``MlflowClient``) only: a client per tracking
URI (kept in the application context), experiments made once, and one MLflow run logged from a
payload (:class:`~evalstore.services.kinds.base.MlflowRun`). The only module that imports MLflow;
the delivery around it is :mod:`evalstore.services.tracking.deliverer`'s.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import re
import sqlite3
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from evalstore import config
from evalstore._version import __version__
from evalstore.metrics import mlflow_key
from evalstore.services.context import Lru
from evalstore.services.kinds.base import MlflowRun

if TYPE_CHECKING:
    import pandas as pd
    from mlflow import MlflowClient


def open_client(uri: str, clients: Lru[str, Any]) -> MlflowClient:
    """The client for ``uri`` kept in ``clients`` (an application context's), opened once: a
    deliverer logs result after result, and opening one checks the tracking store each time (a failed
    opening is simply tried again next time)."""
    client: MlflowClient | None = clients.get(uri)
    if client is not None:
        return client
    config.limit_mlflow_http_retries()
    from mlflow import MlflowClient

    # mlflow sets its loggers to INFO on import and announces its own database set-up each time
    logging.getLogger("mlflow").setLevel(logging.WARNING)
    logging.getLogger("matplotlib").setLevel(logging.WARNING)
    with _local_store_lock(uri):
        client = MlflowClient(tracking_uri=uri)
        client.search_experiments(max_results=1)  # a new local store creates its schema here
        _write_ahead_log(uri)
    return clients.put(uri, client)


def _write_ahead_log(uri: str) -> None:
    """A local SQLite store in WAL mode (kept in the file: set once, for every process). MLflow
    leaves SQLite's default, a rollback journal: each of a job's three MLflow transactions
    created, synced and deleted a journal file, and a writer shut every reader out, which the
    workers logging side by side, and the MLflow UI reading, waited on. WAL appends to one log:
    ~1.7 ms less system CPU and ~3.5 ms less wall a job's MLflow run (create, log_batch,
    set_terminated; `scripts/bench_server.py` measures the throughput). SQLite's WAL needs the
    processes on one host, as a local store has them, and a reader that may write beside the file
    (its shared-memory index): a user with read-only access to the folder cannot open it."""
    path = _sqlite_file(uri)
    if path is None:
        return
    try:
        with contextlib.closing(sqlite3.connect(path, timeout=30)) as connection:
            if connection.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
                connection.execute("PRAGMA journal_mode = WAL")
    except sqlite3.Error as error:  # left as MLflow made it: slower, not wrong
        logging.getLogger("evalstore.mlflow").warning("MLflow's store %s stays in its journal mode: %s", path, error)


def _sqlite_file(uri: str) -> str | None:
    """A local SQLite store's file, as MLflow's engine reads the URI (a query string is not part
    of it); None for any other store."""
    if not uri.startswith("sqlite:///"):
        return None
    from sqlalchemy.engine import make_url

    path = make_url(uri).database
    return path if path and path != ":memory:" else None


@contextlib.contextmanager
def _local_store_lock(uri: str) -> Iterator[None]:
    """MLflow creates its SQLite schema on first use; two local processes doing that at once
    collide, so they take turns (a server-backed store needs no lock)."""
    path = _sqlite_file(uri)
    if path is None:
        yield
        return
    lock_path = Path(path + ".lock")
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


# MLflow 3's UI opens an experiment without this tag on its GenAI overview (traces, nothing of
# ours in it); marked as model development it opens on the runs table. A kind someone chose in the
# UI is left as it is.
EXPERIMENT_KIND = ("mlflow.experimentKind", "custom_model_development")


def experiment_id(client: MlflowClient, uri: str, name: str) -> str:
    from mlflow.exceptions import MlflowException

    with _local_store_lock(uri):
        experiment = client.get_experiment_by_name(name)
        if experiment is not None:
            if EXPERIMENT_KIND[0] not in experiment.tags:  # made by an older evalstore, or by hand
                client.set_experiment_tag(experiment.experiment_id, *EXPERIMENT_KIND)
            return str(experiment.experiment_id)
        root = config.mlflow_artifact_root(uri)
        location = (root / name.replace("/", "_")).as_uri() if root else None
        try:
            return str(
                client.create_experiment(
                    name,
                    artifact_location=location,
                    tags={"evalstore.version": __version__, EXPERIMENT_KIND[0]: EXPERIMENT_KIND[1]},
                )
            )
        except MlflowException:  # created by another process meanwhile
            experiment = client.get_experiment_by_name(name)
            if experiment is None:
                raise
            return str(experiment.experiment_id)


def start_run(client: MlflowClient, experiment_id: str, payload: MlflowRun) -> str:
    """One MLflow run holding everything in ``payload``, left RUNNING for the caller to finish
    (:func:`finish_run`) once it has confirmed its claim. Through MLflow's public client only,
    in few requests: the tags go with the run's creation, params and metrics in one ``log_batch``
    (MLflow splits it within its request limits), and every artifact file is written to one
    temporary folder and uploaded at once (``log_artifacts``). Each ``log_*`` call of MLflow's
    client is a request of its own (and, on a SQLite store, a transaction); ``log_table`` also
    reads the run back to merge a table already there (a new run has none) and to set its tag."""
    from mlflow.entities import Metric, Param

    tags = {**payload.tags, "evalstore.logged_by": "evalstore"}
    if payload.tables:
        tags[LOGGED_ARTIFACTS] = json.dumps([{"path": name, "type": "table"} for name in payload.tables])
    run_id = str(client.create_run(experiment_id, run_name=payload.name, tags=tags).info.run_id)
    # the files before the metrics: log_artifacts reads the run back (with everything logged to it
    # so far) to find where its files go, and a run holding only its tags is read ~4x faster
    with tempfile.TemporaryDirectory(prefix="evalstore-mlflow-") as folder:
        _write_artifacts(payload, Path(folder))
        client.log_artifacts(run_id, folder)
    metrics = [
        Metric(mlflow_key(name), float(value), 0, 0)
        for name, value in payload.metrics.items()
        if value is not None and value == value
    ]
    params = [Param(key, str(value)[:6000]) for key, value in payload.params.items()]
    client.log_batch(run_id, metrics=metrics, params=params)
    return run_id


def finish_run(client: MlflowClient, run_id: str) -> None:
    client.set_terminated(run_id, "FINISHED")


def runs_of(
    client: MlflowClient, experiment_id: str, evaluation_id: int, results_version: int
) -> list[tuple[str, str]]:
    """The (run id, status) of every live MLflow run of these results, found by their tags."""
    found = client.search_runs(
        [experiment_id],
        filter_string=(
            f"tags.`evalstore.evaluation_id` = '{evaluation_id}' "
            f"and tags.`evalstore.results_version` = '{results_version}'"
        ),
    )
    return [(str(run.info.run_id), str(run.info.status)) for run in found]


def log_run(client: MlflowClient, experiment_id: str, payload: MlflowRun) -> str:
    """A run of ``payload`` made and finished at once (a comparison: no delivery to fence)."""
    run_id = start_run(client, experiment_id, payload)
    finish_run(client, run_id)
    return run_id


# The tag MLflow's log_table sets: the UI shows a run's artifacts listed in it as tables.
LOGGED_ARTIFACTS = "mlflow.loggedArtifacts"


# PNGs compressed less than matplotlib's default: the same pixels, a few KB larger, and the
# encoding was a noticeable part of a job's logging.
PNG_COMPRESS_LEVEL = 1


def _write_artifacts(payload: MlflowRun, folder: Path) -> None:
    """Every artifact file of ``payload`` in ``folder``, byte for byte as the MLflow client's own
    ``log_artifact`` (pandas' ``to_parquet``), ``log_table`` (pandas' ``to_json``), ``log_text``,
    ``log_dict`` and ``log_figure`` (PNGs at :data:`PNG_COMPRESS_LEVEL`) write it; an SVG figure
    is text."""
    for name, frame in payload.parquet.items():
        _write_parquet(frame, _file(folder, name))
    for name, frame in payload.tables.items():
        _write_table(frame, _file(folder, name))
    for name, text in payload.texts.items():
        _file(folder, name).write_text(text, encoding="utf-8")
    for name, content in payload.dicts.items():  # JSON: log_dict writes YAML only for .yml/.yaml, none of ours
        with open(_file(folder, name), "w") as out:
            json.dump(content, out, indent=2, default=str)
    for name, figure in payload.figures() if payload.figures else ():
        if isinstance(figure, str):  # SVG text (evalstore.svg_charts), as log_text writes it
            _file(folder, name).write_text(figure, encoding="utf-8")
        else:
            figure.savefig(_file(folder, name), pil_kwargs={"compress_level": PNG_COMPRESS_LEVEL})


def _file(folder: Path, name: str) -> Path:
    """Where artifact ``name`` (a run-relative path) is written in ``folder``."""
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


# The Parquet schemas of the per-topic tables written lately (:func:`_write_parquet`): a task's
# results share one (its measures), so a deliverer works it out once.
_PARQUET_SCHEMAS: Lru[tuple[Any, ...], Any] = Lru(16)


def _write_parquet(frame: pd.DataFrame, path: Path) -> None:
    """``frame.to_parquet(path)``, the same bytes, in about a third of its CPU for our per-topic
    tables (43 topics x ~100 measures). pandas converts a frame to Arrow column by column and
    works out the schema, with its pandas metadata, every time. When the frame's Arrow types
    follow from what :func:`_columns_of` finds (float columns, an object column of floats: double,
    or null when all NaN, as pyarrow infers it; text), the schema depends only on that, the labels
    and the index, so it is kept (:data:`_PARQUET_SCHEMAS`), and the numbers go to Arrow as one
    block; NaN becomes null, as pandas writes it. Any other frame is pandas' to write."""
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    columns = _columns_of(frame)
    index = frame.index
    if columns is None or not _plain_labels(frame) or type(index) is not pd.Index or not isinstance(index.name, str):
        frame.to_parquet(path)
        return
    kinds, block = columns
    all_nan = np.isnan(block).all(axis=1).tolist()
    empty = tuple(kind == "object" and nan for kind, nan in zip(kinds, all_nan, strict=True))
    key = (tuple(frame.columns), tuple(map(repr, frame.dtypes)), empty, index.name, repr(index.dtype))
    schema = _PARQUET_SCHEMAS.get(key)
    if schema is None:
        frame.to_parquet(path)
        _PARQUET_SCHEMAS.put(key, pa.Schema.from_pandas(frame))
        return
    # the whole block in one Arrow array, each column a slice of it (an array a column took ~20x longer)
    numbers, rows = pa.array(block.ravel(), pa.float64(), from_pandas=True), len(frame)
    arrays: list[Any] = []
    for column, kind in enumerate(kinds):
        field = schema.field(column).type
        if kind == "text":
            arrays.append(pa.array(frame.iloc[:, column], field, from_pandas=True))
        else:
            arrays.append(pa.nulls(rows) if pa.types.is_null(field) else numbers.slice(column * rows, rows))
    arrays.append(pa.array(index, schema.field(len(arrays)).type, from_pandas=True))
    pq.write_table(pa.Table.from_arrays(arrays, schema=schema), path)


def _plain_labels(frame: pd.DataFrame) -> bool:
    """Distinct text labels (no name for them, no MultiIndex), no ``attrs``."""
    import pandas as pd

    columns = frame.columns
    return (
        not frame.attrs
        and type(columns) is pd.Index
        and columns.name is None
        and columns.is_unique
        and all(isinstance(label, str) for label in columns)
    )


def _columns_of(frame: pd.DataFrame) -> tuple[list[str], np.ndarray] | None:
    """Each column's kind: "float" (float64), "object" (an object column holding floats only, as a
    per-topic table with a textual measure holds its numbers) or "text" (a string column); and
    the numbers as one float block, a row a column (a text column's row is NaN). None when a
    column is of any other kind, or the frame holds no rows."""
    import pandas as pd

    kinds: list[str] = []
    for dtype in frame.dtypes:
        if dtype == np.float64:
            kinds.append("float")
        elif dtype == np.dtype(object):
            kinds.append("object")
        elif isinstance(dtype, pd.StringDtype):
            kinds.append("text")
        else:
            return None
    if len(frame) == 0:
        return None
    numeric = [i for i, kind in enumerate(kinds) if kind != "text"]
    block = np.full((len(kinds), len(frame)), np.nan)
    if numeric:
        values = frame.to_numpy()[:, numeric]  # the frame's blocks as one array: no copy of its columns first
        if values.dtype == object and not set(map(type, values.ravel().tolist())) <= {float, np.float64}:
            return None
        block[numeric] = values.astype(np.float64).T
    return kinds, block


def _write_table(table: pd.DataFrame, path: Path) -> None:
    """``table.to_json(path, orient="split", index=False)``, as ``log_table`` writes it, the same
    bytes in about a third of its CPU for our per-topic tables. pandas makes the "split" layout as
    Python lists, value by value (~3.5 ms for 43 topics x ~100 measures); its "values" layout
    encodes a float block in C. So the labels, each text column and the numbers (one block,
    :func:`_columns_of`) are encoded by pandas' own JSON encoder, and each row is put together
    from them. An encoded text column is cut into its values at its quotes, so a text holding a
    quote (rare in a topic id) leaves the table to pandas, as any other table."""
    import pandas as pd

    columns = _columns_of(table)
    if columns is None or not _plain_labels(table):
        table.to_json(path, orient="split", index=False, date_format="iso")
        return
    kinds, block = columns
    numeric = [i for i, kind in enumerate(kinds) if kind != "text"]
    cells: list[list[str]] = [[] for _ in range(len(table))]
    if numeric:
        encoded = pd.DataFrame(block[numeric].T).to_json(orient="values")
        for row, values in zip(cells, encoded[2:-2].split("],["), strict=True):
            row.extend(values.split(","))
    for column, kind in enumerate(kinds):
        if kind != "text":
            continue
        encoded = cast(Any, table.iloc[:, column]).to_json(orient="values")  # a Series' "values": not in the stubs
        texts = _JSON_TEXTS.findall(encoded)
        if '\\"' in encoded or len(texts) != len(table):
            table.to_json(path, orient="split", index=False, date_format="iso")
            return
        for row, text in zip(cells, texts, strict=True):
            row.insert(column, text)
    labels = cast(Any, pd.Series(table.columns, dtype=object)).to_json(orient="values")
    data = ",".join(f"[{','.join(row)}]" for row in cells)
    path.write_text(f'{{"columns":{labels},"data":[{data}]}}', encoding="utf-8")


# the values of an encoded text column without escaped quotes: its texts and nulls
_JSON_TEXTS = re.compile(r'"[^"]*"|null')
