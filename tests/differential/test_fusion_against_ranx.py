"""evalstore.fusion against ranx itself: every fusion method under every normalisation, on hand-made
runs (missing documents, negative scores, one-document topics, equal scores across a topic) and on
real runs (three robust03 runs; a DL 2019 run and a DL-HARD run on their common DL 2019 topics):
the same documents per topic, scores equal to 1e-9 relative (1e-12 absolute, for scores that
cancel to about 0), in the same order wherever the scores differ."""

from __future__ import annotations

import functools
import gzip
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from evalstore.errors import InvalidParameterError
from evalstore.fusion import METHODS, NORMS, Fused, fuse
from tests.conftest import shared_path


def ranx() -> Any:
    """ranx, imported by the first test that uses it, not as this module is collected: ranx imports
    numba and matplotlib (~1.5 s of CPU), which every xdist worker paid to collect this module
    and test_trained_fusion_against_ranx.py, though one worker runs each (their module fixtures
    keep a module's tests together). Without ranx the test skips (and fails under CI)."""
    return pytest.importorskip("ranx")


# numba's warning, as it compiles ranx's functions, not ours (where NUMBA_DISABLE_JIT=0 compiles
# them: tests/differential/conftest.py)
pytestmark = pytest.mark.filterwarnings("ignore:.*unsafe cast from uint64 to int64:Warning")

PARAMS: dict[str, dict[str, float]] = {
    "rrf": {"k": 60},
    "rbc": {"phi": 0.8},
    "combgmnz": {"gamma": 0.5},
    "logn_isr": {"sigma": 0.01},
}
WEIGHTS = [0.5, 0.3, 0.2]
# the trained methods: test_trained_fusion_against_ranx.py
UNTRAINED = [m for m in METHODS if not METHODS[m].trained]
COMBINATIONS = [(m, n) for m in UNTRAINED for n in NORMS if not (METHODS[m].by_rank and n == "borda")]
# Condorcet's order where the runs' majority ties or cycles is its sort's (ranx's starts from a
# set's order, which changes with Python's string hashing): compared where the majority decides
SORTED_BY_MAJORITY = ("condorcet", "w_condorcet")
# on the real runs (each ranx call there costs ~0.4 s): every method under one normalisation, and
# every normalisation under two score-based methods; the whole matrix runs on the hand-made runs
ROBUST03_COMBINATIONS = sorted(
    {(m, "min-max") for m in UNTRAINED} | {(m, n) for m in ("combsum", "wsum") for n in NORMS}
)
DL19_COMBINATIONS = sorted({(m, n) for m in UNTRAINED for n in ("none", "zmuv") if (m, n) in COMBINATIONS})

Runs = list[dict[str, dict[str, float]]]

# docnos of one length: ranx cuts a later run's docnos to the first run's longest (ranx 0.3.21:
# fusing {"q": {"only": 4}} with {"q": {"only": -1, "other": -3}} by combsum gives "othe" 0)
HAND_MADE: Runs = [
    {
        "q1": {"a": 3.0, "b": 2.5, "c": 1.0, "d": 0.2},
        "q2": {"x": 1.0, "y": -2.0, "z": 0.5},
        "q3": {"m": 4.0},
        "q4": {"p": 1.0, "q": 2.0},
    },
    {
        "q1": {"b": 10.0, "c": 7.0, "e": 1.0},
        "q2": {"y": 3.0, "w": 2.0},
        "q3": {"m": -1.0, "n": -3.0},
        "q4": {"q": 0.5, "r": 0.25, "s": 0.125},
    },
    {
        "q1": {"e": 0.9, "a": 0.4, "f": 0.1},
        "q2": {"x": 0.3, "w": 0.2, "v": 0.1},
        "q3": {"n": 0.7},
        "q4": {"s": 5.0, "p": 4.0},
    },
]


