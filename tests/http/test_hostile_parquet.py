"""Bounded Parquet uploads: a Parquet file is bounded by what it decodes to, not by its bytes
(dictionary and run-length encoding let a few kilobytes stand for millions of rows): its rows,
its uncompressed size and its text fields are checked before any reader loads it whole, with
the limit named (413 or 422) and nothing stored."""

from __future__ import annotations

import gzip
import io
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from evalstore.errors import InputFormatError, LimitExceeded
from evalstore.io import limits
from evalstore.io.limits import MIN_ROW_BYTES, Bounds
from tests.http.conftest import World, client_for, run_text


def _parquet(rows: int, *, doc: Any = None, dictionary: bool = True, row_group: int | None = None) -> bytes:
    """A run of ``rows`` rows over three topics, as Parquet (zstd)."""
    docs = doc if doc is not None else [f"d{i}" for i in range(rows)]
    table = pa.table(
        {
            "qid": [str(301 + i % 3) for i in range(rows)],
            "docno": docs,
            "rank": list(range(1, rows + 1)),
            "score": [float(rows - i) for i in range(rows)],
        }
    )
    out = io.BytesIO()
    pq.write_table(table, out, compression="zstd", use_dictionary=dictionary, row_group_size=row_group or rows)
    return out.getvalue()


def _constant(rows: int) -> bytes:
    """``rows`` equal rows: each column one dictionary entry and one run-length run."""
    table = pa.table(
        {
            "qid": pa.array(["301"] * rows),
            "docno": pa.array(["same"] * rows),
            "rank": pa.array([1] * rows),
            "score": pa.array([1.0] * rows),
        }
    )
    out = io.BytesIO()
    pq.write_table(table, out, compression="zstd")
    return out.getvalue()


def _post(world: World, content: bytes, name: str, *, limit_mib: float = 1024, filename: str = "run.parquet") -> Any:
    with client_for(world.engine, max_inflated_bytes=int(limit_mib * 2**20)) as client:
        return client.post(
            "/api/v1/tasks/open/runs",
            headers=world.headers("red"),
            data={"name": name},
            files={"file": (filename, content)},
        )


def _runs(world: World) -> int:
    with world.engine.connect() as connection:
        return len(connection.exec_driver_sql("SELECT id FROM runs").fetchall())


def test_a_long_docno_in_parquet_is_refused_naming_row_column_and_limit(world: World) -> None:
    docs = [f"d{i}" for i in range(30)]
    docs[17] = "x" * 5000
    before = _runs(world)
    response = _post(world, _parquet(30, doc=docs), "long-docno")
    assert response.status_code == 422, response.text
    assert response.json()["error"] == (
        "run.parquet: row 18: column 'docno' holds a field longer than this server's limit of 4096 bytes "
        "(a docno, topic id, tag or label)"
    )
    assert _runs(world) == before


def test_rows_that_encode_to_nothing_are_refused_by_their_count(world: World) -> None:
    """200k rows of one docno: run-length encoding makes them a few kilobytes."""
    rows = 200_000
    content = _constant(rows)
    assert len(content) < 16 * 2**10
    started = time.perf_counter()
    response = _post(world, content, "many-rows", limit_mib=1)
    assert response.status_code == 413, response.text
    assert response.json()["error"] == (
        f"run.parquet has {rows} rows; this server takes at most {2**20 // MIN_ROW_BYTES} "
        f"({MIN_ROW_BYTES} bytes a row within its limit of 1 MiB); split it."
    )
    assert time.perf_counter() - started < 5


def test_a_huge_row_group_is_refused_by_its_uncompressed_size(world: World) -> None:
    """600 rows of near-4 KiB docnos in one row group: 2.4 MB uncompressed, a few KB with zstd."""
    content = _parquet(600, doc=[("d" * 4000) + str(i) for i in range(600)], dictionary=False)
    assert len(content) < 256 * 2**10
    response = _post(world, content, "big-group", limit_mib=1)
    assert response.status_code == 413, response.text
    assert response.json()["error"] == "run.parquet inflates to more than this server's limit of 1 MiB; split it."


