"""`splits export`: each fold's train and test units, as `splits make` recorded them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import Engine
from typer.testing import CliRunner

from evalstore.cli import app
from evalstore.errors import InvalidParameterError, NotFoundError, Remedy
from evalstore.services import labels, splits
from tests.conftest import Templates, migrated_copy
from tests.db.test_splits import TOPICS, thirty  # noqa: F401  (the fixture)


def test_kfold_test_parts_partition_the_topics_and_round_trip(thirty: Engine) -> None:  # noqa: F811
    splits.make_split(thirty, "k5", qrels="q", method="kfold", k=5, seed=7)
    exported = splits.export_split(thirty, "k5")
    assert exported.summary.seed == 7 and exported.summary.method == "kfold"
    tests = [fold.test or [] for fold in exported.folds]
    assert sorted(t for part in tests for t in part) == sorted(TOPICS)  # a partition: each topic tested once
    assert sum(len(part) for part in tests) == len(TOPICS)
    _, recorded = splits.members(thirty, "k5")
    assert {fold.fold: fold.test for fold in exported.folds} == recorded
    _, recorded_train = splits.members(thirty, "k5", part="train")
    for fold in exported.folds:
        assert fold.train == recorded_train[fold.fold] == sorted(set(TOPICS) - set(fold.test or []))
        assert not fold.train_weights and "train_weights" not in fold.as_dict()
    # the same seed draws the same folds again
    splits.make_split(thirty, "again", qrels="q", method="kfold", k=5, seed=7)
    assert splits.export_split(thirty, "again").folds == exported.folds


def test_one_fold_one_part_and_bootstrap_weights(thirty: Engine) -> None:  # noqa: F811
    splits.make_split(thirty, "k3", qrels="q", method="kfold", k=3, seed=1)
    only = splits.export_split(thirty, "k3", fold=2, part="test")
    assert [fold.as_dict() for fold in only.folds] == [{"fold": 2, "test": splits.members(thirty, "k3")[1][2]}]
    splits.make_split(thirty, "boot", qrels="q", method="bootstrap", repeats=3, seed=4)
    for fold, size in zip(
        splits.export_split(thirty, "boot").folds, splits.show_split(thirty, "boot").sizes, strict=True
    ):
        weights, train = fold.train_weights, fold.train or []
        assert len(train) == size["train_distinct"]
        assert sum(weights.get(t, 1) for t in train) == size["train"] == 30
        assert weights and min(weights.values()) >= 2
        assert not set(train) & set(fold.test or [])


def test_items_come_in_the_splits_unit_order(engine: Engine, write) -> None:  # type: ignore[no-untyped-def]
    items = [f"z{i}" if i % 2 else f"a{i}" for i in range(12)]
    labels.import_labels(engine, write("gold.csv", "item_id,label\n" + "".join(f"{i},x\n" for i in items)), name="gold")
    splits.make_split(engine, "items", labels_name="gold", method="kfold", k=3, seed=2)
    items, _, _ = splits.split_items(engine, "gold", "none")  # the order the split numbered the units in
    for fold in splits.export_split(engine, "items").folds:
        for part in (fold.train or [], fold.test or []):
            assert part == sorted(part, key=items.index)


def test_bad_requests_say_what_to_do(thirty: Engine) -> None:  # noqa: F811
    splits.make_split(thirty, "k3", qrels="q", method="kfold", k=3, seed=1)
    with pytest.raises(InvalidParameterError, match=r"^Split 'k3' has folds 1-3; there is no fold 4\.$"):
        splits.export_split(thirty, "k3", fold=4)
    with pytest.raises(InvalidParameterError, match=r"^A fold's parts are train and test, not 'dev'\.$") as part:
        splits.export_split(thirty, "k3", part="dev")
    assert part.value.remedy == Remedy(cli="Choose one with --part.")
    with pytest.raises(NotFoundError):
        splits.export_split(thirty, "nope")


def test_the_command_writes_json_and_tsv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, templates: Templates) -> None:
    monkeypatch.setenv("EVALSTORE_HOME", str(tmp_path))
    monkeypatch.setenv("EVALSTORE_MLFLOW", "off")
    url = migrated_copy(templates, "sqlite", tmp_path)  # as `db upgrade` leaves it
    runner = CliRunner()

    def invoke(*args: str):  # type: ignore[no-untyped-def]
        return runner.invoke(app, ["--database-url", url, *args])

    (tmp_path / "qrels").write_text("".join(f"{t} 0 d{t} 1\n" for t in range(1, 11)))
    assert invoke("qrels", "import", str(tmp_path / "qrels"), "--name", "q").exit_code == 0
    assert (
        invoke(
            "splits", "make", "--qrels", "q", "--method", "kfold", "--k", "5", "--seed", "7", "--name", "s5"
        ).exit_code
        == 0
    )
    shown = invoke("splits", "export", "s5")
    assert shown.exit_code == 0, shown.output
    payload = json.loads(shown.stdout)
    assert payload["seed"] == 7 and payload["method"] == "kfold" and payload["k"] == 5
    assert sorted(t for fold in payload["fold_sets"] for t in fold["test"]) == sorted(str(t) for t in range(1, 11))
    tsv = invoke("splits", "export", "s5", "--fold", "1", "--part", "test", "--format", "tsv")
    lines = tsv.stdout.splitlines()
    assert lines[0] == "fold\tpart\tunit\tweight"
    assert [line.split("\t")[2] for line in lines[1:]] == payload["fold_sets"][0]["test"]
    assert all(line.startswith("1\ttest\t") and line.endswith("\t1") for line in lines[1:])
    bad = invoke("splits", "export", "s5", "--fold", "9")
    assert bad.exit_code == 1 and "Split 's5' has folds 1-5; there is no fold 9." in bad.stderr
