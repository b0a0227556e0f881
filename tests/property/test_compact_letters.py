"""The compact letter display says exactly what the tests found: two runs share a letter if and
only if they were not found significantly different (Piepho 2004's guarantee)."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from evalstore.statistics.significance import compact_letters


@st.composite
def outcomes(draw: st.DrawFn) -> tuple[int, set[tuple[int, int]]]:
    count = draw(st.integers(1, 9))
    pairs = list(itertools.combinations(range(count), 2))
    return count, set(draw(st.lists(st.sampled_from(pairs), unique=True)) if pairs else [])


@given(outcomes())
def test_runs_share_a_letter_exactly_when_not_significantly_different(
    outcome: tuple[int, set[tuple[int, int]]],
) -> None:
    count, different = outcome
    letters = compact_letters(count, different)
    assert all(letters)
    for i, j in itertools.combinations(range(count), 2):
        assert bool(set(letters[i]) & set(letters[j])) == ((i, j) not in different), (letters, different)


def test_worked_example() -> None:
    # 0 differs from 2 and 3, 1 from 3: groups {0, 1}, {1, 2}, {2, 3}
    assert compact_letters(4, {(0, 2), (0, 3), (1, 3)}) == ["a", "ab", "bc", "c"]
    assert compact_letters(3, set()) == ["a", "a", "a"]
    assert compact_letters(28, {(i, j) for i in range(28) for j in range(i + 1, 28)})[26:] == ["aa", "ab"]
