"""`evalstore trec-eval -R prefs` and `-R qrels_prefs` against the trec_eval 10.0 program: byte-identical
stdout and the same outcome on generated preference judgments (several judgment groups per topic,
one or several sub-groups per group, ties, repeated lines, documents judged by several groups,
contradictions) and runs (ties in score, unjudged and unretrieved documents), with random flags.

With -Z every judged topic has statistics for every measure: trec_eval's lookups (find_qid and
find_meas in convert_zscores.c) search one entry past their array, so a topic or measure without
statistics reads beyond it (another topic's line, garbage, or a crash) instead of getting the
missing value -1000000 that evalstore gives (tests/golden checks that case).

Levels are non-negative, as trec_eval's format defines them (with a negative level its _Rnonrel
recount can read past the class it counts). Without -c every judged topic has results (trec_eval
aborts otherwise; evalstore skips the topic with a warning, as in -R qrels mode).
"""

from __future__ import annotations

import gzip
import os
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from evalstore.cli import app
from evalstore.metrics.preferences import PREFS_MEASURES
from tests.conftest import shared_path
from tests.differential.test_against_trec_eval import _assert_same, _both

TOPICS = ["1", "10", "2", "q7"]
DOCS = ["d0", "d1", "d2", "d10", "D3", "x#1", "a", "b"]
LEVELS = st.sampled_from([0.0, 0.0, 1.0, 2.0, 3.0, 0.5])
SCORES = st.sampled_from([1.0, 2.0, 0.5, 0.0, 3.0, -1.0, 2.5])
MEASURE_SPECS = st.sampled_from(["all_prefs", "prefs", *PREFS_MEASURES, "num_q", "runid"])
# the families this file holds to the trec_eval program (tests/unit/test_reference_coverage.py)
REFERENCE_FAMILIES = set(PREFS_MEASURES)


@st.composite
def preference_cases(draw: st.DrawFn) -> tuple[str, str, list[str], str | None]:
    """(judgments text, run text, trec_eval arguments, -Z file text or None)."""
    qrels_layout = draw(st.booleans())
    topics = draw(st.lists(st.sampled_from(TOPICS), min_size=1, max_size=3, unique=True))
    lines = []
    for topic in topics:
        for group in draw(st.lists(st.sampled_from(["u1", "u2", "u3"]), min_size=1, max_size=3, unique=True)):
            subgroups = (
                ["0"]
                if qrels_layout
                else draw(st.lists(st.sampled_from(["s1", "s2", "s3"]), min_size=1, max_size=3, unique=True))
            )
            for subgroup in subgroups:
                # mostly one line per document; sometimes a document twice (same or another level)
                docs = draw(st.lists(st.sampled_from(DOCS), min_size=1, max_size=6, unique=draw(st.integers(0, 9)) > 0))
                for doc in docs:
                    level = draw(LEVELS)
                    lines.append(
                        f"{topic} {group} {doc} {level:g}"
                        if qrels_layout
                        else f"{topic} {group} {subgroup} {doc} {level:g}"
                    )
    draw(st.randoms()).shuffle(lines)
    complete = draw(st.booleans())
    run_topics = (
        draw(st.lists(st.sampled_from(topics), max_size=len(topics), unique=True)) if complete else list(topics)
    )
    run_topics += draw(st.lists(st.sampled_from([t for t in TOPICS if t not in topics] or TOPICS), max_size=1))
    run_lines = []
    for topic in dict.fromkeys(run_topics):
        docs = draw(st.lists(st.sampled_from([*DOCS, "u1", "u2"]), min_size=1, max_size=8, unique=True))
        run_lines += [f"{topic} Q0 {doc} {rank} {draw(SCORES)!r} tag" for rank, doc in enumerate(docs)]
    if not run_lines:
        run_lines.append(f"{topics[0]} Q0 d0 1 1.0 tag")
    args = ["-R", "qrels_prefs" if qrels_layout else "prefs"]
    for spec in draw(st.lists(MEASURE_SPECS, min_size=1, max_size=3)):
        args += ["-m", spec]
    if complete:
        args.append("-c")
    if draw(st.booleans()):
        args.append("-q")
    if draw(st.integers(0, 5)) == 0:
        args.append("-n")
    if draw(st.booleans()):
        args += ["-M", str(draw(st.integers(1, 5)))]
    if draw(st.integers(0, 4)) == 0:  # no effect on preference measures, in either program
        args += draw(st.sampled_from([["-J"], ["-l", "2"], ["-N", "50"]]))
    zscores = None
    if draw(st.integers(0, 4)) == 0:  # -Z: statistics for every topic and measure, zero spread too
        stats = st.tuples(st.sampled_from([0.0, 0.25, 1.0, 3.0]), st.sampled_from([0.0, 0.5, 2.0]))
        zscores = "".join(
            f"{topic} {name} {mean} {sd}\n"
            for topic in topics
            for name in (*PREFS_MEASURES, "num_q", "runid")
            for mean, sd in [draw(stats)]
        )
    return "\n".join(lines) + "\n", "\n".join(run_lines) + "\n", args, zscores


