"""Pooling strategies and assessor agreement, on small hand-checked cases and against libraries."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evalstore.statistics import pooling
from evalstore.trec_order import trec_rank


def _run(rows: list[tuple[str, str, float]]) -> pa.Table:
    return pa.table({"topic": [r[0] for r in rows], "doc": [r[1] for r in rows], "score": [r[2] for r in rows]})


def test_trec_rank_ignores_file_order_and_breaks_ties_by_docno_descending() -> None:
    run = _run([("2", "z", 0.5), ("1", "a", 1.0), ("1", "c", 1.0), ("1", "b", 2.0), ("1", "B", 1.0)])
    # byte order: "c" > "a" > "B"
    assert trec_rank(run).tolist() == [1, 3, 2, 1, 4]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["1", "2", "10"]), st.text("aAbz9#", min_size=1, max_size=3), st.integers(-2, 2)),
        max_size=30,
        unique_by=lambda r: (r[0], r[1]),
    )
)
def test_trec_rank_matches_sorting_each_topic_by_score_then_docno_descending(rows: list) -> None:  # type: ignore[type-arg]
    ranks = trec_rank(_run([(t, d, float(s)) for t, d, s in rows]))
    for topic in {r[0] for r in rows}:
        mine = sorted(((s, d.encode()) for t, d, s in rows if t == topic), reverse=True)
        expected = {d.decode(): rank for rank, (_, d) in enumerate(mine, start=1)}
        assert {d: int(k) for (t, d, _), k in zip(rows, ranks, strict=True) if t == topic} == expected


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.lists(
            st.tuples(st.sampled_from("12"), st.sampled_from("abcdefgh"), st.integers(0, 5)),
            min_size=1,
            max_size=20,
            unique_by=lambda r: (r[0], r[1]),
        ),
        min_size=1,
        max_size=4,
    ),
    st.integers(1, 5),
)
def test_depth_pool_is_the_union_of_each_runs_top_k(runs: list, depth: int) -> None:  # type: ignore[type-arg]
    tables = {f"r{i}": _run([(t, d, float(s)) for t, d, s in rows]) for i, rows in enumerate(runs)}
    pool = pooling.build(pooling.candidates(tables, depth), list(tables), pooling.PoolSettings("depth", depth, None))
    expected: dict[tuple[str, str], tuple[int, list[str]]] = {}
    for name, rows in zip(tables, runs, strict=True):
        for topic in "12":
            mine = sorted(((s, d) for t, d, s in rows if t == topic), reverse=True)  # score, then docno, desc
            for rank, (_, doc) in enumerate(mine[:depth], start=1):
                best, who = expected.get((topic, doc), (rank, []))
                expected[(topic, doc)] = (min(best, rank), [*who, name])
    got = {(r["topic"], r["doc"]): (r["best_rank"], r["contributors"]) for r in pool.to_pylist()}
    assert got == expected
    for _, group in pool.to_pandas().groupby("topic"):
        assert sorted(group["judge_order"]) == list(range(1, len(group) + 1))
        assert group.sort_values("judge_order")["best_rank"].is_monotonic_increasing


def test_rrf_and_rbp_weigh_documents_over_runs_and_take_the_budget() -> None:
    runs = {
        "a": _run([("1", "x", 3), ("1", "y", 2), ("1", "z", 1)]),
        "b": _run([("1", "y", 3), ("1", "w", 2), ("1", "x", 1)]),
    }
    cands = pooling.candidates(runs, None)
    rrf = pooling.build(cands, list(runs), pooling.PoolSettings("rrf", None, 2))
    # x: 1/61 + 1/63, y: 1/62 + 1/61 -> y first; budget 2 keeps two
    assert rrf["doc"].to_pylist() == ["y", "x"] and rrf["judge_order"].to_pylist() == [1, 2]
    rbp = pooling.build(cands, list(runs), pooling.PoolSettings("rbp", None, 4, rbp_p=0.5))
    # weights 0.5 * 0.5^(rank-1): x .5+.125, y .25+.5, w .25, z .125
    assert rbp["doc"].to_pylist() == ["y", "x", "w", "z"]


def _oracle(relevant: set[str]):  # type: ignore[no-untyped-def]
    return lambda topic, doc: int(doc in relevant)


def test_move_to_front_stays_with_a_run_while_it_finds_relevant_documents() -> None:
    runs = {
        "good": _run([("1", d, 10 - i) for i, d in enumerate(["g1", "g2", "g3", "n1"])]),
        "bad": _run([("1", d, 10 - i) for i, d in enumerate(["b1", "b2", "g3"])]),
    }
    cands = pooling.candidates(runs, None)
    order = pooling.judging_order(cands, pooling.PoolSettings("mtf", None, 10), _oracle({"g1", "g2", "g3"}))
    # good: g1 g2 g3 hits, n1 miss -> bad: b1 miss -> good exhausted, bad: b2 miss, (g3 judged)
    assert order["doc"].tolist() == ["g1", "g2", "g3", "n1", "b1", "b2"]
    fresh = pooling.judging_order(cands, pooling.PoolSettings("mtf", None, 10))
    assert fresh["doc"].tolist()[:3] == ["g1", "b1", "g2"]  # no feedback: round robin


def test_bandit_pulls_the_arm_that_pays() -> None:
    docs_good = [f"g{i}" for i in range(10)]
    docs_bad = [f"b{i}" for i in range(10)]
    runs = {
        "bad": _run([("1", d, 20 - i) for i, d in enumerate(docs_bad)]),
        "good": _run([("1", d, 20 - i) for i, d in enumerate(docs_good)]),
    }
    cands = pooling.candidates(runs, None)
    for policy, seed, least in (("maxmean", None, 10), ("thompson", 3, 7)):
        order = pooling.judging_order(
            cands, pooling.PoolSettings("bandit", None, 12, seed, bandit_policy=policy), _oracle(set(docs_good))
        )
        assert sum(d.startswith("g") for d in order["doc"]) >= least, policy  # of 12 judgments, 10 good exist
    settings_ = pooling.PoolSettings("bandit", None, 8, 11, bandit_policy="thompson")
    first = pooling.judging_order(cands, settings_, _oracle(set(docs_good)))
    again = pooling.judging_order(cands, settings_, _oracle(set(docs_good)))
    assert first.equals(again)


@pytest.mark.parametrize(
    ("both_yes", "both_no", "only_a", "only_b", "kappa"),
    [(10, 15, 0, 5, 0.667), (45, 15, 15, 25, 0.130), (25, 35, 35, 5, 0.259)],
)
def test_cohen_kappa_textbook_cases(both_yes: int, both_no: int, only_a: int, only_b: int, kappa: float) -> None:
    a = np.array([1] * both_yes + [0] * both_no + [1] * only_a + [0] * only_b)
    b = np.array([1] * both_yes + [0] * both_no + [0] * only_a + [1] * only_b)
    assert pooling.cohen_kappa(a, b) == pytest.approx(kappa, abs=5e-4)
    labels = pd.DataFrame(
        {
            "item": np.tile(np.arange(len(a)), 2),
            "assessor": ["A"] * len(a) + ["B"] * len(b),
            "label": np.concatenate([a, b]),
        }
    )
    result = pooling.agreement(labels)
    assert result.pairs[0].kappa == pytest.approx(kappa, abs=5e-4) and result.pairs[0].items == len(a)
    assert result.pairs[0].weighted_kappa is None  # binary labels


def test_agreement_against_statsmodels_and_krippendorff() -> None:
    import krippendorff
    from sklearn.metrics import cohen_kappa_score
    from statsmodels.stats.inter_rater import aggregate_raters, fleiss_kappa

    rng = np.random.default_rng(0)
    truth = rng.integers(0, 3, 60)
    raters = {name: np.where(rng.random(60) < 0.7, truth, rng.integers(0, 3, 60)) for name in "ABC"}
    rows = [
        (item, name, int(label))
        for name, labels in raters.items()
        for item, label in enumerate(labels)
        if not (name == "C" and item < 10)
    ]  # C skipped ten items
    result = pooling.agreement(pd.DataFrame(rows, columns=["item", "assessor", "label"]))
    ab = next(p for p in result.pairs if (p.first, p.second) == ("A", "B"))
    assert ab.kappa == pytest.approx(cohen_kappa_score(raters["A"], raters["B"]))
    assert ab.weighted_kappa == pytest.approx(cohen_kappa_score(raters["A"], raters["B"], weights="linear"))
    assert ab.quadratic_kappa == pytest.approx(cohen_kappa_score(raters["A"], raters["B"], weights="quadratic"))
    ac = next(p for p in result.pairs if (p.first, p.second) == ("A", "C"))
    assert ac.items == 50
    complete = np.column_stack([raters[n][10:] for n in "ABC"])
    assert result.items_all == 50
    assert result.fleiss_kappa == pytest.approx(fleiss_kappa(aggregate_raters(complete)[0]))
    data = np.vstack([raters[n].astype(float) for n in "ABC"])
    data[2, :10] = np.nan
    assert result.krippendorff_alpha == pytest.approx(
        krippendorff.alpha(data, level_of_measurement="ordinal", value_domain=[0, 1, 2])
    )
    for level in ("nominal", "interval", "ratio"):
        assert result.krippendorff_by_level[level] == pytest.approx(
            krippendorff.alpha(data, level_of_measurement=level, value_domain=[0, 1, 2])
        )