def test_decoding_is_bounded_whatever_the_metadata_says(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The decoded batches are counted too, one batch in memory at a time: with the rows' bound
    lifted, 200k constant rows (uncompressed: a few KB) still stop at the inflated limit."""
    monkeypatch.setattr(limits, "MIN_ROW_BYTES", 1)
    path = tmp_path / "run.parquet"
    path.write_bytes(_constant(200_000))
    limits.check_parquet(path, Bounds(64 * 2**20), "run.parquet")  # within bounds: nothing said
    with pytest.raises(LimitExceeded, match=r"^run.parquet decodes to more than this server's limit of 1 MiB"):
        limits.check_parquet(path, Bounds(2**20), "run.parquet")


def test_a_valid_parquet_run_and_a_gzipped_one_are_stored(world: World) -> None:
    rows = [line.split() for line in run_text(tag="pq").splitlines()]
    table = pa.table(
        {
            "qid": [r[0] for r in rows],
            "docno": [r[2] for r in rows],
            "rank": [int(r[3]) for r in rows],
            "score": [float(r[4]) for r in rows],
        }
    )
    out = io.BytesIO()
    pq.write_table(table, out)
    assert _post(world, out.getvalue(), "pq-run").status_code == 201
    shifted = table.set_column(3, "score", pa.array([s + 1.0 for s in table["score"].to_pylist()]))
    out = io.BytesIO()
    pq.write_table(shifted, out)
    response = _post(world, gzip.compress(out.getvalue()), "pq-gz-run", filename="run.parquet.gz")
    assert response.status_code == 201, response.text


def test_columns_and_row_groups_are_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    wide = tmp_path / "wide.parquet"
    pq.write_table(pa.table({f"c{i}": [1] for i in range(65)}), wide)
    with pytest.raises(InputFormatError, match=r"^wide.parquet: has 65 columns; this server reads at most 64$"):
        limits.check_parquet(wide, Bounds(2**30), "wide.parquet")
    monkeypatch.setattr(limits, "MAX_PARQUET_ROW_GROUPS", 3)
    grouped = tmp_path / "grouped.parquet"
    grouped.write_bytes(_parquet(40, row_group=10))
    with pytest.raises(InputFormatError, match=r"^grouped.parquet: has 4 row groups; this server reads at most 3$"):
        limits.check_parquet(grouped, Bounds(2**30), "grouped.parquet")


def test_the_row_bomb_is_refused_with_bounded_memory(tmp_path: Path) -> None:
    """5M equal rows (~140 MB decoded) in a file of a few hundred KB: refused from its footer, the
    Arrow memory of a fresh process that checks it measured (reading it whole took all 140 MB)."""
    path = tmp_path / "bomb.parquet"
    batch = pa.table(
        {
            "qid": pa.repeat("301", 100_000),
            "docno": pa.repeat("same", 100_000),
            "rank": pa.repeat(1, 100_000),
            "score": pa.repeat(1.0, 100_000),
        }
    )
    with pq.ParquetWriter(path, batch.schema, compression="zstd") as writer:
        for _ in range(50):
            writer.write_table(batch)
    assert path.stat().st_size < 2**20
    probe = (
        "import sys, pyarrow as pa\n"
        "from pathlib import Path\n"
        "from evalstore.errors import LimitExceeded\n"
        "from evalstore.io.limits import Bounds, check_parquet\n"
        "try:\n"
        "    check_parquet(Path(sys.argv[1]), Bounds(16 * 2**20), 'bomb.parquet')\n"
        "except LimitExceeded as error:\n"
        "    print(pa.default_memory_pool().max_memory(), error)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe, str(path)], capture_output=True, text=True, check=True)
    peak, message = done.stdout.split(" ", 1)
    assert message.startswith("bomb.parquet has 5000000 rows; this server takes at most 524288"), done.stdout
    assert int(peak) < 4 * 2**20, f"peak Arrow memory {int(peak) / 2**20:.1f} MiB"
