"""`evalstore ndeval` against the ndeval program (TREC Web track, run with -traditional for
trec_eval's tie order): byte-identical CSV on generated subtopic qrels and runs with random
options, and on the Web track's real subtopic qrels (2013, 2014) with generated runs."""

from __future__ import annotations

import os
import random
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from evalstore.cli import app
from evalstore.metrics import parse_measure
from evalstore.metrics.diversity import COLUMNS
from tests.conftest import shared_path

DOCS = ["d0", "d1", "d2", "d10", "D3", "x#1", "a", "b", "zz", "d9", "e", "f"]
SCORES = st.one_of(
    st.sampled_from([1.0, 2.0, 0.5, 0.0, -1.0]),
    st.floats(min_value=-1e3, max_value=1e3, allow_nan=False, allow_infinity=False),
)

# the families this file holds to the ndeval program: every column it prints
# (tests/unit/test_reference_coverage.py)
REFERENCE_FAMILIES = {parse_measure(canonical).family for _, canonical in COLUMNS}


@st.composite
def diversity_cases(draw: st.DrawFn) -> tuple[str, str, list[str]]:
    """(subtopic qrels text, run text, ndeval options)."""
    topics = draw(st.lists(st.sampled_from([1, 2, 10, 201, 7]), min_size=1, max_size=3, unique=True))
    qrels = []
    for topic in topics:
        for doc in draw(st.lists(st.sampled_from(DOCS), min_size=1, max_size=8, unique=True)):
            for subtopic in draw(st.lists(st.integers(0, 4), min_size=1, max_size=3, unique=True)):
                qrels.append(f"{topic} {subtopic} {doc} {draw(st.sampled_from([0, 1, 1, 2]))}")
    run_topics = draw(st.lists(st.sampled_from([*topics, 99]), min_size=1, max_size=4, unique=True))
    prefix = draw(st.sampled_from(["", "wt13-"]))
    run = []
    for topic in run_topics:
        docs = draw(st.lists(st.sampled_from([*DOCS, "u1", "u2"]), min_size=1, max_size=12, unique=True))
        run += [f"{prefix}{topic} Q0 {doc} {rank + 1} {draw(SCORES)!r} run{topic}" for rank, doc in enumerate(docs)]
    draw(st.randoms()).shuffle(run)
    options = []
    if draw(st.booleans()):
        options.append("-c")
    if draw(st.booleans()):
        options += ["-M", str(draw(st.integers(1, 6)))]
    for flag in ("-alpha", "-beta"):
        if draw(st.booleans()):
            options += [flag, repr(draw(st.sampled_from([0.0, 0.25, 0.5, 0.8, 1.0])))]
    return "\n".join(qrels) + "\n", "\n".join(run) + "\n", options


def _agree(ndeval: Path, options: list[str], qrels: Path, run: Path) -> None:
    theirs = subprocess.run(
        [str(ndeval), "-traditional", *options, str(qrels), str(run)], capture_output=True, text=True, check=False
    )
    ours = CliRunner().invoke(app, ["ndeval", *options, str(qrels), str(run)])
    assert theirs.returncode == 0, theirs.stderr
    assert ours.exit_code == 0, ours.stderr
    assert ours.stdout == theirs.stdout