def table(run: Mapping[str, Mapping[str, float]]) -> pa.Table:
    rows = [(q, d, s) for q, docs in run.items() for d, s in docs.items()]
    return pa.table(
        {
            "topic": [r[0] for r in rows],
            "doc": [r[1] for r in rows],
            "score": pa.array([r[2] for r in rows], pa.float64()),
        }
    )


def ours(runs: Runs, method: str, norm: str) -> Fused:
    weights = WEIGHTS[: len(runs)] if METHODS[method].weighted else None
    return fuse([table(r) for r in runs], method, norm, weights=weights, params=PARAMS.get(method))


_RANX_RUNS: dict[int, tuple[Runs, list[Any]]] = {}


def ranx_runs(runs: Runs) -> list[Any]:
    """ranx's Runs of ``runs``, made once per list (ranx.fuse leaves its inputs as they were):
    making them is most of what the reference costs."""
    made = _RANX_RUNS.get(id(runs))
    if made is None or made[0] is not runs:
        made = _RANX_RUNS[id(runs)] = (runs, [ranx().Run(r) for r in runs])
    return made[1]


def theirs(runs: Runs, method: str, norm: str) -> dict[str, dict[str, float]]:
    params: dict[str, Any] = dict(PARAMS.get(method, {}))
    if METHODS[method].weighted:
        params["weights"] = WEIGHTS[: len(runs)]
    fused = ranx().fuse(
        ranx_runs(runs), norm=None if norm == "none" else norm, method=METHODS[method].ranx, params=params
    )
    return {q: dict(docs) for q, docs in fused.to_dict().items()}


def by_topic(fused: pa.Table) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for q, d, s in zip(fused["topic"].to_pylist(), fused["doc"].to_pylist(), fused["score"].to_pylist(), strict=True):
        out.setdefault(q, {})[d] = s
    return out


def tie_classes(ranking: Mapping[str, float]) -> list[set[str]]:
    """The ranking as consecutive groups of documents of equal score (to 1e-9)."""
    groups: list[set[str]] = []
    previous = None
    for doc, score in ranking.items():
        if previous is not None and np.isclose(score, previous, rtol=1e-9, atol=1e-12):
            groups[-1].add(doc)
        else:
            groups.append({doc})
        previous = score
    return groups


def assert_same(got: Fused, expected: Mapping[str, Mapping[str, float]], method: str) -> None:
    mine = by_topic(got.table)
    assert sorted(mine) == sorted(expected)
    for topic, docs in expected.items():
        assert sorted(mine[topic]) == sorted(docs), topic
        if topic in got.undecided:  # Condorcet where the majority ties or cycles: test_condorcet_... below
            continue
        values = np.array([mine[topic][d] for d in docs])
        reference = np.array(list(docs.values()))
        np.testing.assert_allclose(values, reference, rtol=1e-9, atol=1e-12, err_msg=topic)
        if method not in SORTED_BY_MAJORITY:
            assert tie_classes(mine[topic]) == tie_classes(docs), topic


@pytest.mark.parametrize(("method", "norm"), COMBINATIONS)
def test_hand_made_runs_fuse_as_ranx(method: str, norm: str) -> None:
    got = ours(HAND_MADE, method, norm)
    if method in SORTED_BY_MAJORITY:
        assert got.undecided, "the hand-made runs' majority ties: the fusion says so"
    assert_same(got, theirs(HAND_MADE, method, norm), method)


def test_condorcet_is_ranx_s_where_the_majority_decides() -> None:
    base = [f"d{i}" for i in range(12)]
    swapped_early = base[:1] + [base[2], base[1]] + base[3:]
    swapped_late = base[:8] + [base[9], base[8]] + base[10:]
    runs = [{"q": {d: 12.0 - i for i, d in enumerate(order)}} for order in (base, swapped_early, swapped_late)]
    for method in SORTED_BY_MAJORITY:
        got = ours(runs, method, "none")
        assert got.warnings == ()
        expected = theirs(runs, method, "none")
        assert list(by_topic(got.table)["q"].items()) == list(expected["q"].items())


