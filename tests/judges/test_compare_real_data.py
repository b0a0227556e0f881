"""`judgments compare` on real judgments, every figure checked against libraries computed here
independently: NIST's and UMBRELA's labels of TREC 2025 RAG's 10,284 common (topic, segment) pairs
(label level, against scikit-learn and krippendorff), and robust03's 17 runs under the real qrels
and under a copy with a seeded sample of labels flipped (system level and significance, against
scipy, statsmodels and tau_AP_b by its definition)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import krippendorff
import numpy as np
import pandas as pd
import pytest
from scipy import stats
from sklearn.metrics import (
    cohen_kappa_score,
    confusion_matrix,
    f1_score,
    jaccard_score,
    precision_score,
    recall_score,
)
from sqlalchemy import Engine
from statsmodels.stats.multitest import multipletests
from typer.testing import CliRunner

from evalstore.cli import app
from evalstore.metrics import evaluate
from evalstore.services import pools, store
from evalstore.services.judges import versions
from tests.conftest import shared_path
from tests.judges.conftest import HUMAN
from tests.judges.test_agreement_statistics import _tau_ap_b_by_definition


def _cli(engine: Engine) -> Any:
    url = engine.url.render_as_string(hide_password=False)
    runner = CliRunner()
    return lambda *args: runner.invoke(app, ["--database-url", url, *args])


def _read(path: Path) -> pd.DataFrame:
    return pd.read_csv(path, sep=r"\s+", header=None, names=["topic", "it", "doc", "relevance"], dtype={"topic": str})


def test_rag25_label_agreement_equals_scikit_learn_and_krippendorff(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EVALSTORE_MLFLOW", "off")
    nist = shared_path("rag25", "qrels.rag25.test.txt")
    umbrela = shared_path("rag25", "qrels.rag25.test-umbrela2.txt")
    store.import_qrels(engine, nist, name="nist")
    store.import_qrels(engine, umbrela, name="umbrela")
    cli = _cli(engine)
    result = cli(
        "judgments", "compare", "--qrels", "nist", "--qrels", "umbrela", "--relevant-from", "2", "--format", "json"
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    both = _read(nist).merge(_read(umbrela), on=["topic", "doc"], suffixes=("_a", "_b"))
    a, b = both["relevance_a"].to_numpy(), both["relevance_b"].to_numpy()
    labels = report["labels"]
    assert labels["items"] == len(both) == 10284 and len(report["topics"]) == 22
    assert labels["kappa"] == pytest.approx(0.2333, abs=5e-5)
    assert labels["kappa"] == pytest.approx(cohen_kappa_score(a, b), abs=1e-12)
    assert labels["quadratic_kappa"] == pytest.approx(cohen_kappa_score(a, b, weights="quadratic"), abs=1e-12)
    assert labels["weighted_kappa"] == pytest.approx(cohen_kappa_score(a, b, weights="linear"), abs=1e-12)
    data = np.vstack([a, b]).astype(float)
    assert labels["krippendorff_alpha"] == pytest.approx(
        krippendorff.alpha(reliability_data=data, level_of_measurement="ordinal"), abs=1e-12
    )
    assert labels["krippendorff_alpha_nominal"] == pytest.approx(
        krippendorff.alpha(reliability_data=data, level_of_measurement="nominal"), abs=1e-12
    )
    assert labels["confusion"] == confusion_matrix(a, b, labels=[0, 1, 2, 3, 4]).tolist()
    assert labels["over_labelling"] == pytest.approx(float(np.mean(b > a)))
    relevant = labels["relevant"]
    ra, rb = a >= 2, b >= 2
    assert relevant["relevant_from"] == 2
    assert relevant["kappa"] == pytest.approx(0.4310, abs=5e-5)
    assert relevant["kappa"] == pytest.approx(cohen_kappa_score(ra, rb), abs=1e-12)
    assert relevant["precision"] == pytest.approx(precision_score(ra, rb), abs=1e-12)
    assert relevant["recall"] == pytest.approx(recall_score(ra, rb), abs=1e-12)
    assert relevant["f1"] == pytest.approx(f1_score(ra, rb), abs=1e-12)
    assert relevant["jaccard"] == pytest.approx(jaccard_score(ra, rb), abs=1e-12)
    assert report["note"] == "fewer than two runs: no system order or significance to compare"

    table = cli("judgments", "compare", "--qrels", "nist", "--qrels", "umbrela", "--relevant-from", "2")
    assert table.exit_code == 0, table.output
    lines = [" ".join(line.replace("│", " ").split()) for line in table.stdout.splitlines()]
    assert "labels Cohen's kappa 0.2333" in lines
    assert "relevant sets (grade >= 2) Cohen's kappa (binary) 0.4310" in lines
    assert f"labels Krippendorff's alpha (nominal) {labels['krippendorff_alpha_nominal']:.4f}" in lines
    assert "fewer than two runs: no system order or significance to compare" in table.stderr


def _flipped(path: Path, out: Path, seed: int, share: float) -> pd.DataFrame:
    """A copy of the qrels with a seeded ``share`` of the labels flipped (relevant -> 0, 0 -> 1)."""
    qrels = _read(path)
    rng = np.random.default_rng(seed)
    flip = rng.random(len(qrels)) < share
    qrels.loc[flip, "relevance"] = np.where(qrels.loc[flip, "relevance"] > 0, 0, 1)
    out.write_text(
        "".join(f"{t} 0 {d} {r}\n" for t, d, r in qrels[["topic", "doc", "relevance"]].itertuples(index=False))
    )
    return qrels


def _per_topic_ap(qrels: pd.DataFrame, runs: dict[str, pd.DataFrame], topics: list[str]) -> np.ndarray:
    rows = []
    for run in runs.values():
        result = evaluate(qrels[["topic", "doc", "relevance"]], run, ["AP"], missing_topics="zero")
        values = pd.Series(np.asarray(result.values["AP"], dtype=float), index=[str(t) for t in result.topics])
        rows.append(values.reindex(topics).fillna(0.0).to_numpy())
    return np.vstack(rows)


def test_robust03_system_agreement_equals_scipy_and_tau_ap_b(
    sqlite_engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EVALSTORE_MLFLOW", "off")
    real = shared_path("robust03", "robust03_qrels.txt")
    runs_dir = shared_path("robust03", "runs")
    degraded = _flipped(real, tmp_path / "degraded.txt", seed=2003, share=0.3)
    store.import_qrels(sqlite_engine, real, name="robust")
    store.import_qrels(sqlite_engine, tmp_path / "degraded.txt", name="degraded")
    cli = _cli(sqlite_engine)
    args = ["judgments", "compare", "--qrels", "robust", "--qrels", "degraded", "--runs-dir", str(runs_dir)]
    result = cli(*args, "--measure", "AP", "--top-k", "5", "--format", "json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    files = sorted(runs_dir.iterdir())
    runs = {
        f.name.removesuffix(".gz"): pd.read_csv(
            gzip.open(f),
            sep=r"\s+",
            header=None,
            names=["topic", "q0", "doc", "rank", "score", "tag"],
            dtype={"topic": str, "doc": str},
        )[["topic", "doc", "score"]]
        for f in files
    }
    topics = report["topics"]
    assert len(runs) == 17 and len(topics) == 100
    per_a = _per_topic_ap(_read(real), runs, topics)
    per_b = _per_topic_ap(degraded, runs, topics)
    a, b = per_a.mean(axis=1), per_b.mean(axis=1)
    systems = report["systems"]["AP"]
    assert systems["systems"] == 17
    assert [systems["scores"][name] for name in runs] == [
        pytest.approx([x, y], abs=1e-12) for x, y in zip(a, b, strict=True)
    ]
    assert systems["kendall_tau"] == pytest.approx(stats.kendalltau(a, b).statistic, abs=1e-12)
    assert systems["spearman"] == pytest.approx(stats.spearmanr(a, b).statistic, abs=1e-12)
    assert systems["pearson"] == pytest.approx(stats.pearsonr(a, b).statistic, abs=1e-12)
    expected_ap_b = (_tau_ap_b_by_definition(list(a), list(b)) + _tau_ap_b_by_definition(list(b), list(a))) / 2
    assert systems["tau_ap_b"] == pytest.approx(expected_ap_b, abs=1e-12)
    top = np.argsort(-a, kind="stable")[:5]
    assert systems["tau_at_k"] == pytest.approx(stats.kendalltau(a[top], b[top]).statistic, abs=1e-12)
    taus = [stats.kendalltau(per_a[:, t], per_b[:, t]).statistic for t in range(len(topics))]
    defined = [t for t in taus if not np.isnan(t)]
    assert systems["per_topic_tau"] == pytest.approx(float(np.mean(defined)), abs=1e-12)
    assert systems["per_topic_topics"] + systems["per_topic_undefined"] == 100
    # the degraded labels move the order, and per topic far more than overall
    assert 0.5 < systems["kendall_tau"] < 1 and systems["per_topic_tau"] < systems["kendall_tau"]

    rows, cols = np.triu_indices(17, 1)
    pa_ = multipletests(
        [stats.ttest_rel(per_a[i], per_a[j]).pvalue for i, j in zip(rows, cols, strict=True)], method="holm"
    )[1]
    pb_ = multipletests(
        [stats.ttest_rel(per_b[i], per_b[j]).pvalue for i, j in zip(rows, cols, strict=True)], method="holm"
    )[1]
    sa, sb = pa_ < 0.05, pb_ < 0.05
    same = np.sign(a[rows] - a[cols]) == np.sign(b[rows] - b[cols])
    significance = report["significance"]["AP"]
    assert (significance["pairs"], significance["correction"]) == (136, "holm")
    assert (
        significance["significant_first"],
        significance["preserved"],
        significance["reversed"],
        significance["lost"],
        significance["gained"],
    ) == (
        int(sa.sum()),
        int((sa & sb & same).sum()),
        int((sa & sb & ~same).sum()),
        int((sa & ~sb).sum()),
        int((sb & ~sa).sum()),
    )
    assert significance["lost"] > 0 and significance["share_lost"] == pytest.approx(significance["lost"] / sa.sum())

    # the table, on three of the run files (reading 17 runs again would double the test's time)
    three = [str(f) for f in files[:3]]
    table = cli(*args[:6], *(x for f in three for x in ("--run-file", f)), "--measure", "AP", "--correction", "none")
    assert table.exit_code == 0, table.output
    again = cli(
        *args[:6],
        *(x for f in three for x in ("--run-file", f)),
        "--measure",
        "AP",
        "--correction",
        "none",
        "--format",
        "json",
    )
    few = json.loads(again.stdout)
    lines = [" ".join(line.replace("│", " ").split()) for line in table.stdout.splitlines()]
    assert f"systems (AP) tau_AP_b (ties, both directions) {few['systems']['AP']['tau_ap_b']:.4f}" in lines
    assert f"systems (AP) mean per-topic tau-b {few['systems']['AP']['per_topic_tau']:.4f}" in lines
    assert "systems (AP) systems 3" in lines
    assert any(line.startswith("significance (AP, t test, none, alpha 0.05) share lost") for line in lines)


def test_a_lineages_name_means_its_newest_version(sqlite_world: Engine, tmp_path: Path) -> None:
    (tmp_path / "sheet.txt").write_text(HUMAN)
    pools.import_judgments(sqlite_world, tmp_path / "sheet.txt", pool_name="p", assessor="ann")
    versions.build_version(sqlite_world, "built", pool_name="p", source="human")
    cli = _cli(sqlite_world)
    exported = cli("qrels", "export", "built")
    assert exported.exit_code == 0, exported.output
    assert exported.stdout.splitlines()[0] == "1 0 d1 3"
    compared = cli(
        "judgments", "compare", "--qrels", "human", "--qrels", "built", "--measure", "AP", "--format", "json"
    )
    assert compared.exit_code == 0, compared.output
    assert json.loads(compared.stdout)["qrels"] == {"first": "human", "second": "built@v1"}
    missing = cli("qrels", "export", "nothing")
    assert missing.exit_code == 1
    assert "No qrels named 'nothing'" in missing.stderr
