"""An answer run's references are a ranking (rank = position in 'references'): evaluated against
NIST's segment qrels, every trec_eval measure equals trec_eval 10.0's on the same lists, written
here from the answer file; and the run stands on the qrels' leaderboard beside ranking runs."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from sqlalchemy import Engine
from typer.testing import CliRunner

from evalstore.cli import app
from evalstore.services import store
from evalstore.services.kinds.ranking import results
from tests.conftest import shared_path

RUN = "baseline_rag24.test_command-r-plus_top20"


def test_references_evaluated_on_nists_qrels_equal_trec_eval(
    engine: Engine, trec_eval_binary: Path, tmp_path: Path
) -> None:
    answers = shared_path("rag24", "answers", f"{RUN}.jsonl")
    qrels = shared_path("rag24", "qrels.rag24.test.txt")
    url = engine.url.render_as_string(hide_password=False)
    runner = CliRunner(env={"EVALSTORE_MLFLOW": "off", "EVALSTORE_HOME": str(tmp_path)})
    assert runner.invoke(app, ["--database-url", url, "answers", "register", str(answers)]).exit_code == 0
    store.import_qrels(engine, qrels, name="rag24")
    ranking = tmp_path / "ranking.run"  # a ranking run of one's own, beside the answer run
    ranking.write_text(
        "2024-105741 Q0 msmarco_v2.1_doc_00_1534870566#5_2687183111 1 2.0 mine\n"
        "2024-105741 Q0 msmarco_v2.1_doc_00_125364462#6_229054655 2 1.0 mine\n"
    )
    store.register_run(engine, ranking, name="mine")
    done = runner.invoke(
        app, ["--database-url", url, "evaluate", "--qrels", "rag24", "--all-runs", "--measures", "all_trec", "--wait"]
    )
    assert done.exit_code == 0, done.stderr
    # the references as trec_eval reads a run: any scores falling with the position
    lines = []
    for record in map(json.loads, answers.read_text().splitlines()):
        for position, segment in enumerate(record["references"]):
            lines.append(f"{record['topic_id']} Q0 {segment} {position + 1} {1 / (position + 1)} answers\n")
    plain = tmp_path / "references.run"
    plain.write_text("".join(lines))
    theirs = subprocess.run(
        [str(trec_eval_binary), "-q", "-c", "-m", "all_trec", str(qrels), str(plain)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert results(engine, qrels_name="rag24", run_name=RUN).as_trec_eval(per_query=True) == theirs.stdout
    board = runner.invoke(
        app, ["--database-url", url, "leaderboard", "--qrels", "rag24", "--measure", "nDCG@20", "--format", "json"]
    )
    assert board.exit_code == 0, board.stderr
    assert {row["run"] for row in json.loads(board.stdout)} == {RUN, "mine"}
