"""One canonical name per measure; ir_measures and trec_eval spellings resolve to it; errors
name the allowed range or the closest known measure."""

from __future__ import annotations

import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from evalstore import metrics
from evalstore.cli import app
from evalstore.errors import InvalidParameterError
from evalstore.metrics.registry import mlflow_key

SPELLINGS = {
    "nDCG@10": ["ndcg_cut_10", "NDCG@10", "ndcg_cut(cutoff=10)"],
    "P@5": ["P_5", "precision@5", "P(cutoff=5)"],
    "P(rel=2)@5": ["P(rel=2)@5", "precision(rel=2)@5"],
    "AP": ["map", "MAP", "AP"],
    "AP@100": ["map_cut_100", "AP@100"],
    "RR": ["recip_rank", "MRR", "RR"],
    "R@1000": ["recall_1000", "recall@1000"],
    "IPrec@0.1": ["IPrec(recall=0.1)", "IPrec(rounding='trec_eval9')@0.1"],  # ir_measures' rounding
    "IPrec(rounding=trec_eval10)@0.1": ["iprec_at_recall_0.10", "iprec_at_recall@0.1", "iprec_at_recall(recall=0.1)"],
    "ERR@20": ["ERR@20"],
    "nDCG(gain=exp)@10": ["nDCG(gain=exp)@10", "ndcg(gain='exp')@10", "nDCG(dcg='exp-log2')@10"],
    "SetF(x=2)": ["SetF(beta=2)", "set_F(x=2)"],
    "NumRelRet(rel=1)": ["NumRet(rel=1)", "num_rel_ret(rel=1)"],
    "Judged": ["judged", "Judged"],
    "Rprec": ["Rprec", "BEP", "R-prec"],
    "RR@10": ["MRR@10", "recip_rank@10", "RR(cutoff=10)"],
    "NumQ": ["num_q", "NumQ", "numq"],
    "Success@5": ["success_5", "Success@5", "HitRate@5", "hit_rate@5"],
}


@pytest.mark.parametrize("canonical", list(SPELLINGS))
def test_every_spelling_resolves_to_one_canonical_name(canonical: str) -> None:
    for spelling in SPELLINGS[canonical]:
        assert str(metrics.parse_measure(spelling)) == canonical
    assert str(metrics.parse_measure(canonical)) == canonical


@given(st.sampled_from(sorted(SPELLINGS)), st.sampled_from([1, 2, 3]))
def test_canonical_names_round_trip(canonical: str, rel: int) -> None:
    measure = metrics.parse_measure(canonical)
    assert metrics.parse_measure(str(measure)) == measure


def test_unknown_measure_did_you_mean() -> None:
    with pytest.raises(InvalidParameterError, match=r"^Unknown measure 'nDGC'\. Did you mean 'nDCG'\?"):
        metrics.parse_measure("nDGC@10")


def test_a_trec_eval_output_line_is_not_offered_as_its_own_correction() -> None:
    with pytest.raises(InvalidParameterError) as info:
        metrics.parse_measure("runid")
    assert info.value.on_the_command_line() == (
        "'runid' is a line trec_eval prints, not a measure to store; the run tag is kept with every run. "
        "Run 'evalstore measures' for the measures ('evalstore trec-eval -m runid' prints the line)."
    )
    assert "Did you mean" not in str(info.value)


def test_unknown_ir_measures_dcg_names_the_choices() -> None:
    with pytest.raises(InvalidParameterError) as info:
        metrics.parse_measure("nDCG(dcg='exp-log10')@10")
    assert str(info.value) == "The 'dcg' parameter of nDCG must be one of 'log2', 'exp-log2'. Got 'exp-log10' instead."


def test_bad_parameter_names_the_allowed_range() -> None:
    with pytest.raises(InvalidParameterError) as info:
        metrics.parse_measure("P@0")
    assert str(info.value) == "The 'cutoff' parameter of P must be an int in the range [1, inf). Got 0 instead."
    with pytest.raises(InvalidParameterError) as info:
        metrics.parse_measure("RBP(p=1.5)")
    assert str(info.value) == "The 'p' parameter of RBP must be a number in the range [0, 1]. Got 1.5 instead."
    with pytest.raises(InvalidParameterError) as info:
        metrics.parse_measure("nDCG(gain=cubic)")
    assert str(info.value) == "The 'gain' parameter of nDCG must be one of 'linear', 'exp'. Got 'cubic' instead."
    with pytest.raises(InvalidParameterError, match=r"^P has no parameter 'k'"):
        metrics.parse_measure("P(k=3)")


def test_mlflow_keys_are_safe() -> None:
    assert mlflow_key(metrics.parse_measure("P(rel=2)@5")) == "P_rel-2_at_5"
    assert mlflow_key(metrics.parse_measure("nDCG@10")) == "nDCG_at_10"


def test_measures_command_lists_every_family() -> None:
    result = CliRunner().invoke(app, ["measures", "--format", "json"])
    assert result.exit_code == 0
    import json

    names = {row["name"] for row in json.loads(result.stdout)}
    assert {"AP", "P", "nDCG", "ERR", "Judged", "RBP", "infAP", "Bpref", "IPrec", "F", "Unj"} <= names
    assert all(row["definition"] for row in json.loads(result.stdout))


