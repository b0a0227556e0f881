"""Hashing docnos costs time linear in their bytes: one 4 MB docno in a 4,000-row run cost
O(rows x length / 8) numpy passes before (a 1 MB one took 71 s on a loaded 2-core machine, all
inside the storing transaction); now its bytes past the first 256 are hashed once."""

from __future__ import annotations

import time

import pyarrow as pa

from evalstore.io.hashing import doc_hashes, pair_hashes


def _docs(long_doc: str) -> pa.ChunkedArray:
    docs = [f"doc{i}" for i in range(4000)]
    docs[7] = long_doc
    return pa.chunked_array([pa.array(docs)])


def test_one_huge_docno_costs_time_linear_in_its_bytes() -> None:
    started = time.perf_counter()
    hashes = doc_hashes(_docs("d" * (4 * 2**20)))
    seconds = time.perf_counter() - started
    assert seconds < 3.0, f"{seconds:.2f} s"  # measured 0.2-0.4 s here; before: minutes
    assert len(set(hashes.tolist())) == 4000


def test_long_docnos_hash_by_their_whole_bytes() -> None:
    base = "x" * 300
    [a, b, c, d] = doc_hashes(pa.chunked_array([pa.array([base + "1", base + "2", base + "1", base[:299] + "y1"])]))
    assert a == c and a != b and a != d
    topics = pa.chunked_array([pa.array(["1", "1", "2"])])
    keys = pair_hashes(topics, pa.chunked_array([pa.array([base + "1", base + "1", base + "1"])]))
    assert keys[0] == keys[1] != keys[2]
