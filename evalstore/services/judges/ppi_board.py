"""The leaderboard of a hybrid qrels version with prediction-powered intervals: the judge's labels
of the version's pool give every run's scores on every topic the judge labelled (N), people's
labels on the topics they judged completely give the correction (n), and each run gets
:func:`evalstore.statistics.prediction_powered.prediction_powered`'s mean and interval. Tiers
follow from the intervals: going down the board, a run opens a new tier when its interval lies
wholly below the interval of the run that opened the current one.

Computed here, in this process, from the labels (nothing is stored): the version's own stored
evaluations mix both kinds of labels and cannot be separated again."""

from __future__ import annotations

from dataclasses import asdict, dataclass

import pandas as pd
from sqlalchemy import Engine, select

from evalstore.db import repositories as repo
from evalstore.db.models import PoolEntry, QrelsVersion, Run
from evalstore.db.session import read_only
from evalstore.errors import EvaluationError, InvalidParameterError
from evalstore.metrics import resolve_measures
from evalstore.services.judges.compare import per_topic
from evalstore.services.judges.registry import get_judge
from evalstore.services.judges.versions import human_labels, judge_labels
from evalstore.statistics.prediction_powered import PredictionPowered, prediction_powered


@dataclass(frozen=True, slots=True)
class PpiRow:
    """One run's prediction-powered mean and interval (:class:`PredictionPowered`'s figures), and its tier."""

    run: str
    mean: float
    low: float
    high: float
    half_width: float
    half_width_independent: float
    llm_mean: float
    correction: float
    human_mean: float
    human_half_width: float
    llm_topics: int
    human_topics: int
    confidence: float
    tier: int


@dataclass(frozen=True)
class PpiBoard:
    """A hybrid qrels version's board on one measure, best first."""

    qrels: str
    measure: str
    judge: str
    pool: str
    confidence: float
    llm_topics: int
    human_topics: int
    partly_judged_topics: list[str]  # left out of the correction
    rows: list[PpiRow]


def _frame(labels: pd.Series) -> pd.DataFrame:
    frame = labels.rename("relevance").reset_index()
    return frame.astype({"topic": object, "doc": object})


def ppi_board(
    engine: Engine,
    qrels_name: str,
    *,
    measure: str = "nDCG@10",
    runs: list[str] | None = None,
    confidence: float = 0.95,
) -> PpiBoard:
    """The board of the hybrid version ``qrels_name`` (or a lineage's newest version) on ``measure``:
    per run the prediction-powered mean and interval and its tier, best first."""
    if not 0 < confidence < 1:
        raise InvalidParameterError(f"The confidence is between 0 and 1; not {confidence:g}.")
    [name] = [str(m) for m in resolve_measures([measure])]
    with read_only(engine) as session:
        qrels = repo.get_qrels(session, qrels_name)
        version = session.scalar(select(QrelsVersion).where(QrelsVersion.qrels_id == qrels.id))
        if version is None or not str(version.sources.get("from", "")).startswith("hybrid"):
            raise InvalidParameterError(
                f"'{qrels.name}' is not a hybrid qrels version (built from people's labels and a judge's): "
                "prediction-powered intervals need both."
            )
        pool = repo.get_pool(session, version.pool_name)
        judge = get_judge(session, str(version.sources["judge"]))
        config = str(version.sources.get("judge_config") or judge.config_hash)
        llm = judge_labels(session, pool, judge, config_hash=config)
        human = human_labels(session, pool)
        pooled = pd.DataFrame(
            session.execute(select(PoolEntry.topic, PoolEntry.doc).where(PoolEntry.pool_id == pool.id)).all(),
            columns=["topic", "doc"],
        )
        chosen = (
            [repo.get_run(session, n) for n in runs] if runs else list(session.scalars(select(Run).order_by(Run.name)))
        )
        tables = {run.name: repo.run_table(session, run, for_evaluation=True) for run in chosen}
        stored_name = qrels.name
    llm_topics = sorted({str(t) for t in llm.index.get_level_values("topic")})
    # people's topics: those whose every pooled document they labelled (a topic they judged in
    # part would score its unlabelled documents as not relevant)
    labelled = set(human.index)
    by_topic = pooled.groupby("topic")["doc"].apply(list)
    complete = sorted(str(t) for t, docs in by_topic.items() if all((t, d) in labelled for d in docs))
    human_topics = [t for t in complete if t in set(llm_topics)]
    partial = sorted({str(t) for t, _ in labelled} - set(complete))
    if len(human_topics) < 2 or len(llm_topics) < 2:
        raise EvaluationError(
            f"'{stored_name}' has {len(human_topics)} topics judged completely by people among the judge's "
            f"{len(llm_topics)}; prediction-powered intervals need 2 or more of each."
        )
    if len(tables) < 1:
        raise EvaluationError("No run is stored; there is nothing to rank.")
    llm_frame, human_frame = _frame(llm), _frame(human[human.index.get_level_values("topic").isin(human_topics)])
    llm_all = per_topic(llm_frame, tables, name, llm_topics)
    where = [llm_topics.index(t) for t in human_topics]
    people = per_topic(human_frame, tables, name, human_topics)
    intervals = prediction_powered(llm_all, people, llm_all[:, where], confidence=confidence)
    ranked: list[tuple[str, PredictionPowered]] = sorted(
        zip(tables, intervals, strict=True), key=lambda pair: (-pair[1].mean, pair[0])
    )
    rows, tier, opener = [], 0, None
    for run, interval in ranked:
        if opener is None or interval.high < opener.low:
            tier, opener = tier + 1, interval
        rows.append(PpiRow(run=run, **asdict(interval), tier=tier))
    return PpiBoard(
        qrels=stored_name,
        measure=name,
        judge=judge.name,
        pool=pool.name,
        confidence=confidence,
        llm_topics=len(llm_topics),
        human_topics=len(human_topics),
        partly_judged_topics=partial,
        rows=rows,
    )
