"""The classic worked examples of the textbook definitions (values as printed in the issue)."""

from __future__ import annotations

import pytest

from evalstore import metrics
from evalstore.errors import InvalidParameterError


def ranked(grades: list[int], *, judged: list[int] | None = None, total_relevant: int | None = None):  # type: ignore[no-untyped-def]
    """A one-topic run whose i-th document has grades[i]; qrels hold those grades, extra judged
    grades, and enough unretrieved relevant documents to reach total_relevant."""
    run = {"q": {f"d{i:03d}": float(100 - i) for i in range(len(grades))}}
    qrels = {"q": {f"d{i:03d}": g for i, g in enumerate(grades)}}
    for j, g in enumerate(judged or []):
        qrels["q"][f"x{j:03d}"] = g
    if total_relevant is not None:
        missing = total_relevant - sum(1 for g in grades if g > 0)
        for j in range(missing):
            qrels["q"][f"u{j:03d}"] = 1
    return qrels, run


def value(qrels, run, measure: str) -> float:  # type: ignore[no-untyped-def]
    return metrics.evaluate(qrels, run, [measure], per_query=False).aggregates[str(metrics.parse_measure(measure))]


def at_ranks(relevant_ranks: list[int], depth: int) -> list[int]:
    return [1 if r in relevant_ranks else 0 for r in range(1, depth + 1)]


def test_ap_and_rprec_relevant_at_1_3_9_10_of_4() -> None:
    qrels, run = ranked(at_ranks([1, 3, 9, 10], 10), total_relevant=4)
    assert value(qrels, run, "AP") == pytest.approx(0.6)
    assert value(qrels, run, "Rprec") == pytest.approx(0.5)


def test_ap_and_rprec_relevant_at_2_5_6_7() -> None:
    qrels, run = ranked(at_ranks([2, 5, 6, 7], 10), total_relevant=4)
    assert round(value(qrels, run, "AP"), 2) == 0.49
    assert value(qrels, run, "Rprec") == pytest.approx(0.25)


def test_ap_relevant_at_1_3_6_9_10_of_5() -> None:
    qrels, run = ranked(at_ranks([1, 3, 6, 9, 10], 10), total_relevant=5)
    assert round(value(qrels, run, "AP"), 2) == 0.62


def test_mrr_first_relevant_at_3_2_1() -> None:
    run = {f"q{n}": {f"d{i}": float(10 - i) for i in range(5)} for n in range(3)}
    qrels = {"q0": {"d2": 1}, "q1": {"d1": 1}, "q2": {"d0": 1}}
    assert round(value(qrels, run, "RR"), 2) == 0.61


def test_jarvelin_kekalainen_dcg_of_2_1_0_2_0() -> None:
    qrels, run = ranked([2, 1, 0, 2, 0])
    assert value(qrels, run, "DCG(discount=jk)@5") == pytest.approx(4.0)
    assert round(value(qrels, run, "nDCG(discount=jk)@5"), 2) == 0.86


def test_exponential_gain_ndcg_with_seven_judged() -> None:
    qrels, run = ranked([5, 3, 2, 1, 2], judged=[4, 0])
    assert round(value(qrels, run, "DCG(gain=exp)@5"), 2) == 38.51
    assert round(value(qrels, run, "IDCG(gain=exp)@5"), 2) == 46.42
    assert round(value(qrels, run, "nDCG(gain=exp)@5"), 4) == 0.8296


def test_jk_ndcg_of_4_1_4_2_1_and_its_ascending_order() -> None:
    qrels, run = ranked([4, 1, 4, 2, 1])
    assert round(value(qrels, run, "nDCG(discount=jk)@5"), 4) == 0.8785
    qrels, run = ranked([1, 1, 2, 4, 4])
    assert round(value(qrels, run, "nDCG(discount=jk)@5"), 4) == 0.6853


def test_hits_counts_and_hit_rate_is_success() -> None:
    """ranx's hits@k is a count of relevant documents in the top k; hit_rate@k (Success@k) is 0/1."""
    qrels, run = ranked(at_ranks([1, 3, 9], 10), total_relevant=5)
    assert value(qrels, run, "Hits@5") == 2
    assert value(qrels, run, "Hits@10") == 3
    assert value(qrels, run, "HitRate@5") == value(qrels, run, "Success@5") == 1
    assert value(qrels, run, "hit_rate@2") == 1 and value(qrels, run, "Hits@2") == 1


def test_f_beta_and_precision_at_recall_relevant_at_1_3_9_10_of_4() -> None:
    """F-beta of P@k and R@k (van Rijsbergen), and precision where recall first reaches a level
    (Manning et al., 8.4): relevant at ranks 1, 3, 9 and 10, four relevant in all."""
    qrels, run = ranked(at_ranks([1, 3, 9, 10], 10))
    assert value(qrels, run, "F@5") == pytest.approx(2 * 0.4 * 0.5 / (0.4 + 0.5))  # P@5 2/5, R@5 2/4
    assert value(qrels, run, "F(beta=2)@10") == pytest.approx(5 * 0.4 * 1.0 / (4 * 0.4 + 1.0))
    assert value(qrels, run, "PAtR@0.25") == 1.0  # the 1st relevant, at rank 1
    assert value(qrels, run, "PAtR@0.5") == pytest.approx(2 / 3)  # the 2nd, at rank 3
    assert value(qrels, run, "PAtR@1.0") == pytest.approx(4 / 10)  # the 4th, at rank 10


# the families this file holds to published worked examples (tests/unit/test_reference_coverage.py)
REFERENCE_FAMILIES = {
    "AP",
    "Rprec",
    "RR",
    "DCG",
    "nDCG",
    "Hits",
    "Success",
    "F",
    "PAtR",
    "Coverage",
    "Novelty",
    "RelativeRecall",
    "RecallEffort",
}


def test_user_oriented_measures_worked_by_hand() -> None:
    """Korfhage's measures (Baeza-Yates & Ribeiro-Neto 1999, 3.2.3). Relevant R = {a, b, c, e};
    the user knew U = {a, b, x}; the ranking A = a c d x e f. Rk = A n U = {a, x}, Ru = (A n R) - U =
    {c, e}: coverage |Rk|/|U| = 2/3, novelty |Ru|/(|Ru|+|Rk|) = 1/2, relative recall |A n R|/|U| =
    3/3, recall effort |U| / (rank of the 3rd relevant document, e at 5) = 3/5."""
    qrels = {"q": {"a": 1, "b": 1, "c": 1, "d": 0, "e": 1}}
    known = {"q": {"a": 1, "b": 1, "x": 1}}
    run = {"q": {"a": 6, "c": 5, "d": 4, "x": 3, "e": 2, "f": 1}}
    names = ["Coverage", "Novelty", "RelativeRecall", "RecallEffort"]
    result = metrics.evaluate(qrels, run, names, known=known).aggregates
    assert [result[n] for n in names] == pytest.approx([2 / 3, 1 / 2, 1.0, 3 / 5])
    # a ranking with fewer relevant documents than the user expected: the effort is over all of it
    # (3 expected / 2 examined, at most 1), and it brings nothing new
    short = metrics.evaluate(qrels, {"q": {"a": 2, "d": 1}}, names, known=known).aggregates
    assert [short[n] for n in names] == pytest.approx([1 / 3, 0.0, 1 / 3, 1.0])
    with pytest.raises(
        InvalidParameterError, match="^Coverage compares the ranking with what the user already knew"
    ) as info:
        metrics.evaluate(qrels, run, ["Coverage"])
    assert info.value.remedy is not None and "--known QRELS" in info.value.remedy.cli