def test_condorcet_names_the_topics_where_the_majority_cycles() -> None:
    cycle = [
        {"q": {"a": 3.0, "b": 2.0, "c": 1.0}},
        {"q": {"b": 3.0, "c": 2.0, "a": 1.0}},
        {"q": {"c": 3.0, "a": 2.0, "b": 1.0}},
    ]
    got = ours(cycle, "condorcet", "none")
    assert got.warnings == (
        "the runs' majority vote ties or cycles on 1 topic (q): the order there is Python's sort's from docno order, "
        "where ranx's changes with Python's string hashing from one process to the next",
    )
    assert got.table["doc"].to_pylist() == ["a", "b", "c"]  # the same every time


def test_tied_scores_are_ranked_as_trec_eval_ranks_them_and_said_so() -> None:
    runs = [{"q": {"a": 1.0, "b": 1.0, "c": 0.5}}, {"q": {"c": 2.0, "a": 1.0}}]
    got = fuse([table(r) for r in runs], "rrf", "none", names=["run 'x'", "run 'y'"])
    # b ranks above a in run x (docno descending among equal scores)
    assert by_topic(got.table)["q"] == pytest.approx({"b": 1 / 61, "a": 1 / 62 + 1 / 62, "c": 1 / 63 + 1 / 61})
    assert got.warnings == (
        "run 'x' has 1 document tied in score with the one above: they are ranked by docno descending (trec_eval's "
        "order), where ranx ranks them in its sort's order, so their fused scores can differ from ranx's",
    )
    assert fuse([table(r) for r in runs], "combsum", "none").warnings == ()  # scores alone: ties do not matter


@pytest.mark.parametrize("method", [m for m in UNTRAINED if METHODS[m].by_rank])
def test_rank_methods_after_borda_normalisation_are_refused(method: str) -> None:
    with pytest.raises(InvalidParameterError) as refused:
        ours(HAND_MADE, method, "borda")
    assert str(refused.value) == (
        f"{method} ranks each run's documents, and the borda normalisation gives every document a run lacks one "
        "score, so their ranks are arbitrary (ranx ranks them in Python's string-hashing order, which changes from "
        "one process to the next); fuse with another normalisation."
    )


def test_depth_keeps_each_topic_s_best() -> None:
    whole = ours(HAND_MADE, "combsum", "min-max").table
    cut = fuse([table(r) for r in HAND_MADE], "combsum", "min-max", depth=2).table
    expected = whole.filter(pc.less_equal(whole["rank"], 2))
    assert cut.to_pylist() == expected.to_pylist()
    assert pc.max(cut["rank"]).as_py() == 2


def test_bad_inputs_are_refused_with_what_to_do() -> None:
    runs = [table(r) for r in HAND_MADE]
    cases: list[tuple[dict[str, Any], str]] = [
        ({"method": "combfoo"}, "Unknown fusion method 'combfoo'; the methods are " + ", ".join(METHODS) + "."),
        ({"method": "wsum", "weights": [1, 2]}, "2 weights for 3 runs; give one weight per run."),
        ({"method": "wsum", "weights": [1, -2, 1]}, "A weight must be a number of 0 or more, not -2."),
        ({"method": "wsum", "weights": [1, float("nan"), 1]}, "A weight must be a number of 0 or more, not nan."),
        (
            {"method": "rrf", "weights": [1, 1, 1]},
            "rrf takes no weights; the weighted methods are wsum, wmnz, mixed, w_bordafuse, w_condorcet.",
        ),
        ({"method": "rbc"}, "rbc needs its parameter phi."),
        ({"method": "rbc", "params": {"phi": 1.5}}, "rbc's phi must be between 0 and 1 (exclusive), not 1.5."),
        ({"method": "rrf", "params": {"phi": 0.5}}, "rrf takes k; not phi."),
        (
            {"method": "combsum", "norm": "minmax"},
            "Unknown normalisation 'minmax'; the normalisations are " + ", ".join(NORMS) + ".",
        ),
    ]
    for kwargs, message in cases:
        with pytest.raises(InvalidParameterError) as refused:
            fuse(runs, **kwargs)
        assert str(refused.value) == message
    lacking = table({q: docs for q, docs in HAND_MADE[1].items() if q not in ("q2", "q4")})
    with pytest.raises(InvalidParameterError) as refused:
        fuse([runs[0], lacking], "rrf", names=["run 'a'", "run 'b'"])
    assert (
        str(refused.value)
        == "The runs' topics differ: run 'b' lacks topics q2, q4 that run 'a' has; fuse runs of the same topics."
    )
    with pytest.raises(InvalidParameterError) as refused:
        fuse(runs[:1], "rrf")
    assert str(refused.value) == "Fusion takes two runs or more; 1 given."


