"""`judgments compare`: how far two stored qrels agree, on labels, on the order of systems and on
significance decisions (:mod:`evalstore.statistics.judgment_agreement`).

Labels are compared over the documents both judge (relevance 0 or more: -1, pooled but not judged,
is no label). Systems are the stored runs (or those named), evaluated on each qrels over the topics
both judge, so that a judge's labels of a few topics are compared on those topics only.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from sqlalchemy import Engine, select

from evalstore.db import repositories as repo
from evalstore.db.models import Run
from evalstore.db.session import read_only
from evalstore.errors import EvaluationError, InvalidParameterError
from evalstore.metrics import evaluate, resolve_measures
from evalstore.services.judges.circularity import circular_runs
from evalstore.services.tasks.judge_made import judge_behind
from evalstore.statistics import judgment_agreement as agreement
from evalstore.statistics.significance import TESTS

DEFAULT_MEASURES = ("nDCG@10", "AP")


def _labels(session: Any, name: str) -> pd.DataFrame:
    qrels = repo.get_qrels(session, name)
    if qrels.kind != "relevance":
        raise InvalidParameterError(f"'{name}' holds {qrels.kind} judgments; judgments compare reads relevance qrels.")
    frame = repo.qrels_table(session, qrels).select(["topic", "doc", "relevance"]).to_pandas()
    return frame.astype({"topic": object, "doc": object})


def compare(
    engine: Engine,
    first: str,
    second: str,
    *,
    measures: list[str] | None = None,
    runs: list[str] | None = None,
    top_k: int = 5,
    test: str = "t",
    alpha: float = 0.05,
) -> dict[str, Any]:
    """The three levels of agreement of ``second`` with ``first`` (the reference, e.g. human qrels)."""
    if test not in TESTS or test in ("randomization", "bootstrap"):
        raise InvalidParameterError("--test is t, wilcoxon or sign.")
    if not 0 < alpha < 1:
        raise InvalidParameterError(f"--alpha is between 0 and 1; not {alpha:g}.")
    if top_k < 2:
        raise InvalidParameterError(f"--top-k is at least 2; not {top_k}.")
    names = [str(m) for m in resolve_measures(list(measures or DEFAULT_MEASURES))]
    with read_only(engine) as session:
        a = _labels(session, first)
        b = _labels(session, second)
        chosen = (
            [repo.get_run(session, n) for n in runs] if runs else list(session.scalars(select(Run).order_by(Run.name)))
        )
        tables = {run.name: repo.run_table(session, run, for_evaluation=True) for run in chosen}
        circular = {name: circular_runs(session, name, chosen) for name in (first, second)}
        judges = {name: judge_behind(session, name) for name in (first, second)}
    both = a[a["relevance"] >= 0].merge(b[b["relevance"] >= 0], on=["topic", "doc"], suffixes=("_a", "_b"))
    if both.empty:
        raise EvaluationError(f"'{first}' and '{second}' judge no document in common; nothing to compare.")
    labels = agreement.label_agreement(
        both["topic"].to_numpy(), both["relevance_a"].to_numpy(), both["relevance_b"].to_numpy()
    )
    report: dict[str, Any] = {
        "first": first,
        "second": second,
        "documents": {
            "first": int((a["relevance"] >= 0).sum()),
            "second": int((b["relevance"] >= 0).sum()),
            "both": len(both),
        },
        "labels": asdict(labels),
        "systems": {},
        "significance": {},
        # runs that declare the model that made one side's labels: their scores there are suspect
        "circular": {name: runs_ for name, runs_ in circular.items() if runs_},
        # the judge behind either side's labels, with its stored probe result
        "judges": {name: behind for name, behind in judges.items() if behind},
    }
    topics = sorted(set(both["topic"]))
    report["topics"] = topics
    if len(tables) < 2:
        report["note"] = "fewer than two runs are stored: no system order or significance to compare"
        return report
    for measure in names:
        scores_a = _per_topic(a, tables, measure, topics)
        scores_b = _per_topic(b, tables, measure, topics)
        run_names = list(tables)
        report["systems"][measure] = asdict(
            agreement.system_agreement(run_names, scores_a.mean(axis=1), scores_b.mean(axis=1), top_k=top_k)
        )
        report["significance"][measure] = asdict(
            agreement.significance_agreement(scores_a, scores_b, test=test, alpha=alpha)
        )
    return report


def _per_topic(qrels: pd.DataFrame, runs: dict[str, pa.Table], measure: str, topics: list[str]) -> np.ndarray:
    """runs x topics: each run's ``measure`` on each topic (0 where the run retrieves nothing)."""
    kept = qrels[qrels["topic"].isin(topics)]
    table = pa.table(
        {
            "topic": pa.array(kept["topic"], pa.string()),
            "doc": pa.array(kept["doc"], pa.string()),
            "relevance": pa.array(kept["relevance"].to_numpy("int64")),
        }
    )
    wanted = pa.array(topics, pa.string())
    rows = []
    for run in runs.values():
        mine = run.filter(pc.is_in(run["topic"], value_set=wanted))
        result = evaluate(table, mine, [measure], missing_topics="zero")
        rows.append(
            pd.Series(np.asarray(result.values[measure], dtype=float), index=[str(t) for t in result.topics])
            .reindex(topics)
            .fillna(0.0)
            .to_numpy()
        )
    return np.vstack(rows)
