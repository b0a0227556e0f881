"""What a run says about how it was made: the ``--meta KEY=VALUE`` pairs and a TREC run file's
ir_metadata block (evalstore.io.ir_metadata), kept whole under the run's ``ir_metadata`` key and
searchable by dotted key."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import Engine

from evalstore.db import repositories as repo
from evalstore.db.models import Run
from evalstore.db.session import read_only
from evalstore.errors import InvalidParameterError, Remedy
from evalstore.io.formats import detect_format
from evalstore.io.ir_metadata import METADATA_KEY as IR_METADATA
from evalstore.io.ir_metadata import matches as ir_metadata_matches
from evalstore.io.ir_metadata import parse_block, read_ir_metadata


def read_block(path: str | Path, fmt: str | None) -> str | None:
    """A TREC run file's ir_metadata block as written (None: it has none); a broken block raises
    ``path:line`` before anything is stored."""
    if detect_format(Path(path), fmt) != "trec":
        return None
    block = read_ir_metadata(path)
    return block.block if block is not None else None


def with_ir_metadata(metadata: dict[str, Any] | None, block: str | None) -> dict[str, Any]:
    """The ``--meta`` pairs, and the file's ir_metadata block under ``ir_metadata``."""
    meta: dict[str, Any] = dict(metadata or {})
    if IR_METADATA in meta:
        raise InvalidParameterError(
            f"The metadata key '{IR_METADATA}' is reserved for a run file's ir_metadata block.",
            remedy=Remedy(cli="Choose another key for --meta.", web="Choose another key."),
        )
    if block is not None:
        meta[IR_METADATA] = block
    return meta


def run_metadata(path: str | Path, metadata: dict[str, Any] | None, fmt: str | None) -> dict[str, Any]:
    """:func:`with_ir_metadata` of the file at ``path``."""
    return with_ir_metadata(metadata, read_block(path, fmt))


def matches_meta(run: Run, wanted: dict[str, str]) -> bool:
    """Whether a run has every KEY=VALUE of ``wanted``: in its --meta pairs, or at the dotted key of
    its ir_metadata block (``platform.software.libraries=...``; ``ir_metadata.`` in front optional)."""
    stored = dict(run.metadata_ or {})
    block = stored.get(IR_METADATA)
    parsed = parse_block(block).data if isinstance(block, str) else {}
    return all(
        stored.get(key) == value if key in stored and key != IR_METADATA else ir_metadata_matches(parsed, key, value)
        for key, value in wanted.items()
    )


def ir_metadata_of(engine: Engine, name: str) -> dict[str, str]:
    """The run file's ir_metadata block as dotted keys and texts (empty: the file had none)."""
    with read_only(engine) as session:
        block = dict(repo.get_run(session, name).metadata_ or {}).get(IR_METADATA)
    return parse_block(block).flat() if isinstance(block, str) else {}
