"""evalstore's percentile intervals take their quantiles with row_quantiles, which must be
numpy's np.quantile(values, q, axis=1) (linear interpolation) to the bit: the stored summaries and
the pages' intervals were numpy's, and a page compares what a worker stored with what it computes."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from evalstore.statistics.significance import bootstrap_counts, bootstrap_mean_intervals, row_quantiles

# values as resampled means come, and worse: ties, signed zeros, infinities, NaN, extremes
VALUE = st.one_of(
    st.sampled_from([0.0, -0.0, 1.0, 0.5, float("inf"), float("-inf"), float("nan"), 1e308, -1e308, 5e-324]),
    st.floats(allow_nan=False, allow_infinity=False, width=64),
)
QUANTILE = st.one_of(st.sampled_from([0.0, 1.0, 0.5, 0.025, 0.975, 0.05, 0.95]), st.floats(0.0, 1.0))


@settings(max_examples=400, deadline=None)
@given(
    arrays(np.float64, st.tuples(st.integers(1, 6), st.integers(1, 40)), elements=VALUE),
    st.one_of(
        st.lists(QUANTILE, min_size=1, max_size=4),
        st.lists(QUANTILE, min_size=2, max_size=2).map(sorted),  # an interval's (low, high)
    ),
)
def test_row_quantiles_are_numpys_to_the_bit(values: np.ndarray, quantiles: list[float]) -> None:
    with np.errstate(all="ignore"):  # inf - inf: numpy's own NaN, made the same way
        theirs = np.quantile(values, quantiles, axis=1)
        ours = row_quantiles(values, tuple(quantiles))
    assert ours.shape == theirs.shape
    assert ours.tobytes() == theirs.tobytes() or np.array_equal(ours, theirs, equal_nan=True)


def test_a_leaderboards_intervals_are_numpys_on_its_10000_resamples() -> None:
    rng = np.random.default_rng(3)
    samples = rng.random((60, 43))
    samples[7, 5] = np.nan  # a measure undefined on a topic: its interval is NaN, as numpy's
    counts = bootstrap_counts(43)
    means = samples @ (counts / 43).T
    low, high = bootstrap_mean_intervals(samples, 0.95, counts=counts)
    tail = (1 - 0.95) / 2  # 0.025000000000000022, as the intervals compute it
    expected = np.quantile(means, [tail, 1 - tail], axis=1)
    assert np.array_equal(np.vstack([low, high]), expected, equal_nan=True)
    assert np.isnan(low[7]) and np.isnan(low).sum() == 1


def test_a_quantile_outside_0_1_is_refused_as_numpy_refuses_it() -> None:
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        row_quantiles(np.ones((2, 3)), (1.5,))
    with pytest.raises(ValueError):
        np.quantile(np.ones((2, 3)), 1.5, axis=1)
