"""The trained fusion methods (probfuse, segfuse, slidefuse, bayesfuse, mapfuse, posfuse) against
ranx itself: trained on the same qrels with ranx's ``*_train`` and fused with ``ranx.fuse``, on the
hand-made runs with hand-made qrels and on three robust03 runs over three topics with the robust03
qrels of those topics: the same documents per topic, scores equal to 1e-9 relative, in the same
order wherever the scores differ. ranx places a run's documents in the order its dictionary holds
them where evalstore ranks them by score: the runs given to ranx are in score order."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from evalstore.errors import InvalidParameterError
from evalstore.fusion import METHODS, fuse
from tests.conftest import shared_path
from tests.differential.test_fusion_against_ranx import HAND_MADE, Runs, assert_same, ranx, real_runs, table


def ranx_fusion() -> Any:
    """ranx's fusion module, imported by the first test that uses it (as ranx: ranx())."""
    return pytest.importorskip("ranx.fusion")


pytestmark = pytest.mark.filterwarnings("ignore:.*unsafe cast from uint64 to int64:Warning")  # as there

TRAINED = [m for m in METHODS if METHODS[m].trained]
PARAMS: dict[str, dict[str, int]] = {"probfuse": {"n_segments": 2}, "slidefuse": {"w": 1}}
REAL_PARAMS: dict[str, dict[str, int]] = {"probfuse": {"n_segments": 25}, "slidefuse": {"w": 3}}
# what ranx.fuse takes each method's training as
TRAINED_AS = {"mapfuse": "map_scores", "bayesfuse": "log_odds"}
Qrels = dict[str, dict[str, int]]

HAND_QRELS: Qrels = {
    "q1": {"a": 1, "e": 2, "c": 0},
    "q2": {"y": 1, "v": 1},
    "q3": {"n": 0},
    "q4": {"s": 1, "zz": 1},  # a relevant document no run retrieved: it counts in mapfuse's MAP
}


def in_score_order(runs: Runs) -> Runs:
    """Each topic's documents by score descending, then docno descending (trec_eval's order)."""
    return [
        {q: dict(sorted(docs.items(), key=lambda d: (-d[1], [-ord(c) for c in d[0]]))) for q, docs in run.items()}
        for run in runs
    ]


def qrels_table(qrels: Qrels) -> pa.Table:
    rows = [(q, d, r) for q, docs in qrels.items() for d, r in docs.items()]
    return pa.table(
        {"topic": [r[0] for r in rows], "doc": [r[1] for r in rows], "relevance": pa.array([r[2] for r in rows])}
    )


def theirs(runs: Runs, qrels: Qrels, method: str, params: Mapping[str, int]) -> dict[str, dict[str, float]]:
    train = getattr(ranx_fusion(), f"{method}_train")
    extra = [params["n_segments"]] if method == "probfuse" else []
    learnt = train(ranx().Qrels(qrels), [ranx().Run(r) for r in runs], *extra)
    given: dict[str, Any] = {TRAINED_AS.get(method, "probs"): learnt}
    if method == "slidefuse":
        given["w"] = params["w"]
    fused = ranx().fuse([ranx().Run(r) for r in runs], norm="min-max", method=method, params=given)
    return {q: dict(docs) for q, docs in fused.to_dict().items()}


@pytest.mark.parametrize("method", TRAINED)
def test_hand_made_runs_fuse_as_ranx_after_training(method: str) -> None:
    runs = in_score_order(HAND_MADE)
    got = fuse([table(r) for r in runs], method, "min-max", params=PARAMS.get(method), qrels=qrels_table(HAND_QRELS))
    assert_same(got, theirs(runs, HAND_QRELS, method, PARAMS.get(method, {})), method)
    assert got.trained is not None and got.trained.topics == 4
    assert len(got.trained.values) == 3


@pytest.fixture(scope="module")
def robust03() -> tuple[Runs, Qrels]:
    names = ("input.uwmtCR0.gz", "input.SABIR03BASE.gz", "input.fub03IeOLKe3.gz")
    runs = in_score_order(real_runs([shared_path("robust03", "runs", n) for n in names], topics=3))
    qrels: Qrels = {}
    with open(shared_path("robust03", "robust03_qrels.txt")) as handle:
        for line in handle:
            q, _, doc, rel = line.split()
            if q in runs[0]:
                qrels.setdefault(q, {})[doc] = int(rel)
    return runs, qrels


@pytest.mark.parametrize("method", TRAINED)
def test_robust03_runs_fuse_as_ranx_after_training(robust03: tuple[Runs, Qrels], method: str) -> None:
    runs, qrels = robust03
    got = fuse([table(r) for r in runs], method, "min-max", params=REAL_PARAMS.get(method), qrels=qrels_table(qrels))
    assert_same(got, theirs(runs, qrels, method, REAL_PARAMS.get(method, {})), method)


