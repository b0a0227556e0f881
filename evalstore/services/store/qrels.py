"""Judgments in the store (relevance qrels, subtopic qrels, preferences): importing, listing, exporting
and deleting them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import pyarrow as pa
from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from evalstore.db import repositories as repo
from evalstore.db.models import QRELS_KINDS, QrelsSet, Task
from evalstore.db.session import read_only, unit_of_work
from evalstore.db.staging import StagedRows, staged_rows
from evalstore.errors import ConflictError, InputFormatError, InvalidParameterError, Remedy, replace_or_rename
from evalstore.io.formats import (
    ParsedFile,
    read_preferences,
    read_qrels,
    read_subtopic_qrels,
)
from evalstore.metrics.preferences import check_consistent
from evalstore.services.store.common import (
    Progress,
    Registered,
    Summary,
    dropped_message,
    name_from_file,
    qrels_summary,
    refuse,
    refuse_repeated,
    retry_on_name_race,
)
from evalstore.times import utc_text


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
    return store_qrels(
        engine,
        parsed,
        name=name,
        description=description,
        source=str(path),
        replace=replace,
        kind=kind,
        progress=progress,
    )


def read_judgments(path: str | Path, *, kind: str = "relevance", fmt: str | None = None) -> ParsedFile:
    """A judgments file of ``kind`` read and validated as :func:`import_qrels` stores it."""
    if kind != "relevance" and fmt not in (None, "trec"):
        raise InvalidParameterError(
            f"{kind} judgments are read from TREC text only, not {fmt}.", remedy=Remedy(cli="Leave --format out.")
        )
    if kind == "relevance":
        return read_qrels(path, fmt=fmt)
    if kind == "subtopics":
        return read_subtopic_qrels(path)
    if kind == "preferences":
        parsed, preferences = read_preferences(path)
        check_consistent(preferences, str(path))
        return parsed
    raise InvalidParameterError(
        f"Judgments are of kind {', '.join(QRELS_KINDS)}; not '{kind}'.", remedy=Remedy(cli="Choose one with --kind.")
    )


def import_many_qrels(
    engine: Engine,
    paths: Sequence[str | Path],
    *,
    names: Sequence[str] | None = None,
    description: str | None = None,
    replace: bool = False,
    fmt: str | None = None,
    kind: str = "relevance",
    progress: Progress | None = None,
    on_file: Callable[[int, str], None] | None = None,
) -> list[Registered]:
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
    refuse(errors, len(paths))
    refuse_repeated(
        chosen, "Two files would be imported as '{name}'.", Remedy(cli="Import them one at a time with --name.")
    )
    stored = []
    for index, (path, name, judgments) in enumerate(zip(paths, chosen, parsed, strict=True)):
        if on_file is not None:
            on_file(index, name)
        stored.append(
            store_qrels(
                engine,
                judgments,
                name=name,
                description=description,
                source=str(path),
                replace=replace,
                kind=kind,
                progress=progress,
            )
        )
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
            return add_qrels(
                session,
                staged,
                parsed,
                name=name,
                source=source,
                description=description,
                replace=replace,
                kind=kind,
                progress=progress,
            )

    with staged_rows(engine, repo.judgments_to_store(parsed.table)) as staged:
        return retry_on_name_race(lambda: store(staged))


def add_qrels(
    session: Session,
    staged: StagedRows,
    parsed: ParsedFile,
    *,
    name: str,
    source: str,
    description: str | None = None,
    replace: bool = False,
    kind: str = "relevance",
    progress: Progress | None = None,
) -> Registered:
    """The step of :func:`store_qrels`: the qrels row and its judgments added in the caller's unit
    of work (opened with ``staged.attach``), so that what else the caller stores with them (a qrels
    version's row) commits with them or not at all."""
    existing = repo.find_qrels(session, name)
    if existing is not None and existing.content_hash == parsed.content_hash and existing.kind == kind:
        return Registered(qrels_summary(existing), False, parsed.warnings)
    if existing is not None and not replace:
        what = "different content" if existing.kind == kind else f"{existing.kind} judgments"
        raise ConflictError(
            f"Qrels named '{name}' already exist with {what} (imported {utc_text(existing.created_at)}).",
            remedy=replace_or_rename("them"),
        )
    warnings = parsed.warnings
    if existing is not None:
        dropped = repo.count_evaluations(session, qrels_id=existing.id)
        if dropped:
            warnings = (*warnings, dropped_message("qrels", name, dropped))
        repo.delete_qrels(session, existing)
    qrels = QrelsSet(
        name=name,
        kind=kind,
        description=description,
        content_hash=parsed.content_hash,
        row_count=parsed.table.num_rows,
        topic_count=parsed.topic_count,
        source=source,
    )
    session.add(qrels)
    session.flush()
    repo.insert_judgments(session, qrels.id, staged, progress)
    return Registered(qrels_summary(qrels), True, warnings)


def list_qrels(engine: Engine) -> list[Summary]:
    with read_only(engine) as session:
        return [qrels_summary(q) for q in repo.list_qrels(session)]


def show_qrels(engine: Engine, name: str) -> Summary:
    with read_only(engine) as session:
        return qrels_summary(repo.get_qrels(session, name))


def delete_qrels(engine: Engine, name: str) -> Summary:
    with unit_of_work(engine) as session:
        qrels = repo.get_qrels(session, name, latest=False)  # a deletion names what it deletes
        tasks = session.scalars(select(Task.name).where(Task.qrels_id == qrels.id)).all()
        if tasks:
            raise ConflictError(
                f"Qrels '{name}' are the judgments of task '{tasks[0]}'; they stay while the task does."
            )
        summary = qrels_summary(qrels)
        repo.delete_qrels(session, qrels)
        return summary


def qrels_rows(engine: Engine, name: str) -> tuple[Summary, pa.Table]:
    with read_only(engine) as session:
        qrels = repo.get_qrels(session, name)
        return qrels_summary(qrels), repo.qrels_table(session, qrels)