def test_ranx_s_names_are_accepted() -> None:
    runs = [table(r) for r in HAND_MADE]
    for spelling, canonical in [
        ("sum", "combsum"),
        ("comb_mnz", "combmnz"),
        ("weighted_sum", "wsum"),
        ("med", "combmed"),
    ]:
        weights = WEIGHTS if canonical == "wsum" else None
        assert fuse(runs, spelling, "min_max", weights=weights).method == canonical


# the real runs, cut to a few topics (the whole matrix of methods and normalisations runs on each)
# and to one document of each tie: ranx orders tied scores as its sort leaves them, evalstore as
# trec_eval does (test_tied_scores_... above)
def real_runs(paths: Sequence[Path], topics: int) -> Runs:
    runs: Runs = []
    for path in paths:
        run: dict[str, dict[str, float]] = {}
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt") as handle:
            for line in handle:
                q, _, doc, _, score, *_ = line.split()
                run.setdefault(q, {})[doc] = float(score)
        runs.append(run)
    common = sorted(set(runs[0]).intersection(*runs[1:]))[:topics]
    out: Runs = []
    for run in runs:
        kept: dict[str, dict[str, float]] = {}
        for q in common:
            seen: set[float] = set()
            kept[q] = {d: s for d, s in run[q].items() if not (s in seen or seen.add(s))}
        out.append(kept)
    return out


@pytest.fixture(scope="module")
def robust03() -> Runs:
    names = ("input.uwmtCR0.gz", "input.SABIR03BASE.gz", "input.fub03IeOLKe3.gz")
    return real_runs([shared_path("robust03", "runs", n) for n in names], topics=3)


@pytest.fixture(scope="module")
def dl19() -> Runs:
    # DL 2019's BM25 run, and a DL-HARD run (its zero-shot T5, negative scores) on their common DL 2019 topics
    paths = [
        shared_path("msmarco-dl19", "runs", "run.msmarco-v1-passage.bm25-default.dl19.txt"),
        shared_path("dl-hard", "runs", "passage", "bm25+t5-zs.run.gz"),
    ]
    return real_runs(paths, topics=3)


_CUT: dict[int, Runs] = {}


def cut(runs: Runs, depth: int = 30) -> Runs:
    """Each topic's first ``depth`` documents (Condorcet compares every pair), made once per list."""
    if id(runs) not in _CUT:
        _CUT[id(runs)] = [{q: dict(list(docs.items())[:depth]) for q, docs in run.items()} for run in runs]
    return _CUT[id(runs)]


@pytest.mark.parametrize(("method", "norm"), ROBUST03_COMBINATIONS)
def test_robust03_runs_fuse_as_ranx(robust03: Runs, method: str, norm: str) -> None:
    runs = cut(robust03) if method in SORTED_BY_MAJORITY else robust03
    assert_same(ours(runs, method, norm), theirs(runs, method, norm), method)


