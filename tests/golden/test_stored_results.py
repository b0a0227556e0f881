"""Per-query values read back from the database are exactly what `evalstore trec-eval -q` prints
for the same files: real runs from ../shared/data, on SQLite and PostgreSQL."""

from __future__ import annotations

import pytest
from sqlalchemy import Engine
from typer.testing import CliRunner

from evalstore.cli import app
from evalstore.services import jobs, store
from evalstore.services.kinds.ranking import results
from evalstore.services.orchestration import work_on
from tests.conftest import shared_path

CASES = [  # (qrels, run, relevance level)
    (("robust03", "robust03_qrels.txt"), ("robust03", "runs", "input.SABIR03BASE.gz"), 1),
    (("robust03", "robust03_qrels.txt"), ("robust03", "runs", "input.uwmtCR0.gz"), 1),
    (("dl-hard", "dl_hard-passage.qrels"), ("dl-hard", "runs", "passage", "bm25+rm3+t5-zs.run.gz"), 2),
]


@pytest.mark.slow
@pytest.mark.parametrize(("qrels_parts", "run_parts", "level"), CASES, ids=[c[1][-1] for c in CASES])
def test_stored_results_read_back_as_trec_eval_q(
    engine: Engine, qrels_parts: tuple[str, ...], run_parts: tuple[str, ...], level: int
) -> None:
    qrels, run = shared_path(*qrels_parts), shared_path(*run_parts)
    store.import_qrels(engine, qrels, name="q")
    store.register_run(engine, run, name="r")
    refs = jobs.enqueue(
        engine, qrels_name="q", run_names=["r"], options=jobs.EvaluationOptions(("all_trec",), relevance_level=level)
    )
    work_on(engine, [r.evaluation_id for r in refs], mlflow=False)
    text = results(engine, qrels_name="q", run_name="r").as_trec_eval(per_query=True)
    direct = CliRunner().invoke(
        app, ["trec-eval", "-q", "-c", "-l", str(level), "-m", "all_trec", str(qrels), str(run)]
    )
    assert direct.exit_code == 0, direct.stderr
    assert text == direct.stdout
