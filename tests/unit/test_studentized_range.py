"""The studentized range distribution (evalstore.statistics.studentized_range) against scipy's."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import special, stats

from evalstore.statistics import studentized_range as sr

# from two systems to a hundred; from one degree of freedom (2 runs x 2 topics) past scipy's switch
# to the infinite-df form at 100,000
SYSTEMS = (2, 3, 17, 100)
DEGREES = (1, 2, 7, 60, 1584, 24750, 200_000)


@pytest.mark.parametrize("k", SYSTEMS)
@pytest.mark.parametrize("df", DEGREES)
def test_cdf_and_sf_equal_scipys_to_1e_9(k: int, df: int) -> None:
    q = np.array([0.2, 1.5, 3.5, 5.0, 7.0, 25.0])
    expected = stats.studentized_range.cdf(q, k, df)
    cdf, sf = sr.cdf_sf(q, k, df)
    assert np.abs(cdf - expected).max() < 1e-9
    assert np.abs(sf - (1 - expected)).max() < 1e-9


@pytest.mark.parametrize(("k", "df"), [(2, 1), (3, 10), (17, 1584), (100, 2), (100, 24750), (5, 200_000)])
def test_the_quantile_equals_scipys(k: int, df: int) -> None:
    assert sr.ppf(0.95, k, df) == pytest.approx(stats.studentized_range.ppf(0.95, k, df), rel=1e-9)


def test_two_systems_with_infinite_df_is_the_range_of_two_normals() -> None:
    """|X - Y| / 1 for two standard normals: P(Q <= q) = 2 Phi(q / sqrt 2) - 1, exactly."""
    q = np.linspace(0.01, 9, 50)
    cdf, sf = sr.cdf_sf(q, 2, 10**6)
    assert cdf == pytest.approx(2 * special.ndtr(q / np.sqrt(2)) - 1, abs=1e-13)
    # the survival function keeps its relative precision where one minus the CDF is noise
    assert sf == pytest.approx(2 * special.ndtr(-q / np.sqrt(2)), rel=1e-9)


def test_small_p_values_go_on_falling_where_one_minus_scipys_cdf_stops() -> None:
    """scipy's survival function is one minus its CDF, which misses ~1.7e-13 of the mass here: its
    p-values stop falling there. Ours are a sum of positive terms (absolute error below 1e-14)."""
    q = np.arange(12.0, 20.0, 2.0)
    floor = 1 - stats.studentized_range.cdf(q, 5, 1000)
    assert np.ptp(floor) < 1e-15 and floor[0] > 1e-13
    sf = sr.sf(q, 5, 1000)
    assert (sf > 0).all() and (np.diff(sf) < 0).all() and sf[0] < floor[0]


def test_cdf_plus_sf_is_one_and_the_shape_is_kept() -> None:
    q = np.linspace(0, 12, 24).reshape(4, 6)
    cdf, sf = sr.cdf_sf(q, 17, 300)
    assert cdf.shape == sf.shape == (4, 6)
    assert cdf + sf == pytest.approx(np.ones((4, 6)), abs=1e-12)
    assert (np.diff(cdf.ravel()) >= 0).all()


def test_the_ends_and_nan() -> None:
    cdf, sf = sr.cdf_sf(np.array([-1.0, 0.0, np.inf, np.nan]), 4, 30)
    assert cdf[:3].tolist() == [0.0, 0.0, 1.0] and sf[:3].tolist() == [1.0, 1.0, 0.0]
    assert np.isnan(cdf[3]) and np.isnan(sf[3])


@pytest.mark.parametrize(("k", "df"), [(1, 10), (3, 0)])
def test_a_distribution_that_does_not_exist_is_refused(k: int, df: int) -> None:
    with pytest.raises(ValueError, match="studentized range needs k >= 2 systems and df > 0"):
        sr.ppf(0.95, k, df)


def test_the_quantiles_ends_are_scipys_and_one_too_close_to_1_is_infinite() -> None:
    """--alpha may be any number in (0, 1): 1 - alpha rounds to 1 below ~1e-16, and within ~1e-15
    of 1 the integral cannot tell p from 1 (where a search for it would never end)."""
    for p in (0.0, 1.0, -0.5, 1.5):
        assert sr.ppf(p, 4, 30) == pytest.approx(stats.studentized_range.ppf(p, 4, 30), nan_ok=True)
    assert sr.ppf(1 - 1e-16, 4, 30) == np.inf
    assert sr.ppf(1 - 1e-9, 4, 30) == pytest.approx(stats.studentized_range.ppf(1 - 1e-9, 4, 30), rel=1e-6)


def test_values_taken_a_block_at_a_time_give_the_same_numbers(monkeypatch: pytest.MonkeyPatch) -> None:
    """Many pairs are integrated a block of values at a time, so memory stays bounded; a tiny
    block (a few values, each cut across z-blocks) changes nothing but the last bits of the sums."""
    q = np.linspace(0.1, 9, 37)
    whole = sr.cdf_sf(q, 17, 300)
    monkeypatch.setattr(sr, "_CHUNK", 700)
    assert max(1, sr._CHUNK // sr._scale_rule(300)[0].size) < 37
    blocked = sr.cdf_sf(q, 17, 300)
    assert blocked[0] == pytest.approx(whole[0], rel=1e-13, abs=1e-16)
    assert blocked[1] == pytest.approx(whole[1], rel=1e-13, abs=1e-16)
