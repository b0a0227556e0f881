"""Every upload format under every bound: a field too long is refused whatever the Arrow type
(dictionary, view, large, binary, nested, chunked) or CSV quoting carries it, and a file that
inflates far more than real runs and qrels do (gzip of whitespace or blank lines, a Parquet
column that decompresses to a 32 MiB docno) is refused while it inflates, with memory that does
not grow with what it would have inflated to."""

from __future__ import annotations

import gzip
import io
import subprocess
import sys
import time
import tracemalloc
import zlib
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from evalstore.errors import InputFormatError
from evalstore.io import labels, tables
from evalstore.io.limits import Bounds, copy_bounded
from tests.http.conftest import World, client_for, run_text

FIELD_REFUSAL = (
    "column 'docno' holds a field longer than this server's limit of 4096 bytes (a docno, topic id, tag or label)"
)
RATIO_REFUSAL = (
    "inflates to more than 100 times its size; this server refuses such files (real runs and "
    "qrels inflate less than 10 times): remove the repeated or blank content."
)


def _runs(world: World) -> int:
    with world.engine.connect() as connection:
        return len(connection.exec_driver_sql("SELECT id FROM runs").fetchall())


def _post(world: World, content: bytes, name: str, filename: str, **settings: Any) -> Any:
    with client_for(world.engine, **settings) as client:
        return client.post(
            "/api/v1/tasks/open/runs",
            headers=world.headers("red"),
            data={"name": name},
            files={"file": (filename, content)},
        )


def _docs_with_a_long_one() -> list[str]:
    docs = [f"d{i}" for i in range(30)]
    docs[17] = "x" * 5000
    return docs


def _typed(kind: str) -> pa.Array | pa.ChunkedArray:
    docs = _docs_with_a_long_one()
    raw = [d.encode() for d in docs]
    return {
        "dictionary": lambda: pa.array(docs).dictionary_encode(),
        "string_view": lambda: pa.array(docs, pa.string_view()),
        "binary_view": lambda: pa.array(raw, pa.binary_view()),
        "large_string": lambda: pa.array(docs, pa.large_string()),
        "binary": lambda: pa.array(raw, pa.binary()),
        "large_binary": lambda: pa.array(raw, pa.large_binary()),
        "list": lambda: pa.array([[d] for d in docs]),
        "struct": lambda: pa.array([{"id": d} for d in docs]),
        "chunked dictionary": lambda: pa.chunked_array(
            [pa.array(docs[:10]).dictionary_encode(), pa.array(docs[10:]).dictionary_encode()]
        ),
    }[kind]()


def _parquet_of(docno: pa.Array | pa.ChunkedArray, *, row_group: int | None = None) -> bytes:
    rows = len(docno)
    table = pa.table(
        {
            "qid": [str(301 + i % 3) for i in range(rows)],
            "docno": docno,
            "rank": list(range(1, rows + 1)),
            "score": [float(rows - i) for i in range(rows)],
        }
    )
    out = io.BytesIO()
    pq.write_table(table, out, compression="zstd", row_group_size=row_group)
    return out.getvalue()


@pytest.mark.parametrize(
    "kind",
    [
        "dictionary",
        "string_view",
        "binary_view",
        "large_string",
        "binary",
        "large_binary",
        "list",
        "struct",
        "chunked dictionary",
    ],
)
def test_a_long_docno_is_refused_whatever_its_parquet_type(world: World, kind: str) -> None:
    """Dictionary and view types skipped the field check: the docno was stored."""
    content = _parquet_of(_typed(kind), row_group=10 if kind.startswith("chunked") else None)
    before = _runs(world)
    response = _post(world, content, f"typed-{kind.replace(' ', '-')}", "run.parquet")
    assert response.status_code == 422, response.text
    assert response.json()["error"] == f"run.parquet: row 18: {FIELD_REFUSAL}"
    assert _runs(world) == before


def test_a_gzipped_parquet_with_a_dictionary_docno_is_refused(world: World) -> None:
    content = gzip.compress(_parquet_of(_typed("dictionary")))
    response = _post(world, content, "typed-gz", "run.parquet.gz")
    assert response.status_code == 422, response.text
    assert response.json()["error"] == f"run.parquet.gz: row 18: {FIELD_REFUSAL}"


def test_a_quoted_csv_field_is_bounded_as_decoded(world: World) -> None:
    """The line check splits at commas and spaces, which a quoted CSV field may hold: 6000 bytes
    in pieces of 99 passed it and were stored."""
    long = " ".join(["y" * 99] * 60)
    lines = ["qid,docno,score", "301,a,3.0", f'301,"{long}",2.0', "302,b,1.0"]
    before = _runs(world)
    response = _post(world, ("\n".join(lines) + "\n").encode(), "quoted", "run.csv")
    assert response.status_code == 422, response.text
    assert response.json()["error"] == f"run.csv:3: {FIELD_REFUSAL}"
    assert _runs(world) == before


