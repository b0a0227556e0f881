"""Bounded inputs: a gzip bomb is stopped while it inflates (413), a huge docno is refused before
any transaction (422 naming the line and the limit), names are validated. Peak memory and the
time spent are measured, not assumed."""

from __future__ import annotations

import gzip
import io
import time
import tracemalloc
import zlib

import pytest
from fastapi.testclient import TestClient

from evalstore.io import limits
from evalstore.io.limits import Bounds, copy_bounded
from tests.http.conftest import World, client_for, run_text


def _runs_of_open(world: World) -> int:
    with world.engine.connect() as connection:
        return len(connection.exec_driver_sql("SELECT id FROM runs").fetchall())


def _bomb(mebibytes: int) -> bytes:
    """A valid run's line repeated to ``mebibytes`` MiB, gzip-compressed (~1 MiB), made in pieces so
    the test itself never holds it inflated."""
    deflate = zlib.compressobj(9, wbits=16 + zlib.MAX_WBITS)
    piece = b"301 Q0 doc 1 1.0 r\n" * (2**20 // 19)
    return b"".join(deflate.compress(piece) for _ in range(mebibytes)) + deflate.flush()


def test_a_gzip_bomb_is_stopped_at_the_inflated_limit_with_bounded_memory(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The inflated limit alone (the ratio check, which refuses this bomb sooner, lifted)."""
    monkeypatch.setattr(limits, "MAX_INFLATE_RATIO", 10**9)
    bomb = _bomb(64)  # four times the limit: the whole of it inflated would pass the memory bound
    assert len(bomb) < 2 * 2**20
    before = _runs_of_open(world)
    with client_for(world.engine, max_inflated_bytes=16 * 2**20) as client:
        tracemalloc.start()
        started = time.perf_counter()
        response = client.post(
            "/api/v1/tasks/open/runs",
            headers=world.headers("red"),
            data={"name": "bomb"},
            files={"file": ("bomb.txt.gz", bomb)},
        )
        seconds = time.perf_counter() - started
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert response.status_code == 413, response.text
    assert response.json()["error"] == "bomb.txt.gz inflates to more than this server's limit of 16 MiB; split it."
    assert peak < 24 * 2**20, f"peak {peak / 2**20:.1f} MiB"  # before: the whole file inflated in memory (64 MiB)
    assert seconds < 30
    assert _runs_of_open(world) == before


def test_a_huge_docno_is_refused_before_any_transaction(world: World, client: TestClient) -> None:
    text = run_text(tag="big")
    lines = text.splitlines()
    topic, q0, _, rank, score, tag = lines[2].split()
    lines[2] = " ".join((topic, q0, "d" * 4 * 2**20, rank, score, tag))
    upload = gzip.compress(("\n".join(lines) + "\n").encode(), 9)
    assert len(upload) < 64 * 2**10
    before = _runs_of_open(world)
    started = time.perf_counter()
    response = client.post(
        "/api/v1/tasks/open/runs",
        headers=world.headers("red"),
        data={"name": "big-docno"},
        files={"file": ("big.txt.gz", upload)},
    )
    seconds = time.perf_counter() - started
    assert response.status_code == 422, response.text
    assert response.json()["error"] == ("big.txt.gz:3: a line is longer than this server's limit of 16384 bytes")
    assert seconds < 5, seconds  # before: 14-45 s of hashing inside the storing transaction
    assert _runs_of_open(world) == before


def test_a_long_field_in_a_short_enough_line_is_named() -> None:
    with pytest.raises(
        Exception,
        match=r"^run.txt:2: a field \(a docno, topic id, tag or label\) is longer than "
        r"this server's limit of 4096 bytes$",
    ):
        copy_bounded(
            io.BytesIO(b"301 Q0 d 1 1 r\n301 Q0 " + b"x" * 5000 + b" 2 1 r\n"), io.BytesIO(), Bounds(2**30), "run.txt"
        )


@pytest.mark.parametrize("name", ["a/b", "tab\there", "x" * 201, " "])
def test_run_names_are_printable_bounded_and_slash_free(world: World, client: TestClient, name: str) -> None:
    response = client.post(
        "/api/v1/tasks/open/runs",
        headers=world.headers("red"),
        data={"name": name},
        files={"file": ("run.txt", run_text(tag="n").encode())},
    )
    assert response.status_code == 422, response.text
    if name != "x" * 201:
        assert response.json()["error"] == f"A run's name is 1-200 printable characters without '/'; got {name!r}."


def test_long_descriptions_are_refused_naming_the_limit(world: World, client: TestClient) -> None:
    response = client.post(
        "/api/v1/tasks/open/runs",
        headers=world.headers("red"),
        data={"name": "described", "description": "x" * 4001},
        files={"file": ("run.txt", run_text(tag="d").encode())},
    )
    assert response.status_code == 422
    assert "description: String should have at most 4000 characters" in response.json()["error"]
