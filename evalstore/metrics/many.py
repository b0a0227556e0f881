"""``evalstore.evaluate(qrels, runs, measures)`` with a list or mapping of runs: every run against
the one qrels, read and indexed once, the runs' rankings evaluated together
(:mod:`evalstore.metrics.stacked`). Each result is the one ``evaluate(qrels, run, measures)``
returns for that run, value for value."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from evalstore.errors import EvaluationError, InvalidParameterError
from evalstore.metrics import (
    EvaluationResult,
    Measure,
    MeasureValues,
    _as_table,
    prepare_run_file,
    resolve_measures,
    summarise,
)
from evalstore.metrics._prepare import PrepareOptions, Ranking, attach_known, prepare
from evalstore.metrics.stacked import STACK_CELLS, compute_stacked


def several_runs(run: object) -> bool:
    """Whether ``evaluate``'s ``run`` is several runs: a list or tuple of runs, or a mapping of
    names to runs (a mapping whose values are files, frames, tables or ``{query_id: {doc_id:
    score}}`` dicts; one run as a dict maps query ids to ``{doc_id: score}``)."""
    if isinstance(run, (list, tuple)):
        return True
    if not isinstance(run, Mapping) or not run:
        return False
    first = next(iter(run.values()))
    if isinstance(first, Mapping):  # a run's {doc_id: score}, or a run given as a dict of them
        return bool(first) and isinstance(next(iter(first.values())), Mapping)
    return isinstance(first, (str, Path, pa.Table)) or type(first).__name__ == "DataFrame"


def evaluate_runs(qrels: Any, runs: Sequence[Any] | Mapping[str, Any], measures: Iterable[str | Measure], *,
                  per_query: bool, relevance_level: int, max_docs: int | None, judged_only: bool,
                  missing_topics: str, known: Any = None,
                  stack_cells: int = STACK_CELLS) -> list[EvaluationResult] | dict[str, EvaluationResult]:
    """``evaluate`` of each run (see :func:`evalstore.metrics.evaluate`): a list of results for a
    list of runs, a dict by the same names for a mapping. The runs are ranked and evaluated in
    batches of up to ``stack_cells`` cells (topics x depth); a run that shares no topic with the
    qrels is an error naming it."""
    if missing_topics not in ("zero", "skip"):
        raise InvalidParameterError(
            f"The 'missing_topics' parameter of evaluate must be 'zero' or 'skip'. Got {missing_topics!r} instead."
        )
    if known is not None and judged_only:
        raise InvalidParameterError("-J closes up the ranking by the main qrels' judgments; the user-oriented "
                                    "measures (known) need the ranking whole.")
    named: list[tuple[object, Any]] = list(runs.items()) if isinstance(runs, Mapping) else list(enumerate(runs))
    options = PrepareOptions(max_docs=max_docs, judged_only=judged_only, complete=missing_topics == "zero")
    qrels_table = _as_table(qrels, "qrels")
    known_table = _as_table(known, "qrels") if known is not None else None
    wanted = resolve_measures(measures)
    settings = {"relevance_level": relevance_level, "max_docs": max_docs, "judged_only": judged_only,
                "missing_topics": missing_topics, "tie_rule": "score desc, docno desc"}
    results: list[EvaluationResult] = []
    batch: list[Ranking] = []
    cells = 0
    for name, run in named:
        rk = _ranking(qrels_table, run, options, known_table)
        if rk.n == 0:
            raise EvaluationError(f"Run {name!r} and the qrels share no topic; check that the topic ids match.")
        batch.append(rk)
        cells += rk.n * max(rk.depth, 1)
        if cells >= stack_cells:
            results += _results(batch, wanted, relevance_level, per_query, settings)
            batch, cells = [], 0
    results += _results(batch, wanted, relevance_level, per_query, settings)
    if isinstance(runs, Mapping):
        return {str(name): result for (name, _), result in zip(named, results, strict=True)}
    return results


def _ranking(qrels: pa.Table, run: Any, options: PrepareOptions, known: pa.Table | None) -> Ranking:
    """The run ranked against the qrels as ``evaluate`` ranks one (with what the user knew)."""
    if isinstance(run, (str, Path)):
        rk, parsed = prepare_run_file(qrels, run, options)
        run_table = parsed.table
    else:
        run_table = _as_table(run, "run")
        rk = prepare(qrels, run_table, options)
    if known is not None and rk.n:
        attach_known(rk, prepare(known, run_table, options))
    return rk


def _results(batch: list[Ranking], wanted: list[Measure], relevance_level: int, per_query: bool,
             settings: dict[str, Any]) -> list[EvaluationResult]:
    if not batch:
        return []
    results = []
    for rk, values in zip(batch, compute_stacked(batch, wanted, relevance_level=relevance_level), strict=True):
        aggregates = MeasureValues({str(m): summarise(m, v, rk) for m, v in values.items()})
        results.append(EvaluationResult(
            aggregates=aggregates, topics=rk.topics, missing_topics=rk.missing_topics,
            dropped_run_topics=rk.dropped_run_topics, options=dict(settings),
            # each run's own arrays, not views that would keep the batch's alive
            values={str(m): np.array(v, copy=True) for m, v in values.items()} if per_query else {},
        ))
    return results
