"""The kernels that read only a ranking's judged entries (not its (topics, depth) matrix) against
a plain per-topic loop over the matrix row: every place, relevant or not, in the qrels or not.
Covers the parameters that change which places carry something: pooled-but-unjudged judgments
(-1 in a qrels file) with a gain of their own, cutoffs past the ranking, -M and -J."""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evalstore.metrics import compute, parse_measure
from evalstore.metrics.preparation import NONPOOL, PAD, UNJUDGED, PrepareOptions, prepare

TOPICS = ["1", "2", "3"]
DOCS = [f"d{i}" for i in range(12)]


@st.composite
def rankings(draw: st.DrawFn):  # type: ignore[no-untyped-def]
    run_pairs = draw(st.lists(st.tuples(st.sampled_from(TOPICS), st.sampled_from(DOCS)), unique=True, max_size=30))
    scores = draw(st.lists(st.integers(0, 5), min_size=len(run_pairs), max_size=len(run_pairs)))
    judged = draw(
        st.lists(st.tuples(st.sampled_from(TOPICS), st.sampled_from(DOCS)), unique=True, min_size=1, max_size=25)
    )
    levels = draw(st.lists(st.integers(-1, 3), min_size=len(judged), max_size=len(judged)))
    run = pa.table(
        {
            "topic": pa.array([t for t, _ in run_pairs], pa.string()),
            "doc": pa.array([d for _, d in run_pairs], pa.string()),
            "score": pa.array([float(s) for s in scores], pa.float64()),
        }
    )
    qrels = pa.table(
        {"topic": [t for t, _ in judged], "doc": [d for _, d in judged], "relevance": pa.array(levels, pa.int64())}
    )
    options = PrepareOptions(
        max_docs=draw(st.sampled_from([None, 2, 5])), judged_only=draw(st.booleans()), complete=draw(st.booleans())
    )
    return prepare(qrels, run, options)


def places(rk, t: int) -> list[int]:  # type: ignore[no-untyped-def]
    return [int(code) for code in rk.rel[t] if code != PAD]


def gain_of(code: int, gains: dict[int, float]) -> float:
    return gains.get(code, float(max(code, 0))) if code != NONPOOL else gains.get(NONPOOL, 0.0)


def dcg(codes: list[int], gains: dict[int, float], k: int) -> float:
    total = 0.0
    for i, code in enumerate(codes[:k]):
        if gain_of(code, gains) != 0:
            total += gain_of(code, gains) / math.log2(i + 2.0)
    return total


def reference(rk, name: str, t: int) -> float:  # type: ignore[no-untyped-def]
    codes = places(rk, t)
    judged_levels = rk.rel_levels[t]
    relevant = int(judged_levels[1:].sum())
    hits = [code >= 1 for code in codes]
    if name == "P@7":
        return sum(hits[:7]) / 7
    if name == "RR@3":
        return next((1.0 / (i + 1) for i, hit in enumerate(hits[:3]) if hit), 0.0)
    if name == "RR":
        return next((1.0 / (i + 1) for i, hit in enumerate(hits) if hit), 0.0)
    if name == "NumNonRelJudgedRet(rel=2)":
        return float(sum(0 <= code < 2 for code in codes))
    if name == "Unj@4":
        return sum(code < 0 for code in codes[:4]) / 4
    if name == "Judged@4":
        top = codes[:4]
        return sum(code >= 0 for code in top) / len(top) if top else 0.0
    if name in ("IPrec(recall=0.5,rounding=trec_eval10)", "IPrec(recall=0.0,rounding=trec_eval10)"):
        x = 0.5 if "0.5" in name else 0.0
        count = math.floor(x * relevant + 0.5)
        found = sum(hits)
        if count == 0 and not codes and not rk.stand_in[t]:
            return math.nan
        if found == 0 or count > found:
            return 0.0
        seen, best, start = 0, 0.0, None
        for i, hit in enumerate(hits):
            seen += hit
            if start is None and seen >= max(count, 1):
                start = i
            if start is not None:
                best = max(best, seen / (i + 1))
        return best
    if name == "PAtR(recall=0.5)":
        need = max(math.ceil(0.5 * relevant - 1e-12), 1)
        seen = 0
        for i, hit in enumerate(hits):
            seen += hit
            if relevant and seen == need:
                return need / (i + 1)
        return 0.0
    if name == "binG":
        total, before = 0.0, 0
        for hit in hits:
            if hit:
                total += 1.0 / math.log2(2.0 + before)
            else:
                before += 1
        return total / relevant if relevant else 0.0
    if name.startswith("nDCG"):
        gains = {UNJUDGED: 2.5} if "gains" in name else {}
        k = 3 if name.endswith("@3") else 10**9
        ideal = sorted(
            (
                gain_of(level, gains)
                for level in range(len(judged_levels))
                for _ in range(int(judged_levels[level]))
                if gain_of(level, gains) > 0
            ),
            reverse=True,
        )
        best = sum(g / math.log2(i + 2.0) for i, g in enumerate(ideal[:k]))
        return dcg(codes, gains, k) / best if best > 0 else 0.0
    if name == "RBP(p=0.7,rel=2)":
        total, weight = 0.0, 1.0
        for code in codes:
            total += (1.0 if code >= 2 else 0.0) * weight
            weight *= 0.7
        return 0.3 * total
    raise AssertionError(name)