def test_evaluate_accepts_dicts_and_frames_alike() -> None:
    qrels = {"q1": {"a": 1, "b": 0, "c": 2}, "q2": {"x": 1}}
    run = {"q1": {"a": 0.5, "b": 0.9, "c": 0.1}, "q2": {"y": 1.0}}
    from_dicts = metrics.evaluate(qrels, run, ["AP", "nDCG@10", "P@2"])
    frame_q = pd.DataFrame(
        [(q, d, r) for q, ds in qrels.items() for d, r in ds.items()], columns=["query_id", "doc_id", "relevance"]
    )
    frame_r = pd.DataFrame(
        [(q, d, s) for q, ds in run.items() for d, s in ds.items()], columns=["query_id", "doc_id", "score"]
    )
    from_frames = metrics.evaluate(frame_q, frame_r, ["AP", "nDCG@10", "P@2"])
    assert from_dicts.aggregates == from_frames.aggregates
    per_query = from_dicts.per_query.set_index(["query_id", "measure"])["value"]
    assert per_query[("q1", "AP")] == pytest.approx((1 / 2 + 2 / 3) / 2)
    assert per_query[("q2", "AP")] == 0.0
    # q1's top 2 are b (non-relevant, 0.9) then a (relevant); q2 retrieves nothing relevant
    assert from_dicts.aggregates["P@2"] == pytest.approx((0.5 + 0.0) / 2)


def test_missing_topics_policy() -> None:
    qrels = {"q1": {"a": 1}, "q2": {"b": 1}}
    run = {"q1": {"a": 1.0}}
    assert metrics.evaluate(qrels, run, ["AP"], missing_topics="zero").aggregates["AP"] == 0.5
    skipped = metrics.evaluate(qrels, run, ["AP"], missing_topics="skip")
    assert skipped.aggregates["AP"] == 1.0 and skipped.missing_topics == ["q2"]


def test_every_measure_says_what_the_peers_call_it() -> None:
    """`evalstore measures` prints, per family, trec_eval's and ir_measures' names for it and
    whether their values are the same: a new family must decide."""
    from evalstore.metrics.peers import PEERS
    from evalstore.metrics.registry import REGISTRY

    assert set(PEERS) == set(REGISTRY)


def test_top_level_evaluate_and_aggregates_answer_to_the_spelling_asked() -> None:
    """`import evalstore; evalstore.evaluate(...)` as the README shows it; a result asked for as
    `map` or `P_10` is found under that name too (stored under the canonical AP and P@10)."""
    import evalstore

    qrels = {"q1": {"a": 1, "b": 0}, "q2": {"c": 1}}
    run = {"q1": {"a": 2.0, "b": 1.0}, "q2": {"x": 1.0, "c": 0.5}}
    result = evalstore.evaluate(qrels, run, ["map", "P_10", "recip_rank"])
    assert list(result.aggregates) == ["AP", "P@10", "RR"]
    assert result.aggregates["map"] == result.aggregates["AP"] == 0.75
    assert result.aggregates["MRR"] == result.aggregates["RR"] == 0.75
    assert "P_10" in result.aggregates and "P@5" not in result.aggregates
    with pytest.raises(KeyError):
        result.aggregates["P@5"]
    assert result.aggregates.get("nDCG") is None
    assert evalstore.evaluate is metrics.evaluate and "evaluate" in evalstore.__all__


def test_importing_evalstore_loads_no_numerical_library() -> None:
    import subprocess
    import sys

    probe = "import sys, evalstore; print('numpy' in sys.modules or 'pyarrow' in sys.modules)"
    assert (
        subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.strip()
        == "False"
    )


# ir_measures' parse_trec_measure reads these as lists of measures (ir_measures 0.4's spellings:
# trec_eval's name, '_' or '.', comma-separated values)
TREC_LISTS = {
    "P_5,10": ["P@5", "P@10"],
    "P.5,10": ["P@5", "P@10"],
    "ndcg_cut_5,10": ["nDCG@5", "nDCG@10"],
    "ndcg_cut.20": ["nDCG@20"],
    "map_cut_10,100,1000": ["AP@10", "AP@100", "AP@1000"],
    "recall_100,1000": ["R@100", "R@1000"],
    "success_1,5": ["Success@1", "Success@5"],
}


@pytest.mark.parametrize("name", list(TREC_LISTS))
def test_trec_eval_lists_name_their_measures_as_ir_measures_reads_them(name: str) -> None:
    ir_measures = pytest.importorskip("ir_measures")
    assert [str(m) for m in metrics.resolve_measures([name])] == TREC_LISTS[name]
    assert [str(m) for m in ir_measures.parse_trec_measure(name)] == TREC_LISTS[name]


def test_trec_eval_lists_in_evaluate_and_the_cli_measure_text() -> None:
    from evalstore.cli.evaluate import split_measures

    qrels = {"q1": {"a": 1, "b": 0, "c": 1}, "q2": {"d": 1}}
    run = {"q1": {"a": 3.0, "b": 2.0, "c": 1.0}, "q2": {"x": 2.0, "d": 1.0}}
    result = metrics.evaluate(qrels, run, ["P_1,2", "ndcg_cut.2"])
    assert list(result.aggregates) == ["P@1", "P@2", "nDCG@2"]
    assert result.aggregates["P_1"] == 0.5 and result.aggregates["P@2"] == 0.5
    shaped = metrics.evaluate(qrels, run, ["P_1,2", "map"], as_ir_measures=True).per_query
    assert list(dict.fromkeys(shaped["measure"])) == ["P@1", "P@2", "map"]  # a list's measures by their names
    assert split_measures("AP,P_5,10,nDCG(gain=exp,discount=jk)@10,ndcg_cut.5,10,20,RR,1") == [
        "AP",
        "P_5,10",
        "nDCG(gain=exp,discount=jk)@10",
        "ndcg_cut.5,10,20",
        "RR",
        "1",
    ]
    with pytest.raises(InvalidParameterError, match=r"^'P_5,5' names a cutoff twice; name each once\.$"):
        metrics.resolve_measures(["P_5,5"])
