"""`judgments compare`: how far two stored qrels agree, on labels, on the order of systems and on
significance decisions (:mod:`evalstore.statistics.judgment_agreement`).

Labels are compared over the documents both judge (relevance 0 or more: -1, pooled but not judged,
is no label). Systems are the stored runs (or those named, or run files), evaluated on each qrels
over the topics both judge, so that a judge's labels of a few topics are compared on those topics
only. A qrels name is a stored qrels set's, or a lineage's (its newest version).
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any, NotRequired, TypedDict

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from sqlalchemy import Engine, select

from evalstore.db import repositories as repo
from evalstore.db.models import Run
from evalstore.db.session import read_only
from evalstore.errors import ConflictError, EvaluationError, InvalidParameterError, Remedy
from evalstore.io.readers import read_run
from evalstore.metrics import evaluate, resolve_measures
from evalstore.services.judges.circularity import circular_runs
from evalstore.services.tasks.judge_made import JudgeBehind, judge_behind
from evalstore.statistics import judgment_agreement as agreement
from evalstore.statistics.prediction_powered import prediction_powered
from evalstore.statistics.significance import CORRECTIONS, TESTS

DEFAULT_MEASURES = ("nDCG@10", "AP")
MAX_RUN_FILES = 1000  # systems compared at once: each is evaluated twice per measure, in memory


class QrelsPair(TypedDict):
    first: str
    second: str


class DocumentCounts(TypedDict):
    first: int
    second: int
    both: int


class PpiTopics(TypedDict):
    """Prediction-powered inference's N (the topics the LLM judges) and n (those both judge)."""

    llm: int
    human: int


class AgreementReport(TypedDict):
    """The agreement of two qrels as `judgments compare --format json` and the agreement pages
    give it (a TypedDict: it goes to JSON as built). ``qrels``: the stored qrels each name
    resolved to (a lineage's name: its newest version). The figures are the statistics'
    dataclasses as dicts: ``labels`` (:class:`~evalstore.statistics.judgment_agreement.LabelAgreement`),
    per measure ``systems`` and ``significance``, and per measure and run ``ppi`` (the
    prediction-powered interval). ``circular``: per side, the runs that declare the model that
    made its labels (their scores there are suspect); ``judges``: the judge behind either side's
    labels. With fewer than two runs, a ``note`` and no system figures."""

    first: str
    second: str
    qrels: QrelsPair
    documents: DocumentCounts
    labels: dict[str, Any]
    systems: dict[str, dict[str, Any]]
    significance: dict[str, dict[str, Any]]
    ppi: dict[str, dict[str, dict[str, Any]]]
    circular: dict[str, dict[str, list[str]]]
    judges: dict[str, JudgeBehind]
    topics: list[str]
    note: NotRequired[str]
    ppi_topics: NotRequired[PpiTopics]


def _labels(session: Any, name: str) -> tuple[str, pd.DataFrame]:
    """The stored name the qrels resolve to, and their (topic, doc, relevance)."""
    qrels = repo.get_qrels(session, name)
    if qrels.kind != "relevance":
        raise InvalidParameterError(f"'{name}' holds {qrels.kind} judgments; judgments compare reads relevance qrels.")
    frame = repo.qrels_table(session, qrels).select(["topic", "doc", "relevance"]).to_pandas()
    return qrels.name, frame.astype({"topic": object, "doc": object})


def run_name(path: Path) -> str:
    """A run file's name as a system: the file's name without a compression suffix."""
    name = path.name
    for suffix in (".gz", ".bz2", ".xz", ".zst"):
        name = name.removesuffix(suffix)
    return name


def _run_files(paths: list[Path]) -> dict[str, pa.Table]:
    if len(paths) > MAX_RUN_FILES:
        raise InvalidParameterError(f"At most {MAX_RUN_FILES} run files are compared at once; {len(paths)} were given.")
    tables: dict[str, pa.Table] = {}
    for path in paths:
        name = run_name(path)
        if name in tables:
            raise ConflictError(f"{path}: two run files are named '{name}'; give each system a file of its own name.")
        tables[name] = read_run(path, strict=False, content_hash=False).table.select(["topic", "doc", "score"])
    return tables


def _check_options(test: str, correction: str, alpha: float, top_k: int, confidence: float, relevant_from: int) -> None:
    """:func:`compare`'s options, refused before anything is read."""
    if test not in TESTS or test in ("randomization", "bootstrap"):
        raise InvalidParameterError(
            f"The paired test is t, wilcoxon or sign; not '{test}'.",
            remedy=Remedy(cli="Choose one with --test.", web="Choose one in the Test field."),
        )
    if correction not in CORRECTIONS:
        raise InvalidParameterError(f"The correction is one of {', '.join(CORRECTIONS)}; not '{correction}'.")
    if not 0 < alpha < 1:
        raise InvalidParameterError(
            f"The significance level is between 0 and 1; not {alpha:g}.",
            remedy=Remedy(cli="Set it with --alpha.", web="Set Alpha between 0 and 1."),
        )
    if top_k < 2:
        raise InvalidParameterError(
            f"The systems' orders are compared over the reference's top k systems, k at least 2; not {top_k}.",
            remedy=Remedy(cli="Set k with --top-k.", web="Set Top k to 2 or more."),
        )
    if not 0 < confidence < 1:
        raise InvalidParameterError(f"The confidence is between 0 and 1; not {confidence:g}.")
    if relevant_from < 1:
        raise InvalidParameterError(f"The relevant grade is at least 1; not {relevant_from}.")