@settings(
    max_examples=int(os.environ.get("EVALSTORE_DIFFERENTIAL_EXAMPLES", "100")),
    deadline=None,
    derandomize=os.environ.get("CI") == "true",
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(case=diversity_cases())
def test_ndeval_program_and_evalstore_agree(
    case: tuple[str, str, list[str]], ndeval_binary: Path, tmp_path: Path
) -> None:
    qrels_text, run_text, options = case
    (tmp_path / "qrels").write_text(qrels_text)
    (tmp_path / "run").write_text(run_text)
    _agree(ndeval_binary, options, tmp_path / "qrels", tmp_path / "run")


@pytest.mark.slow
@pytest.mark.parametrize("qrels_name", ["qrels.web.201-250.ndeval.txt", "qrels.web.251-300.ndeval.txt"])
@pytest.mark.parametrize("options", [[], ["-c", "-M", "10"], ["-alpha", "0.3", "-beta", "0.8"]], ids=" ".join)
def test_web_track_qrels_agree_with_ndeval(
    qrels_name: str, options: list[str], ndeval_binary: Path, tmp_path: Path
) -> None:
    """A run drawn (seeded) from each topic's judged documents and unjudged ones, with ties, one
    topic missing and one the qrels lack."""
    qrels = shared_path("web-diversity", qrels_name)
    docs: dict[str, set[str]] = {}
    for line in qrels.read_text().splitlines():
        topic, _, doc, _ = line.split()
        docs.setdefault(topic, set()).add(doc)
    rng = random.Random(qrels_name)
    lines = []
    for topic in [*sorted(docs, key=int)[1:], "999"]:
        pool = sorted(docs.get(topic, ())) + [f"unjudged-{i}" for i in range(40)]
        for rank, doc in enumerate(rng.sample(pool, min(len(pool), 150))):
            lines.append(f"{topic} Q0 {doc} {rank + 1} {rng.choice([1.0, 0.5, rng.random()])!r} sys")
    (tmp_path / "run").write_text("\n".join(lines) + "\n")
    _agree(ndeval_binary, options, qrels, tmp_path / "run")


EVALUATE_NAMES = ["ERR_IA@20", "nERR_IA@10", "alpha_nDCG@5", "alpha_nDCG@20", "alpha_DCG@10", "NRBP", "nNRBP"]
EVALUATE_NAMES += ["AP_IA", "P_IA@10", "StRecall@20"]


@pytest.mark.slow
@pytest.mark.parametrize("missing", ["zero", "skip"])
def test_evaluate_gives_ndeval_values_on_subtopic_qrels(missing: str, ndeval_binary: Path, tmp_path: Path) -> None:
    """evalstore.evaluate on subtopic qrels: each topic's value and the mean are ndeval's (with -c
    for missing_topics="zero": a judged topic the run lacks scores 0)."""
    import math

    from evalstore.metrics import evaluate
    from evalstore.metrics.diversity import ndeval_column

    qrels = shared_path("web-diversity", "qrels.web.201-250.ndeval.txt")
    docs: dict[str, set[str]] = {}
    for line in qrels.read_text().splitlines():
        topic, _, doc, _ = line.split()
        docs.setdefault(topic, set()).add(doc)
    rng = random.Random(missing)
    lines = []
    for topic in [*sorted(docs, key=int)[2:], "999"]:  # two judged topics missing, one the qrels lack
        pool = sorted(docs[topic]) + [f"unjudged-{i}" for i in range(20)] if topic in docs else ["x", "y"]
        for rank, doc in enumerate(rng.sample(pool, min(len(pool), 60))):
            lines.append(f"{topic} Q0 {doc} {rank + 1} {rng.choice([1.0, 0.5, rng.random()])!r} sys")
    run = tmp_path / "run"
    run.write_text("\n".join(lines) + "\n")
    options = ["-c"] if missing == "zero" else []
    printed = subprocess.run(
        [str(ndeval_binary), "-traditional", *options, str(qrels), str(run)], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    header = printed[0].split(",")
    rows = {line.split(",")[1]: dict(zip(header, line.split(","), strict=True)) for line in printed[1:]}
    result = evaluate(qrels, run, EVALUATE_NAMES, missing_topics=missing)
    judged = sorted((t for t in docs if t != "999"), key=int)
    assert result.topics == (judged if missing == "zero" else judged[2:])
    assert result.missing_topics == judged[:2]
    for name in EVALUATE_NAMES:
        column = ndeval_column(parse_measure(name))
        frame = result.per_query[result.per_query["measure"] == str(parse_measure(name))]
        ours = dict(zip(frame["query_id"], frame["value"], strict=True))
        for topic in result.topics:
            theirs = float(rows[topic][column]) if topic in rows else 0.0
            assert math.isclose(ours[topic], theirs, abs_tol=5e-7), (name, topic)  # ndeval prints 6 decimals
        assert math.isclose(result.aggregates[name], float(rows["amean"][column]), abs_tol=5e-7), name


def test_evaluate_refuses_diversity_measures_beside_relevance_ones(tmp_path: Path) -> None:
    from evalstore.errors import InvalidParameterError
    from evalstore.metrics import evaluate

    qrels = tmp_path / "qrels"
    qrels.write_text("1 1 a 1\n1 2 b 1\n")
    run = tmp_path / "run"
    run.write_text("1 Q0 a 1 2.0 r\n1 Q0 b 2 1.0 r\n")
    with pytest.raises(InvalidParameterError, match=r"^AP is computed from relevance judgments and the diversity"):
        evaluate(qrels, run, ["alpha_nDCG@10", "AP"])
    with pytest.raises(InvalidParameterError, match=r"^The diversity measures need subtopic qrels"):
        evaluate({"1": {"a": 1}}, {"1": {"a": 1.0}}, ["alpha_nDCG@10"])
    result = evaluate(qrels, run, ["alpha_nDCG@10", "StRecall@1"])
    assert result.aggregates["StRecall@1"] == 0.5
    assert result.aggregates["alpha_nDCG@10"] == 1.0
    reversed_run = tmp_path / "reversed"
    reversed_run.write_text("1 Q0 b 1 2.0 r\n1 Q0 a 2 1.0 r\n")
    both = evaluate(qrels, {"same": run, "reversed": reversed_run}, ["alpha_nDCG@10", "StRecall@1"])
    assert both["same"].aggregates == result.aggregates
    assert both["reversed"].aggregates == evaluate(qrels, reversed_run, ["alpha_nDCG@10", "StRecall@1"]).aggregates
