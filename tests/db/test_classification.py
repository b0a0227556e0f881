"""Gold labels, predictions and clusterings in the store (SQLite and PostgreSQL): the textbook
cases end to end, bad input refused whole with path:line, idempotency, per-group values,
leaderboard and McNemar."""

from __future__ import annotations

import pytest
from sqlalchemy import Engine, func, select

from evalstore.db.models import GoldLabel, LabelSet, Prediction, PredictionSet
from evalstore.db.session import read_only
from evalstore.errors import ConflictError, InputFormatError, NotFoundError
from evalstore.services import comparisons, orchestration
from evalstore.services import labels as classification
from evalstore.services.kinds import predictions

FRUIT_GOLD = "item_id,label,group\n" + "".join(
    f"{i},{label},u{1 + i % 3}\n" for i, label in enumerate(["orange"] * 5 + ["lemon"] * 2 + ["apple"] * 2, 1)
)
FRUIT_PRED = "item_id,label\n" + "".join(
    f"{i},{label}\n"
    for i, label in enumerate(["lemon", "lemon", "apple", "orange", "apple", "lemon", "apple", "apple", "apple"], 1)
)


def _rows(engine: Engine) -> tuple[int, int, int]:
    with read_only(engine) as session:
        return tuple(
            session.scalar(select(func.count()).select_from(m)) or 0  # type: ignore[return-value]
            for m in (GoldLabel, PredictionSet, Prediction)
        )


def test_fruit_case_through_the_store(engine: Engine, write) -> None:  # type: ignore[no-untyped-def]
    summary = classification.import_labels(engine, write("gold.csv", FRUIT_GOLD), name="fruit")
    assert summary.details["classes"] == ["apple", "lemon", "orange"] and summary.details["groups"] == 3
    assert not classification.import_labels(engine, write("gold.csv", FRUIT_GOLD), name="fruit").created
    classification.register_predictions(engine, write("p.csv", FRUIT_PRED), name="p", labels_name="fruit")
    [result] = orchestration.evaluate_predictions(engine, labels_name="fruit", prediction_names=["p"])
    assert result.created
    assert result.aggregates["precision_micro"] == pytest.approx(0.444, abs=5e-4)
    assert result.aggregates["precision_macro"] == pytest.approx(0.578, abs=5e-4)
    assert result.aggregates["recall_macro"] == pytest.approx(0.567, abs=5e-4)
    again = orchestration.evaluate_predictions(engine, labels_name="fruit", prediction_names=None)
    assert [r.created for r in again] == [False] and again[0].aggregates == pytest.approx(
        result.aggregates, nan_ok=True
    )
    per_group = predictions.group_values(engine, labels_name="fruit", prediction_name="p", measure="accuracy")
    assert sorted(per_group.index) == ["u1", "u2", "u3"]
    board = predictions.leaderboard(engine, labels_name="fruit", measure_names=["f1_macro", "accuracy"])
    assert board["predictions"].tolist() == ["p"]


