"""Evaluations on Spark: Spark DataFrames in, Spark DataFrames out, the local engine's numbers.

    from evalstore.spark import evaluate_ranking, evaluate_predictions
    per_query, aggregates = evaluate_ranking(run_df, qrels_df, measures=["AP", "nDCG@10", "RR@10"])
    per_group, aggregates = evaluate_predictions(pred_df, label_col="label", score_col="score",
                                                 group_col="user_id")

Ranking: Spark does the part that grows with the run, as the DuckDB backend does
(:mod:`evalstore.backends.duckdb_engine`): the judged rows (a join with the qrels), each judged
row's trec_eval rank (a window over its topic: score descending, docno descending; Spark
compares strings by their bytes, as strcmp), and each topic's row count. Those are a few
rows per topic, so they come to the driver, where the local engine's kernels compute every
measure from them (:func:`evalstore.metrics.preparation.prepare_ranked`): the values are the local
engine's by construction, for every measure it has.

Predictions: exact AUC and GAUC from per-(group, distinct score) counts and a window over each
group's distinct scores (Spark's BinaryClassificationEvaluator bins scores; this does not). A group
of 10M impressions is split by Spark's partial aggregation; only its distinct scores meet in one
task. GAUC's sum over groups is taken exactly (math.fsum) on the driver, so it has the local
engine's bits; log loss is Spark's floating sum (equal to 1e-12, not to the bit).

pyspark is an optional extra: pip install 'evalstore[spark]'.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from evalstore.errors import InputFormatError, InvalidParameterError
from evalstore.io.formats import choose_columns

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from evalstore.metrics.classification import BinaryCounts


def _functions() -> Any:
    try:
        from pyspark.sql import functions
    except ImportError:
        raise InvalidParameterError("evalstore.spark needs pyspark: pip install 'evalstore[spark]'.") from None
    return functions


def _one_row(frame: DataFrame) -> Any:
    row = frame.first()
    assert row is not None, "an aggregate without GROUP BY has one row"
    return row


def _canonical(df: DataFrame, wanted: Sequence[str], what: str) -> DataFrame:
    """``df`` with its columns renamed to evalstore's names (topic, doc, score | relevance)."""
    chosen = choose_columns(what, df.columns, wanted)
    return df.select(*(df[source].alias(canonical) for canonical, source in chosen.items()))


def judged_ranks(run_df: DataFrame, qrels_df: DataFrame) -> tuple[pa.Table, pa.Table]:
    """(topic, retrieved) per run topic and (topic, rank, relevance) per judged run row, ranked in
    trec_eval order, as Arrow tables on the driver; a docno twice in a topic is refused."""
    f = _functions()
    run = _canonical(run_df, ["topic", "doc", "score"], "the run DataFrame").select(
        f.col("topic").cast("string"), f.col("doc").cast("string"), f.col("score").cast("double")
    )
    qrels = _canonical(qrels_df, ["topic", "doc", "relevance"], "the qrels DataFrame").select(
        f.col("topic").cast("string"), f.col("doc").cast("string"), f.col("relevance").cast("long")
    )
    counts = run.groupBy("topic").agg(f.count(f.lit(1)).alias("retrieved"), f.countDistinct("doc").alias("docs"))
    retrieved = counts.toArrow()
    repeated = np.flatnonzero(retrieved["retrieved"].to_numpy() != retrieved["docs"].to_numpy())
    if len(repeated):
        topic = retrieved["topic"][int(repeated[0])].as_py()
        doc = _one_row(run.where(f.col("topic") == topic).groupBy("doc").count().where(f.col("count") > 1))["doc"]
        raise InputFormatError(
            "the run DataFrame",
            None,
            f"docno '{doc}' appears twice in topic '{topic}'; "
            "trec_eval refuses duplicate documents, so remove one of them",
        )
    # The rank as a window over each topic (one shuffle by topic, a sort within it), not DuckDB's
    # counting join (judged rows x their topic's rows, aggregated): DuckDB streams that join, but
    # Spark materialises and shuffles every pair, ~15M on a 100k-row robust03 run (10x slower
    # here). Spark sorts doubles as it compares them (NaN largest, -0.0 == 0.0) and strings by
    # their bytes, as strcmp; documents are unique in a topic (checked above), so row_number is
    # 1 + the rows ahead, trec_eval's rank.
    from pyspark.sql.window import Window

    in_order = Window.partitionBy("topic").orderBy(f.col("score").desc(), f.col("doc").desc())
    ranked = (
        run.withColumn("rank", f.row_number().over(in_order))
        .join(qrels, ["topic", "doc"])
        .select("topic", f.col("rank").cast("int"), "relevance")
    )
    return retrieved.select(["topic", "retrieved"]), ranked.toArrow()


