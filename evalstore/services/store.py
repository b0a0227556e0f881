"""Registering, listing, exporting and deleting runs and qrels."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import pyarrow as pa
from sqlalchemy import Engine, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from evalstore.db import repositories as repo
from evalstore.db.models import QRELS_KINDS, QrelsSet, Run, Task
from evalstore.db.session import read_only, unit_of_work
from evalstore.db.staging import StagedRows, staged_rows, staged_stream
from evalstore.errors import ConflictError, InputFormatError, InvalidParameterError
from evalstore.io.formats import (
    ParsedFile,
    has_duplicate_docs,
    read_preferences,
    read_qrels,
    read_run,
    read_subtopic_qrels,
)
from evalstore.metrics.preferences import check_consistent

if TYPE_CHECKING:
    from evalstore.backends.duckdb_engine import DuckDBSettings

log = logging.getLogger("evalstore")
Progress = Callable[[int], None]
T = TypeVar("T")


@dataclass(frozen=True)
class Summary:
    """What `list` and `show` report for a run or a qrels set."""

    kind: str
    name: str
    rows: int
    topics: int
    content_hash: str
    created_at: datetime
    details: dict[str, Any]

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "rows": self.rows,
            "topics": self.topics,
            "created_at": self.created_at.isoformat(),
            "content_hash": self.content_hash,
            **self.details,
        }


@dataclass(frozen=True)
class Registered:
    summary: Summary
    created: bool  # False when the same content was already stored
    warnings: tuple[str, ...] = ()


def run_summary(run: Run) -> Summary:
    return Summary(
        "run", run.name, run.row_count, run.topic_count, run.content_hash, run.created_at,
        {"system": run.system, "tag": run.tag, "description": run.description,
         "metadata": dict(run.metadata_ or {}), "source": run.source},
    )


def _qrels_summary(qrels: QrelsSet) -> Summary:
    return Summary(
        "qrels", qrels.name, qrels.row_count, qrels.topic_count, qrels.content_hash, qrels.created_at,
        {"kind": qrels.kind, "description": qrels.description, "source": qrels.source},
    )


NAME_SOURCES = ("file", "tag")
_COMPRESSED = (".gz", ".bz2", ".xz")
_TABLE_SUFFIXES = (".txt", ".run", ".trec", ".tsv", ".csv", ".parquet", ".res", ".qrels")


def name_from_file(path: str | Path) -> str:
    """A run's name from its file name: ``input.bm25.gz`` -> ``bm25`` (compression and table
    suffixes dropped, and TREC's ``input.`` prefix of submitted runs)."""
    name = Path(path).name
    for suffixes in (_COMPRESSED, _TABLE_SUFFIXES):
        name = next((name[: -len(s)] for s in suffixes if name.lower().endswith(s) and len(name) > len(s)), name)
    return name.removeprefix("input.") or name


def _refuse(errors: list[InputFormatError], files: int) -> None:
    """Refuse a batch with a bad file: every bad file's ``path:line: problem``, one per line."""
    if len(errors) == 1 and files == 1:
        raise errors[0]
    if errors:
        first, *rest = errors
        summary = f"nothing stored: {len(errors)} of {files} files refused"
        raise InputFormatError(first.path, first.line, "\n".join([first.problem, *(str(e) for e in rest), summary]))


