"""trec_eval's ranking order (score descending, ties by docno descending in byte order) from the
shortcuts of evalstore.trec_order and the duplicate check of evalstore.io.hashing, against a
plain sort and a set: runs listed by topic and score with their ties in any order (Anserini lists
them by docno ascending), runs with a topic's rows apart, tables in several chunks."""

from __future__ import annotations

from unittest import mock

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evalstore import trec_order
from evalstore.io import hashing
from evalstore.io.hashing import has_repeated_pair
from evalstore.trec_order import encoded_ranks, take_rows

TOPICS = ["1", "2", "10", "B"]
DOCS = ["d1", "d2", "d3", "D4", "d10", "e", "é", "d1 "]


@st.composite
def runs(draw: st.DrawFn) -> list[tuple[str, str, float]]:
    """Rows (topic, doc, score): usually each topic's rows together by score descending (the order
    of ties drawn), sometimes shuffled."""
    rows = []
    for topic in draw(st.lists(st.sampled_from(TOPICS), unique=True, min_size=1)):
        docs = draw(st.lists(st.sampled_from(DOCS), unique=True, min_size=1))
        scores = sorted(
            draw(st.lists(st.sampled_from([0.0, 0.5, 1.0, -2.0]), min_size=len(docs), max_size=len(docs))), reverse=True
        )
        rows.extend((topic, doc, score) for doc, score in zip(docs, scores, strict=True))
    if draw(st.booleans()):
        rows = draw(st.permutations(rows))
    return rows


def as_table(rows: list[tuple[str, str, float]], chunks: int) -> pa.Table:
    table = pa.table(
        {
            "topic": pa.array([r[0] for r in rows], pa.string()),
            "doc": pa.array([r[1] for r in rows], pa.string()),
            "score": pa.array([r[2] for r in rows], pa.float64()),
        }
    )
    step = max(len(rows) // chunks, 1)
    return pa.concat_tables([table.slice(start, step) for start in range(0, len(rows), step)] or [table])


def expected_ranks(rows: list[tuple[str, str, float]]) -> list[int]:
    by_docno = sorted(range(len(rows)), key=lambda i: rows[i][1].encode(), reverse=True)
    ordered = sorted(by_docno, key=lambda i: (rows[i][0], -rows[i][2]))  # stable: ties stay by docno descending
    rank, before = [0] * len(rows), None
    for i in ordered:
        rank[i] = rank[before] + 1 if before is not None and rows[before][0] == rows[i][0] else 1
        before = i
    return rank


@settings(max_examples=300, deadline=None)
@given(rows=runs(), chunks=st.integers(1, 3), asked=st.data())
def test_ranks_equal_a_plain_sort(rows: list[tuple[str, str, float]], chunks: int, asked: st.DataObject) -> None:
    ranked = encoded_ranks(as_table(rows, chunks))
    expected = expected_ranks(rows)
    some = np.array(sorted(asked.draw(st.sets(st.integers(0, len(rows) - 1)))), dtype=np.int64)
    assert ranked.ranks_at(some).tolist() == [expected[i] for i in some]
    assert ranked.ranks.tolist() == expected
    topics = ranked.topics.to_pylist()
    assert {topic: int(count) for topic, count in zip(topics, ranked.counts, strict=True)} == {
        topic: sum(r[0] == topic for r in rows) for topic in topics
    }


def test_a_listed_run_is_ranked_without_sorting_and_its_ties_by_docno_descending() -> None:
    rows = [("1", "a", 2.0), ("1", "b", 1.0), ("1", "c", 1.0), ("1", "d", 0.5), ("2", "x", 3.0)]
    ranked = encoded_ranks(as_table(rows, 1))
    assert ranked.starts is not None and ranked.tied_scores is not None  # the shortcut, not a sort
    assert ranked.ranks_at(np.array([1, 2, 3])).tolist() == [3, 2, 4]


@pytest.mark.parametrize("all_ties", [0, 10**9])
def test_a_tie_ends_where_its_topic_ends(monkeypatch: pytest.MonkeyPatch, all_ties: int) -> None:
    """Topic 1's last score equals topic 2's first ones: the ties are two, one a topic, whether the
    rows asked for are widened to their ties (all_ties 0) or every tie of the run is marked."""
    monkeypatch.setattr(trec_order, "ALL_TIES_PER_ASKED_ROW", all_ties)
    # untied rows after them, so that the ties' pairs stay under TIE_PAIRS_PER_ROW of the run
    rows = [("1", "z", 1.0), ("1", "a", 0.5), ("2", "b", 0.5), ("2", "c", 0.5)]
    rows += [("2", f"u{i}", 0.4 - i / 100) for i in range(36)]
    ranked = encoded_ranks(as_table(rows, 1))
    assert ranked.starts is not None and ranked.tied_scores is not None
    assert ranked.ranks_at(np.array([1, 2, 3])).tolist() == [2, 2, 1]


@pytest.mark.parametrize("limit", ["TIE_PAIRS_PER_ROW", "MAX_TIE_LENGTH"])
def test_a_run_tied_throughout_is_sorted(monkeypatch: pytest.MonkeyPatch, limit: str) -> None:
    monkeypatch.setattr(trec_order, limit, 1)
    rows = [("1", doc, 1.0) for doc in ("a", "c", "b", "e", "d")]
    assert encoded_ranks(as_table(rows, 1)).ranks_at(np.array([0, 1, 3])).tolist() == [5, 3, 1]


@st.composite
def pairs(draw: st.DrawFn) -> list[tuple[str, str]]:
    rows = [
        (topic, doc)
        for topic in draw(st.lists(st.sampled_from(TOPICS), unique=True, min_size=1))
        for doc in draw(st.lists(st.sampled_from(DOCS), min_size=1, max_size=6))
    ]
    return draw(st.permutations(rows)) if draw(st.booleans()) else rows


@settings(max_examples=300, deadline=None)
@given(rows=pairs(), chunks=st.integers(1, 3), block=st.sampled_from([1, 3, hashing.HASH_BLOCK_ROWS]))
def test_a_repeated_pair_is_found_whatever_the_order(rows: list[tuple[str, str]], chunks: int, block: int) -> None:
    """Whatever the blocks of topics the docnos are hashed in (a topic longer than a block is one
    block of its own)."""
    table = as_table([(topic, doc, 0.0) for topic, doc in rows], chunks)
    with mock.patch.object(hashing, "HASH_BLOCK_ROWS", block):
        assert has_repeated_pair(table["topic"], table["doc"]) == (len(set(rows)) < len(rows))


@settings(max_examples=200, deadline=None)
@given(values=st.lists(st.sampled_from(DOCS), min_size=1), chunks=st.integers(1, 4), asked=st.data())
def test_take_rows_equals_a_list_lookup(values: list[str], chunks: int, asked: st.DataObject) -> None:
    """Rows in any order, repeated or not, from a column in several chunks."""
    column = as_table([("1", value, 0.0) for value in values], chunks)["doc"]
    rows = asked.draw(st.lists(st.integers(0, len(values) - 1)))
    taken = take_rows(column, np.array(rows, dtype=np.int64))
    assert taken.to_pylist() == [values[row] for row in rows]
