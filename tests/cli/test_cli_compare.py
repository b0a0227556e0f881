"""`evalstore compare`, `correlate` and the report formats of `leaderboard`, as a user types them."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from tests.cli.usage import usage_message


@pytest.fixture
def cli(synthetic_cli):  # type: ignore[no-untyped-def]
    return synthetic_cli(["alpha", "beta", "gamma"])


def test_compare_json_records_the_seed_and_is_reproducible(cli) -> None:  # type: ignore[no-untyped-def]
    args = [
        "compare",
        "--qrels",
        "q",
        "--measure",
        "AP",
        "--measure",
        "P@5",
        "alpha",
        "beta",
        "gamma",
        "--test",
        "randomization",
        "--resamples",
        "500",
        "--format",
        "json",
    ]
    drawn = cli(*args)
    assert drawn.exit_code == 0, drawn.stderr
    report = json.loads(drawn.stdout)
    seed = report["settings"]["seed"]
    assert f"seed {seed} (pass --seed {seed} to reproduce)" in drawn.stderr
    assert report["settings"]["test"] == "randomization" and report["settings"]["correction"] == "holm"
    assert len(report["comparisons"]) == 6
    assert set(report["comparisons"][0]) == {
        "measure",
        "run",
        "versus",
        "mean_run",
        "mean_versus",
        "difference",
        "ci_low",
        "ci_high",
        "statistic",
        "p_value",
        "p_corrected",
        "significant",
        "effect_size",
        "wins",
        "ties",
        "losses",
        "topics",
    }
    replay = cli(*args, "--seed", str(seed))
    assert json.loads(replay.stdout)["comparisons"] == report["comparisons"]


def test_compare_table_csv_markdown_latex_and_plot(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    base = ["compare", "--qrels", "q", "--measure", "AP", "beta", "gamma", "--baseline", "alpha"]
    table = cli(*base)
    assert table.exit_code == 0, table.stderr
    assert "q: t test, holm (alpha 0.05; 8 topics)" in table.stdout and "95% CI" in table.stdout
    rows = list(csv.DictReader(io.StringIO(cli(*base, "--format", "csv").stdout)))
    assert [(r["run"], r["versus"]) for r in rows] == [("beta", "alpha"), ("gamma", "alpha")]
    markdown = cli(*base, "--format", "markdown").stdout.splitlines()
    # both means (the README promises them), the statistic named for the test, one p-value style
    assert markdown[0] == (
        "| measure | run | versus | mean run | mean versus | difference | 95% CI | statistic (t) | "
        "p | p adjusted | sig | effect size | W/T/L |"
    )
    assert markdown[1] == "|---|---|---|---|---|---|---|---|---|---|---|---|---|" and len(markdown) == 4
    cells = markdown[2].strip("|").split("|")
    assert float(cells[3]) == pytest.approx(float(rows[0]["mean_run"]), abs=5e-5)
    assert float(cells[5]) == pytest.approx(float(cells[3]) - float(cells[4]), abs=2e-4)
    assert all(cell.strip() == "<0.0001" or len(cell.strip().split(".")[1]) == 4 for cell in cells[8:10])
    randomized = cli(*base, "--test", "randomization", "--seed", "1", "--format", "markdown").stdout
    assert "| statistic (mean diff) |" in randomized.splitlines()[0]
    latex = cli(*base, "--format", "latex").stdout
    assert latex.startswith("\\begin{table}[t]\n\\centering\n\\caption{q: t test, holm")
    assert "\\toprule" in latex and latex.endswith("\\end{table}\n")
    plot = tmp_path / "diffs.png"
    drawn = cli(*base, "--plot", str(plot))
    assert drawn.exit_code == 0 and plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"plot written to {plot}" in drawn.stderr


def test_compare_errors_exit_1_with_the_fix(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    wrong_test = cli("compare", "--qrels", "q", "--measure", "AP", "alpha", "beta", "--test", "z")
    assert wrong_test.exit_code == 1
    assert wrong_test.stderr == (
        "Error: The paired test is one of t, randomization, bootstrap, wilcoxon, sign; not 'z'. "
        "Choose one with --test.\n"
    )
    unknown = cli("compare", "--qrels", "q", "--measure", "AP", "alpha", "nobody")
    assert unknown.exit_code == 1 and "nobody" in unknown.stderr
    many = ["compare", "--qrels", "q", "alpha", "beta", "gamma"]
    for measure in ("AP", "P@5", "P@10", "P@15", "P@20", "P@30", "RR", "nDCG@10", "nDCG@20"):
        many += ["--measure", measure]
    too_big = cli(*many, "--plot", str(tmp_path / "x.png"))
    assert too_big.exit_code == 1
    assert too_big.stderr == (
        "Error: A plot of 27 comparisons is unreadable (at most 24). Name a --baseline, or fewer runs or measures.\n"
    )
    assert not (tmp_path / "x.png").exists()


def test_compare_logs_to_mlflow(cli, mlflow_store: str) -> None:  # type: ignore[no-untyped-def]
    from mlflow import MlflowClient

    # the store in the test's folder has its schema made (mlflow_store): MLflow's migrations are not
    # what this checks
    logged = cli(
        "compare",
        "--qrels",
        "q",
        "--measure",
        "AP",
        "alpha",
        "beta",
        "--test",
        "bootstrap",
        "--seed",
        "3",
        "--resamples",
        "300",
        "--mlflow",
    )
    assert logged.exit_code == 0, logged.stderr
    run_id = logged.stderr.strip().splitlines()[-1].removeprefix("logged to MLflow run ")
    client = MlflowClient(tracking_uri=mlflow_store)
    run = client.get_run(run_id)
    assert run.info.status == "FINISHED" and run.info.run_name == "compare: alpha, beta"
    assert run.data.params["test"] == "bootstrap" and run.data.params["seed"] == "3"
    assert run.data.tags["evalstore.kind"] == "comparison"
    assert "significant_pairs.AP" in run.data.metrics
    artifacts = {a.path for a in client.list_artifacts(run_id)}
    assert {"comparison.csv", "comparison.json", "comparison_table.json", "per_topic_differences.png"} <= artifacts


def test_correlate_and_leaderboard_reports(cli) -> None:  # type: ignore[no-untyped-def]
    assert cli("evaluate", "--qrels", "q", "--all-runs", "--measures", "AP,P@5,Judged@10", "--wait").exit_code == 0
    shown = cli("correlate", "--qrels", "q", "--measure", "AP", "--measure", "P@5", "--format", "json")
    assert shown.exit_code == 0, shown.stderr
    report = json.loads(shown.stdout)
    assert report["reference"] == "AP on q" and report["other"] == "P@5 on q" and report["systems"] == 3
    assert report["concordant"] + report["discordant"] <= 3
    wrong = cli("correlate", "--qrels", "q", "--measure", "AP")
    assert wrong.exit_code == 2
    assert usage_message(wrong.stderr) == "Give one --qrels and two --measure, or two --qrels and one --measure."
    latex = cli("leaderboard", "--qrels", "q", "--measure", "AP", "--format", "latex").stdout
    assert latex.splitlines()[3] == "\\begin{tabular}{lrrrr}"
    assert "AP [95\\% CI] & Judged@10" in latex
