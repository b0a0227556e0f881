"""The scan that sends an irregular run file the precise way sees two separators side by side
wherever the pieces it reads the file in end."""

from __future__ import annotations

import io

import pytest

from evalstore.io import trec_text
from evalstore.io.trec_text import regular_trec_text

REGULAR = b"1\tQ0\td1\t1\t2.5\tt\n1\tQ0\td2\t2\t1.5\tt\n"


@pytest.mark.parametrize("piece", [1, 2, 3, 7, 1 << 18])
def test_pieces_of_any_size_find_the_same(monkeypatch: pytest.MonkeyPatch, piece: int) -> None:
    monkeypatch.setattr(trec_text, "SCANNED_PIECE", piece)
    assert regular_trec_text(io.BytesIO(REGULAR), b"\t")
    for at in range(len(REGULAR)):
        if REGULAR[at : at + 1] in (b"\t", b"\n"):  # a second separator beside each one
            doubled = REGULAR[: at + 1] + REGULAR[at : at + 1] + REGULAR[at + 1 :]
            assert not regular_trec_text(io.BytesIO(doubled), b"\t"), (piece, at)
    assert not regular_trec_text(io.BytesIO(b"\t" + REGULAR), b"\t")
    assert not regular_trec_text(io.BytesIO(REGULAR + b"\t"), b"\t")
    assert not regular_trec_text(io.BytesIO(REGULAR.replace(b"\td2", b" d2")), b"\t")
