"""A docno's hash is a function of the docno alone: not of the longest string beside it, the chunk
it is in or the block of rows it was hashed with. The run's docnos and the qrels' are hashed
apart, and a judgment is found by equal hashes; a run holding a docno longer than every judged
one once took one more mixing pass for every row, and found none of its judgments."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from evalstore.io import hashing
from evalstore.io.hashing import doc_hashes
from evalstore.trec_eval.command_line import run

DOCS = ["", "d", "d1", "FBIS3-10082", "LA010189-0001", "x" * 17, "y" * 64, "z" * 300]


def _hash(docs: list[str]) -> dict[str, int]:
    return dict(zip(docs, doc_hashes(pa.chunked_array([pa.array(docs)])).tolist(), strict=True))


def test_a_docno_hashes_the_same_whatever_the_strings_beside_it() -> None:
    alone = {doc: _hash([doc])[doc] for doc in DOCS}
    assert _hash(DOCS) == alone
    assert _hash(["d1", "a" * 40]) == {"d1": alone["d1"], "a" * 40: _hash(["a" * 40])["a" * 40]}
    chunked = doc_hashes(pa.chunked_array([pa.array(DOCS[:3]), pa.array(DOCS[3:])])).tolist()
    assert chunked == [alone[doc] for doc in DOCS]
    assert len(set(alone.values())) == len(DOCS)


def test_a_docno_hashes_the_same_in_every_block_of_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    docs = [f"doc{i}" for i in range(50)] + ["a-much-longer-docno-than-the-others"] + ["d1"]
    whole = doc_hashes(pa.chunked_array([pa.array(docs)])).tolist()
    monkeypatch.setattr(hashing, "_BLOCK_ROWS", 4)
    assert doc_hashes(pa.chunked_array([pa.array(docs)])).tolist() == whole
    assert whole[-1] == _hash(["d1"])["d1"]


def test_a_run_with_a_docno_longer_than_every_judged_one_finds_its_judgments(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    qrels = tmp_path / "qrels"
    qrels.write_text("1 0 d1 1\n1 0 d2 0\n1 0 d3 1\n")
    lines = ["1 Q0 d1 1 3.0 t", "1 Q0 d2 2 2.0 t", "1 Q0 d3 3 1.0 t"]
    short, long = tmp_path / "short", tmp_path / "long"
    short.write_text("\n".join(lines) + "\n")
    long.write_text("\n".join([*lines, "1 Q0 an-unjudged-docno-of-28-bytes 4 0.5 t"]) + "\n")
    printed = []
    for path in (short, long):
        run(["-m", "num_rel_ret", "-m", "map", str(qrels), str(path)])
        printed.append(capsys.readouterr().out)
    # trec_eval 10.0 prints the same for both: d1 and d3 relevant at ranks 1 and 3
    expected = "num_rel_ret           \tall\t2\nmap                   \tall\t0.8333\n"
    assert printed == [expected, expected]