@pytest.mark.parametrize(("method", "norm"), DL19_COMBINATIONS)
def test_dl19_runs_fuse_as_ranx(dl19: Runs, method: str, norm: str) -> None:
    runs = cut(dl19) if method in SORTED_BY_MAJORITY else dl19
    assert_same(ours(runs, method, norm), theirs(runs, method, norm), method)


# weights chosen on a split's training topics, against ranx's optimize_fusion on the same topics;
# not w_bordafuse's: on these very inputs ranx chose 0.6,0.1,0.3 in one pytest process and
# 0.7,...,0.2 in another (fused Borda points tie often, and ranx orders a fused run's ties as its
# sort leaves them), so its choice is no reference
def synthetic(seed: int, topics: Sequence[str], docs: int = 40) -> tuple[Runs, dict[str, dict[str, int]]]:
    rng = np.random.default_rng(seed)
    qrels = {q: {f"d{j:03d}": int(rng.integers(0, 3)) for j in range(docs)} for q in topics}
    runs: Runs = []
    for _ in range(3):
        run = {}
        for q in topics:
            picked = rng.choice(docs, size=20, replace=False)
            # scores that follow relevance a little, and never tie within a topic
            scores = rng.normal(size=20) + 0.5 * np.array([qrels[q][f"d{j:03d}"] for j in picked])
            run[q] = {f"d{j:03d}": float(s) for j, s in zip(picked, scores, strict=True)}
        runs.append(run)
    return runs, qrels


def lines(run: Mapping[str, Mapping[str, float]], tag: str) -> str:
    return "".join(f"{q} Q0 {d} {i} {s!r} {tag}\n" for q, docs in run.items() for i, (d, s) in enumerate(docs.items()))


SPLIT_TOPICS = [str(t) for t in range(1, 16)]


@functools.cache
def ranx_optimised(method: str, metric: str, chosen: frozenset[str]) -> dict[str, Any]:
    """ranx's choice on the synthetic runs' ``chosen`` topics, made once for both databases' tests
    (a choice takes ranx tens of fusions and evaluations)."""
    runs, qrels = synthetic(11, SPLIT_TOPICS)
    return ranx().optimize_fusion(  # type: ignore[no-any-return]
        qrels=ranx().Qrels({q: v for q, v in qrels.items() if q in chosen}),
        runs=[ranx().Run({q: v for q, v in run.items() if q in chosen}) for run in runs],
        norm="min-max",
        method=method,
        metric=metric,
        show_progress=False,
        **({} if method == "rrf" else {"step": 0.1}),  # rrf: k 10 to 100 in 10s, ranx's default
    )


@pytest.mark.parametrize(
    ("method", "measure", "metric"),
    [
        ("wsum", "nDCG@10", "ndcg@10"),
        ("wmnz", "AP", "map"),
        ("mixed", "P@5", "precision@5"),
        ("rrf", "AP", "map"),
    ],
)
def test_weights_chosen_on_a_split_are_ranx_s(engine, write, method: str, measure: str, metric: str) -> None:  # type: ignore[no-untyped-def]
    from evalstore.services import fusion as service
    from evalstore.services import splits, store

    runs, qrels = synthetic(11, SPLIT_TOPICS)
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
        engine,
        ["r0", "r1", "r2"],
        service.Recipe(method, "min-max", depth=None),
        name="fused",
        optimise_for=measure,
        split="h",
    )

    expected = ranx_optimised(method, metric, frozenset(chosen))
    assert made.optimised is not None
    assert made.optimised.topics == len(chosen) == 10
    if method == "rrf":
        assert made.optimised.params == expected == {"k": made.optimised.params["k"]}
        assert made.provenance["fusion.params"] == f'{{"k": {expected["k"]}}}'
    else:
        assert made.optimised.weights == list(expected["weights"])
        assert made.provenance["fusion.weights"] == ",".join(repr(float(w)) for w in expected["weights"])
    assert made.provenance["fusion.seed"] == "5"
    assert made.provenance["fusion.split"] == "h" and made.provenance["fusion.fold"] == "1"
