"""Runs in the store: registering them (in memory, or out of core with DuckDB), as steps a caller's
unit of work calls or as one use case; listing, exporting, deleting and indexing them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from evalstore.db import repositories as repo
from evalstore.db.models import Run
from evalstore.db.session import read_only, unit_of_work
from evalstore.db.staging import StagedRows, staged_rows, staged_stream
from evalstore.errors import ConflictError, InputFormatError, InvalidParameterError, Remedy, replace_or_rename
from evalstore.io.formats import (
    ParsedFile,
    has_duplicate_docs,
    read_run,
)
from evalstore.services.store.common import (
    NAME_SOURCES,
    Progress,
    Registered,
    Summary,
    dropped_message,
    name_from_file,
    refuse,
    refuse_repeated,
    retry_on_name_race,
    run_summary,
)
from evalstore.services.store.run_metadata import matches_meta, read_block, run_metadata, with_ir_metadata
from evalstore.times import utc_text

if TYPE_CHECKING:
    from evalstore.backends.duckdb_engine import DuckDBSettings


def register_runs(
    engine: Engine,
    paths: Sequence[str | Path],
    *,
    names: Sequence[str] | None = None,
    name_from: str = "file",
    system: str | None = None,
    metadata: dict[str, str] | None = None,
    description: str | None = None,
    replace: bool = False,
    fmt: str | None = None,
    on_file: Callable[[int, str], None] | None = None,
    progress: Progress | None = None,
) -> list[Registered]:
    """Register several run files: every file is validated before any is stored, so a bad one
    stores nothing and every bad file is named (``path:line: what is wrong``, one per line);
    then each run is stored whole, in its own transaction. Names are ``names``, or each file's
    (:func:`name_from_file`) or run tag's (``name_from="tag"``). ``on_file(i, name)`` hears of
    each run as its storing starts, ``progress`` of the rows stored."""
    if name_from not in NAME_SOURCES:
        raise InvalidParameterError(
            f"Runs are named after their file or their run tag, not '{name_from}'.",
            remedy=Remedy(cli="Give --name-from file or --name-from tag."),
        )
    if names is not None and len(names) != len(paths):
        raise InvalidParameterError(f"{len(names)} names for {len(paths)} files; give one name per file.")
    if len(paths) == 1 and (names is not None or name_from == "file"):
        # one file, its name known: register_run validates it whole before storing anything, and a
        # separate validation pass would parse a 7M-row run twice
        name = names[0] if names is not None else name_from_file(paths[0])
        if on_file is not None:
            on_file(0, name)
        return [
            register_run(
                engine,
                paths[0],
                name=name,
                system=system,
                metadata=metadata,
                description=description,
                replace=replace,
                fmt=fmt,
                progress=progress,
            )
        ]
    # Several files: all are parsed and validated first, then each is parsed again as it is
    # stored. Keeping the parsed tables between the two passes would hold every run of the batch in
    # memory at once (10 MS MARCO-sized runs: ~12 GB); parsing twice costs time, not memory.
    errors: list[InputFormatError] = []
    chosen: list[str] = []
    for index, path in enumerate(paths):
        try:
            parsed = read_run(path, fmt=fmt, content_hash=False)
            run_metadata(path, metadata, fmt)  # a broken ir_metadata block is reported with the rest
        except InputFormatError as error:
            errors.append(error)
            continue
        if names is not None:
            chosen.append(names[index])
        elif name_from == "tag":
            if not parsed.tag:
                errors.append(
                    InputFormatError(
                        str(path),
                        None,
                        "no run tag to name the run after (a CSV, TSV or Parquet run has none)",
                        remedy=Remedy(cli="use --name-from file"),
                    )
                )
                continue
            chosen.append(parsed.tag)
        else:
            chosen.append(name_from_file(path))
    refuse(errors, len(paths))
    other = "file" if name_from == "tag" else "tag"
    refuse_repeated(
        chosen,
        "Two files would be registered as '{name}'.",
        Remedy(cli=f"Register them with --name-from {other}, or one at a time with --name."),
    )
    registered = []
    for index, (path, name) in enumerate(zip(paths, chosen, strict=True)):
        if on_file is not None:
            on_file(index, name)
        registered.append(
            register_run(
                engine,
                path,
                name=name,
                system=system,
                metadata=metadata,
                description=description,
                replace=replace,
                fmt=fmt,
                progress=progress,
            )
        )
    return registered


def register_run(
    engine: Engine,
    path: str | Path,
    *,
    name: str,
    system: str | None = None,
    metadata: dict[str, Any] | None = None,
    description: str | None = None,
    replace: bool = False,
    fmt: str | None = None,
    progress: Progress | None = None,
    backend: str = "local",
    duckdb_settings: DuckDBSettings | None = None,
) -> Registered:
    """Validate a run file and store it whole, in one transaction, or not at all.
    ``backend="duckdb"``: a file larger than memory, parsed, checked and ranked by DuckDB and
    stored batch by batch (:func:`_register_run_out_of_core`). A caller that stores more in the
    same transaction (a task's submission) uses the steps: :func:`prepare_run`, then
    :func:`add_run` in :func:`run_unit_of_work`."""
    if backend == "duckdb":
        return _register_run_out_of_core(
            engine,
            Path(path),
            name=name,
            system=system,
            metadata=metadata,
            description=description,
            replace=replace,
            progress=progress,
            settings=duckdb_settings,
        )
    if backend != "local":
        raise InvalidParameterError(
            f"Runs are stored by the local or the duckdb backend, not '{backend}'.",
            remedy=Remedy(cli="Give --backend local or --backend duckdb."),
        )
    parsed = read_run(path, fmt=fmt, check_duplicates=False)  # checked below, alongside storing
    with read_only(engine) as session:  # the same content again: report it without staging the rows
        existing = repo.find_run(session, name)
    if existing is not None and existing.content_hash == parsed.content_hash:
        return Registered(run_summary(existing), False, parsed.warnings)
    with prepare_run(engine, path, fmt=fmt, parsed=parsed) as prepared:

        def store() -> Registered:
            with run_unit_of_work(engine, prepared) as session:
                return add_run(
                    session,
                    prepared,
                    name=name,
                    system=system,
                    metadata=metadata,
                    description=description,
                    replace=replace,
                    progress=progress,
                )

        return retry_on_name_race(store)


@dataclass
class PreparedRun:
    """A run file parsed, its rows ranked and staged for a bulk insert, and its duplicate-docno
    check under way: what :func:`add_run` stores (made by :func:`prepare_run`)."""

    path: str | Path
    fmt: str | None
    parsed: ParsedFile
    staged: StagedRows
    counts: Any
    duplicates: Future[bool]
    ir_metadata: str | None = None  # the file's ir_metadata block, as written
    # seconds spent reading and validating the file ("parse") and ranking and staging its rows
    # ("stage"), for the Server-Timing of an upload
    seconds: dict[str, float] = field(default_factory=dict)

    def refuse_duplicates(self) -> None:
        """Raise path:line if a docno repeats within a topic (waits for the check)."""
        if self.duplicates.result():
            read_run(self.path, fmt=self.fmt)  # raises path:line (or the hashes collided: no duplicate)


@contextmanager
def prepare_run(
    engine: Engine, path: str | Path, *, fmt: str | None = None, parsed: ParsedFile | None = None
) -> Iterator[PreparedRun]:
    """A step outside any transaction: parse the run file (unless ``parsed``), rank and stage its
    rows; the staged rows are deleted when the block ends."""
    started = time.perf_counter()
    if parsed is None:
        parsed = read_run(path, fmt=fmt, check_duplicates=False)  # checked alongside storing
    block = read_block(path, fmt)  # a broken ir_metadata block: path:line, before anything is staged
    parsed_at = time.perf_counter()
    # The duplicate-docno check (~1 s for 7M rows) runs on the second core while the rows are
    # ranked and stored.
    with ThreadPoolExecutor(max_workers=1) as pool:
        duplicates = pool.submit(has_duplicate_docs, parsed.table)
        rows, counts = repo.run_rows_to_store(parsed.table)
        with staged_rows(engine, rows) as staged:
            seconds = {"parse": parsed_at - started, "stage": time.perf_counter() - parsed_at}
            yield PreparedRun(path, fmt, parsed, staged, counts, duplicates, block, seconds)


def run_unit_of_work(engine: Engine, prepared: PreparedRun) -> AbstractContextManager[Session]:
    """The unit of work :func:`add_run` stores ``prepared`` in (on SQLite it attaches the staged
    rows)."""
    return unit_of_work(engine, prepared.staged.attach)


def add_run(
    session: Session,
    prepared: PreparedRun,
    *,
    name: str,
    system: str | None = None,
    metadata: dict[str, str] | None = None,
    description: str | None = None,
    replace: bool = False,
    progress: Progress | None = None,
) -> Registered:
    """A step: store a prepared run as ``name`` in the caller's unit of work
    (:func:`run_unit_of_work`), never committing; the same content under that name already is
    reported (``created`` False) and stores nothing. A duplicate docno raises before the caller
    commits, so it rolls everything back."""
    parsed = prepared.parsed
    existing = repo.find_run(session, name)
    if existing is not None and existing.content_hash == parsed.content_hash:
        return Registered(run_summary(existing), False, parsed.warnings)
    # bad input is reported before a taken name, as it is for every other defect
    warnings = (*parsed.warnings, *_replace_run(session, existing, name, replace, prepared.refuse_duplicates))
    run = Run(
        name=name,
        system=system,
        description=description,
        metadata_=with_ir_metadata(metadata, prepared.ir_metadata),
        tag=parsed.tag,
        content_hash=parsed.content_hash,
        row_count=parsed.table.num_rows,
        topic_count=prepared.counts.num_rows,  # one row per topic, counted as the rows were staged
        source=str(prepared.path),
    )
    session.add(run)
    session.flush()
    repo.insert_run_rows(session, run.id, prepared.staged, prepared.counts, progress)
    prepared.refuse_duplicates()  # before the commit: a duplicate rolls everything back
    return Registered(run_summary(run), True, warnings)


# runs this long get a docno-hash index (repositories.index_run): a shorter run's judged rows are
# found fast enough by hashing (a 50k-row run: ~10 ms), and every index costs a build and space
INDEXED_RUN_ROWS = 500_000


def index_next_run(engine: Engine, min_rows: int | None = None) -> int | None:
    """PostgreSQL: give the largest run of at least ``min_rows`` rows (default
    :data:`INDEXED_RUN_ROWS`) that lacks one its docno-hash index, in a transaction of its own (an
    idle worker's chore, services.worker); the run's id, or None when there was nothing to do (or
    another worker is at it; always on SQLite)."""
    if engine.dialect.name != "postgresql":
        return None
    with read_only(engine) as session:
        candidates = repo.runs_without_index(session, INDEXED_RUN_ROWS if min_rows is None else min_rows)
    for run_id in candidates:
        with unit_of_work(engine) as session:
            if repo.index_run(session, run_id):
                return run_id
    return None


def _replace_run(
    session: Session, existing: Run | None, name: str, replace: bool, before_refusing: Callable[[], None] = lambda: None
) -> tuple[str, ...]:
    """Make room for a run named ``name`` with other content: refused without ``replace``
    (``before_refusing`` first), else the old run goes, with the warning of the evaluations
    that go with it."""
    if existing is None:
        return ()
    if not replace:
        before_refusing()
        raise ConflictError(
            f"A run named '{name}' already exists with different content (registered {utc_text(existing.created_at)}).",
            remedy=replace_or_rename(),
        )
    dropped = repo.count_evaluations(session, run_id=existing.id)
    repo.delete_run(session, existing)
    return (dropped_message("run", name, dropped),) if dropped else ()


def _register_run_out_of_core(
    engine: Engine,
    path: Path,
    *,
    name: str,
    system: str | None,
    metadata: dict[str, Any] | None,
    description: str | None,
    replace: bool,
    progress: Progress | None,
    settings: DuckDBSettings | None,
) -> Registered:
    """:func:`register_run` for a run file of any size: DuckDB parses, checks and ranks it in
    bounded memory (evalstore.backends.duckdb_engine.run_to_store), and its rows go to the store
    batch by batch (COPY into the run's partition on PostgreSQL, a scratch database on SQLite),
    still in one transaction. The stored rows, ranks, counts and content hash are those of the
    local path (tests/db/test_store.py holds them equal)."""
    from evalstore.backends.duckdb_engine import DuckDBSettings, run_to_store

    metadata = run_metadata(path, metadata, None)
    with run_to_store(path, settings or DuckDBSettings(), repo.BATCH_ROWS) as (parsed, reader):
        with read_only(engine) as session:
            existing = repo.find_run(session, name)
        if existing is not None and existing.content_hash == parsed.content_hash:
            return Registered(run_summary(existing), False)
        with staged_stream(engine, reader, parsed.rows) as staged, unit_of_work(engine, staged.attach) as session:
            warnings = _replace_run(session, repo.find_run(session, name), name, replace)
            run = Run(
                name=name,
                system=system,
                description=description,
                metadata_=dict(metadata or {}),
                tag=parsed.tag,
                content_hash=parsed.content_hash,
                row_count=parsed.rows,
                topic_count=parsed.topics,
                source=str(path),
            )
            session.add(run)
            session.flush()
            repo.insert_run_rows(session, run.id, staged, parsed.counts, progress)
            return Registered(run_summary(run), True, warnings)


def list_runs(engine: Engine, meta: dict[str, str] | None = None) -> list[Summary]:
    """The runs, or those holding every KEY=VALUE of ``meta`` (:func:`matches_meta`)."""
    with read_only(engine) as session:
        return [run_summary(run) for run in repo.list_runs(session) if not meta or matches_meta(run, meta)]


def show_run(engine: Engine, name: str) -> Summary:
    with read_only(engine) as session:
        return run_summary(repo.get_run(session, name))


def delete_run(engine: Engine, name: str) -> Summary:
    with unit_of_work(engine) as session:
        run = repo.get_run(session, name)
        summary = run_summary(run)
        repo.delete_run(session, run)
        return summary


def run_rows(engine: Engine, name: str) -> tuple[Summary, pa.Table]:
    with read_only(engine) as session:
        run = repo.get_run(session, name)
        return run_summary(run), repo.run_table(session, run)
