"""A split's folds put to use: a cross-validated run combined from per-fold runs, and the
values of a run on each fold's test topics (see the package's docstring)."""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from sqlalchemy import Engine, delete, select

from evalstore import scratch
from evalstore._version import __version__
from evalstore.db import repositories as repo
from evalstore.db.models import Evaluation, FoldResult, Run
from evalstore.db.session import read_only, unit_of_work
from evalstore.errors import EvaluationError, InvalidParameterError, Remedy
from evalstore.io.writers import write_run
from evalstore.metrics import resolve_measures
from evalstore.services import store, tracking
from evalstore.services.kinds import ranking
from evalstore.services.kinds.base import MlflowRun
from evalstore.services.splits.drawing import members


def combine_runs(engine: Engine, *, splits: str, folds: Mapping[int, str], name: str) -> store.Registered:
    """A cross-validated run: each topic's ranking from the run of the fold that tested it (a run
    trained without that topic). Every topic of the split must be tested by exactly one of the
    folds given."""
    split, tests = members(engine, splits)
    if split.source_kind != "qrels":
        raise InvalidParameterError(
            f"Split '{splits}' splits items of labels '{split.source}'; runs combine topics (a split of qrels).",
            remedy=Remedy(cli="Name a split made with --qrels."),
        )
    unknown = sorted(set(folds) - set(tests))
    if unknown:
        raise InvalidParameterError(f"Split '{splits}' has folds 1-{split.folds}; there is no fold {unknown[0]}.")
    owner: dict[str, int] = {}
    for fold in sorted(folds):
        for topic in tests[fold]:
            if topic in owner:
                raise InvalidParameterError(
                    f"Topic {topic} is in the test part of folds {owner[topic]} and {fold}: "
                    f"a {split.method} split's test parts overlap; combine the folds of a "
                    f"k-fold, leave-one-out, holdout or imported split."
                )
            owner[topic] = fold
    every = sorted(set().union(*tests.values()))
    untested = [t for t in every if t not in owner]
    if untested:
        missing = sorted({f for f, topics in tests.items() if set(topics) & set(untested)} - set(folds))
        raise InvalidParameterError(
            f"{len(untested)} topic(s) are tested by no fold given (e.g. {untested[0]}).",
            remedy=Remedy(cli=f"Add --fold {missing[0] if missing else '?'}=RUN."),
        )
    parts = []
    for fold, run_name in sorted(folds.items()):
        _, table = store.run_rows(engine, run_name)
        parts.append(table.filter(pc.is_in(table["topic"], pa.array(tests[fold]))))
    combined = pa.concat_tables(parts)
    if combined.num_rows == 0:
        raise EvaluationError("The runs retrieve nothing for their folds' test topics; nothing to combine.")
    buffer = io.BytesIO()
    write_run(combined, buffer, "trec", tag=name)
    with scratch.folder("combine") as folder:
        path = folder / f"{name}.txt"
        path.write_bytes(buffer.getvalue())
        return store.register_run(
            engine,
            path,
            name=name,
            metadata={"splits": splits, "folds": ",".join(f"{f}={r}" for f, r in sorted(folds.items()))},
            description=f"cross-validated over split '{splits}' ({split.method})",
        )


@dataclass(frozen=True)
class FoldValues:
    run: str
    splits: str
    qrels: str
    evaluation_id: int  # the stored evaluation the per-topic values come from
    method: str
    seed: int | None
    measures: list[str]
    per_fold: pd.DataFrame  # fold, topics, then one column per measure: the mean over the fold's test topics
    mean: dict[str, float]
    spread: dict[str, float]  # standard deviation over the folds (n-1)


