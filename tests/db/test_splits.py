"""Splits in the store (SQLite and PostgreSQL): each method's textbook properties, reproducibility
by seed, stratification, cross-validated runs and per-fold values."""

from __future__ import annotations

import math

import numpy as np
import pytest
from sqlalchemy import Engine

from evalstore.errors import ConflictError, InvalidParameterError, Remedy
from evalstore.services import labels, splits, store
from evalstore.services.kinds.ranking import results
from evalstore.services.orchestration import evaluate_runs
from tests.db.test_compare import _qrels_text, _run_text

TOPICS = [str(t) for t in range(401, 431)]  # 30 topics


@pytest.fixture
def thirty(engine: Engine, write) -> Engine:  # type: ignore[no-untyped-def]
    qrels = "".join(
        line.replace("401 ", f"{t} ", 1) + "\n"
        for t in TOPICS
        for line in _qrels_text().splitlines()
        if line.startswith("401 ")
    )
    store.import_qrels(engine, write("qrels", qrels), name="q")
    for seed, name in enumerate(["alpha", "beta", "gamma"]):
        store.register_run(engine, write(name, _run_text(seed, name, TOPICS)), name=name)
    return engine


def test_each_method_keeps_its_textbook_promise(thirty: Engine) -> None:
    _, holdout = splits.members(thirty, splits.make_split(thirty, "h", qrels="q", seed=1).name)
    assert len(holdout[1]) == 10  # the 2/3-1/3 holdout: a third of 30 topics tested
    _, kfold = splits.members(thirty, splits.make_split(thirty, "k", qrels="q", method="kfold", k=5, seed=1).name)
    assert sorted(t for fold in kfold.values() for t in fold) == sorted(TOPICS)  # each topic tested once
    assert [len(f) for f in kfold.values()] == [6] * 5
    loo = splits.make_split(thirty, "l", qrels="q", method="loo")
    assert loo.folds == 30 and all(size["test"] == 1 and size["train"] == 29 for size in loo.sizes)
    sub = splits.make_split(thirty, "s", qrels="q", method="subsample", repeats=4, test_share=0.2, seed=3)
    assert [size["test"] for size in sub.sizes] == [6] * 4
    boot = splits.make_split(thirty, "b", qrels="q", method="bootstrap", repeats=200, seed=4)
    _, out_of_bag = splits.members(thirty, "b")
    assert all(size["train"] == 30 and size["train_distinct"] + size["test"] == 30 for size in boot.sizes)
    # a resample of n holds 1 - (1 - 1/n)^n of the units, ~63.2% (1 - 1/e) for large n
    distinct = np.mean([size["train_distinct"] for size in boot.sizes]) / 30
    assert distinct == pytest.approx(1 - (1 - 1 / 30) ** 30, abs=0.02) and 1 - 1 / math.e < 0.64
    assert len(out_of_bag) == 200


def test_the_same_seed_gives_the_same_split(thirty: Engine) -> None:
    splits.make_split(thirty, "a", qrels="q", method="kfold", k=3, seed=9)
    splits.make_split(thirty, "b", qrels="q", method="kfold", k=3, seed=9)
    splits.make_split(thirty, "c", qrels="q", method="kfold", k=3, seed=10)
    assert splits.members(thirty, "a")[1] == splits.members(thirty, "b")[1] != splits.members(thirty, "c")[1]
    drawn = splits.make_split(thirty, "d", qrels="q")
    assert drawn.seed is not None  # drawn and recorded
    with pytest.raises(ConflictError, match=r"^A split named 'a' exists\.$") as taken:
        splits.make_split(thirty, "a", qrels="q")
    assert taken.value.on_the_command_line() == "A split named 'a' exists. Choose another --name."