def test_a_trained_method_needs_its_training_and_an_untrained_one_refuses_it() -> None:
    runs = [table(r) for r in HAND_MADE]
    with pytest.raises(InvalidParameterError) as error:
        fuse(runs, "mapfuse", "min-max")
    assert str(error.value) == "mapfuse is trained on judgments first; give the training qrels."
    with pytest.raises(InvalidParameterError) as error:
        fuse(runs, "combsum", "min-max", qrels=qrels_table(HAND_QRELS))
    assert str(error.value) == (
        "combsum is not trained on judgments; the trained methods are "
        "probfuse, segfuse, slidefuse, bayesfuse, mapfuse, posfuse."
    )
    with pytest.raises(InvalidParameterError) as error:
        fuse(runs, "probfuse", "min-max", qrels=qrels_table(HAND_QRELS))
    assert str(error.value) == "probfuse needs its parameter n_segments."
    with pytest.raises(InvalidParameterError) as error:
        fuse(runs, "slidefuse", "min-max", params={"w": 1.5}, qrels=qrels_table(HAND_QRELS))
    assert str(error.value) == "slidefuse's w must be a whole number from 0 to 1000, not 1.5."
    with pytest.raises(InvalidParameterError) as error:
        fuse(runs, "posfuse", "min-max", qrels=qrels_table({"other": {"a": 1}}))
    assert str(error.value) == (
        "The training qrels judge none of the runs' topics; train on judgments of the runs' topics."
    )


def test_training_on_some_topics_fuses_them_all() -> None:
    runs = in_score_order(HAND_MADE)
    some = {q: HAND_QRELS[q] for q in ("q1", "q2")}
    got = fuse([table(r) for r in runs], "posfuse", "min-max", qrels=qrels_table(some))
    assert got.trained is not None and got.trained.topics == 2
    assert sorted(set(got.table["topic"].to_pylist())) == ["q1", "q2", "q3", "q4"]
    # trained on q1 and q2 only: run 1 has a relevant document first in q1 only, none second
    assert got.trained.values[0][:2] == (0.5, 0.0)
    assert np.isclose(got.trained.values[2][1], 0.5)


def test_trained_on_a_split_learns_from_its_training_topics_and_records_them(engine, write) -> None:  # type: ignore[no-untyped-def]
    from evalstore.services import fusion as service
    from evalstore.services import splits, store
    from tests.differential.test_fusion_against_ranx import lines, synthetic

    topics = [str(t) for t in range(1, 11)]
    runs, qrels = synthetic(3, topics)
    store.import_qrels(
        engine,
        write("q.txt", "".join(f"{q} 0 {d} {r}\n" for q, docs in qrels.items() for d, r in docs.items())),
        name="q",
    )
    for i, run in enumerate(runs):
        store.register_run(engine, write(f"r{i}.txt", lines(run, f"r{i}")), name=f"r{i}")
    splits.make_split(engine, "h", qrels="q", seed=5)
    _, train = splits.members(engine, "h", "train")
    chosen = set(train[1])

    made = service.fuse_runs(
        engine, ["r0", "r1", "r2"], service.Recipe("mapfuse", "min-max", depth=None), name="fused", split="h"
    )

    expected = ranx_fusion().mapfuse_train(
        ranx().Qrels({q: v for q, v in qrels.items() if q in chosen}),
        [ranx().Run({q: v for q, v in run.items() if q in chosen}) for run in in_score_order(runs)],
    )
    learnt = json.loads(made.provenance["fusion.trained"])
    np.testing.assert_allclose([v[0] for v in learnt], expected, rtol=1e-9)
    assert made.provenance["fusion.training_topics"] == str(len(chosen))
    assert made.provenance["fusion.split"] == "h" and made.provenance["fusion.fold"] == "1"
    assert made.provenance["fusion.seed"] == "5"


def test_bayesfuse_refuses_a_topic_past_its_1000_positions() -> None:
    deep = pa.table(
        {"topic": ["q"] * 1001, "doc": [f"d{i:04d}" for i in range(1001)], "score": np.arange(1001.0)[::-1]}
    )
    short = pa.table({"topic": ["q"], "doc": ["d0000"], "score": [1.0]})
    with pytest.raises(InvalidParameterError) as error:
        fuse([short, deep], "bayesfuse", "min-max", qrels=qrels_table({"q": {"d0000": 1}}))
    assert str(error.value) == (
        "bayesfuse learns log-odds for the first 1000 positions; run 2 has more documents in topic q; "
        "fuse runs cut to 1000 documents per topic."
    )
