"""`evalstore health` and `evalstore standardize` on real TREC 2003 Robust runs: the report's
parts, the plot, reproducibility by seed, and the -Z file trec-eval reads back."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from evalstore.cli import app
from tests.conftest import Templates, migrated_copy, shared_path

# one xdist worker builds the module's store (six robust03 runs evaluated) for all of its tests
pytestmark = pytest.mark.xdist_group("cli_health")

RUNS = ("pircRBa1", "aplrob03a", "uwmtCR0", "SABIR03BASE", "humR03dc", "rutcor03100")


@pytest.fixture(scope="module")
def cli(tmp_path_factory: pytest.TempPathFactory, templates: Templates):  # type: ignore[no-untyped-def]
    folder = tmp_path_factory.mktemp("health")
    url = migrated_copy(templates, "sqlite", folder)  # as `db upgrade` leaves it
    runner = CliRunner()

    def invoke(*args: str):  # type: ignore[no-untyped-def]
        return runner.invoke(
            app, ["--database-url", url, *args], env={"EVALSTORE_HOME": str(folder), "EVALSTORE_MLFLOW": "off"}
        )

    invoke.url = url  # type: ignore[attr-defined]  # for tests that read the store themselves
    robust = shared_path("robust03", "robust03_qrels.txt").parent
    assert invoke("qrels", "import", str(robust / "robust03_qrels.txt"), "--name", "robust03").exit_code == 0
    registered = invoke("runs", "register", *(str(robust / "runs" / f"input.{r}.gz") for r in RUNS))
    assert registered.exit_code == 0, registered.stderr
    evaluated = invoke("evaluate", "--qrels", "robust03", "--all-runs", "--wait")
    assert evaluated.exit_code == 0, evaluated.stderr
    return invoke


def test_health_reports_every_part_and_draws_the_curve(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    plot = tmp_path / "stability.png"
    first = cli(
        "health",
        "--qrels",
        "robust03",
        "--measure",
        "AP",
        "--measure",
        "P@10",
        "--seed",
        "5",
        "--plot",
        str(plot),
        "--format",
        "json",
    )
    assert first.exit_code == 0, first.stderr
    assert first.stderr.startswith("seed 5 (pass --seed 5 to reproduce the swap rates)\n")
    report = json.loads(first.stdout)
    assert report["runs"] == sorted(report["runs"], key=list(RUNS).index) and report["topics"] == 100
    power = {d["measure"]: d for d in report["discriminative_power"]}
    assert power["AP"]["pairs"] == 15 and 0 < power["AP"]["significant"] <= 15
    assert [s["topics"] for s in report["stability"] if s["measure"] == "AP"] == list(range(5, 51, 5))
    rates = [s["swap_rate"] for s in report["stability"] if s["measure"] == "AP"]
    assert rates[0] > rates[-1]  # more topics, fewer swaps
    assert {t["measure"] for t in report["topic_set_size"]} == {"AP", "P@10"}
    assert {r["run"] for r in report["leave_one_run_out"]} == set(RUNS)
    assert all(r["AP without"] <= r["AP"] + 1e-12 for r in report["leave_one_run_out"])
    assert set(report["judged_at_10"]) == set(RUNS)
    assert plot.read_bytes().startswith(b"\x89PNG")
    again = cli(
        "health", "--qrels", "robust03", "--measure", "AP", "--measure", "P@10", "--seed", "5", "--format", "json"
    )
    assert json.loads(again.stdout)["stability"] == report["stability"]


def test_standardize_writes_the_z_file_trec_eval_reads(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    zfile = tmp_path / "z.txt"
    done = cli("standardize", "--qrels", "robust03", "--measure", "AP", "-o", str(zfile), "--format", "json")
    assert done.exit_code == 0, done.stderr
    lines = zfile.read_text().splitlines()
    assert len(lines) == 100 and all(len(line.split()) == 4 and line.split()[1] == "map" for line in lines)
    means = {row["run"]: row["mean z AP"] for row in json.loads(done.stdout)}
    run = shared_path("robust03", "runs", "input.pircRBa1.gz")
    printed = cli("trec-eval", "-Z", str(zfile), "-m", "map", str(run.parents[1] / "robust03_qrels.txt"), str(run))
    zmap = float(printed.stdout.split()[-1])
    assert zmap == pytest.approx(means["pircRBa1"], abs=5e-4)  # the file's statistics are rounded to 4 places
    assert done.stderr.startswith(f"standardisation 'robust03-z' stored: {len(RUNS)} runs x 1 measure(s)\n")


def test_standardize_stores_the_statistics_and_z_scores(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from evalstore.db.engine import make_engine
    from evalstore.services import health

    done = cli(
        "standardize", "--qrels", "robust03", "--measure", "AP", "--measure", "P@10", "--name", "rz", "--format", "json"
    )
    assert done.exit_code == 0, done.stderr
    engine = make_engine(cli.url)
    try:
        stored = health.read_standardisation(engine, "rz")
        again = cli("standardize", "--qrels", "robust03", "--measure", "AP", "--name", "rz")
        assert again.exit_code == 0 and sorted(health.read_standardisation(engine, "rz").zscores) == ["AP"]
    finally:
        engine.dispose()
    assert (stored.qrels, sorted(stored.runs), sorted(stored.zscores)) == ("robust03", sorted(RUNS), ["AP", "P@10"])
    assert len(stored.statistics) == 200 and set(stored.statistics["measure"]) == {"AP", "P@10"}
    means = {row["run"]: row["mean z AP"] for row in json.loads(done.stdout)}
    for run, mean in means.items():
        assert float(stored.zscores["AP"].loc[run].mean()) == pytest.approx(mean, abs=5e-5)
    # each topic's z-scores over the runs have mean 0 and (where the runs differ) standard deviation 1
    z = stored.zscores["AP"].to_numpy()
    assert np.allclose(z.mean(axis=0), 0) and np.allclose(z.std(axis=0, ddof=1)[z.std(axis=0) > 0], 1)


def test_health_says_how_to_evaluate_a_missing_measure(cli) -> None:  # type: ignore[no-untyped-def]
    refused = cli("health", "--qrels", "robust03", "--measure", "P@7")
    assert refused.exit_code == 1
    assert refused.stderr == (
        "Error: Measure 'P@7' was not computed for these runs. Run 'evalstore evaluate --qrels "
        "robust03 --all-runs --measures P@7 --wait'.\n"
    )


def test_cross_validation_from_the_command_line(cli) -> None:  # type: ignore[no-untyped-def]
    made = cli(
        "splits",
        "make",
        "--qrels",
        "robust03",
        "--method",
        "kfold",
        "--k",
        "3",
        "--seed",
        "7",
        "--stratify-by",
        "difficulty",
        "--name",
        "k3",
        "--format",
        "json",
    )
    assert made.exit_code == 0, made.stderr
    assert made.stderr == "split 'k3': 3 fold(s) by kfold, seed 7\n"
    assert [f["test"] for f in json.loads(made.stdout)] == [34, 33, 33]
    combined = cli(
        "runs",
        "combine",
        "--splits",
        "k3",
        "--fold",
        "1=pircRBa1",
        "--fold",
        "2=aplrob03a",
        "--fold",
        "3=uwmtCR0",
        "--name",
        "cv",
    )
    assert combined.exit_code == 0, combined.stderr
    assert combined.stderr == "registered run 'cv': 100000 rows, 100 topics from 3 folds of split 'k3'\n"
    folds = cli(
        "evaluate",
        "--qrels",
        "robust03",
        "--run",
        "cv",
        "--measures",
        "AP",
        "--wait",
        "--splits",
        "k3",
        "--format",
        "json",
    )
    assert folds.exit_code == 0, folds.stderr
    rows = json.loads(folds.stdout)
    assert [r["fold"] for r in rows] == [1, 2, 3, "mean", "sd"]
    stored = json.loads(cli("splits", "results", "k3", "--format", "json").stdout)
    assert [(r["run"], r["fold"], r["measure"]) for r in stored] == [("cv", f, "AP") for f in (1, 2, 3)]
    assert [r["value"] for r in stored] == pytest.approx([r["AP"] for r in rows[:3]])
    bad = cli("runs", "combine", "--splits", "k3", "--fold", "1=pircRBa1", "--name", "half")
    assert bad.exit_code == 1
    assert bad.stderr.startswith("Error: 66 topic(s) are tested by no fold given")
    usage = cli("runs", "combine", "--splits", "k3", "--fold", "one=pircRBa1", "--name", "x")
    assert usage.exit_code == 2 and "give a fold as FOLD=RUN" in usage.stderr
