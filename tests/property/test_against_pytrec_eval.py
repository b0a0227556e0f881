"""Per-topic values equal pytrec_eval's (trec_eval's own C code) on generated runs with ties,
graded and negative labels, topics without relevant documents, and topics missing on either side.

pytrec_eval follows trec_eval 9.x for iprec_at_recall / 11pt_avg (and lacks rbp, unj): those are
checked against trec_eval 10.0's golden files instead (tests/golden).
"""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evalstore.metrics import compute
from evalstore.metrics.preparation import PrepareOptions, prepare
from evalstore.metrics.trec_names import expand_trec_spec

pytrec_eval = pytest.importorskip("pytrec_eval")

FAMILIES = [
    "map",
    "P",
    "recall",
    "ndcg",
    "ndcg_cut",
    "Rprec",
    "bpref",
    "recip_rank",
    "infAP",
    "map_cut",
    "relative_P",
    "success",
    "set_P",
    "set_recall",
    "set_relative_P",
    "set_map",
    "set_F",
    "utility",
    "num_ret",
    "num_rel",
    "num_rel_ret",
    "num_nonrel_judged_ret",
    "Rprec_mult",
    "binG",
    "G",
    "ndcg_rel",
    "Rndcg",
]
TOPICS = ["q1", "q2", "q3", "q4"]
DOCS = [f"d{i}" for i in range(12)]


@st.composite
def qrels_and_run(draw: st.DrawFn) -> tuple[dict[str, dict[str, int]], dict[str, dict[str, float]]]:
    qrels: dict[str, dict[str, int]] = {}
    for topic in draw(st.lists(st.sampled_from(TOPICS[:3]), min_size=1, max_size=3, unique=True)):
        docs = draw(st.lists(st.sampled_from(DOCS), min_size=1, max_size=10, unique=True))
        labels = {d: draw(st.sampled_from([-1, 0, 0, 1, 1, 2, 3])) for d in docs}
        # A topic whose judgments are all negative makes trec_eval's C code read past a zero-length
        # array (form_res_rels.c: max_rel = -1), and pytrec_eval crashes or returns garbage; our
        # engine defines it (no relevant documents), so such topics are left out of the comparison.
        if max(labels.values()) >= 0:
            qrels[topic] = labels
    if not qrels:
        qrels["q1"] = {"d0": 1}
    run: dict[str, dict[str, float]] = {}
    for topic in draw(st.lists(st.sampled_from(TOPICS), min_size=1, max_size=4, unique=True)):
        docs = draw(st.lists(st.sampled_from(DOCS), min_size=1, max_size=12, unique=True))
        # few distinct scores: many ties, broken by docno descending
        run[topic] = {d: draw(st.sampled_from([0.5, 1.0, 1.0, 2.0, -1.0])) for d in docs}
    return qrels, run


def _table(nested: dict[str, dict[str, float]], value: str) -> pa.Table:
    rows = [(q, d, v) for q, docs in nested.items() for d, v in docs.items()]
    return pa.table({"topic": [r[0] for r in rows], "doc": [r[1] for r in rows], value: [r[2] for r in rows]})


@settings(max_examples=250, deadline=None)
@given(data=qrels_and_run(), level=st.sampled_from([1, 2]))
def test_matches_pytrec_eval(data: tuple[dict, dict], level: int) -> None:  # type: ignore[type-arg]
    qrels, run = data
    shared = sorted(set(qrels) & set(run))
    if not shared:
        return
    expected = pytrec_eval.RelevanceEvaluator(qrels, set(FAMILIES), relevance_level=level).evaluate(run)
    rk = prepare(_table(qrels, "relevance"), _table(run, "score"), PrepareOptions())
    assert rk.topics == shared
    pairs = [pair for family in FAMILIES for pair in expand_trec_spec(family)]
    values = compute(rk, [m for _, m in pairs if m is not None], relevance_level=level)
    for t, topic in enumerate(rk.topics):
        for name, measure in pairs:
            assert measure is not None
            ours = float(values[measure][t])
            theirs = expected[topic][name]
            assert ours == pytest.approx(theirs, abs=1e-9), (topic, name, ours, theirs)
