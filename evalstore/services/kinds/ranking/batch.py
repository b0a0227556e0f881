"""A batch of ranking jobs against one qrels, computed in one pass: the qrels read once (the
context keeps them, and the ranking's qrels-side work is kept for the next run), each run's judged
ranks read and ranked, then every measure's kernel run once over the rankings stacked
(:mod:`evalstore.metrics.stacked`). Every measure is computed topic by topic, so each job's values
are the ones :func:`~evalstore.services.kinds.ranking.job.compute_job` gives it alone, bit for bit.

A job that cannot be read or ranked fails alone: its error is its outcome, and the others are
computed without it. Should the stacked computation itself fail, each job is computed alone, so
that the error stays with the job it belongs to.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence

from sqlalchemy import Engine

from evalstore.metrics import compute
from evalstore.metrics.preparation import Ranking
from evalstore.metrics.stacked import compute_stacked
from evalstore.services.context import AppContext, context_for
from evalstore.services.jobs import ClaimedJob
from evalstore.services.kinds.base import ComputedJob
from evalstore.services.kinds.ranking.job import LoadedJob, finish_job, load_job, prepare_job

Outcome = ComputedJob | Exception


def compute_batch(engine: Engine, claimed: Sequence[ClaimedJob], *, context: AppContext | None = None) -> list[Outcome]:
    """Each claimed job's results (or the error that stopped it), in their order, storing nothing.
    Jobs asked with the same options are stacked together."""
    context = context_for(engine, context)
    outcomes: list[Outcome | None] = [None] * len(claimed)
    groups: dict[str, list[tuple[int, LoadedJob, Ranking, float]]] = {}
    for index, job in enumerate(claimed):
        try:
            loaded = load_job(engine, job, context=context)
            started = time.perf_counter()
            rk = prepare_job(loaded)
            if rk is None:  # judgments that rank the run themselves: nothing to stack
                outcomes[index] = finish_job(loaded, None, None, started)
                continue
        except Exception as error:  # this job's own: the others go on
            outcomes[index] = error
            continue
        groups.setdefault(json.dumps(job.options, sort_keys=True), []).append(
            (index, loaded, rk, time.perf_counter() - started)
        )
    for members in groups.values():
        for index, outcome in zip((m[0] for m in members), _computed(members), strict=True):
            outcomes[index] = outcome
    assert all(outcome is not None for outcome in outcomes)
    return [outcome for outcome in outcomes if outcome is not None]


def _computed(members: list[tuple[int, LoadedJob, Ranking, float]]) -> list[Outcome]:
    """The outcomes of jobs asked with one set of options, their rankings stacked."""
    first = members[0][1]
    rankings = [rk for _, _, rk, _ in members]
    started = time.perf_counter()
    try:
        values = compute_stacked(compute, rankings, first.measures, relevance_level=first.options["relevance_level"])
    except Exception:  # whose error it is shows when each job is computed alone
        return [_alone(loaded, rk, prepared) for _, loaded, rk, prepared in members]
    share = (time.perf_counter() - started) / len(members)  # each job's part of the stacked kernels
    outcomes: list[Outcome] = []
    for (_, loaded, rk, prepared), job_values in zip(members, values, strict=True):
        try:
            outcomes.append(finish_job(loaded, rk, job_values, time.perf_counter() - prepared - share))
        except Exception as error:
            outcomes.append(error)
    return outcomes


def _alone(loaded: LoadedJob, rk: Ranking, prepared: float) -> Outcome:
    started = time.perf_counter() - prepared
    try:
        values = compute(rk, loaded.measures, relevance_level=loaded.options["relevance_level"])
        return finish_job(loaded, rk, values, started)
    except Exception as error:
        return error