def _refuse_repeated(names: list[str], message: str) -> None:
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise InvalidParameterError(message.format(name=repeated[0]))


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
        raise InvalidParameterError(f"--name-from must be file or tag, not '{name_from}'.")
    if names is not None and len(names) != len(paths):
        raise InvalidParameterError(f"{len(names)} names for {len(paths)} files; give one name per file.")
    if len(paths) == 1 and (names is not None or name_from == "file"):
        # one file, its name known: register_run validates it whole before storing anything, and a
        # separate validation pass would parse a 7M-row run twice
        name = names[0] if names is not None else name_from_file(paths[0])
        if on_file is not None:
            on_file(0, name)
        return [register_run(engine, paths[0], name=name, system=system, metadata=metadata, description=description,
                             replace=replace, fmt=fmt, progress=progress)]
    # Several files: all are parsed and validated first, then each is parsed again as it is
    # stored. Keeping the parsed tables between the two passes would hold every run of the batch in
    # memory at once (10 MS MARCO-sized runs: ~12 GB); parsing twice costs time, not memory.
    errors: list[InputFormatError] = []
    chosen: list[str] = []
    for index, path in enumerate(paths):
        try:
            parsed = read_run(path, fmt=fmt, content_hash=False)
        except InputFormatError as error:
            errors.append(error)
            continue
        if names is not None:
            chosen.append(names[index])
        elif name_from == "tag":
            if not parsed.tag:
                errors.append(InputFormatError(str(path), None, "no run tag to name the run after (a CSV, TSV or "
                                                                "Parquet run has none); use --name-from file"))
                continue
            chosen.append(parsed.tag)
        else:
            chosen.append(name_from_file(path))
    _refuse(errors, len(paths))
    other = "file" if name_from == "tag" else "tag"
    _refuse_repeated(chosen, f"Two files would be registered as '{{name}}'; register them with --name-from {other}, "
                             "or one at a time with --name.")
    registered = []
    for index, (path, name) in enumerate(zip(paths, chosen, strict=True)):
        if on_file is not None:
            on_file(index, name)
        registered.append(register_run(engine, path, name=name, system=system, metadata=metadata,
                                       description=description, replace=replace, fmt=fmt, progress=progress))
    return registered