def fold_values(engine: Engine, *, splits: str, run: str, measures: Sequence[str]) -> FoldValues:
    """Each fold's mean of the run's stored per-topic values over the fold's test topics (a topic
    the run lacks counts 0, as trec_eval -c), and the mean and spread over the folds."""
    split, tests = members(engine, splits)
    if split.source_kind != "qrels":
        raise InvalidParameterError(f"Split '{splits}' splits items; per-fold values are for topic splits.")
    names = [str(m) for m in resolve_measures(list(measures))]
    stored = ranking.results(engine, qrels_name=split.source, run_name=run, measures=names)
    frame = stored.frame[names].astype(float)
    rows = []
    for fold, topics in sorted(tests.items()):
        values = frame.reindex(topics).fillna(0.0)
        rows.append({"fold": fold, "topics": len(topics), **{m: float(values[m].mean()) for m in names}})
    per_fold = pd.DataFrame(rows)
    spread = {m: float(per_fold[m].std(ddof=1)) if len(per_fold) > 1 else 0.0 for m in names}
    return FoldValues(
        run,
        splits,
        split.source,
        stored.evaluation_id,
        split.method,
        split.seed,
        names,
        per_fold,
        {m: float(per_fold[m].mean()) for m in names},
        spread,
    )


def record_fold_values(engine: Engine, values: FoldValues) -> None:
    """Store each fold's values beside the evaluation they come from (replacing those of the same
    split, evaluation and measures), in one transaction."""
    with unit_of_work(engine) as session:
        split = repo.get_split(session, values.splits)
        session.execute(
            delete(FoldResult).where(
                FoldResult.split_id == split.id,
                FoldResult.evaluation_id == values.evaluation_id,
                FoldResult.measure.in_(values.measures),
            )
        )
        session.add_all(
            FoldResult(
                split_id=split.id,
                evaluation_id=values.evaluation_id,
                fold=int(row["fold"]),
                measure=measure,
                value=float(row[measure]),
            )
            for row in values.per_fold.to_dict(orient="records")
            for measure in values.measures
        )


def stored_fold_values(engine: Engine, splits: str) -> pd.DataFrame:
    """The fold values stored for a split: run, evaluation, fold, measure, value."""
    with read_only(engine) as session:
        split = repo.get_split(session, splits)
        rows = session.execute(
            select(Run.name, FoldResult.evaluation_id, FoldResult.fold, FoldResult.measure, FoldResult.value)
            .join(Evaluation, Evaluation.id == FoldResult.evaluation_id)
            .join(Run, Run.id == Evaluation.run_id)
            .where(FoldResult.split_id == split.id)
            .order_by(Run.name, FoldResult.evaluation_id, FoldResult.measure, FoldResult.fold)
        ).all()
    return pd.DataFrame(rows, columns=["run", "evaluation", "fold", "measure", "value"])


def log_fold_values(values: FoldValues) -> str:
    """The fold values as an MLflow run in the qrels' experiment: the split's method and seed as
    params, ``MEASURE.fold<i>``, ``MEASURE.mean`` and ``MEASURE.sd`` as metrics, the table as an
    artifact. Returns the MLflow run id."""
    metrics: dict[str, float | None] = {}
    for measure in values.measures:
        for fold, value in zip(values.per_fold["fold"], values.per_fold[measure], strict=True):
            metrics[f"{measure}.fold{int(fold)}"] = float(value)
        metrics[f"{measure}.mean"] = values.mean[measure]
        metrics[f"{measure}.sd"] = values.spread[measure]
    payload = MlflowRun(
        experiment=values.qrels,
        name=f"{values.run} over split {values.splits}",
        tags={
            "evalstore.kind": "folds",
            "evalstore.qrels": values.qrels,
            "evalstore.run": values.run,
            "evalstore.version": __version__,
        },
        params={
            "splits": values.splits,
            "method": values.method,
            "seed": values.seed,
            "folds": len(values.per_fold),
            "evaluation_id": values.evaluation_id,
        },
        metrics=metrics,
        texts={"folds.csv": values.per_fold.to_csv(index=False)},
    )
    return tracking.log_now(payload, f"the fold values of run '{values.run}'")
