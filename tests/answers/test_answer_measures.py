"""The answer measures against values worked out here by hand and against nuggetizer's
definitions (castorini/nuggetizer core/metrics.py, restated below as plain loops over one
response's nuggets: support 1, partial_support 0.5, a topic with no vital nugget 0)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from evalstore.errors import InvalidParameterError
from evalstore.metrics import answers as m

# (topic, importance, assignment) of every nugget of one run; topic 2 has no vital nugget
NUGGETS = [
    ("t0", "vital", "support"),
    ("t0", "vital", "partial_support"),
    ("t0", "vital", "not_support"),
    ("t0", "okay", "support"),
    ("t0", "okay", "partial_support"),
    ("t1", "vital", "partial_support"),
    ("t1", "okay", "not_support"),
    ("t2", "okay", "support"),
    ("t2", "okay", "partial_support"),
    ("t2", "okay", "not_support"),
]
TOPICS = ["t0", "t1", "t2"]
# the measures this module holds to a reference (tests/unit/test_reference_coverage.py): nuggetizer's
# definitions and the papers' formulas, worked out by hand below
HAND_WORKED = ("V_strict", "A_strict", "V", "A", "W", "W_strict")
REFERENCE_FAMILIES = {*HAND_WORKED, "support_precision", "support_recall"}


def _table(nuggets: list[tuple[str, str, str]], topics: list[str]) -> m.NuggetTable:
    code = {t: i for i, t in enumerate(topics)}
    return m.NuggetTable(
        np.array([code[t] for t, _, _ in nuggets]),
        np.array([i == "vital" for _, i, _ in nuggets]),
        np.array([m.ASSIGNMENT_VALUE[a] for _, _, a in nuggets]),
        len(topics),
    )


def _nuggetizer(nuggets: list[dict[str, str]]) -> dict[str, float]:
    """nuggetizer's calculate_nugget_scores, as its code defines them."""
    vital = [n for n in nuggets if n["importance"] == "vital"]
    strict_vital = sum(n["assignment"] == "support" for n in vital)
    strict_all = sum(n["assignment"] == "support" for n in nuggets)
    vital_score = strict_vital + 0.5 * sum(n["assignment"] == "partial_support" for n in vital)
    all_score = strict_all + 0.5 * sum(n["assignment"] == "partial_support" for n in nuggets)
    return {
        "V_strict": strict_vital / len(vital) if vital else 0.0,
        "A_strict": strict_all / len(nuggets) if nuggets else 0.0,
        "V": vital_score / len(vital) if vital else 0.0,
        "A": all_score / len(nuggets) if nuggets else 0.0,
    }


def _nuggets(name: str) -> Callable[[m.NuggetTable], np.ndarray]:
    function = m.ANSWER_MEASURES[name].nuggets
    assert function is not None
    return function


def test_each_nugget_measure_by_hand() -> None:
    table = _table(NUGGETS, TOPICS)
    # t0: vital 1, 0.5, 0; okay 1, 0.5.  t1: vital 0.5; okay 0.  t2: okay 1, 0.5, 0 (no vital)
    expected = {
        "V_strict": [1 / 3, 0 / 1, 0.0],
        "A_strict": [2 / 5, 0 / 2, 1 / 3],
        "V": [1.5 / 3, 0.5 / 1, 0.0],
        "A": [3.0 / 5, 0.5 / 2, 1.5 / 3],
        "W": [(1.5 + 0.5 * 1.5) / (3 + 0.5 * 2), (0.5 + 0) / (1 + 0.5), (0.5 * 1.5) / (0.5 * 3)],
        "W_strict": [(1 + 0.5 * 1) / (3 + 0.5 * 2), 0 / 1.5, (0.5 * 1) / (0.5 * 3)],
    }
    assert set(expected) == set(HAND_WORKED)
    for name, values in expected.items():
        np.testing.assert_allclose(_nuggets(name)(table), values, rtol=0, atol=1e-15, err_msg=name)


def test_nugget_measures_equal_nuggetizers_definitions_topic_by_topic() -> None:
    table = _table(NUGGETS, TOPICS)
    for i, topic in enumerate(TOPICS):
        ours = {name: float(_nuggets(name)(table)[i]) for name in ("V_strict", "A_strict", "V", "A")}
        theirs = _nuggetizer([{"importance": imp, "assignment": a} for t, imp, a in NUGGETS if t == topic])
        assert ours == pytest.approx(theirs, abs=1e-15), topic


def test_a_topic_with_no_vital_nugget_gives_v_zero_and_w_equal_to_a() -> None:
    okay_only = [("t", "okay", "support"), ("t", "okay", "partial_support"), ("t", "okay", "not_support")]
    table = _table(okay_only, ["t"])
    assert m.vital_strict(table)[0] == m.vital(table)[0] == 0.0  # nuggetizer: "if vital_nuggets else 0.0"
    assert m.weighted(table)[0] == pytest.approx(m.all_nuggets(table)[0]) == pytest.approx(0.5)
    assert m.weighted_strict(table)[0] == pytest.approx(m.all_strict(table)[0]) == pytest.approx(1 / 3)


def test_support_precision_and_recall_by_hand() -> None:
    # topic 0: four sentences: cited full, cited partial, cited none, uncited;
    # topic 1: cited but unjudged (left out), cited full
    table = m.SentenceTable(
        np.array([0, 0, 0, 0, 1, 1]),
        np.array([True, True, True, False, True, True]),
        np.array([1.0, 0.5, 0.0, np.nan, np.nan, 1.0]),
        2,
    )
    np.testing.assert_allclose(m.support_precision(table), [1.5 / 3, 1.0 / 1])
    np.testing.assert_allclose(m.support_recall(table), [1.5 / 4, 1.0 / 1])
    nothing_cited = m.SentenceTable(np.array([0]), np.array([False]), np.array([np.nan]), 1)
    assert np.isnan(m.support_precision(nothing_cited)[0])
    assert m.support_recall(nothing_cited)[0] == 0.0


def test_measures_are_found_by_nuggetizers_names_in_any_case() -> None:
    assert m.answer_measure("strict_vital_score").family.name == "V_strict"
    assert m.answer_measure("ALL_SCORE").family.name == "A"
    assert m.answer_measure("w").family.name == "W"
    with pytest.raises(InvalidParameterError, match="Unknown answer measure 'nDCG'"):
        m.answer_measure("nDCG")
