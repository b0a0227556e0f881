"""The C/W/L measures against cwl_eval (through ir_measures' provider, and its own classes), and
Compat and Accuracy against ir_measures' compat and accuracy providers: per query, on real runs
from ../shared/data and on the peers' own test inputs.

ir_measures hands cwl_eval a run ranked by score alone (ties in its input order) and its compat
provider breaks ties by docno ascending; evalstore ranks by trec_eval's order (score descending,
docno descending). The real runs are rewritten with distinct scores in trec_eval's order, so both
rank alike and the definitions are what is compared (as tests/differential/test_against_ir_measures.py
does for RBP).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.compute as pc
import pytest

from evalstore.errors import InvalidParameterError
from evalstore.io.formats import read_run
from evalstore.metrics import evaluate, parse_measure
from tests.conftest import shared_path

ir_measures = pytest.importorskip("ir_measures", reason="ir_measures is a test dependency (pip install -e .[test])")
cwl_metrics = pytest.importorskip("cwl.ruler.measures.cwl_metrics", reason="cwl-eval is a test dependency")

RUNS = [
    (
        ("msmarco-dl19", "qrels.dl19-passage.txt"),
        ("msmarco-dl19", "runs", "run.msmarco-v1-passage.bm25-default.dl19.txt"),
        3,
    ),
    (("dl-hard", "dl_hard-passage.qrels"), ("dl-hard", "runs", "passage", "bm25+rm3+t5-zs.run.gz"), 3),
    (("robust03", "robust03_qrels.txt"), ("robust03", "runs", "input.NLPR03vb10.gz"), 2),
]


def cwl_names(top: int) -> list[str]:
    """The C/W/L measures at their defaults and beside them, for a grade scale 0..top (T as a
    float: ir_measures refuses T=1)."""
    return [
        f"BPM(T=1.0,max_rel={top})@10",
        f"BPM(T=2.0,min_rel=1,max_rel={top})@1000",
        f"INST(T=1.0,max_rel={top})",
        f"INST(T=3.0,max_rel={top})",
        f"INSQ(T=2.0,max_rel={top})",
        f"SDCG(max_rel={top})@10",
        f"NERR8(max_rel={top})@10",
        f"NERR9(min_rel=1,max_rel={top})@20",
        f"NERR10(p=0.5,max_rel={top})",
        f"NERR11(T=2.0,max_rel={top})",
        f"INST(T=1.0,max_rel={top - 1})",  # grades above max_rel count as it
    ]


ORDERING_NAMES = [
    "Compat",
    "Compat(p=0.8)",
    "Compat(p=0.5,normalize=False)",
    "Accuracy",
    "Accuracy(rel=2)",
    "Accuracy(rel=3,cutoff=100)",
]


def _theirs(
    names: list[str], qrels: list[Any], run: list[Any], *, together: bool = False
) -> dict[str, dict[str, float]]:
    """ir_measures' values of each name by query: one call per name, or all in one call
    (``together``: its cwl_eval provider ranks the run once for every measure of a grade scale;
    the compat and accuracy providers are called one measure at a time, as together with others
    the accuracy provider's values are not its values alone)."""
    spelled = {ir_measures.parse_measure(name): name for name in names}
    values: dict[str, dict[str, float]] = {name: {} for name in names}
    for group in [list(spelled)] if together else [[m] for m in spelled]:
        for m in ir_measures.iter_calc(group, qrels, run):
            values[spelled[m.measure]][m.query_id] = m.value
    return values


def _ours(qrels: Path | str, run: Path | str, names: list[str]) -> dict[str, dict[str, float]]:
    frame = evaluate(qrels, run, names, missing_topics="skip").per_query
    ours: dict[str, dict[str, float]] = {}
    for query, canonical, value in zip(frame["query_id"], frame["measure"], frame["value"], strict=True):
        ours.setdefault(canonical, {})[query] = value
    return {name: ours[str(parse_measure(name))] for name in names}


def _distinct(run: Path, tmp_path: Path, top: int = 10**7) -> Path:
    """The run in trec_eval's order with distinct, positive scores (ir_measures ranks by score alone)."""
    table = read_run(run, strict=False).table
    order = pc.sort_indices(table, sort_keys=[("topic", "ascending"), ("score", "descending"), ("doc", "descending")])
    table = table.take(order)
    path = tmp_path / "run.txt"
    path.write_text(
        "".join(
            f"{t} Q0 {d} {i} {top - i} r\n"
            for i, (t, d) in enumerate(zip(table["topic"].to_pylist(), table["doc"].to_pylist(), strict=True))
        )
    )
    return path


def _assert_same(names: list[str], theirs: dict[str, dict[str, float]], ours: dict[str, dict[str, float]]) -> None:
    for name in names:
        defined = {q: v for q, v in ours[name].items() if not math.isnan(v)}
        assert defined.keys() == theirs[name].keys(), name
        assert max(abs(defined[q] - theirs[name][q]) for q in defined) < 1e-9, name


@pytest.mark.slow
@pytest.mark.parametrize(("qrels_parts", "run_parts", "top"), RUNS, ids=[r[1][-1] for r in RUNS])
def test_cwl_measures_are_cwl_eval_values(
    qrels_parts: tuple[str, ...], run_parts: tuple[str, ...], top: int, tmp_path: Path
) -> None:
    qrels, run = shared_path(*qrels_parts), _distinct(shared_path(*run_parts), tmp_path)
    names = cwl_names(top)
    judgments, ranked = list(ir_measures.read_trec_qrels(str(qrels))), list(ir_measures.read_trec_run(str(run)))
    theirs = _theirs(names, judgments, ranked, together=True)
    _assert_same(names, theirs, _ours(qrels, run, names))


@pytest.mark.slow
@pytest.mark.parametrize(("qrels_parts", "run_parts", "top"), RUNS[:2], ids=[r[1][-1] for r in RUNS[:2]])
def test_compat_and_accuracy_are_ir_measures_values(
    qrels_parts: tuple[str, ...], run_parts: tuple[str, ...], top: int, tmp_path: Path
) -> None:
    """(robust03's NLPR03vb10 has a topic whose every retrieved document is relevant, where
    ir_measures' Accuracy divides by zero: see test_accuracy_without_a_non_relevant_document.)"""
    qrels, run = shared_path(*qrels_parts), _distinct(shared_path(*run_parts), tmp_path)
    theirs = _theirs(
        ORDERING_NAMES, list(ir_measures.read_trec_qrels(str(qrels))), list(ir_measures.read_trec_run(str(run)))
    )
    _assert_same(ORDERING_NAMES, theirs, _ours(qrels, run, ORDERING_NAMES))


@pytest.mark.slow
def test_compat_on_robust03_is_ir_measures_value(tmp_path: Path) -> None:
    qrels = shared_path("robust03", "robust03_qrels.txt")
    run = _distinct(shared_path("robust03", "runs", "input.NLPR03vb10.gz"), tmp_path)
    names = ["Compat", "Compat(p=0.99)"]
    theirs = _theirs(names, list(ir_measures.read_trec_qrels(str(qrels))), list(ir_measures.read_trec_run(str(run))))
    _assert_same(names, theirs, _ours(qrels, run, names))


# ir_measures' own test of its cwl_eval provider (test/test_cwl_eval.py: "based on a manual execution of
# cwl-eval"), its inputs test/cwl.qrels and test/cwl.run transcribed
CWL_QRELS = """\
T1 00 D1 1
T1 00 D2 0
T1 00 D3 1
T1 00 D4 1
T1 00 D7 1
T1 00 D8 0
T1 00 D9 1
T1 00 D10 0
T2 00 D1 1
T2 00 D2 1
T2 00 D5 1
T2 00 D6 0
T2 00 D7 1
T2 00 D8 1
T2 00 D9 1
T2 00 D10 0
T3 00 D4 0
T3 00 D5 0
T3 00 D6 1
T3 00 D7 1
T3 00 D8 1
T3 00 D9 0
T3 00 D10 1
"""
CWL_SCORES = [4.3, 4.2, 4.1, 3.9, 3.8, 3.7, 3.6, 3.5, 3.4, 3.3]
CWL_RUN = "".join(f"T{t} Q0 D{i + 1} {i + 1} {score} R1\n" for t in (1, 2, 3) for i, score in enumerate(CWL_SCORES))
CWL_EXPECTED = {
    "BPM(T=1.0,max_rel=1)@20": (1.0000, 1.0000, 0.1667),
    "BPM(T=2.0,max_rel=1)@10": (0.6667, 1.0000, 0.2857),
    "INSQ(T=1.0,max_rel=1)": (0.5872, 0.6629, 0.0880),
    "INSQ(T=2.0,max_rel=1)": (0.4513, 0.5068, 0.1292),
    "INST(T=1.0,max_rel=1)": (0.7934, 0.9226, 0.0888),
    "INST(T=2.0,max_rel=1)": (0.5994, 0.6924, 0.1397),
    "SDCG(max_rel=1)@10": (0.5645, 0.6531, 0.2848),
    "NERR8(max_rel=1)@10": (1.0000, 1.0000, 0.1667),
    "NERR9(max_rel=1)@10": (1.0000, 1.0000, 0.0680),
    "NERR10(p=0.8,max_rel=1)": (1.0000, 1.0000, 0.0888),
    "NERR11(T=2.0,max_rel=1)": (1.0000, 1.0000, 0.0691),
    "RBP(p=0.9,rel=1)": (0.3501, 0.3996, 0.1988),
}


def test_cwl_measures_give_the_values_ir_measures_tests_expect(tmp_path: Path) -> None:
    qrels, run = tmp_path / "cwl.qrels", tmp_path / "cwl.run"
    qrels.write_text(CWL_QRELS)
    run.write_text(CWL_RUN)
    names = list(CWL_EXPECTED)
    ours = _ours(qrels, run, names)
    for name, expected in CWL_EXPECTED.items():
        assert [round(ours[name][q], 4) for q in ("T1", "T2", "T3")] == list(expected), name
    # and ir_measures' provider itself on the same input, to the last bit
    theirs = _theirs(names, list(ir_measures.read_trec_qrels(str(qrels))), list(ir_measures.read_trec_run(str(run))))
    _assert_same(names, theirs, ours)


def _cwl_eval_value(metric: Any, gains: list[float]) -> float:
    """cwl_eval's own class on a ranking of these gains (costs 1, depth 1000, as ir_measures runs it)."""
    from cwl.ruler.ranking import Ranking

    ranking = Ranking("q", np.array(gains, dtype=float), np.full(len(gains), np.nan), max_n=1000)
    return float(metric.measure(ranking))


def test_cwl_measures_equal_cwl_eval_classes_on_graded_gains(tmp_path: Path) -> None:
    """Straight against cwl_eval's metric classes (no ir_measures between): grades 0..4 scaled by
    max_rel=4, a judged document of grade -1 gaining 0, unjudged documents 0, a short ranking
    padded to cwl_eval's 1000 places."""
    from cwl.ruler.measures import cwl_bpm, cwl_dcg, cwl_insq, cwl_inst, cwl_nerr

    grades = [4, 0, -1, 2, None, 3, 1, None, 4, 0, 2, 1]
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("".join(f"q 0 d{i} {g}\n" for i, g in enumerate(grades) if g is not None) + "q 0 extra 3\n")
    run = tmp_path / "run.txt"
    run.write_text("".join(f"q Q0 d{i} {i + 1} {100 - i} r\n" for i in range(len(grades))))
    gains = [max(g, 0) / 4 if g is not None else 0.0 for g in grades]
    theirs = {
        "BPM(T=1.5,max_rel=4)@8": cwl_bpm.BPMCWLMetric(1.5, 8),
        "SDCG(max_rel=4)@7": cwl_dcg.NDCGCWLMetric(7),
        "INST(T=2.5,max_rel=4)": cwl_inst.INSTCWLMetric(2.5),
        "INSQ(T=0.5,max_rel=4)": cwl_insq.INSQCWLMetric(0.5),
        "NERR8(max_rel=4)@6": cwl_nerr.NERReq8CWLMetric(6),
        "NERR9(max_rel=4)@6": cwl_nerr.NERReq9CWLMetric(6),
        "NERR10(p=0.7,max_rel=4)": cwl_nerr.NERReq10CWLMetric(0.7),
        "NERR11(T=3.0,max_rel=4)": cwl_nerr.NERReq11CWLMetric(3.0),
    }
    ours = _ours(qrels, run, list(theirs))
    for name, metric in theirs.items():
        assert ours[name]["q"] == pytest.approx(_cwl_eval_value(metric, gains), abs=1e-12), name


def test_cwl_measures_of_a_topic_without_results_are_zero(tmp_path: Path) -> None:
    qrels = {"q1": {"a": 2, "b": 0}, "q2": {"c": 1}}
    run = {"q1": {"a": 1.0, "b": 0.5}}
    result = evaluate(qrels, run, ["INST(max_rel=2)", "SDCG(max_rel=2)@10", "NERR10(max_rel=2)"])
    frame = result.per_query
    assert frame[frame["query_id"] == "q2"]["value"].tolist() == [0.0, 0.0, 0.0]
    assert frame[frame["query_id"] == "q1"]["value"].tolist() == pytest.approx(
        [
            _cwl_eval_value(cwl_metrics_module("cwl_inst").INSTCWLMetric(1.0), [1.0, 0.0]),
            _cwl_eval_value(cwl_metrics_module("cwl_dcg").NDCGCWLMetric(10), [1.0, 0.0]),
            _cwl_eval_value(cwl_metrics_module("cwl_nerr").NERReq10CWLMetric(0.9), [1.0, 0.0]),
        ],
        abs=1e-12,
    )


def cwl_metrics_module(name: str) -> Any:
    import importlib

    return importlib.import_module(f"cwl.ruler.measures.{name}")


def test_cwl_measures_need_max_rel_and_a_scale() -> None:
    with pytest.raises(
        InvalidParameterError, match=r"^INST needs a value for 'max_rel' \(e.g. INST\(max_rel=...\)\)\.$"
    ):
        parse_measure("INST")
    with pytest.raises(InvalidParameterError, match=r"^BPM needs a value for 'cutoff' \(e.g. BPM@10\)\.$"):
        parse_measure("BPM(max_rel=3)")
    with pytest.raises(InvalidParameterError, match=r"^min_rel must be below max_rel\. Got min_rel=2, max_rel=2\.$"):
        evaluate({"q": {"a": 1}}, {"q": {"a": 1.0}}, ["INST(min_rel=2,max_rel=2)"])
    assert str(parse_measure("INST(T=1.0,max_rel=3)")) == "INST(max_rel=3)"
    assert str(parse_measure("NERR10(p=0.9,max_rel=3)")) == "NERR10(max_rel=3)"
    assert str(parse_measure("BPM(T=2,max_rel=3)@10")) == "BPM(T=2,max_rel=3)@10"
    # cwl_eval's names of the families
    assert str(parse_measure("NERR-EQ10(p=0.8,max_rel=1)")) == "NERR10(max_rel=1,p=0.8)"
    assert str(parse_measure("BPM-Static(max_rel=2)@5")) == "BPM(max_rel=2)@5"
    assert str(parse_measure("NDCG-k(max_rel=2)@5")) == "SDCG(max_rel=2)@5"


# ir_measures' own test of its compat provider (tests/test_compat.py: "based on a manual execution of
# https://github.com/claclark/Compatibility"), on its inputs in ../shared/data
COMPAT_EXPECTED = {
    "Compat(p=0.95)": {"31_1": 0.51779512165509, "31_2": 0.018400100569017922},
    "Compat(p=0.9)": {"31_1": 0.3761334522946854, "31_2": 0.004344079941789211},
    "Compat(p=0.8)": {"31_1": 0.16723008845234535, "31_2": 0.00022806427320561776},
}


def test_compat_gives_the_values_of_clarkes_compatibility_code() -> None:
    qrels = shared_path("cast2019-ir_measures-compat", "compat.qrels")
    run = shared_path("cast2019-ir_measures-compat", "compat.run")
    ours = _ours(qrels, run, list(COMPAT_EXPECTED))
    for name, expected in COMPAT_EXPECTED.items():
        assert ours[name] == pytest.approx(expected, abs=1e-9), name
    theirs = _theirs(
        list(COMPAT_EXPECTED), list(ir_measures.read_trec_qrels(str(qrels))), list(ir_measures.read_trec_run(str(run)))
    )
    _assert_same(list(COMPAT_EXPECTED), theirs, ours)


def test_compat_is_the_same_whatever_the_scores_sign() -> None:
    """ir_measures places an unretrieved relevant document within its level as if it scored 0, so
    with negative scores its ideal ordering changes; here only the ranking's order counts."""
    qrels = {"q": {"a": 2, "b": 1, "c": 1, "d": 1, "e": 0}}
    positive = {"q": {"e": 5.0, "c": 4.0, "a": 3.0, "x": 2.0, "b": 1.0}}
    negative = {"q": {doc: score - 10.0 for doc, score in positive["q"].items()}}
    ours = evaluate(qrels, positive, ["Compat"]).aggregates["Compat"]
    assert evaluate(qrels, negative, ["Compat"]).aggregates["Compat"] == ours
    theirs = ir_measures.calc_aggregate([ir_measures.parse_measure("Compat")], qrels, positive)
    assert ours == pytest.approx(next(iter(theirs.values())), abs=1e-12)
    shifted = ir_measures.calc_aggregate([ir_measures.parse_measure("Compat")], qrels, negative)
    assert abs(next(iter(shifted.values())) - ours) > 1e-3  # the one difference, named in the docs


def test_accuracy_without_a_non_relevant_document() -> None:
    """Every retrieved document relevant: 1 (ir_measures 0.4 divides by zero); none relevant:
    no value, left out of the mean as ir_measures leaves the query out."""
    qrels = {"q1": {"a": 1, "b": 1}, "q2": {"c": 1, "d": 0}, "q3": {"e": 1}}
    run = {"q1": {"a": 2.0, "b": 1.0}, "q2": {"d": 3.0, "x": 2.0, "c": 1.0}, "q3": {"z": 1.0}}
    result = evaluate(qrels, run, ["Accuracy"])
    values = dict(zip(result.per_query["query_id"], result.per_query["value"], strict=True))
    assert values["q1"] == 1.0 and values["q2"] == 0.0 and math.isnan(values["q3"])
    assert result.aggregates["Accuracy"] == 0.5
    with pytest.raises(ZeroDivisionError):
        ir_measures.calc_aggregate([ir_measures.parse_measure("Accuracy")], qrels, {"q1": run["q1"]})
    theirs = ir_measures.calc_aggregate(
        [ir_measures.parse_measure("Accuracy")], qrels, {"q2": run["q2"], "q3": run["q3"]}
    )
    assert next(iter(theirs.values())) == 0.0
    with pytest.raises(InvalidParameterError, match=r"^Accuracy takes a relevance level of 1 or more \(got 0\)"):
        evaluate(qrels, run, ["Accuracy(rel=0)"])


# the families this file holds to cwl_eval and ir_measures (tests/unit/test_reference_coverage.py)
REFERENCE_FAMILIES = {
    parse_measure(name).family for name in [*cwl_names(3), *ORDERING_NAMES, *CWL_EXPECTED, *COMPAT_EXPECTED]
}
