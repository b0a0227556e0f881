"""The reproducibility formulas (evalstore.statistics.repro) on cases worked by hand."""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pytest

from evalstore.statistics import repro


def test_ranked_documents_follow_trec_eval_order() -> None:
    run = pa.table(
        {"topic": ["2", "1", "1", "1", "1"], "doc": ["x", "a", "b", "c", "d"], "score": [1.0, 1.0, 2.0, 2.0, 0.5]}
    )
    assert repro.ranked_documents(run) == {"1": ["c", "b", "a", "d"], "2": ["x"]}  # ties docno descending
    assert repro.ranked_documents(run, depth=2) == {"1": ["c", "b"], "2": ["x"]}


def test_ktu_by_hand() -> None:
    assert repro.ktu(list("abcd"), list("abcd")) == 1.0
    assert repro.ktu(list("abcd"), list("dcba")) == -1.0
    # union a..f; positions 0,1,2,3 against 0,1,4,5: every pair concordant
    assert repro.ktu(list("abcd"), list("abef")) == 1.0
    # one swap among 4: tau = (5 - 1) / 6
    assert repro.ktu(list("abcd"), list("bacd")) == pytest.approx(4 / 6)
    assert repro.ktu(list("abcd"), list("abc"), depth=2) == 1.0
    assert math.isnan(repro.ktu(["a"], ["a"]))  # one document: no pair
    assert repro.ktu(list("abcd"), list("ab")) == 1.0  # cut to the shorter (repro_eval raises)


def test_rbo_by_hand() -> None:
    assert repro.rbo(list("abc"), list("abc"), p=0.5, depth=3) == pytest.approx(1.0)
    # overlaps at depth 1, 2, 3: 0, 1/2, 3/3 with weights 1, .5, .25
    assert repro.rbo(list("abc"), list("bca"), p=0.5, depth=3) == pytest.approx((0 + 0.5 * 0.5 + 0.25 * 1) / 1.75)
    assert repro.rbo(["a"], ["b"], p=0.9, depth=5) == 0.0
    assert repro.rbo([], [], depth=3) == 0.0
    with pytest.raises(ValueError, match=r"persistence p must be in \(0, 1\], not 0"):
        repro.rbo(["a"], ["a"], p=0)


def test_effectiveness_and_effects_by_hand() -> None:
    original, reproduced = np.array([0.2, 0.8]), np.array([0.4, 0.4])
    assert repro.rmse(original, reproduced) == pytest.approx(math.sqrt((0.04 + 0.16) / 2))
    assert repro.nrmse(original, reproduced) == pytest.approx(math.sqrt(0.1) / math.sqrt((0.64 + 0.64) / 2))
    assert repro.rmse(original, original) == 0.0
    assert math.isnan(repro.nrmse(np.array([0.5]), np.array([0.5]))) is False
    base, adv = np.array([0.2, 0.4]), np.array([0.4, 0.6])
    assert repro.effect_ratio(adv, base, adv - 0.1, base) == pytest.approx(0.5)
    assert repro.delta_ri(adv, base, adv, base) == 0.0
    assert repro.delta_ri(adv, base, adv + 0.3, base) == pytest.approx(0.2 / 0.3 - 0.5 / 0.3)
    assert math.isnan(repro.effect_ratio(base, base, adv, base))  # no original improvement to compare with
    assert math.isnan(repro.delta_ri(adv, np.zeros(2), adv, base))


def test_t_test() -> None:
    same = np.array([0.1, 0.5, 0.3])
    assert repro.t_test(same, same, paired=True) == 1.0  # scipy: nan; repro_eval: 1.0
    assert repro.t_test(same, same, paired=False) == 1.0
    from scipy.stats import ttest_ind, ttest_rel

    other = np.array([0.2, 0.4, 0.9])
    assert repro.t_test(same, other, paired=True) == ttest_rel(same, other).pvalue
    assert repro.t_test(same, np.array([0.2, 0.4]), paired=False) == ttest_ind(same, [0.2, 0.4]).pvalue


def test_document_order_over_shared_topics() -> None:
    order = repro.document_order(
        {"1": list("abc"), "2": list("ab"), "3": list("x")}, {"1": list("abc"), "2": list("ba")}
    )
    assert order.topics == ["1", "2"] and order.ktu == [1.0, -1.0] and order.mean_ktu == 0.0
    # Clarke et al.'s RBO is not extrapolated: past the rankings' end the overlap's share shrinks
    weights = 0.95 ** np.arange(1000)
    assert order.rbo[0] == pytest.approx(
        float(np.sum(weights * np.minimum(np.arange(1, 1001), 3) / np.arange(1, 1001)) / np.sum(weights))
    )
    assert repro.document_order({"1": list("abc")}, {"1": list("abc")}, depth=3).rbo == [pytest.approx(1.0)]
    empty = repro.document_order({}, {})
    assert math.isnan(empty.mean_ktu) and math.isnan(empty.mean_rbo)
