"""Talking to MLflow: a client per tracking URI (kept in the application context), experiments
made once, and one MLflow run logged from a payload (:class:`~evalstore.services.kinds.base.MlflowRun`).
The delivery state machine around it is the package's (:mod:`evalstore.services.tracking`).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import sqlite3
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from evalstore import config
from evalstore._version import __version__
from evalstore.metrics import mlflow_key
from evalstore.services.context import Lru
from evalstore.services.kinds.base import MlflowRun

if TYPE_CHECKING:
    import pandas as pd
    from mlflow import MlflowClient


def _client(uri: str, clients: Lru[str, Any]) -> MlflowClient:
    """The client for ``uri`` kept in ``clients`` (an application context's), opened once: a
    worker logs job after job, and opening one checks the tracking store each time (a failed
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


def _experiment_id(client: MlflowClient, uri: str, name: str) -> str:
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


def _log_run(
    client: MlflowClient,
    experiment_id: str,
    payload: MlflowRun,
    *,
    finished: bool = True,
    schemas: Lru[tuple[Any, ...], Any] | None = None,
) -> str:
    """One MLflow run holding everything in ``payload``; finished, or (``finished=False``) left
    running for the caller to finish. ``schemas`` keeps the Parquet tables' schemas from run to
    run (an application context's, :func:`_write_parquet`).

    Few requests: the tags go with the run's creation, params and metrics in one ``log_batch``
    (MLflow splits it within its request limits), and every artifact file is written to one
    folder and uploaded at once. Each ``log_*`` call of MLflow's client is a request of its own
    (and, on a SQLite store, a transaction); ``log_table`` also reads the run back to merge a
    table already there (a new run has none) and to set its tag."""
    from mlflow.entities import Metric, Param

    tags = {**payload.tags, "evalstore.logged_by": "evalstore"}
    if payload.tables:
        tags[LOGGED_ARTIFACTS] = json.dumps([{"path": name, "type": "table"} for name in payload.tables])
    created = client.create_run(experiment_id, run_name=payload.name, tags=tags)
    run_id = str(created.info.run_id)
    metrics = [
        Metric(mlflow_key(name), float(value), 0, 0)
        for name, value in payload.metrics.items()
        if value is not None and value == value
    ]
    params = [Param(key, str(value)[:6000]) for key, value in payload.params.items()]
    client.log_batch(run_id, metrics=metrics, params=params)
    repository = _artifact_repository(client, created.info.artifact_uri)
    local = _local_folder(repository)
    if local is not None:  # a folder on this machine: the files are written where MLflow would copy them
        _write_artifacts(payload, local, schemas)
    else:
        with tempfile.TemporaryDirectory() as folder:
            _write_artifacts(payload, Path(folder), schemas)
            repository.log_artifacts(folder)
    if finished:
        client.set_terminated(run_id, "FINISHED")
    return run_id


def _artifact_repository(client: MlflowClient, artifact_uri: str) -> Any:
    """The run's artifact store, as ``client.log_artifacts`` finds it, from the artifact URI the
    run was created with: MLflow's client reads the run back for it first (a request, and on a
    SQLite store a query of the run with its params, metrics and tags: ~4 ms of a DL-sized job)."""
    from mlflow.store.artifact.artifact_repository_registry import get_artifact_repository
    from mlflow.utils.uri import add_databricks_profile_info_to_artifact_uri

    return get_artifact_repository(
        add_databricks_profile_info_to_artifact_uri(artifact_uri, client.tracking_uri), tracking_uri=client.tracking_uri
    )


def _local_folder(repository: Any) -> Path | None:
    """The run's artifact folder when its store is a folder on this machine (the embedded
    default's ``mlartifacts``), else None. Writing the files there, not into a temporary folder
    that ``log_artifacts`` then copies file by file, saved ~5% of a worker's CPU per job (py-spy,
    200 DL-sized jobs). The run is unfinished while they are written; a run left unfinished is
    deleted and logged afresh under a new run id (:mod:`evalstore.services.tracking`)."""
    from mlflow.store.artifact.local_artifact_repo import LocalArtifactRepository

    if not isinstance(repository, LocalArtifactRepository):
        return None
    folder = Path(repository.artifact_dir)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


# The tag MLflow's log_table sets: the UI shows a run's artifacts listed in it as tables.
LOGGED_ARTIFACTS = "mlflow.loggedArtifacts"


# PNGs compressed less than matplotlib's default: the same pixels, a few KB larger, and the
# encoding was a noticeable part of a job's logging.
PNG_COMPRESS_LEVEL = 1


def _write_artifacts(payload: MlflowRun, folder: Path, schemas: Lru[tuple[Any, ...], Any] | None = None) -> None:
    """Every artifact file of ``payload`` in ``folder``, each as the MLflow client's own
    ``log_artifact``, ``log_table``, ``log_text``, ``log_dict`` and ``log_figure`` (PNGs at
    :data:`PNG_COMPRESS_LEVEL`) write it; an SVG figure is text."""
    for name, frame in payload.parquet.items():
        _write_parquet(frame, _file(folder, name), schemas)
    for name, frame in payload.tables.items():
        frame.to_json(_file(folder, name), orient="split", index=False, date_format="iso")
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


def _write_parquet(frame: pd.DataFrame, path: Path, schemas: Lru[tuple[Any, ...], Any] | None) -> None:
    """``frame.to_parquet(path)``, the same bytes, in about half the time for our per-topic frames.

    pandas converts a frame to Arrow column by column and works out the schema, with its pandas
    metadata, every time: ~4 ms of the ~8 ms a DL-sized job's table (43 topics x ~100 measures)
    took. For a frame whose Arrow types follow from its dtypes alone (:func:`_typed_by_dtypes`: float
    and string columns with text labels, a named index of text), the schema depends only on the
    columns, their dtypes and the index, so ``schemas`` keeps it, and the float columns go to Arrow
    as one block. NaN becomes null, as pandas writes it. Any other frame is pandas' to write."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if schemas is None or not _typed_by_dtypes(frame):
        frame.to_parquet(path)
        return
    dtypes = frame.dtypes.tolist()
    key = (tuple(frame.columns), tuple(map(repr, dtypes)), frame.index.name, repr(frame.index.dtype))
    schema = schemas.get(key)
    if schema is None:
        frame.to_parquet(path)
        schemas.put(key, pa.Schema.from_pandas(frame))
        return
    floats = [i for i, dtype in enumerate(dtypes) if dtype == np.float64]
    block = np.ascontiguousarray(frame.iloc[:, floats].to_numpy(dtype=np.float64).T)
    arrays: list[Any] = [None] * len(dtypes)
    for row, column in enumerate(floats):
        arrays[column] = pa.array(block[row], pa.float64(), from_pandas=True)
    for column, array in enumerate(arrays):
        if array is None:
            arrays[column] = pa.array(frame.iloc[:, column], schema.field(column).type, from_pandas=True)
    arrays.append(pa.array(frame.index, schema.field(len(dtypes)).type, from_pandas=True))
    pq.write_table(pa.Table.from_arrays(arrays, schema=schema), path)


def _typed_by_dtypes(frame: pd.DataFrame) -> bool:
    """Whether pandas gives ``frame`` an Arrow schema that follows from its dtypes and labels alone,
    whatever the values: float64 and string columns under distinct text labels (no name for the
    labels, no MultiIndex), a plain index of text under a name, no ``attrs``. An object column's
    type depends on its values (all NaN: null), so such a frame is pandas' to write."""
    import pandas as pd

    columns, index = frame.columns, frame.index
    return (
        not frame.attrs
        and type(columns) is pd.Index
        and columns.name is None
        and columns.is_unique
        and all(isinstance(label, str) for label in columns)
        and all(dtype == np.float64 or isinstance(dtype, pd.StringDtype) for dtype in frame.dtypes)
        and type(index) is pd.Index
        and isinstance(index.name, str)
        and isinstance(index.dtype, pd.StringDtype)
    )