def test_topics_stratified_by_difficulty_spread_over_the_folds(thirty: Engine) -> None:
    evaluate_runs(thirty, qrels_name="q", run_names=["alpha", "beta", "gamma"], measures=["AP"])
    made = splits.make_split(thirty, "strat", qrels="q", method="kfold", k=2, stratify_by="difficulty", seed=5)
    assert made.params["strata"] == "quartiles of mean AP over 3 runs"
    _, folds = splits.members(thirty, "strat")
    ap = np.mean(
        [results(thirty, qrels_name="q", run_name=r).frame["AP"].astype(float) for r in ("alpha", "beta", "gamma")],
        axis=0,
    )
    by_topic = dict(zip(results(thirty, qrels_name="q", run_name="alpha").frame.index, ap, strict=True))
    hardest = sorted(TOPICS, key=lambda t: by_topic[t])[:8]  # the hardest quartile (rank-binned: 8 of 30)
    assert abs(sum(t in folds[1] for t in hardest) - sum(t in folds[2] for t in hardest)) <= 1


def test_items_stratified_by_label_keep_the_class_shares(engine: Engine, write) -> None:  # type: ignore[no-untyped-def]
    rows = "item_id,label\n" + "".join(f"i{i},{'rare' if i % 5 == 0 else 'common'}\n" for i in range(100))
    labels.import_labels(engine, write("gold.csv", rows), name="gold")
    splits.make_split(engine, "items", labels_name="gold", method="kfold", k=4, stratify_by="label", seed=1)
    _, folds = splits.members(engine, "items")
    assert [sum(int(item[1:]) % 5 == 0 for item in fold) for fold in folds.values()] == [5, 5, 5, 5]


def test_a_cross_validated_run_takes_each_topic_from_its_fold(thirty: Engine) -> None:
    splits.make_split(thirty, "k", qrels="q", method="kfold", k=3, seed=2)
    _, folds = splits.members(thirty, "k")
    registered = splits.combine_runs(thirty, splits="k", folds={1: "alpha", 2: "beta", 3: "gamma"}, name="cv")
    assert registered.summary.topics == 30
    _, combined = store.run_rows(thirty, "cv")
    for fold, run in ((1, "alpha"), (2, "beta"), (3, "gamma")):
        _, source = store.run_rows(thirty, run)
        mine = set(folds[fold])
        expected = {
            (t, d) for t, d in zip(source["topic"].to_pylist(), source["doc"].to_pylist(), strict=True) if t in mine
        }
        got = {
            (t, d) for t, d in zip(combined["topic"].to_pylist(), combined["doc"].to_pylist(), strict=True) if t in mine
        }
        assert got == expected
    with pytest.raises(InvalidParameterError, match=r"tested by no fold given \(e.g. .*\)\.$") as untested:
        splits.combine_runs(thirty, splits="k", folds={1: "alpha", 2: "beta"}, name="cv2")
    assert untested.value.remedy == Remedy(cli="Add --fold 3=RUN.")
    splits.make_split(thirty, "sub", qrels="q", method="subsample", repeats=3, seed=1)
    with pytest.raises(InvalidParameterError, match="test parts overlap"):
        splits.combine_runs(thirty, splits="sub", folds={1: "alpha", 2: "beta", 3: "gamma"}, name="cv3")


def test_fold_values_are_the_means_over_each_folds_test_topics(thirty: Engine) -> None:
    evaluate_runs(thirty, qrels_name="q", run_names=["alpha"], measures=["AP", "P@5"])
    splits.make_split(thirty, "k", qrels="q", method="kfold", k=3, seed=2)
    _, folds = splits.members(thirty, "k")
    values = splits.fold_values(thirty, splits="k", run="alpha", measures=["AP"])
    frame = results(thirty, qrels_name="q", run_name="alpha").frame["AP"].astype(float)
    expected = [float(frame.loc[folds[f]].mean()) for f in (1, 2, 3)]
    assert values.per_fold["AP"].tolist() == pytest.approx(expected)
    assert values.mean["AP"] == pytest.approx(np.mean(expected))
    assert values.spread["AP"] == pytest.approx(np.std(expected, ddof=1))


