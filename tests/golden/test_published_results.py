"""Agreement with results published by others, computed on real submitted runs.

- NIST's official TREC 2003 Robust summaries (map, Rprec, P_100, P_1000) for the 17 runs in
  ../shared/data/robust03 (published-results/robust03-nist-official-summaries.tsv).
- The DL-HARD authors' own `trec_eval -q -l 2 -m all_trec` outputs (trec_eval 9.x) for their 20
  baseline runs; iprec_at_recall and 11pt_avg are left out because 10.0 changed their rounding
  (see tests/golden/test_trec_eval_golden.py for 10.0's values).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from evalstore.cli import app
from evalstore.metrics import evaluate
from tests.conftest import SHARED, shared_path

NIST = SHARED / "published-results" / "robust03-nist-official-summaries.tsv"
# For these two runs the published Rprec is not what trec_eval's own C code gives: pytrec_eval
# (trec_eval 9.x's code) returns 0.229552 and 0.285252, topic by topic equal to ours; the table's
# 0.2295 / 0.2852 look truncated rather than rounded. We assert trec_eval's values.
TREC_EVAL_NOT_NIST = {("SABIR03BASE", "Rprec"): "0.2296", ("THUIRr0301", "Rprec"): "0.2853"}
DLHARD = SHARED / "published-results" / "dl-hard-authors-trec_eval"


def _nist_rows() -> list[list[str]]:
    if not NIST.exists():
        return []
    lines = [line.split("\t") for line in NIST.read_text().splitlines() if line and not line.startswith("#")]
    return lines[1:]


@pytest.mark.parametrize("row", _nist_rows(), ids=lambda row: row[0])
def test_robust03_matches_nist_official_summary(row: list[str]) -> None:
    run, expected = row[0], dict(zip(["map", "Rprec", "P_100", "P_1000"], row[1:5], strict=True))
    expected.update({m: v for (r, m), v in TREC_EVAL_NOT_NIST.items() if r == run})
    result = evaluate(
        shared_path("robust03", "robust03_qrels.txt"),
        shared_path("robust03", "runs", f"input.{run}.gz"),
        ["map", "Rprec", "P_100", "P_1000"],
        per_query=False,
        missing_topics="skip",
    )
    ours = {
        "map": result.aggregates["AP"],
        "Rprec": result.aggregates["Rprec"],
        "P_100": result.aggregates["P@100"],
        "P_1000": result.aggregates["P@1000"],
    }
    assert {k: f"{v:.4f}" for k, v in ours.items()} == expected


def _dlhard_cases() -> list[Path]:
    return sorted(DLHARD.glob("*/*.run.eval")) if DLHARD.exists() else []


def _parse(text: str) -> dict[tuple[str, str], str]:
    values = {}
    for line in text.splitlines():
        name, topic, value = (part.strip() for part in line.split("\t"))
        # 10.0 changed iprec_at_recall/11pt_avg rounding; 9.x's summary num_rel ignores -l (the
        # doc runs' 3358 is the count of rel >= 1), while 10.0's honours it (out.test.aql, golden)
        # runid is a label: the authors' bm25+bert-zs.run.eval says T5-P, its run file says BERT-P
        if name.startswith(("iprec_at_recall", "11pt_avg")) or (name, topic) in (("num_rel", "all"), ("runid", "all")):
            continue
        values[(name, topic)] = value
    return values


@pytest.mark.parametrize("expected_file", _dlhard_cases(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_dlhard_matches_the_authors_trec_eval(expected_file: Path) -> None:
    kind = expected_file.parent.name
    run = shared_path("dl-hard", "runs", kind, expected_file.name.replace(".run.eval", ".run.gz"))
    qrels = shared_path("dl-hard", f"dl_hard-{kind}.qrels")
    result = CliRunner().invoke(app, ["trec-eval", "-q", "-l", "2", "-m", "all_trec", str(qrels), str(run)])
    assert result.exit_code == 0, result.stderr
    theirs = _parse(expected_file.read_text())
    ours = _parse(result.stdout)
    differing = {key: (ours.get(key), value) for key, value in theirs.items() if ours.get(key) != value}
    assert not differing, list(differing.items())[:10]