def test_every_table_reader_bounds_its_fields(tmp_path: Path) -> None:
    """The readers of qrels (CSV) and gold labels (Parquet) apply the same bound: the CLI's files
    too."""
    qrels = tmp_path / "qrels.tsv"
    qrels.write_text("qid\tdocno\trel\n301\td1\t1\n301\t" + "z" * 5000 + "\t0\n")
    with pytest.raises(InputFormatError) as raised:
        tables.parse_table(qrels, "tsv", "qrels")
    assert str(raised.value) == f"{qrels}:3: {FIELD_REFUSAL}"
    gold = tmp_path / "gold.parquet"
    pq.write_table(pa.table({"item_id": pa.array(["a", "b" * 5000]).dictionary_encode(), "label": ["x", "y"]}), gold)
    with pytest.raises(InputFormatError) as raised:
        labels.read_table_file(gold, "gold labels")
    assert str(raised.value) == (
        f"{gold}: row 2: column 'item_id' holds a field longer than this server's limit of 4096 bytes "
        "(a docno, topic id, tag or label)"
    )


def test_a_parquet_docno_that_decompresses_to_32_mib_is_refused_from_the_footer(tmp_path: Path) -> None:
    """One dictionary entry of 32 MiB in a file of a few KB (the issue's was 200 MB in 7.5 KB):
    refused before a page is decoded, the Arrow memory of a fresh process that checks it
    measured (before: the whole docno decoded, and stored)."""
    path = tmp_path / "bomb.parquet"
    docno = pa.DictionaryArray.from_arrays(pa.array([0, 0, 0], pa.int32()), pa.array(["u" * 32 * 2**20]))
    path.write_bytes(_parquet_of(docno))
    assert path.stat().st_size < 16 * 2**10
    probe = (
        "import sys, pyarrow as pa\n"
        "from pathlib import Path\n"
        "from evalstore.errors import EvalstoreError\n"
        "from evalstore.io.limits import Bounds, check_parquet\n"
        "try:\n"
        "    check_parquet(Path(sys.argv[1]), Bounds(2**30), 'bomb.parquet')\n"
        "    print(pa.default_memory_pool().max_memory(), 'accepted')\n"
        "except EvalstoreError as error:\n"
        "    print(pa.default_memory_pool().max_memory(), error)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe, str(path)], capture_output=True, text=True, check=True)
    peak, message = done.stdout.strip().split(" ", 1)
    assert message == f"bomb.parquet {RATIO_REFUSAL}", done.stdout
    assert int(peak) < 2**20, f"peak Arrow memory {int(peak) / 2**20:.1f} MiB"


def _whitespace_bomb(mebibytes: int, piece: bytes) -> bytes:
    deflate = zlib.compressobj(9, wbits=16 + zlib.MAX_WBITS)
    block = piece * (2**20 // len(piece))
    return b"".join(deflate.compress(block) for _ in range(mebibytes)) + deflate.flush()


@pytest.mark.parametrize(("what", "piece"), [("spaces", b" " * 63 + b"\n"), ("blank lines", b"\n")])
def test_a_gzip_of_whitespace_is_refused_early_with_bounded_memory(world: World, what: str, piece: bytes) -> None:
    """Within the default limits (1 GiB inflated), 64 MiB of whitespace from a ~64 KiB upload:
    refused by its ratio after a few MiB, never read whole (before: inflated to disk, then read
    into memory whole by the reader, and refused at the end)."""
    bomb = _whitespace_bomb(64, piece)
    assert len(bomb) < 256 * 2**10
    before = _runs(world)
    with client_for(world.engine) as client:
        tracemalloc.start()
        started = time.perf_counter()
        response = client.post(
            "/api/v1/tasks/open/runs",
            headers=world.headers("red"),
            data={"name": "whitespace"},
            files={"file": ("run.txt.gz", bomb)},
        )
        seconds = time.perf_counter() - started
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert response.status_code == 413, response.text
    assert response.json()["error"] == f"run.txt.gz {RATIO_REFUSAL}"
    assert peak < 12 * 2**20, f"{what}: peak {peak / 2**20:.1f} MiB"
    assert seconds < 5, seconds
    assert _runs(world) == before


def test_real_runs_pass_the_ratio_and_multi_member_gzip_counts_each_member_once() -> None:
    """A run of repeated, sorted lines (more regular than any real run) inflates ~15 times: kept."""
    text = "".join(f"{301 + i // 1000} Q0 doc{i:07d} {i % 1000 + 1} {1000 - i % 1000}.0 run\n" for i in range(60_000))
    packed = gzip.compress(text.encode()[: len(text) // 2], 9) + gzip.compress(text.encode()[len(text) // 2 :], 9)
    assert len(text) / len(packed) < 25
    out = io.BytesIO()
    assert copy_bounded(io.BytesIO(packed), out, Bounds(2**30), "run.txt.gz") is True
    assert out.getvalue() == text.encode()


def test_a_valid_gzipped_run_is_still_stored(world: World) -> None:
    response = _post(world, gzip.compress(run_text(tag="gz").encode()), "gz-run", "run.txt.gz")
    assert response.status_code == 201, response.text
