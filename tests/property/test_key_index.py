"""evalstore.io.hashing.KeyIndex, the vectorised open-addressing table that prepare looks a
run's (topic, docno) keys up in, against a dict."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from evalstore.io.hashing import KeyIndex

# few distinct values, so keys repeat and their home slots (the top bits) meet; and full-width ones
KEYS = st.one_of(st.integers(0, 40), st.integers(0, 2**64 - 1), st.integers(0, 7).map(lambda k: k << 60))


@settings(max_examples=300, deadline=None)
@given(keys=st.lists(KEYS, max_size=200), queries=st.lists(KEYS, max_size=200))
def test_find_equals_a_dict(keys: list[int], queries: list[int]) -> None:
    index = KeyIndex(np.array(keys, dtype=np.uint64))
    assert index.distinct == (len(set(keys)) == len(keys))
    found = index.find(np.array(queries + keys, dtype=np.uint64))
    for query, place in zip(queries + keys, found.tolist(), strict=True):
        if query in keys:
            assert keys[place] == query  # one of its places
        else:
            assert place == -1
    if index.distinct:
        assert found[len(queries) :].tolist() == list(range(len(keys)))


def test_keys_that_share_their_home_slot_are_all_found() -> None:
    """Every key with the same top bits: each probe sequence runs through the others'."""
    keys = np.arange(1, 1001, dtype=np.uint64)  # the top bits of all of them are 0
    index = KeyIndex(keys)
    assert index.distinct
    assert index.find(keys).tolist() == list(range(1000))
    assert index.find(np.array([0, 1001, 2**63], dtype=np.uint64)).tolist() == [-1, -1, -1]