def register_run(
    engine: Engine,
    path: str | Path,
    *,
    name: str,
    system: str | None = None,
    metadata: dict[str, str] | None = None,
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
        return _register_run_out_of_core(engine, Path(path), name=name, system=system, metadata=metadata,
                                         description=description, replace=replace, progress=progress,
                                         settings=duckdb_settings)
    if backend != "local":
        raise InvalidParameterError(f"--backend must be local or duckdb, not '{backend}'.")
    parsed = read_run(path, fmt=fmt, check_duplicates=False)  # checked below, alongside storing
    with read_only(engine) as session:  # the same content again: report it without staging the rows
        existing = repo.find_run(session, name)
    if existing is not None and existing.content_hash == parsed.content_hash:
        return Registered(run_summary(existing), False, parsed.warnings)
    with prepare_run(engine, path, fmt=fmt, parsed=parsed) as prepared:

        def store() -> Registered:
            with run_unit_of_work(engine, prepared) as session:
                return add_run(session, prepared, name=name, system=system, metadata=metadata,
                               description=description, replace=replace, progress=progress)

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

    def refuse_duplicates(self) -> None:
        """Raise path:line if a docno repeats within a topic (waits for the check)."""
        if self.duplicates.result():
            read_run(self.path, fmt=self.fmt)  # raises path:line (or the hashes collided: no duplicate)


@contextmanager
def prepare_run(engine: Engine, path: str | Path, *, fmt: str | None = None,
                parsed: ParsedFile | None = None) -> Iterator[PreparedRun]:
    """A step outside any transaction: parse the run file (unless ``parsed``), rank and stage its
    rows; the staged rows are deleted when the block ends."""
    if parsed is None:
        parsed = read_run(path, fmt=fmt, check_duplicates=False)  # checked alongside storing
    # The duplicate-docno check (~1 s for 7M rows) runs on the second core while the rows are
    # ranked and stored.
    with ThreadPoolExecutor(max_workers=1) as pool:
        duplicates = pool.submit(has_duplicate_docs, parsed.table)
        rows, counts = repo.run_rows_to_store(parsed.table)
        with staged_rows(engine, rows) as staged:
            yield PreparedRun(path, fmt, parsed, staged, counts, duplicates)


def run_unit_of_work(engine: Engine, prepared: PreparedRun) -> AbstractContextManager[Session]:
    """The unit of work :func:`add_run` stores ``prepared`` in (on SQLite it attaches the staged
    rows)."""
    return unit_of_work(engine, prepared.staged.attach)


def add_run(session: Session, prepared: PreparedRun, *, name: str, system: str | None = None,
            metadata: dict[str, str] | None = None, description: str | None = None, replace: bool = False,
            progress: Progress | None = None) -> Registered:
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
        name=name, system=system, description=description, metadata_=dict(metadata or {}),
        tag=parsed.tag, content_hash=parsed.content_hash, row_count=parsed.table.num_rows,
        topic_count=parsed.topic_count, source=str(prepared.path),
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


def _replace_run(session: Session, existing: Run | None, name: str, replace: bool,
                 before_refusing: Callable[[], None] = lambda: None) -> tuple[str, ...]:
    """Make room for a run named ``name`` with other content: refused without ``replace``
    (``before_refusing`` first), else the old run goes, with the warning of the evaluations
    that go with it."""
    if existing is None:
        return ()
    if not replace:
        before_refusing()
        raise ConflictError(f"A run named '{name}' already exists with different content (registered "
                            f"{existing.created_at:%Y-%m-%d %H:%M}). Pass --replace to replace it, or choose another "
                            "--name.")
    dropped = repo.count_evaluations(session, run_id=existing.id)
    repo.delete_run(session, existing)
    return (_dropped_message("run", name, dropped),) if dropped else ()


def _register_run_out_of_core(engine: Engine, path: Path, *, name: str, system: str | None,
                              metadata: dict[str, str] | None, description: str | None, replace: bool,
                              progress: Progress | None, settings: DuckDBSettings | None) -> Registered:
    """:func:`register_run` for a run file of any size: DuckDB parses, checks and ranks it in
    bounded memory (evalstore.backends.duckdb_engine.run_to_store), and its rows go to the store
    batch by batch (COPY into the run's partition on PostgreSQL, a scratch database on SQLite),
    still in one transaction. The stored rows, ranks, counts and content hash are those of the
    local path (tests/db/test_store.py holds them equal)."""
    from evalstore.backends.duckdb_engine import DuckDBSettings, run_to_store

    with run_to_store(path, settings or DuckDBSettings(), repo.BATCH_ROWS) as (parsed, reader):
        with read_only(engine) as session:
            existing = repo.find_run(session, name)
        if existing is not None and existing.content_hash == parsed.content_hash:
            return Registered(run_summary(existing), False)
        with staged_stream(engine, reader, parsed.rows) as staged, unit_of_work(engine, staged.attach) as session:
            warnings = _replace_run(session, repo.find_run(session, name), name, replace)
            run = Run(name=name, system=system, description=description, metadata_=dict(metadata or {}),
                      tag=parsed.tag, content_hash=parsed.content_hash, row_count=parsed.rows,
                      topic_count=parsed.topics, source=str(path))
            session.add(run)
            session.flush()
            repo.insert_run_rows(session, run.id, staged, parsed.counts, progress)
            return Registered(run_summary(run), True, warnings)


def import_qrels(
    engine: Engine,
    path: str | Path,
    *,
    name: str,
    description: str | None = None,
    replace: bool = False,
    fmt: str | None = None,
    kind: str = "relevance",
    progress: Progress | None = None,
) -> Registered:
    """Validate a judgments file and store it whole, in one transaction, or not at all. ``kind``:
    ``relevance`` (qrels), ``subtopics`` (``topic subtopic docno judgment``, the TREC Web track's
    diversity qrels) or ``preferences`` (trec_eval's ``-R prefs`` lines ``topic jg jsg docno level``,
    or a qrels file whose second column is the judgment group)."""
    parsed = read_judgments(path, kind=kind, fmt=fmt)
    return store_qrels(engine, parsed, name=name, description=description, source=str(path), replace=replace,
                       kind=kind, progress=progress)


def read_judgments(path: str | Path, *, kind: str = "relevance", fmt: str | None = None) -> ParsedFile:
    """A judgments file of ``kind`` read and validated as :func:`import_qrels` stores it."""
    if kind != "relevance" and fmt not in (None, "trec"):
        raise InvalidParameterError(f"{kind} judgments are read from TREC text only; got --format {fmt}.")
    if kind == "relevance":
        return read_qrels(path, fmt=fmt)
    if kind == "subtopics":
        return read_subtopic_qrels(path)
    if kind == "preferences":
        parsed, preferences = read_preferences(path)
        check_consistent(preferences, str(path))
        return parsed
    raise InvalidParameterError(f"--kind must be one of {', '.join(QRELS_KINDS)}; got '{kind}'.")


def import_many_qrels(engine: Engine, paths: Sequence[str | Path], *, names: Sequence[str] | None = None,
                      description: str | None = None, replace: bool = False, fmt: str | None = None,
                      kind: str = "relevance", progress: Progress | None = None,
                      on_file: Callable[[int, str], None] | None = None) -> list[Registered]:
    """Import several judgments files as :func:`register_runs` registers runs: all read and
    validated first (a bad file stores nothing, every bad file named), then each stored whole in
    its own transaction, named ``names`` or after its file (:func:`name_from_file`)."""
    if names is not None and len(names) != len(paths):
        raise InvalidParameterError(f"{len(names)} names for {len(paths)} files; give one name per file.")
    chosen = list(names) if names is not None else [name_from_file(path) for path in paths]
    parsed: list[ParsedFile] = []
    errors: list[InputFormatError] = []
    for path in paths:
        try:
            parsed.append(read_judgments(path, kind=kind, fmt=fmt))
        except InputFormatError as error:
            errors.append(error)
    _refuse(errors, len(paths))
    _refuse_repeated(chosen, "Two files would be imported as '{name}'; import them one at a time with --name.")
    stored = []
    for index, (path, name, judgments) in enumerate(zip(paths, chosen, parsed, strict=True)):
        if on_file is not None:
            on_file(index, name)
        stored.append(store_qrels(engine, judgments, name=name, description=description, source=str(path),
                                  replace=replace, kind=kind, progress=progress))
    return stored


def store_qrels(
    engine: Engine,
    parsed: ParsedFile,
    *,
    name: str,
    source: str,
    description: str | None = None,
    replace: bool = False,
    kind: str = "relevance",
    progress: Progress | None = None,
) -> Registered:
    """Store validated judgments (from a file, or made from a pool's judgments) under ``name``."""

    def store(staged: StagedRows) -> Registered:
        with unit_of_work(engine, staged.attach) as session:
            existing = repo.find_qrels(session, name)
            if existing is not None and existing.content_hash == parsed.content_hash and existing.kind == kind:
                return Registered(_qrels_summary(existing), False, parsed.warnings)
            if existing is not None and not replace:
                what = "different content" if existing.kind == kind else f"{existing.kind} judgments"
                raise ConflictError(
                    f"Qrels named '{name}' already exist with {what} "
                    f"(imported {existing.created_at:%Y-%m-%d %H:%M}). "
                    "Pass --replace to replace them, or choose another --name."
                )
            warnings = parsed.warnings
            if existing is not None:
                dropped = repo.count_evaluations(session, qrels_id=existing.id)
                if dropped:
                    warnings = (*warnings, _dropped_message("qrels", name, dropped))
                repo.delete_qrels(session, existing)
            qrels = QrelsSet(
                name=name, kind=kind, description=description, content_hash=parsed.content_hash,
                row_count=parsed.table.num_rows, topic_count=parsed.topic_count, source=source,
            )
            session.add(qrels)
            session.flush()
            repo.insert_judgments(session, qrels.id, staged, progress)
            return Registered(_qrels_summary(qrels), True, warnings)

    with staged_rows(engine, repo.judgments_to_store(parsed.table)) as staged:
        return retry_on_name_race(lambda: store(staged))


def _dropped_message(what: str, name: str, count: int) -> str:
    return (f"replacing {what} '{name}' deleted the {count} stored evaluation{'s' if count != 1 else ''} made with "
            f"the old content; evaluate again to have them back")


def retry_on_name_race(store: Callable[[], T]) -> T:
    """Two processes registering one name at once: the loser sees the winner's row and decides
    again (same content: report it; other content: conflict). Nothing partial is ever visible."""
    try:
        return store()
    except IntegrityError:
        return store()


def list_runs(engine: Engine) -> list[Summary]:
    with read_only(engine) as session:
        return [run_summary(run) for run in repo.list_runs(session)]


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


def list_qrels(engine: Engine) -> list[Summary]:
    with read_only(engine) as session:
        return [_qrels_summary(q) for q in repo.list_qrels(session)]


def show_qrels(engine: Engine, name: str) -> Summary:
    with read_only(engine) as session:
        return _qrels_summary(repo.get_qrels(session, name))


def delete_qrels(engine: Engine, name: str) -> Summary:
    with unit_of_work(engine) as session:
        qrels = repo.get_qrels(session, name)
        tasks = session.scalars(select(Task.name).where(Task.qrels_id == qrels.id)).all()
        if tasks:
            raise ConflictError(f"Qrels '{name}' are the judgments of task '{tasks[0]}'; they stay while the task "
                                "does.")
        summary = _qrels_summary(qrels)
        repo.delete_qrels(session, qrels)
        return summary


def qrels_rows(engine: Engine, name: str) -> tuple[Summary, pa.Table]:
    with read_only(engine) as session:
        qrels = repo.get_qrels(session, name)
        return _qrels_summary(qrels), repo.qrels_table(session, qrels)