def evaluate_ranking(
    run_df: DataFrame,
    qrels_df: DataFrame,
    measures: Sequence[str] = ("AP", "nDCG@10", "RR@10"),
    *,
    relevance_level: int = 1,
    complete: bool = False,
    judged_only: bool = False,
    max_docs: int | None = None,
) -> tuple[DataFrame, DataFrame]:
    """(per query: query_id, measure, value (text_value: for text-valued measures); aggregates: measure,
    value) of a run against qrels, both Spark DataFrames with any of evalstore's column names
    (topic/query_id/qid, doc/docno, score; relevance/rel/label). The per-query table names its
    query column as :func:`evalstore.evaluate`'s does. ``complete``, ``judged_only`` and
    ``max_docs`` are trec_eval's -c, -J and -M."""
    from evalstore.metrics import compute, resolve_measures, summarise
    from evalstore.metrics.preparation import PrepareOptions, prepare_ranked

    spark = run_df.sparkSession
    chosen = resolve_measures(list(measures))
    retrieved, judged = judged_ranks(run_df, qrels_df)
    f = _functions()
    qrels = (
        _canonical(qrels_df, ["topic", "doc", "relevance"], "the qrels DataFrame")
        .select(f.col("topic").cast("string"), f.col("doc").cast("string"), f.col("relevance").cast("long"))
        .toArrow()
    )
    rk = prepare_ranked(
        qrels, retrieved, judged, PrepareOptions(max_docs=max_docs, judged_only=judged_only, complete=complete)
    )
    if not rk.topics:
        raise InvalidParameterError("No queries with both results and relevance info; check that the topic ids match.")
    values = compute(rk, chosen, relevance_level=relevance_level)
    numeric = [m for m in chosen if values[m].dtype != object]  # text values (relstring) go in 'text_value'
    per_query = pa.table(
        {
            "query_id": pa.array(rk.topics * len(chosen), pa.string()),
            "measure": pa.array([str(m) for m in chosen for _ in rk.topics], pa.string()),
            "value": pa.array(
                np.concatenate(
                    [np.asarray(values[m], dtype=np.float64) if m in numeric else np.full(rk.n, np.nan) for m in chosen]
                ),
                from_pandas=True,
            ),
            "text_value": pa.array([None if m in numeric else str(v) for m in chosen for v in values[m]], pa.string()),
        }
    )
    aggregates = pa.table(
        {
            "measure": [str(m) for m in numeric],
            "value": pa.array([summarise(m, values[m], rk) for m in numeric], pa.float64()),
        }
    )
    return spark.createDataFrame(per_query), spark.createDataFrame(aggregates)


def _pair_counts(frame: DataFrame) -> DataFrame:
    """Per group g of rows (label, s, g): positives, negatives, twice the pairs ordered right (a
    tie counts half; exact integers) and the sum over distinct scores of the positives there times
    the precision at that score, as PAIR_COUNTS in evalstore.backends.duckdb_engine."""
    from pyspark.sql import Window

    f = _functions()
    counts = frame.groupBy("g", "s").agg(f.sum("label").alias("pos"), (f.count(f.lit(1)) - f.sum("label")).alias("neg"))
    lower = Window.partitionBy("g").orderBy("s").rowsBetween(Window.unboundedPreceding, -1)
    whole = Window.partitionBy("g")
    return (
        counts.withColumn("neg_below", f.coalesce(f.sum("neg").over(lower), f.lit(0)))
        .withColumn("tp_at", f.sum("pos").over(whole) - f.coalesce(f.sum("pos").over(lower), f.lit(0)))
        .withColumn(
            "predicted_at",
            f.sum(f.col("pos") + f.col("neg")).over(whole)
            - f.coalesce(f.sum(f.col("pos") + f.col("neg")).over(lower), f.lit(0)),
        )
        .groupBy("g")
        .agg(
            f.sum("pos").alias("positives"),
            f.sum("neg").alias("negatives"),
            f.sum(f.col("pos") * (2 * f.col("neg_below") + f.col("neg")).cast("decimal(38,0)")).alias("twice_pairs"),
            f.sum(f.col("pos") * (f.col("tp_at").cast("double") / f.col("predicted_at"))).alias("precision_sum"),
        )
    )


def _loss_sums(data: DataFrame) -> tuple[float, float]:
    """(sum of the log loss terms, of the Brier terms) of the rows (y, s), as LOSS_SUMS in
    evalstore.backends.duckdb_engine: the gold class's probability clipped to [eps, 1 - eps]."""
    f = _functions()
    eps = float(np.finfo(np.float64).eps)
    gold = f.when(f.col("y") == 1, f.col("s")).otherwise(1 - f.col("s"))
    sums = _one_row(
        data.agg(
            f.sum(-f.log(f.least(f.greatest(gold, f.lit(eps)), f.lit(1 - eps)))),
            f.sum((f.col("y") - f.col("s")) * (f.col("y") - f.col("s"))),
        )
    )
    return float(sums[0]), float(sums[1])


