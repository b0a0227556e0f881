"""`evalstore repro` in the store: evaluated when needed, stored with the evaluations' ids (replaced,
not doubled), read back for the run page, logged to MLflow, and the command's formats."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest
from sqlalchemy import Engine, func, select
from typer.testing import CliRunner

from evalstore.cli import app
from evalstore.db.models import ReproResult
from evalstore.db.session import read_only
from evalstore.errors import InvalidParameterError, NotFoundError, Remedy
from evalstore.services import repro
from evalstore.services.kinds.ranking import results
from tests.conftest import Templates, migrated_copy
from tests.db.test_splits import thirty  # noqa: F401  (the fixture)


def test_figures_are_computed_stored_and_replaced(thirty: Engine) -> None:  # noqa: F811
    found = repro.reproduce(
        thirty,
        qrels="q",
        original="alpha",
        reproduced="beta",
        original_baseline="gamma",
        reproduced_baseline="gamma",
        measures=["AP", "P@5"],
    )
    assert found.kind == "reproducibility" and found.measures == ["AP", "P@5"]
    alpha = results(thirty, qrels_name="q", run_name="alpha", measures=["AP"])  # evaluated on the way
    assert found.evaluation_ids["original"] == alpha.evaluation_id
    figures = {(row.part, row.measure, row.figure) for row in found.figures}
    assert ("advanced", "", "KTU") in figures and ("baseline", "AP", "RMSE") in figures
    assert ("both", "P@5", "ER") in figures and ("both", "AP", "DeltaRI") in figures
    # the baselines are the same run: nothing differs between them
    assert found.value("RMSE", "AP", "baseline") == 0.0 and found.value("KTU", part="baseline") == 1.0
    assert found.value("p_value", "AP", "baseline") == 1.0
    beta = results(thirty, qrels_name="q", run_name="beta", measures=["AP"]).frame["AP"].astype(float)
    gamma = results(thirty, qrels_name="q", run_name="gamma", measures=["AP"]).frame["AP"].astype(float)
    alpha_ap = alpha.frame["AP"].astype(float)
    expected_er = (beta - gamma).mean() / (alpha_ap - gamma).mean()
    assert found.value("ER", "AP", "both") == pytest.approx(expected_er)
    assert len(found.per_topic) == 2 * 30
    again = repro.reproduce(
        thirty,
        qrels="q",
        original="alpha",
        reproduced="beta",
        original_baseline="gamma",
        reproduced_baseline="gamma",
        measures=["AP", "P@5"],
    )
    with read_only(thirty) as session:
        assert session.scalar(select(func.count()).select_from(ReproResult)) == 1  # replaced, not doubled
    stored = repro.reproductions_of(thirty, "beta")
    assert len(stored) == 1 and stored[0].runs["original"] == "alpha"
    assert stored[0].evaluation_ids["reproduced"] == again.evaluation_ids["reproduced"]
    # stored as JSON: an undefined (NaN) figure reads back as None
    assert stored[0].figures == [
        dataclasses.replace(row, value=None if row.value is None or math.isnan(row.value) else row.value)
        for row in again.figures
    ]
    assert repro.reproductions_of(thirty, "gamma")[0].runs["reproduced"] == "beta"  # as the reproduced baseline
    assert repro.reproductions_of(thirty, "alpha") == []


def test_bad_requests_say_what_to_do(thirty: Engine) -> None:  # noqa: F811
    with pytest.raises(
        InvalidParameterError,
        match=r"^ER and DeltaRI compare two improvements, each over its baseline; only the original baseline is "
        r"named\.$",
    ) as one_baseline:
        repro.reproduce(thirty, qrels="q", original="alpha", reproduced="beta", original_baseline="gamma")
    assert one_baseline.value.remedy == Remedy(
        cli="Give both --original-baseline and --reproduced-baseline, or neither."
    )
    with pytest.raises(InvalidParameterError, match=r"^RBO's persistence is between 0 and 1; not 1\.5\.$") as rbo:
        repro.reproduce(thirty, qrels="q", original="alpha", reproduced="beta", rbo_p=1.5)
    assert rbo.value.on_the_command_line() == "RBO's persistence is between 0 and 1; not 1.5. Set it with --rbo-p."
    with pytest.raises(
        InvalidParameterError, match=r"^KTU and RBO compare each ranking's top documents, 1 or more; not 0\.$"
    ) as depth:
        repro.reproduce(thirty, qrels="q", original="alpha", reproduced="beta", depth=0)
    assert depth.value.remedy == Remedy(cli="Set how many with --depth.")
    with pytest.raises(NotFoundError, match="nope"):
        repro.reproduce(thirty, qrels="q", original="alpha", reproduced="nope")
    with pytest.raises(NotFoundError):
        repro.reproduce(thirty, qrels="nope", original="alpha", reproduced="beta")


def test_the_figures_are_logged_to_mlflow(
    thirty: Engine,  # noqa: F811
    mlflow_store: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from mlflow.tracking import MlflowClient

    uri = mlflow_store  # a store with its schema made (MLflow's migrations are not what this checks)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    found = repro.reproduce(thirty, qrels="q", original="alpha", reproduced="beta", measures=["nDCG@10"])
    logged = MlflowClient(uri).get_run(repro.log_reproduction(found))
    assert logged.data.metrics["RMSE.nDCG_at_10"] == pytest.approx(found.value("RMSE", "nDCG@10"))
    assert logged.data.metrics["KTU"] == pytest.approx(found.value("KTU"))
    assert logged.data.params["original"] == "alpha" and logged.data.params["kind"] == "reproducibility"
    assert logged.data.params["reproduced_evaluation_id"] == str(found.evaluation_ids["reproduced"])
    assert logged.data.tags["evalstore.kind"] == "repro"


def test_the_command_prints_table_json_and_csv(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, templates: Templates
) -> None:
    from tests.db.test_compare import _qrels_text, _run_text

    monkeypatch.setenv("EVALSTORE_HOME", str(tmp_path))
    monkeypatch.setenv("EVALSTORE_MLFLOW", "off")
    url = migrated_copy(templates, "sqlite", tmp_path)  # as `db upgrade` leaves it
    runner = CliRunner()

    def invoke(*args: str):  # type: ignore[no-untyped-def]
        return runner.invoke(app, ["--database-url", url, *args])

    (tmp_path / "qrels").write_text(_qrels_text())
    assert invoke("qrels", "import", str(tmp_path / "qrels"), "--name", "q").exit_code == 0
    for seed, name in enumerate(["orig", "rep"]):
        (tmp_path / name).write_text(_run_text(seed, name))
        assert invoke("runs", "register", str(tmp_path / name), "--name", name).exit_code == 0
    shown = invoke(
        "repro", "--qrels", "q", "--original", "orig", "--reproduced", "rep", "--measure", "AP", "--format", "json"
    )
    assert shown.exit_code == 0, shown.output
    payload = json.loads(shown.stdout)
    assert payload["kind"] == "reproducibility" and payload["original"] == "orig" and payload["measures"] == ["AP"]
    assert {row["figure"] for row in payload["figures"]} == {"KTU", "RBO", "RMSE", "nRMSE", "p_value"}
    assert "reproducibility of run 'orig' by run 'rep'" in shown.stderr
    csv_out = invoke("repro", "--qrels", "q", "--original", "orig", "--reproduced", "rep", "--format", "csv")
    assert csv_out.stdout.splitlines()[0] == "part,measure,figure,value"
    assert len(csv_out.stdout.splitlines()) == 1 + 2 + 3 * 3  # KTU, RBO; RMSE, nRMSE, p for 3 measures
    per_topic = invoke(
        "repro", "--qrels", "q", "--original", "orig", "--reproduced", "rep", "--per-topic", "--format", "csv"
    )
    assert per_topic.stdout.splitlines()[0] == "part,topic,KTU,RBO"
    bad = invoke("repro", "--qrels", "q", "--original", "orig", "--reproduced", "rep", "--original-baseline", "orig")
    assert bad.exit_code == 1
    assert bad.stderr == (
        "Error: ER and DeltaRI compare two improvements, each over its baseline; only the original baseline is "
        "named. Give both --original-baseline and --reproduced-baseline, or neither.\n"
    )