def test_auc_gauc_cost_and_mcnemar(engine: Engine, write) -> None:  # type: ignore[no-untyped-def]
    # u1-, u1+, u2-, u1+, u2+ by ascending score: AUC 0.833, GAUC 1.0
    classification.import_labels(
        engine,
        write("g.tsv", "item_id\tlabel\tgroup\na\tneg\tu1\nb\tpos\tu1\nc\tneg\tu2\nd\tpos\tu1\ne\tpos\tu2\n"),
        name="users",
    )
    classification.register_predictions(
        engine,
        write("s.csv", "item_id,score\na,0.1\nb,0.2\nc,0.3\nd,0.4\ne,0.5\n"),
        name="s",
        labels_name="users",
        probabilities=True,
    )
    classification.register_predictions(
        engine, write("l.csv", "item_id,label\na,neg\nb,neg\nc,neg\nd,pos\ne,pos\n"), name="l", labels_name="users"
    )
    costs = write("costs.csv", "true,predicted,cost\npos,pos,-1\npos,neg,100\nneg,pos,1\nneg,neg,0\n")
    results = {
        r.predictions: r
        for r in orchestration.evaluate_predictions(
            engine, labels_name="users", prediction_names=None, cost_matrix=costs, threshold="youden"
        )
    }
    assert results["s"].aggregates["auc"] == pytest.approx(5 / 6)
    assert results["s"].aggregates["gauc"] == 1.0
    # youden: threshold 0.4 -> predicted pos d, e; b missed (cost 100), two hits (-2)
    assert results["s"].settings["threshold"] == 0.4 and results["s"].aggregates["cost"] == 98
    assert results["l"].aggregates["cost"] == 98  # labels given: the threshold does not apply
    test = comparisons.mcnemar(engine, labels_name="users", first="s", second="l")
    assert (test.only_first_right, test.only_second_right) == (0, 0) and test.p_value == 1.0


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("dup.csv", "item_id,label\n1,orange\n1,lemon\n", "dup.csv:3: item_id '1' appears twice (first at line 2)"),
        ("extra.csv", FRUIT_PRED + "10,apple\n", "extra.csv:11: item_id '10' is not in the gold labels"),
        (
            "short.csv",
            "\n".join(FRUIT_PRED.splitlines()[:-1]) + "\n",
            "short.csv: 1 gold items have no prediction (e.g. '9')",
        ),
        (
            "unknown.csv",
            FRUIT_PRED.replace("9,apple", "9,banana"),
            "unknown.csv:10: label 'banana' is not a gold class",
        ),
        (
            "nan.csv",
            "item_id,score_apple,score_lemon,score_orange\n"
            + "".join(f"{i},0.1,0.2,{'nan' if i == 4 else 0.7}\n" for i in range(1, 10)),
            "nan.csv:5: score_orange is missing or NaN; scores must be finite",
        ),
        (
            "prob.csv",
            "item_id,score_apple,score_lemon,score_orange\n"
            + "".join(f"{i},0.1,{1.5 if i == 2 else 0.2},0.7\n" for i in range(1, 10)),
            "prob.csv:3: score_lemon 1.5 is outside [0, 1]",
        ),
    ],
)
def test_bad_predictions_are_refused_whole(engine: Engine, write, name: str, text: str, message: str) -> None:  # type: ignore[no-untyped-def]
    classification.import_labels(engine, write("gold.csv", FRUIT_GOLD), name="fruit")
    before = _rows(engine)
    with pytest.raises(InputFormatError) as raised:
        classification.register_predictions(
            engine, write(name, text), name="bad", labels_name="fruit", probabilities=True
        )
    assert str(raised.value).startswith(str(raised.value.path)) and message in str(raised.value)
    assert _rows(engine) == before


def test_clusters_and_replacement_rules(engine: Engine, write) -> None:  # type: ignore[no-untyped-def]
    classification.import_labels(engine, write("gold.csv", FRUIT_GOLD), name="fruit")
    clusters = "item_id,cluster_id\n" + "".join(f"{i},c{(i - 1) // 3}\n" for i in range(1, 10))
    classification.register_predictions(
        engine, write("c.csv", clusters), name="c", labels_name="fruit", kind="clustering"
    )
    [result] = orchestration.evaluate_predictions(engine, labels_name="fruit", prediction_names=["c"])
    # clusters {o,o,o} {o,o,l} {l,a,a}: majorities 3 + 2 + 2 of 9
    assert result.aggregates["purity"] == pytest.approx(7 / 9)
    with pytest.raises(ConflictError, match="Gold labels 'fruit' are used by c"):
        classification.import_labels(
            engine, write("gold2.csv", FRUIT_GOLD.replace("u1", "u9")), name="fruit", replace=True
        )
    with pytest.raises(ConflictError, match="Predictions named 'c' exist with other content"):
        classification.register_predictions(
            engine, write("c2.csv", clusters.replace("c2", "c1")), name="c", labels_name="fruit", kind="clustering"
        )
    classification.delete_predictions(engine, "c")
    assert _rows(engine)[1:] == (0, 0)
    with pytest.raises(NotFoundError, match="No predictions named 'c'"):
        orchestration.evaluate_predictions(engine, labels_name="fruit", prediction_names=["c"])


