"""Three trec_eval 10.0 behaviours the conformance page states, each checked against the binary:
a -Z statistic missing for the key that sorts last (trec_eval reads past its array: a crash),
contradicting preferences in one judgment group (trec_eval aborts), and Rprec_mult(_avgjg),
iprec_at_recall and 11pt_avg at a negative -l (trec_eval counts a document missing from the
qrels as relevant in one part of them and not in another: evalstore refuses, where it printed
other numbers silently)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.differential.fuzz_cases import run_evalstore

QRELS = "1 0 a 1\n1 0 b 0\n1 0 c 2\n2 0 a 1\n2 0 x 1\n"
RUN = "1 Q0 a 1 3 r\n1 Q0 z 2 2 r\n1 Q0 c 3 1 r\n2 Q0 x 1 1 r\n2 Q0 y 2 1 r\n"


def _files(tmp_path: Path, **texts: str) -> dict[str, str]:
    paths = {}
    for name, text in texts.items():
        (tmp_path / name).write_text(text)
        paths[name] = str(tmp_path / name)
    return paths


def test_a_missing_z_statistic_that_sorts_last(trec_eval_binary: Path, tmp_path: Path) -> None:
    """Statistics for topic 1 only: topic 2's key sorts after every one given."""
    files = _files(tmp_path, qrels=QRELS, run=RUN, z="1 map 0.2 0.1\n")
    args = ["-q", "-m", "map", "-Z", files["z"], files["qrels"], files["run"]]
    theirs = subprocess.run([str(trec_eval_binary), *args], capture_output=True, text=True, check=False)
    assert theirs.returncode < 0 or theirs.returncode > 128, theirs  # killed by a signal: it crashed
    ours = run_evalstore(args)
    assert ours.code == 0, ours.stderr
    assert (
        ours.stdout.splitlines()[1] == "Zmap                   \t2\t-1000000.0000"
    )  # its value for a missing statistic


def test_contradicting_preferences_in_one_judgment_group(trec_eval_binary: Path, tmp_path: Path) -> None:
    files = _files(
        tmp_path,
        prefs="1 jg1 s1 A 2\n1 jg1 s1 B 1\n1 jg1 s2 B 2\n1 jg1 s2 A 1\n",
        run="1 Q0 A 1 2.0 r\n1 Q0 B 2 1.0 r\n",
    )
    args = ["-R", "prefs", "-m", "prefs_simp", files["prefs"], files["run"]]
    theirs = subprocess.run([str(trec_eval_binary), *args], capture_output=True, text=True, check=False)
    assert "Pref inconsistency found" in theirs.stderr and theirs.returncode != 0  # abort()
    ours = run_evalstore(args)
    assert ours.code == 1 and ours.stdout == ""
    assert ours.stderr == (
        "Error: topic 1: the preferences of one judgment group contradict each other (A and B are each "
        "preferred to the other, through its sub-groups); put contradicting judgments in different "
        "judgment groups\n"
    )


@pytest.mark.parametrize(
    ("rel_format", "measure", "named"),
    [
        ("qrels", "Rprec_mult", "Rprec_mult"),
        ("qrels", "all_trec", "11pt_avg, Rprec_mult, iprec_at_recall"),
        ("qrels_jg", "Rprec_mult_avgjg", "Rprec_mult_avgjg"),
    ],
)
def test_rprec_mult_at_a_negative_relevance_level(
    trec_eval_binary: Path, tmp_path: Path, rel_format: str, measure: str, named: str
) -> None:
    files = _files(tmp_path, qrels=QRELS, run=RUN)
    args = ["-R", rel_format, "-l", "-1", "-m", measure, files["qrels"], files["run"]]
    ours = run_evalstore(args)
    assert ours.code == 1 and ours.stdout == ""
    assert ours.stderr == (
        f"Error: -l -1: at a negative relevance level trec_eval 10.0 counts a retrieved document missing "
        f"from the qrels as relevant in one part of {named} and not in another, which evalstore does not "
        "reproduce; use -l 0 or more, add -J, or leave those measures out.\n"
    )
    # what evalstore computes at -l 0 and with -J is trec_eval's, to the digit
    for fixed in (["-l", "0"], ["-J", "-l", "-1"]):
        again = ["-R", rel_format, *fixed, "-m", measure, files["qrels"], files["run"]]
        theirs = subprocess.run([str(trec_eval_binary), *again], capture_output=True, text=True, check=True)
        assert run_evalstore(again).stdout == theirs.stdout