def compare(
    engine: Engine,
    first: str,
    second: str,
    *,
    measures: list[str] | None = None,
    runs: list[str] | None = None,
    run_files: list[Path] | None = None,
    top_k: int = 5,
    test: str = "t",
    alpha: float = 0.05,
    correction: str = "holm",
    relevant_from: int = 1,
    confidence: float = 0.95,
) -> AgreementReport:
    """The three levels of agreement of ``second`` with ``first`` (the reference, e.g. human qrels):
    labels (the relevant sets at ``relevant_from`` or more), the systems' order (``top_k``: tau over
    the first's top k, swaps among them) and significance (``test`` at ``alpha``, p-values under
    ``correction``). The systems are the stored ``runs`` and the ``run_files`` (every stored run
    when neither is given). With ``second`` an LLM's labels and ``first`` people's, ``ppi`` holds
    each system's prediction-powered mean and interval at ``confidence``: the LLM's scores on
    every topic it judges corrected by people's on the topics both judge
    (:mod:`evalstore.statistics.prediction_powered`)."""
    _check_options(test, correction, alpha, top_k, confidence, relevant_from)
    names = [str(m) for m in resolve_measures(list(measures or DEFAULT_MEASURES))]
    files = _run_files(list(run_files or []))
    with read_only(engine) as session:
        first_stored, a = _labels(session, first)
        second_stored, b = _labels(session, second)
        if runs or files:
            chosen = [repo.get_run(session, n) for n in runs or []]
        else:
            chosen = list(session.scalars(select(Run).order_by(Run.name)))
        tables = {run.name: repo.run_table(session, run, for_evaluation=True) for run in chosen}
        circular = {
            name: circular_runs(session, stored, chosen)
            for name, stored in ((first, first_stored), (second, second_stored))
        }
        judges = {
            name: judge_behind(session, stored) for name, stored in ((first, first_stored), (second, second_stored))
        }
    for name, table in files.items():
        if name in tables:
            raise ConflictError(f"A stored run and a run file are both named '{name}'; rename the file.")
        tables[name] = table
    both = a[a["relevance"] >= 0].merge(b[b["relevance"] >= 0], on=["topic", "doc"], suffixes=("_a", "_b"))
    if both.empty:
        raise EvaluationError(f"'{first}' and '{second}' judge no document in common; nothing to compare.")
    labels = agreement.label_agreement(
        both["topic"].to_numpy(),
        both["relevance_a"].to_numpy(),
        both["relevance_b"].to_numpy(),
        relevant_from=relevant_from,
    )
    topics = sorted(set(both["topic"]))
    report = AgreementReport(
        first=first,
        second=second,
        qrels=QrelsPair(first=first_stored, second=second_stored),
        documents=DocumentCounts(
            first=int((a["relevance"] >= 0).sum()), second=int((b["relevance"] >= 0).sum()), both=len(both)
        ),
        labels=asdict(labels),
        systems={},
        significance={},
        ppi={},
        circular={name: runs_ for name, runs_ in circular.items() if runs_},
        judges={name: behind for name, behind in judges.items() if behind},
        topics=topics,
    )
    if len(tables) < 2:
        report["note"] = "fewer than two runs: no system order or significance to compare"
        return report
    run_names = list(tables)
    # PPI's N: every topic the second (the LLM) judges; its n: the topics both judge
    llm_topics = sorted(set(b.loc[b["relevance"] >= 0, "topic"]))
    where = [llm_topics.index(t) for t in topics]
    report["ppi_topics"] = PpiTopics(llm=len(llm_topics), human=len(topics))
    for measure in names:
        scores_a = per_topic(a, tables, measure, topics)
        scores_b = per_topic(b, tables, measure, topics)
        if len(topics) >= 2:
            llm_all = scores_b if llm_topics == topics else per_topic(b, tables, measure, llm_topics)
            intervals = prediction_powered(llm_all, scores_a, llm_all[:, where], confidence=confidence)
            report["ppi"][measure] = {run: asdict(i) for run, i in zip(run_names, intervals, strict=True)}
        report["systems"][measure] = asdict(
            agreement.system_agreement(
                run_names,
                scores_a.mean(axis=1),
                scores_b.mean(axis=1),
                top_k=top_k,
                per_topic_first=scores_a,
                per_topic_second=scores_b,
            )
        )
        report["significance"][measure] = asdict(
            agreement.significance_agreement(scores_a, scores_b, test=test, alpha=alpha, correction=correction)
        )
    return report


def per_topic(qrels: pd.DataFrame, runs: dict[str, pa.Table], measure: str, topics: list[str]) -> np.ndarray:
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