@settings(
    max_examples=int(os.environ.get("EVALSTORE_DIFFERENTIAL_EXAMPLES", "100")),
    deadline=None,
    derandomize=os.environ.get("CI") == "true",
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(case=preference_cases())
# two sub-groups chain d1 > d2 > d3 (transitive d1 > d3); ties in score break by docno ascending here
@example(
    case=(
        "1 u1 s1 d1 2\n1 u1 s1 d2 1\n1 u1 s2 d2 5\n1 u1 s2 d3 4\n",
        "1 Q0 d3 1 1 t\n1 Q0 d2 2 1 t\n1 Q0 d1 3 1 t\n",
        ["-R", "prefs", "-q", "-m", "all_prefs"],
        None,
    )
)
# _Rnonrel recount: more non-relevant documents than relevant ones, in a one-sub-group group
@example(
    case=(
        "1 u1 d1 1\n1 u1 d2 0\n1 u1 d3 0\n1 u1 d10 0\n",
        "1 Q0 d2 1 3 t\n1 Q0 d1 2 2 t\n1 Q0 d3 3 1 t\n",
        ["-R", "qrels_prefs", "-q", "-m", "all_prefs"],
        None,
    )
)
# -Z with statistics for the one measure asked for (a mean with no spread, met exactly: 0)
@example(
    case=(
        "1 u1 d1 1\n1 u1 d2 0\n",
        "1 Q0 d2 1 3 t\n1 Q0 d1 2 2 t\n",
        ["-R", "qrels_prefs", "-q", "-m", "prefs_simp"],
        "1 prefs_simp 0.5 0.25\n",
    )
)
@example(
    case=(
        "1 u1 d1 1\n1 u1 d2 0\n",
        "1 Q0 d2 1 3 t\n1 Q0 d1 2 2 t\n",
        ["-R", "qrels_prefs", "-q", "-m", "prefs_num_prefs_poss"],
        "1 prefs_num_prefs_poss 1 0\n",
    )
)
# judgments trec_eval would refuse (d0 both 0 and 1 in one group) are not read for num_q and runid
@example(
    case=("2 u3 s3 d0 1\n2 u3 s3 d0 0\n2 u3 s1 d0 0\n", "2 Q0 d0 0 1.0 tag\n", ["-R", "prefs", "-m", "num_q"], None)
)
def test_preference_modes_agree_with_trec_eval(
    case: tuple[str, str, list[str], str | None], trec_eval_binary: Path, tmp_path: Path
) -> None:
    prefs_text, run_text, args, zscores = case
    prefs, run = tmp_path / "prefs", tmp_path / "run"
    prefs.write_text(prefs_text)
    run.write_text(run_text)
    if zscores is not None:
        (tmp_path / "zscores").write_text(zscores)
        args = [*args, "-Z", str(tmp_path / "zscores")]
    full = [*args, str(prefs), str(run)]
    # the same outcome (trec_eval abort()s on contradicting preferences within a group, a negative
    # return code, where evalstore exits 1) and, on success, the same text
    _assert_same(*_both(trec_eval_binary, full), full)


REAL_CASES = [  # qrels read as preferences (one group per qrels file here: its second column)
    (("robust03", "robust03_qrels.txt"), ("robust03", "runs", "input.InexpC2.gz"), ["-M", "500"]),
    (
        ("msmarco-dl19", "qrels.dl19-passage.txt"),
        ("msmarco-dl19", "runs", "run.msmarco-v1-passage.bm25-default.dl19.txt"),
        ["-c"],
    ),
]


@pytest.mark.slow
@pytest.mark.parametrize(("qrels_parts", "run_parts", "flags"), REAL_CASES, ids=[c[1][-1] for c in REAL_CASES])
def test_real_runs_agree_with_trec_eval_in_qrels_prefs_mode(
    qrels_parts: tuple[str, ...], run_parts: tuple[str, ...], flags: list[str], trec_eval_binary: Path, tmp_path: Path
) -> None:
    """Graded (DL19, levels 0-3) and binary (robust03) qrels of real collections with real runs,
    ties in score included, as -R qrels_prefs."""
    qrels, run = shared_path(*qrels_parts), shared_path(*run_parts)
    if run.suffix == ".gz":  # trec_eval reads plain text only
        plain = tmp_path / run.stem
        plain.write_bytes(gzip.decompress(run.read_bytes()))
        run = plain
    full = ["-R", "qrels_prefs", "-q", "-m", "all_prefs", *flags, str(qrels), str(run)]
    theirs = subprocess.run([str(trec_eval_binary), *full], capture_output=True, text=True, check=False)
    ours = CliRunner().invoke(app, ["trec-eval", *full])
    assert theirs.returncode == 0 and ours.exit_code == 0, (theirs.stderr, ours.stderr)
    assert ours.stdout == theirs.stdout