NAMES = [
    "P@7",
    "RR@3",
    "RR",
    "NumNonRelJudgedRet(rel=2)",
    "Unj@4",
    "Judged@4",
    "IPrec(recall=0.5,rounding=trec_eval10)",
    "IPrec(recall=0.0,rounding=trec_eval10)",
    "PAtR(recall=0.5)",
    "binG",
    "nDCG@3",
    "nDCG",
    "nDCG(gains={-2:2.5})@3",
    "RBP(p=0.7,rel=2)",
]


@settings(max_examples=200, deadline=None)
@given(rk=rankings())
def test_entry_kernels_equal_a_loop_over_every_place(rk) -> None:  # type: ignore[no-untyped-def]
    measures = [parse_measure(name) for name in NAMES]
    values = compute(rk, measures, threads=1)
    for name, measure in zip(NAMES, measures, strict=True):
        got = values[measure].tolist()
        want = [reference(rk, name, t) for t in range(rk.n)]
        assert got == pytest.approx(want, rel=1e-12, abs=1e-15, nan_ok=True), name


def test_a_gain_for_documents_outside_the_qrels_reads_the_matrix() -> None:
    """gains={-1: g} gives every retrieved document outside the qrels a gain: the entries lack them."""
    run = pa.table({"topic": ["1", "1"], "doc": ["a", "b"], "score": [2.0, 1.0]})
    qrels = pa.table({"topic": ["1"], "doc": ["b"], "relevance": pa.array([1], pa.int64())})
    rk = prepare(qrels, run)
    measure = parse_measure("DCG(gains={-1:1.0})")
    assert compute(rk, [measure])[measure].tolist() == [1.0 + 1.0 / np.log2(3.0)]


def test_qrels_of_pooled_but_unjudged_documents_alone_score_zero() -> None:
    """Every judgment -1 (no relevance level at all): RBP once failed on its empty gain table."""
    run = pa.table({"topic": ["1", "1"], "doc": ["a", "b"], "score": [2.0, 1.0]})
    qrels = pa.table({"topic": ["1"], "doc": ["b"], "relevance": pa.array([-1], pa.int64())})
    measures = [parse_measure(name) for name in ("RBP", "RBP(p=0.9)", "nDCG", "G", "RBP_resid(p=0.9)")]
    values = compute(prepare(qrels, run), measures)
    # both places unjudged: p^2 + (1-p)(1 + p) = 1, as trec_eval prints
    assert [values[m].tolist() for m in measures] == [[0.0], [0.0], [0.0], [0.0], [pytest.approx(1.0)]]
