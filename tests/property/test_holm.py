"""evalstore's Holm adjustment is statsmodels' multipletests(method="holm") to the bit (ours skips
the full garbage collection statsmodels runs on every call)."""

from __future__ import annotations

from unittest import mock

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from statsmodels.stats.multitest import multipletests

from evalstore.statistics.significance import correct

# p-values as they come: ties, exact 0 and 1, tiny ones, now and then a NaN (a pair of identical runs)
P_VALUE = st.one_of(
    st.sampled_from([0.0, 1.0, 0.05, 0.5, 1e-300, float("nan")]),
    st.floats(min_value=0.0, max_value=1.0, allow_nan=False),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(P_VALUE, min_size=1, max_size=40))
def test_holm_is_statsmodels_holm(p_values: list[float]) -> None:
    p = np.array(p_values)
    with mock.patch("gc.collect", return_value=0):  # 0.1 s a call in pytest's heap, 300 calls
        theirs = multipletests(p, alpha=0.05, method="holm")[1]
    ours = correct(p, "holm")
    assert ours.dtype == theirs.dtype and ours.shape == theirs.shape
    assert np.array_equal(ours, theirs, equal_nan=True)