def test_bad_requests_say_what_to_do(thirty: Engine) -> None:
    with pytest.raises(InvalidParameterError) as too_many:
        splits.make_split(thirty, "x", qrels="q", method="kfold", k=31)
    assert too_many.value.on_the_command_line() == (
        "A k-fold split's k is between 2 and the 30 units to split, not 31. Give another --k."
    )
    with pytest.raises(InvalidParameterError) as no_strata:
        splits.make_split(thirty, "x", qrels="q", method="loo", stratify_by="difficulty")
    assert no_strata.value.on_the_command_line() == (
        "Leave-one-out tests one unit at a time: it has no strata. Drop --stratify-by."
    )
    with pytest.raises(InvalidParameterError) as by_label:
        splits.make_split(thirty, "x", qrels="q", stratify_by="label")
    assert by_label.value.on_the_command_line() == (
        "Topics (of qrels) are stratified by difficulty, and items (of labels) by label; these are topics. "
        "Give --stratify-by difficulty or none."
    )
    with pytest.raises(InvalidParameterError) as both:
        splits.make_split(thirty, "x", qrels="q", labels_name="g")
    assert both.value.on_the_command_line() == (
        "A split splits the topics of one qrels set or the items of one label set: both were named. "
        "Give --qrels NAME or --labels NAME."
    )
    unevaluated = splits.make_split(thirty, "by-relevant", qrels="q", stratify_by="difficulty", seed=1)
    assert unevaluated.params["strata"] == "quartiles of the number of relevant documents (no run evaluated yet)"


def test_a_collections_own_folds_import_and_refuse_overlaps(thirty: Engine, write) -> None:  # type: ignore[no-untyped-def]
    import json

    path = write("folds.json", json.dumps({"a": [int(t) for t in TOPICS[:15]], "b": [int(t) for t in TOPICS[15:]]}))
    made = splits.import_split(thirty, path, qrels="q", name="given")
    assert (made.method, made.folds) == ("given", 2) and [s["test"] for s in made.sizes] == [15, 15]
    assert splits.combine_runs(thirty, splits="given", folds={1: "alpha", 2: "beta"}, name="cv").summary.topics == 30
    overlapping = write("bad.json", json.dumps({"1": ["401", "402"], "2": ["402"]}))
    with pytest.raises(Exception, match=r"bad.json: topic 402 is in folds 1 and 2; a topic is tested by one fold"):
        splits.import_split(thirty, overlapping, qrels="q", name="bad")
    unknown = write("unknown.json", json.dumps({"1": ["999"]}))
    with pytest.raises(Exception, match="fold 1 names topic 999, which qrels 'q' do not judge"):
        splits.import_split(thirty, unknown, qrels="q", name="bad")


@pytest.mark.usefixtures("mlflow_store")  # a made store at tmp_path/mlflow.db
def test_fold_values_are_stored_and_logged(thirty: Engine, tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    evaluate_runs(thirty, qrels_name="q", run_names=["alpha"], measures=["AP"])
    splits.make_split(thirty, "k", qrels="q", method="kfold", k=3, seed=2)
    values = splits.fold_values(thirty, splits="k", run="alpha", measures=["AP"])
    splits.record_fold_values(thirty, values)
    splits.record_fold_values(thirty, values)  # again: replaced, not doubled
    stored = splits.stored_fold_values(thirty, "k")
    assert stored["fold"].tolist() == [1, 2, 3] and stored["value"].tolist() == pytest.approx(values.per_fold["AP"])
    run_id = splits.log_fold_values(values)
    logged = MlflowClient(uri).get_run(run_id)
    assert logged.data.metrics["AP.mean"] == pytest.approx(values.mean["AP"])
    assert logged.data.metrics["AP.fold2"] == pytest.approx(values.per_fold["AP"][1])
    assert logged.data.params["seed"] == "2" and logged.data.params["method"] == "kfold"