@pytest.mark.usefixtures("mlflow_store")  # a made store at tmp_path/mlflow.db
def test_evaluation_logged_to_mlflow_with_curves_and_groups(
    sqlite_engine: Engine,
    write,
    tmp_path,  # type: ignore[no-untyped-def]
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Delivered as the jobs end (``mlflow=True``, as --wait-mlflow) and later by 'mlflow sync':
    the same metrics, params and per-group table, the curves as figures, each result logged once."""
    import pandas as pd
    from mlflow import MlflowClient

    from evalstore.services import jobs
    from evalstore.services.tracking import deliver, pending_count

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.setenv("EVALSTORE_HOME", str(tmp_path))
    classification.import_labels(
        sqlite_engine,
        write("g.csv", "item_id,label,group\na,neg,u1\nb,pos,u1\nc,neg,u2\nd,pos,u1\ne,pos,u2\n"),
        name="users",
    )
    classification.register_predictions(
        sqlite_engine,
        write("s.csv", "item_id,score\na,0.1\nb,0.2\nc,0.3\nd,0.4\ne,0.5\n"),
        name="s",
        labels_name="users",
        system="gbdt",
    )
    [by_worker] = orchestration.evaluate_predictions(
        sqlite_engine, labels_name="users", prediction_names=["s"], mlflow=True
    )
    [by_sync] = orchestration.evaluate_predictions(
        sqlite_engine, labels_name="users", prediction_names=["s"], threshold="youden"
    )
    assert pending_count(sqlite_engine) == 1
    assert deliver(sqlite_engine).logged == [by_sync.evaluation_id] and pending_count(sqlite_engine) == 0
    client = MlflowClient(uri)
    runs = {}
    for result in (by_worker, by_sync):
        view = jobs.show_job(sqlite_engine, result.evaluation_id)
        assert view.kind == "classifier" and view.mlflow_state == "logged"
        runs[result.evaluation_id] = client.get_run(view.mlflow_run_id)
    worker_run, sync_run = runs[by_worker.evaluation_id], runs[by_sync.evaluation_id]
    assert worker_run.data.metrics["auc"] == pytest.approx(5 / 6) and worker_run.data.metrics["gauc"] == 1.0
    assert worker_run.data.params["predictions.system"] == "gbdt" and worker_run.info.run_name == "s"
    assert worker_run.data.tags["evalstore.evaluation_id"] == str(by_worker.evaluation_id)
    # the same options differ only in the threshold rule and what it decides
    differ = {"threshold", "threshold_used"}
    assert {k: v for k, v in worker_run.data.params.items() if k not in differ} == {
        k: v for k, v in sync_run.data.params.items() if k not in differ
    }
    assert {k: worker_run.data.metrics[k] for k in ("auc", "gauc", "average_precision")} == {
        k: sync_run.data.metrics[k] for k in ("auc", "gauc", "average_precision")
    }
    for run in (worker_run, sync_run):
        artifacts = {a.path for a in client.list_artifacts(run.info.run_id)}
        assert {
            "roc_curve.svg",
            "precision_recall_curve.svg",
            "per_group.parquet",
            "per_group_table.json",
            "evaluation.json",
        } <= artifacts
    tables = [
        pd.read_parquet(client.download_artifacts(run.info.run_id, "per_group.parquet", str(tmp_path / n)))
        for n, run in (("w", worker_run), ("s", sync_run))
    ]
    pd.testing.assert_frame_equal(tables[0][["auc", "average_precision"]], tables[1][["auc", "average_precision"]])
    # u1: a- b+ d+ scored .1 .2 .4; u2: c- e+ scored .3 .5
    assert tables[0].loc["u1", "auc"] == 1.0 and tables[0].loc["u2", "average_precision"] == 1.0


@pytest.mark.parametrize("order", [[0, 1, 2, 3], [2, 0, 3, 1]])
def test_predictions_are_aligned_with_the_gold_labels_in_any_order(order: list[int]) -> None:
    """Rows read back in the gold labels' order are taken as they are; in another order they are
    matched by item id."""
    import numpy as np
    import pyarrow as pa

    from evalstore.io.labels import Gold

    gold = Gold(
        pa.chunked_array([["a", "b", "c", "d"]]),
        pa.chunked_array([["neg", "pos", "pos", "neg"]]),
        pa.chunked_array([["u1", "u1", "u2", "u2"]]),
        "h",
    )
    rows = {
        "item_id": ["a", "b", "c", "d"],
        "label": ["neg", "neg", "pos", "pos"],
        "score": [0.1, 0.2, 0.3, 0.4],
        "group_id": [None] * 4,
    }
    table = pa.table(
        {k: pa.array([v[i] for i in order], pa.float64() if k == "score" else pa.string()) for k, v in rows.items()}
    )
    label_set = LabelSet(classes=["neg", "pos"])
    prediction_set = PredictionSet(kind="classifier", has_label=True, has_score=True, score_classes=[])
    data = predictions.aligned(prediction_set, label_set, gold, [table])
    assert data.y_true.tolist() == [0, 1, 1, 0] and data.y_pred.tolist() == [0, 0, 1, 1]
    assert np.allclose(data.score, [0.1, 0.2, 0.3, 0.4]) and data.groups.tolist() == [0, 0, 1, 1]


# three classes, five items, sample weights; item d3 has no label
NEWS_GOLD = (
    "item_id,labels,weight,group\nd1,sports|politics,1,g1\nd2,politics,2,g1\nd3,,0.5,g2\nd4,arts,1,g2\n"
    "d5,arts | sports,1,g2\n"
)
NEWS_PRED = "item_id,labels\nd1,sports\nd2,politics|arts\nd3,\nd4,arts\nd5,sports|arts\n"
NEWS_SCORES = (
    "item_id,score_arts,score_politics,score_sports\nd1,0.1,0.6,0.7\nd2,0.4,0.9,0.1\nd3,0.2,0.2,0.2\n"
    "d4,0.8,0.1,0.3\nd5,0.7,0.3,0.45\n"
)


def test_multilabel_weighted_gold_through_the_store(engine: Engine, write) -> None:  # type: ignore[no-untyped-def]
    import numpy as np
    from sklearn import metrics

    summary = classification.import_labels(engine, write("news.csv", NEWS_GOLD), name="news")
    assert summary.details["classes"] == ["arts", "politics", "sports"]
    assert summary.details["multilabel"] and summary.details["weighted"]
    classification.register_predictions(engine, write("p.csv", NEWS_PRED), name="sets", labels_name="news")
    classification.register_predictions(
        engine, write("s.csv", NEWS_SCORES), name="scores", labels_name="news", probabilities=True
    )
    results = {
        r.predictions: r for r in orchestration.evaluate_predictions(engine, labels_name="news", prediction_names=None)
    }
    y_true = np.array([[0, 1, 1], [0, 1, 0], [0, 0, 0], [1, 0, 0], [1, 0, 1]])
    w = np.array([1, 2, 0.5, 1, 1])
    for name, y_pred in (
        ("sets", np.array([[0, 0, 1], [1, 1, 0], [0, 0, 0], [1, 0, 0], [1, 0, 1]])),
        ("scores", np.array([[0, 1, 1], [0, 1, 0], [0, 0, 0], [1, 0, 0], [1, 0, 0]])),
    ):
        values = results[name].aggregates
        assert values["subset_accuracy"] == pytest.approx(metrics.accuracy_score(y_true, y_pred, sample_weight=w))
        assert values["hamming_loss"] == pytest.approx(metrics.hamming_loss(y_true, y_pred, sample_weight=w))
        assert values["jaccard_samples"] == pytest.approx(
            metrics.jaccard_score(y_true, y_pred, average="samples", sample_weight=w, zero_division=0)
        )
        assert values["f1_macro"] == pytest.approx(
            metrics.f1_score(y_true, y_pred, average="macro", sample_weight=w, zero_division=0)
        )
    assert results["scores"].settings["threshold"] == 0.5 and results["scores"].settings["weighted"]
    assert results["scores"].aggregates["lrap"] == pytest.approx(
        metrics.label_ranking_average_precision_score(
            y_true,
            np.array([[0.1, 0.6, 0.7], [0.4, 0.9, 0.1], [0.2, 0.2, 0.2], [0.8, 0.1, 0.3], [0.7, 0.3, 0.45]]),
            sample_weight=w,
        )
    )
    assert sorted(
        predictions.group_values(engine, labels_name="news", prediction_name="sets", measure="subset_accuracy").index
    ) == ["g1", "g2"]
    board = predictions.leaderboard(engine, labels_name="news", measure_names=[])
    assert board.columns.tolist()[3:] == predictions.MULTILABEL_LEADERBOARD
    assert board["predictions"].tolist() == ["scores", "sets"]
    test = comparisons.mcnemar(engine, labels_name="news", first="sets", second="scores")
    assert (test.only_first_right, test.only_second_right) == (1, 2)  # d5 / d1, d2


def test_weights_reach_every_classifier_measure_through_the_store(engine: Engine, write) -> None:  # type: ignore[no-untyped-def]
    weighted = FRUIT_GOLD.replace("item_id,label,group\n", "item_id,label,group,weight\n")
    weighted = "".join(line + (f",{index}" if index else "") + "\n" for index, line in enumerate(weighted.splitlines()))
    classification.import_labels(engine, write("gold.csv", weighted), name="fruit")
    classification.register_predictions(engine, write("p.csv", FRUIT_PRED), name="p", labels_name="fruit")
    [result] = orchestration.evaluate_predictions(engine, labels_name="fruit", prediction_names=["p"])
    # item i weighs i: right are 4 (orange), 6 (lemon), 8 and 9 (apple); unweighted, 4 of 9
    assert result.aggregates["accuracy"] == pytest.approx((4 + 6 + 8 + 9) / 45)
    assert result.settings["weighted"] is True


@pytest.mark.parametrize(
    ("name", "gold", "text", "message"),
    [
        (
            "negative.csv",
            "item_id,label,weight\n1,a,1\n2,b,-1\n",
            None,
            "negative.csv:3: weight -1 is negative; sample weights are 0 or more",
        ),
        (
            "zero.csv",
            "item_id,label,weight\n1,a,0\n2,b,0\n",
            None,
            "zero.csv: every weight is 0; give some items a positive weight",
        ),
        (
            "empty.csv",
            "item_id,labels\n1,a||b\n",
            None,
            "empty.csv:2: labels 'a||b' has an empty label; separate labels with one '|'",
        ),
        (
            "single.csv",
            NEWS_GOLD,
            "item_id,label\nd1,arts\n",
            "single.csv: the gold labels are multilabel: give each item's predicted labels in a 'labels' column",
        ),
        (
            "unknown.csv",
            NEWS_GOLD,
            NEWS_PRED.replace("d4,arts", "d4,arts|music"),
            "unknown.csv:5: label 'music' is not a gold class",
        ),
        (
            "score.csv",
            NEWS_GOLD,
            "item_id,score\nd1,0.5\nd2,0.5\nd3,0.5\nd4,0.5\nd5,0.5\n",
            "score.csv: a single 'score' column cannot score a multilabel task",
        ),
    ],
)
def test_bad_weights_and_label_sets_are_refused_whole(
    engine: Engine,
    write,
    name: str,
    gold: str,  # type: ignore[no-untyped-def]
    text: str | None,
    message: str,
) -> None:
    before = _rows(engine)
    with pytest.raises(InputFormatError) as raised:
        if text is None:
            classification.import_labels(engine, write(name, gold), name="bad")
        else:
            classification.import_labels(engine, write("gold.csv", gold), name="news")
            before = _rows(engine)
            classification.register_predictions(engine, write(name, text), name="bad", labels_name="news")
    assert message in str(raised.value)
    assert _rows(engine) == before
