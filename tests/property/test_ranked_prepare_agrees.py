"""Evaluating a stored run starts from what the database computes (each topic's document count
and the stored trec_eval rank of each judged document); it must give exactly the rankings the
sorting path gives the same run: ties, run topics missing from the qrels or the reverse,
negative ("pooled but unjudged") judgments, -J and -M, with and without -c."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from hypothesis import given, settings
from hypothesis import strategies as st

from evalstore.metrics import compute, preparation, resolve_measures
from evalstore.metrics.preparation import PrepareOptions, prepare, prepare_ranked
from evalstore.metrics.trec_names import expand, parse_trec_specs
from evalstore.trec_order import trec_rank

TOPICS = ["1", "2", "10", "B", "a"]
DOCS = ["d1", "d2", "d3", "D4", "d10", "e"]


@st.composite
def run_and_qrels(draw: st.DrawFn) -> tuple[pa.Table, pa.Table]:
    run_pairs = draw(st.lists(st.tuples(st.sampled_from(TOPICS[:4]), st.sampled_from(DOCS)), unique=True, max_size=20))
    scores = draw(
        st.lists(st.sampled_from([0.0, 0.5, 1.0, -2.0, 3.25]), min_size=len(run_pairs), max_size=len(run_pairs))
    )
    judged = draw(
        st.lists(st.tuples(st.sampled_from(TOPICS[1:]), st.sampled_from(DOCS)), unique=True, min_size=1, max_size=15)
    )
    levels = draw(st.lists(st.integers(-1, 3), min_size=len(judged), max_size=len(judged)))
    run = pa.table(
        {
            "topic": pa.array([t for t, _ in run_pairs], pa.string()),
            "doc": pa.array([d for _, d in run_pairs], pa.string()),
            "score": pa.array(scores, pa.float64()),
        }
    )
    qrels = pa.table(
        {"topic": [t for t, _ in judged], "doc": [d for _, d in judged], "relevance": pa.array(levels, pa.int64())}
    )
    return run, qrels


def stored_view(run: pa.Table, qrels: pa.Table) -> tuple[pa.Table, pa.Table]:
    """What repositories.judged_ranks reads for the run once stored."""
    frame = run.append_column("rank", pa.array(trec_rank(run))).to_pandas()
    counts = frame.groupby("topic").size()
    retrieved = pa.table(
        {"topic": pa.array(counts.index.tolist(), pa.string()), "retrieved": pa.array(counts.to_numpy(), pa.int64())}
    )
    hits = frame.merge(qrels.to_pandas(), on=["topic", "doc"])
    judged = pa.table(
        {
            "topic": pa.array(hits["topic"].tolist(), pa.string()),
            "rank": pa.array(hits["rank"].to_numpy(), pa.int32()),
            "relevance": pa.array(hits["relevance"].to_numpy(), pa.int64()),
        }
    )
    return retrieved, judged


@settings(max_examples=300, deadline=None)
@given(
    data=run_and_qrels(), judged_only=st.booleans(), complete=st.booleans(), max_docs=st.sampled_from([None, 1, 2, 5])
)
def test_prepare_from_stored_ranks_equals_sorting(
    data: tuple[pa.Table, pa.Table], judged_only: bool, complete: bool, max_docs: int | None
) -> None:
    run, qrels = data
    options = PrepareOptions(max_docs=max_docs, judged_only=judged_only, complete=complete)
    expected = prepare(qrels, run, options)
    got = prepare_ranked(qrels, *stored_view(run, qrels), options)
    assert got.topics == expected.topics
    assert got.missing_topics == expected.missing_topics
    assert got.dropped_run_topics == expected.dropped_run_topics
    np.testing.assert_array_equal(got.rel, expected.rel)
    np.testing.assert_array_equal(got.num_ret, expected.num_ret)
    np.testing.assert_array_equal(got.rel_levels, expected.rel_levels)
    assert got.max_level == expected.max_level


@settings(max_examples=150, deadline=None)
@given(
    data=run_and_qrels(),
    judged_only=st.booleans(),
    complete=st.booleans(),
    max_docs=st.sampled_from([None, 1, 2, 5]),
    level=st.integers(1, 2),
)
def test_batches_of_topics_give_the_values_of_the_whole(
    data: tuple[pa.Table, pa.Table], judged_only: bool, complete: bool, max_docs: int | None, level: int
) -> None:
    """compute() splits a large ranking into batches of topics (Ranking.topic_rows): with a batch
    of one cell, every topic is its own batch, and every measure must still give the same values."""
    run, qrels = data
    rk = prepare(qrels, run, PrepareOptions(max_docs=max_docs, judged_only=judged_only, complete=complete))
    if rk.n < 2:
        return
    whole = compute(rk, EVERY_MEASURE, relevance_level=level)
    batched = compute(
        prepare(qrels, run, PrepareOptions(max_docs=max_docs, judged_only=judged_only, complete=complete)),
        EVERY_MEASURE,
        relevance_level=level,
        batch_cells=1,
    )
    for measure in EVERY_MEASURE:
        if whole[measure].dtype == object:
            assert whole[measure].tolist() == batched[measure].tolist(), measure
        else:
            np.testing.assert_array_equal(whole[measure], batched[measure], err_msg=str(measure))


# all_trec's measures and the registry's others at their defaults (relevance judgments)
EVERY_MEASURE = list(
    dict.fromkeys(
        [m for spec in parse_trec_specs(["all_trec"]) for _, m in expand(spec) if m is not None]
        + resolve_measures(["nDCG@10", "RR@10", "RBP(p=0.8)", "ERR@20", "Judged@10", "infAP", "Success@5", "R@100"])
    )
)


def _colliding_hashes(docs: pa.ChunkedArray) -> np.ndarray:
    """Every docno of the same length gets the same hash: look-ups by hash meet collisions."""
    return pc.binary_length(docs).to_numpy(zero_copy_only=False).astype(np.uint64)


@settings(max_examples=150, deadline=None)
@given(data=run_and_qrels(), complete=st.booleans())
def test_docnos_looked_up_by_hash_by_text_and_through_collisions_agree(
    data: tuple[pa.Table, pa.Table], complete: bool
) -> None:
    """prepare looks an ordinary run's docnos up by 64-bit hash (a match confirmed on the text),
    a large run's as text: the two, and the hashed one with every hash colliding, find the same
    judged places. Qrels that judge each pair once take the (topic, docno) key index (``single``,
    and ``colliding_once`` where no two judgments' keys collide: there a run docno's key meets a
    judgment of another docno), qrels with a judgment given twice the look-up as text. Plain
    patching (not pytest's fixture, which hypothesis would share between examples) and restored in
    finally."""
    run, once = data
    qrels = pa.concat_tables([once, once.slice(0, 1)])  # a judgment given twice: a place is judged once
    options = PrepareOptions(complete=complete)
    single = prepare(once, run, options)
    original = (preparation.HASHED_LOOKUP_ROWS, preparation.doc_hashes)
    try:
        by_hash = prepare(qrels, run, options)
        preparation.HASHED_LOOKUP_ROWS = 0
        by_text = prepare(qrels, run, options)
        preparation.HASHED_LOOKUP_ROWS, preparation.doc_hashes = original[0], _colliding_hashes
        preparation._last_judged.clear()
        colliding = prepare(qrels, run, options)
        colliding_once = prepare(once, run, options)
    finally:
        preparation.HASHED_LOOKUP_ROWS, preparation.doc_hashes = original
        preparation._last_judged.clear()
    for got in (single, by_text, colliding, colliding_once):
        np.testing.assert_array_equal(got.rel, by_hash.rel)
        np.testing.assert_array_equal(got.judged_row, by_hash.judged_row)
        np.testing.assert_array_equal(got.judged_position, by_hash.judged_position)