def binary_counts(data: DataFrame) -> BinaryCounts:
    """:class:`BinaryCounts` of a DataFrame of rows (y, s, g, predicted), as
    :func:`evalstore.backends.duckdb_engine.binary_counts` counts them (per group only when every
    row has one); a few rows per group come to the driver."""
    from evalstore.metrics.classification import BinaryCounts

    f = _functions()
    overall = _one_row(
        data.agg(
            f.count(f.lit(1)).alias("items"),
            f.count("s").alias("scored"),
            f.count("g").alias("grouped"),
            f.min("s").alias("lowest"),
            f.max("s").alias("highest"),
        )
    )
    if overall["items"] == 0:
        raise InvalidParameterError("no predictions to evaluate")
    if overall["scored"] < overall["items"]:
        raise InvalidParameterError(
            f"{overall['items'] - overall['scored']} of {overall['items']} predictions have "
            "no score; the out-of-core backends evaluate scored predictions"
        )
    rows = data.select(f.col("y").alias("label"), "s", "g", "predicted")

    def counts(frame: DataFrame) -> pa.Table:
        cells = frame.groupBy("g").agg(
            f.sum(f.col("label") * f.col("predicted")).alias("tp"),
            f.sum((1 - f.col("label")) * f.col("predicted")).alias("fp"),
            f.sum(f.col("label") * (1 - f.col("predicted"))).alias("fn"),
            f.sum((1 - f.col("label")) * (1 - f.col("predicted"))).alias("tn"),
        )
        return (
            _pair_counts(frame)
            .join(cells, "g")
            .orderBy("g")
            .select(
                f.col("g").cast("string").alias("group"),
                "positives",
                "negatives",
                f.col("twice_pairs").cast("string"),
                "precision_sum",
                "tp",
                "fp",
                "fn",
                "tn",
            )
            .toArrow()
        )

    log_loss_sum = brier_sum = None
    if 0 <= overall["lowest"] and overall["highest"] <= 1:
        log_loss_sum, brier_sum = _loss_sums(data)
    return BinaryCounts.from_tables(
        counts(rows.withColumn("g", f.lit(""))),
        counts(rows) if overall["grouped"] == overall["items"] else None,
        log_loss_sum,
        brier_sum,
    )


def evaluate_predictions(
    pred_df: DataFrame, *, label_col: str = "label", score_col: str = "score", group_col: str | None = None
) -> tuple[DataFrame | None, DataFrame]:
    """(per group: group, positives, negatives, auc (null with one class), or None without
    ``group_col``; aggregates, one row: items, positives, auc, gauc, gauc_groups_skipped, log_loss
    (when every score is in [0, 1])) of binary predictions (label 0/1)."""
    f = _functions()
    spark = pred_df.sparkSession
    data = pred_df.select(
        f.col(label_col).cast("long").alias("label"),
        f.col(score_col).cast("double").alias("s"),
        (f.col(group_col) if group_col else f.lit(0)).alias("g"),
    )
    overall = data.agg(
        f.count(f.lit(1)).alias("items"),
        f.min("label").alias("low"),
        f.max("label").alias("high"),
        f.min("s").alias("lowest"),
        f.max("s").alias("highest"),
        f.count(f.when(f.col("s").isNull(), 1)).alias("missing"),
    )
    overall = _one_row(overall)
    if overall["items"] == 0:
        raise InvalidParameterError("no predictions to evaluate")
    if overall["low"] not in (0, 1) or overall["high"] not in (0, 1) or overall["missing"]:
        raise InvalidParameterError(
            f"labels must be 0 or 1 and every score a number (labels {overall['low']}.."
            f"{overall['high']}, {overall['missing']} missing scores)"
        )

    from evalstore.metrics.classification import gauc_of_pairs, ratio_of_pairs

    whole = _one_row(_pair_counts(data.withColumn("g", f.lit(0))))
    aggregates: dict[str, float | None] = {
        "items": float(overall["items"]),
        "positives": float(whole["positives"]),
        "auc": float(
            ratio_of_pairs(
                np.array([int(whole["twice_pairs"])], dtype=object),
                np.array([whole["positives"]]),
                np.array([whole["negatives"]]),
            )[0]
        ),
    }
    per_group = None
    if group_col is not None:
        groups = _pair_counts(data).cache()
        table = groups.select("positives", "negatives", f.col("twice_pairs").cast("string")).toArrow()
        gauc, skipped = gauc_of_pairs(
            [int(v) for v in table["twice_pairs"].to_pylist()],
            table["positives"].to_numpy(),
            table["negatives"].to_numpy(),
        )
        aggregates["gauc"] = None if math.isnan(gauc) else gauc
        aggregates["gauc_groups_skipped"] = skipped
        per_group = groups.select(
            f.col("g").alias(group_col),
            "positives",
            "negatives",
            f.when(
                (f.col("positives") > 0) & (f.col("negatives") > 0),
                f.col("twice_pairs").cast("double") / (2.0 * f.col("positives") * f.col("negatives")),
            ).alias("auc"),
        )
    if 0 <= overall["lowest"] and overall["highest"] <= 1:
        aggregates["log_loss"] = _loss_sums(data.withColumnRenamed("label", "y"))[0] / overall["items"]
    return per_group, spark.createDataFrame([aggregates])
