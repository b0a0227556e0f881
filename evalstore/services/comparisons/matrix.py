"""The score matrix: the stored per-topic values of several runs on one qrels, aligned by topic,
read from each run's newest finished evaluation holding the measures (evaluating first where none
does); or of answer runs on a nugget bank (their answer measures), for the same tests."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from sqlalchemy import Engine, select

from evalstore.db import repositories as repo
from evalstore.db.models import Evaluation
from evalstore.db.session import read_only
from evalstore.errors import EvaluationError, InvalidParameterError, NotFoundError, Remedy
from evalstore.metrics import parse_measure, resolve_measures
from evalstore.metrics.answers import answer_measure
from evalstore.services.answers import get_bank
from evalstore.services.jobs import default_measures
from evalstore.services.kinds.answers import latest_evaluations
from evalstore.services.kinds.ranking import TopicFilter
from evalstore.services.orchestration import evaluate_runs

if TYPE_CHECKING:
    import pandas as pd

log = logging.getLogger("evalstore.compare")


# Options that change what a value means; runs compared must agree on them.
_MEANING_OPTIONS = ("relevance_level", "max_docs", "judged_only", "missing_topics")


MISSING_POLICIES = ("error", "zero")


def _check_missing(missing: str) -> None:
    if missing not in MISSING_POLICIES:
        raise InvalidParameterError(
            f"A topic a run has no value on is refused or scored 0 ({', '.join(MISSING_POLICIES)}); not '{missing}'.",
            remedy=Remedy(cli="Choose one with --missing."),
        )


@dataclass(frozen=True)
class ScoreMatrix:
    """Per-topic values of several runs on one qrels, aligned by topic."""

    qrels: str
    runs: list[str]
    topics: list[str]
    measures: list[str]
    scores: dict[str, np.ndarray]  # measure -> (runs x topics)
    evaluation_ids: dict[str, int]  # run -> evaluation read
    options: dict[str, Any]  # the evaluation options the runs share
    zero_filled: dict[str, list[str]] = field(default_factory=dict)  # run -> topics scored 0 (--missing zero)


def score_matrix(
    engine: Engine,
    *,
    qrels_name: str,
    run_names: list[str],
    measures: list[str],
    missing: str = "error",
    evaluate_missing: bool = True,
    topic_filter: TopicFilter | None = None,
) -> ScoreMatrix:
    """Read (evaluating first where needed) the per-topic values of ``run_names`` on the qrels (of
    the topics ``topic_filter`` keeps: a split task's public ones)."""
    _check_missing(missing)
    if len(set(run_names)) != len(run_names):
        raise InvalidParameterError("A run is named twice; name each run once.")
    names = [str(m) for m in resolve_measures(measures)]
    chosen = _newest_evaluations(engine, qrels_name, run_names, names)
    lacking = [r for r in run_names if r not in chosen]
    if lacking and evaluate_missing:
        with read_only(engine) as session:
            kind_defaults = list(default_measures(repo.get_qrels(session, qrels_name).kind))
        default = {str(m) for m in resolve_measures(kind_defaults)}
        log.info(
            "evaluating %d run(s) with no stored result for %s: %s", len(lacking), ", ".join(names), ", ".join(lacking)
        )
        evaluate_runs(
            engine,
            qrels_name=qrels_name,
            run_names=lacking,
            measures=[*kind_defaults, *(n for n in names if n not in default)],
        )
        chosen = _newest_evaluations(engine, qrels_name, run_names, names)
    if lacking and not evaluate_missing:  # a caller that must not write (a GET page): say what is there
        raise NotFoundError(
            f"Run '{lacking[0]}' has no stored {', '.join(names)} on '{qrels_name}'; pick a measure its evaluation has."
        )
    assert all(r in chosen for r in run_names), "evaluate_runs stores every run or raises"
    first_options = chosen[run_names[0]].options
    for run in run_names[1:]:
        options = chosen[run].options
        differing = [k for k in _MEANING_OPTIONS if options.get(k) != first_options.get(k)]
        if differing:
            key = differing[0]
            raise EvaluationError(
                f"Runs '{run_names[0]}' and '{run}' were evaluated with different {key} "
                f"({first_options.get(key)} vs {options.get(key)}), so their values do not compare.",
                remedy=Remedy(
                    cli=f"Evaluate both with the same options: 'evalstore evaluate --qrels {qrels_name} "
                    f"--run {run_names[0]} --run {run} --force --wait'."
                ),
            )
    with read_only(engine) as session:
        frames: dict[str, pd.DataFrame] = {}
        for run in run_names:
            table = repo.result_table(session, chosen[run].id, names).to_pandas()
            frame = table.pivot(index="query_id", columns="measure", values="value")
            kept = frame if topic_filter is None else frame[[topic_filter.keeps(str(t)) for t in frame.index]]
            frames[run] = kept
    _refuse_undefined(frames, names)
    topics = sorted(set().union(*(frame.index for frame in frames.values())))
    zero_filled: dict[str, list[str]] = {}
    for run, frame in frames.items():
        absent = sorted(set(topics) - set(frame.index))
        if not absent:
            continue
        if missing == "error":
            shown = ", ".join(absent[:5]) + (f" and {len(absent) - 5} more" if len(absent) > 5 else "")
            raise EvaluationError(
                f"Run '{run}' has no value for {len(absent)} topic(s) the other runs have ({shown}): its "
                "evaluation skipped topics it did not retrieve for.",
                remedy=Remedy(
                    cli="Re-evaluate it scoring them 0 with "
                    f"'evalstore evaluate --qrels {qrels_name} --run {run} --missing zero --force --wait', "
                    "or pass --missing zero to score them 0 here."
                ),
            )
        zero_filled[run] = absent
    scores = {
        name: np.vstack([frames[run].reindex(topics)[name].fillna(0.0).to_numpy(dtype=float) for run in run_names])
        for name in names
    }
    options = {k: first_options.get(k) for k in _MEANING_OPTIONS}
    return ScoreMatrix(
        qrels_name,
        list(run_names),
        topics,
        names,
        scores,
        {run: chosen[run].id for run in run_names},
        options,
        zero_filled,
    )


def _newest_evaluations(
    engine: Engine, qrels_name: str, run_names: list[str], measures: list[str]
) -> dict[str, Evaluation]:
    """For each run, its newest finished evaluation on the qrels holding all ``measures``."""
    with read_only(engine) as session:
        qrels = repo.get_qrels(session, qrels_name)
        chosen: dict[str, Evaluation] = {}
        for name in run_names:
            run = repo.get_run(session, name)
            for evaluation in session.scalars(
                select(Evaluation)
                .where(Evaluation.run_id == run.id, Evaluation.qrels_id == qrels.id, Evaluation.state == "done")
                .order_by(Evaluation.finished_at.desc(), Evaluation.id.desc())
            ):
                if set(measures) <= set(evaluation.options["measures"]):
                    chosen[name] = evaluation
                    break
    return chosen


def _refuse_undefined(frames: dict[str, pd.DataFrame], names: list[str]) -> None:
    """A stored value that is no number (Accuracy on a topic with no relevant document retrieved,
    trec_eval's 0/0) would be read as 0 by the paired tests below: refused, with where it is."""
    for run, frame in frames.items():
        for name in names:
            if name not in frame.columns or parse_measure(name).spec.value_type == "str":
                continue
            undefined = sorted(str(t) for t in frame.index[frame[name].isna()])
            if undefined:
                shown = ", ".join(undefined[:5]) + (f" and {len(undefined) - 5} more" if len(undefined) > 5 else "")
                raise EvaluationError(
                    f"{name} has no value for run '{run}' on {len(undefined)} topic(s) ({shown}): the measure is "
                    "undefined there, and a comparison topic by topic needs a value on every topic. Compare a "
                    "measure defined on every topic."
                )


def answer_matrix(
    engine: Engine,
    *,
    bank_name: str,
    answer_names: list[str],
    measures: list[str],
    assessor: str = "human",
    missing: str = "error",
    evaluation_ids: Mapping[str, int] | None = None,
) -> ScoreMatrix:
    """The per-topic answer measures of answer runs on a nugget bank, aligned by topic: from each
    run's newest finished evaluation on the bank with ``assessor``'s labels, or from the
    ``evaluation_ids`` given (a task's board). ``qrels`` holds the bank's name. A topic a run has
    no value on (not assessed for it; no judged citation for support_precision) is refused or,
    with ``missing`` zero, scored 0."""
    _check_missing(missing)
    if len(set(answer_names)) != len(answer_names):
        raise InvalidParameterError("A run is named twice; name each run once.")
    names = list(dict.fromkeys(answer_measure(m).family.name for m in measures))
    with read_only(engine) as session:
        bank = get_bank(session, bank_name)
        if evaluation_ids is None:
            newest = {run.name: evaluation.id for run, evaluation in latest_evaluations(session, bank, assessor)}
        else:
            newest = dict(evaluation_ids)
        lacking = [name for name in answer_names if name not in newest]
        if lacking:
            raise NotFoundError(
                f"Answer run '{lacking[0]}' has no evaluation on nugget bank '{bank_name}' with {assessor} labels.",
                remedy=Remedy(
                    cli=f"Evaluate it first ('evalstore evaluate --nuggets {bank_name} --answers {lacking[0]} --wait')."
                ),
            )
        frames = {}
        for name in answer_names:
            table = repo.result_table(session, newest[name], names).to_pandas()
            frames[name] = table.pivot(index="query_id", columns="measure", values="value").reindex(columns=names)
    topics = sorted({str(t) for frame in frames.values() for t in frame.index[frame.notna().any(axis=1)]})
    zero_filled: dict[str, list[str]] = {}
    for name, frame in frames.items():
        aligned = frame.reindex(topics)
        absent = sorted({str(t) for t in aligned.index[aligned.isna().any(axis=1)]})
        if not absent:
            continue
        if missing == "error":
            shown = ", ".join(absent[:5]) + (f" and {len(absent) - 5} more" if len(absent) > 5 else "")
            raise EvaluationError(
                f"Answer run '{name}' has no {'/'.join(names)} on {len(absent)} topic(s) the other runs have "
                f"({shown}): it is not assessed there.",
                remedy=Remedy(cli="Assess it, or pass --missing zero to score them 0."),
            )
        zero_filled[name] = absent
    scores = {
        m: np.vstack([frames[name].reindex(topics)[m].fillna(0.0).to_numpy(dtype=float) for name in answer_names])
        for m in names
    }
    return ScoreMatrix(
        bank_name,
        list(answer_names),
        topics,
        names,
        scores,
        {name: newest[name] for name in answer_names},
        {"assessor": assessor},
        zero_filled,
    )
