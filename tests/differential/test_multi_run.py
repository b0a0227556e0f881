"""`evalstore trec-eval QRELS RUN [RUN ...]` against a loop over the trec_eval 10.0 program:
byte-identical stdout on whole campaigns, robust03's 17 runs and DL-HARD's 20 (6 passage runs
against the passage qrels, 14 document runs against the document qrels), with -q -m all_trec and
with no flag. Each runs the installed command once (its own entry point, as people run it) and
trec_eval once a run."""

from __future__ import annotations

import gzip
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import shared_path

CAMPAIGNS = {  # name: (qrels, folder of gzipped runs, their count)
    "robust03": (("robust03", "robust03_qrels.txt"), ("robust03", "runs"), 17),
    "dl-hard passage": (("dl-hard", "dl_hard-passage.qrels"), ("dl-hard", "runs", "passage"), 6),
    "dl-hard doc": (("dl-hard", "dl_hard-doc.qrels"), ("dl-hard", "runs", "doc"), 14),
}
FLAGS = {"-q -m all_trec": ["-q", "-m", "all_trec"], "plain": []}


@pytest.fixture(scope="module")
def campaign_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, list[Path]]]:
    """Each campaign's qrels and its runs as plain text (trec_eval reads no gzip), in name order."""
    files = {}
    for name, (qrels, folder, count) in CAMPAIGNS.items():
        runs = sorted(shared_path(*folder).glob("*.gz"))
        assert len(runs) == count, f"{name}: {len(runs)} runs, expected {count}"
        out = tmp_path_factory.mktemp(name.replace(" ", "-"))
        plain = []
        for run in runs:
            path = out / run.name.removesuffix(".gz")
            path.write_bytes(gzip.decompress(run.read_bytes()))
            plain.append(path)
        files[name] = (shared_path(*qrels), plain)
    return files


@pytest.mark.slow
@pytest.mark.parametrize("flags", list(FLAGS))
@pytest.mark.parametrize("name", list(CAMPAIGNS))
def test_one_command_prints_what_a_loop_over_trec_eval_prints(
    name: str, flags: str, trec_eval_binary: Path, campaign_files: dict[str, tuple[Path, list[Path]]]
) -> None:
    qrels, runs = campaign_files[name]
    loop = [
        subprocess.run(
            [str(trec_eval_binary), *FLAGS[flags], str(qrels), str(run)], capture_output=True, check=True
        ).stdout
        for run in runs
    ]
    jobs = ["--jobs", "2"] if flags == "plain" else []  # the processes' outputs come back in order too
    ours = subprocess.run(
        [sys.executable, "-m", "evalstore", "trec-eval", *jobs, *FLAGS[flags], str(qrels), *map(str, runs)],
        capture_output=True,
        timeout=300,
        check=False,
    )
    assert (ours.returncode, ours.stderr) == (0, b"")
    assert ours.stdout == b"".join(loop)
