"""`evalstore repro`: how far a reproduced run is from the original (Breuer et al., SIGIR 2020).

Reproducibility (the reproduced runs on the original's qrels): KTU and RBO of the document
orderings per topic and their means, RMSE and nRMSE of the per-topic values, the paired t-test;
replicability (``reproduced_qrels``: another collection): the unpaired t-test. Both give the effect
ratio (ER) and delta relative improvement (DeltaRI) when the baselines are given. The per-topic
values are the runs' stored evaluations (evaluated first when missing); the figures are stored
with those evaluations' ids and can be logged to MLflow. The formulas: evalstore.statistics.repro.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from sqlalchemy import Engine, delete, or_, select

from evalstore._version import __version__
from evalstore.db import repositories as repo
from evalstore.db.models import Evaluation, ReproResult
from evalstore.db.session import read_only, unit_of_work
from evalstore.errors import InvalidParameterError, NotFoundError, Remedy
from evalstore.metrics import resolve_measures
from evalstore.services import orchestration, store, tracking
from evalstore.services.kinds import ranking
from evalstore.services.kinds.base import MlflowRun
from evalstore.statistics import repro as formulas

DEFAULT_MEASURES = ("AP", "nDCG@10", "P@10")
FIGURE_COLUMNS = ["part", "measure", "figure", "value"]


@dataclass(frozen=True)
class ReproFigure:
    """One figure of a reproduction: ``part`` is advanced, baseline or both (ER and DeltaRI);
    ``measure`` is "" for KTU and RBO, which are over the document orderings."""

    part: str
    measure: str
    figure: str
    value: float | None  # NaN when computed undefined; stored (JSON has no NaN) and read back as None

    def as_json(self) -> dict[str, Any]:
        """As stored and sent: a NaN value as null."""
        return {"part": self.part, "measure": self.measure, "figure": self.figure, "value": _json_number(self.value)}

    @classmethod
    def stored(cls, row: dict[str, Any]) -> ReproFigure:
        return cls(str(row["part"]), str(row["measure"]), str(row["figure"]), row["value"])


@dataclass(frozen=True)
class Reproduction:
    kind: str  # reproducibility | replicability
    qrels: str
    reproduced_qrels: str
    runs: dict[str, str]  # role (original, reproduced, original_baseline, reproduced_baseline) -> run name
    evaluation_ids: dict[str, int]  # role -> the evaluation its per-topic values came from
    measures: list[str]
    params: dict[str, Any]
    figures: list[ReproFigure]
    per_topic: pd.DataFrame = field(repr=False)  # part, topic, KTU, RBO (reproducibility only)
    notes: list[str] = field(default_factory=list)

    def value(self, figure: str, measure: str = "", part: str = "advanced") -> float:
        return next(
            math.nan if row.value is None else row.value
            for row in self.figures
            if (row.figure, row.measure, row.part) == (figure, measure, part)
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "qrels": self.qrels,
            "reproduced_qrels": self.reproduced_qrels,
            **self.runs,
            "evaluation_ids": self.evaluation_ids,
            "measures": self.measures,
            **self.params,
            "figures": [row.as_json() for row in self.figures],
            "per_topic": [
                {k: _json_number(v) if isinstance(v, float) else v for k, v in row.items()}
                for row in self.per_topic.to_dict(orient="records")
            ],
        }


def _json_number(value: float | None) -> float | None:
    return None if value is None or math.isnan(value) else float(value)


def _check_options(original_baseline: str | None, reproduced_baseline: str | None, depth: int, rbo_p: float) -> None:
    """:func:`reproduce`'s options, refused before anything is read."""
    if (original_baseline is None) != (reproduced_baseline is None):
        given = "original" if original_baseline is not None else "reproduced"
        raise InvalidParameterError(
            f"ER and DeltaRI compare two improvements, each over its baseline; only the {given} baseline is named.",
            remedy=Remedy(cli="Give both --original-baseline and --reproduced-baseline, or neither."),
        )
    if depth < 1:
        raise InvalidParameterError(
            f"KTU and RBO compare each ranking's top documents, 1 or more; not {depth}.",
            remedy=Remedy(cli="Set how many with --depth."),
        )
    if not 0 < rbo_p < 1:
        raise InvalidParameterError(
            f"RBO's persistence is between 0 and 1; not {rbo_p}.", remedy=Remedy(cli="Set it with --rbo-p.")
        )


def reproduce(
    engine: Engine,
    *,
    qrels: str,
    original: str,
    reproduced: str,
    original_baseline: str | None = None,
    reproduced_baseline: str | None = None,
    reproduced_qrels: str | None = None,
    measures: Sequence[str] | None = None,
    depth: int = formulas.RUN_LENGTH,
    rbo_p: float = formulas.RBO_P,
) -> Reproduction:
    """The reproducibility (or, with ``reproduced_qrels``, replicability) figures of ``reproduced``
    against ``original``, and of the baselines' too when both are given; stored."""
    _check_options(original_baseline, reproduced_baseline, depth, rbo_p)
    names = [str(m) for m in resolve_measures(list(measures or DEFAULT_MEASURES))]
    replicating = reproduced_qrels is not None and reproduced_qrels != qrels
    target_qrels = reproduced_qrels or qrels
    runs = {"original": original, "reproduced": reproduced}
    if original_baseline is not None and reproduced_baseline is not None:
        runs.update(original_baseline=original_baseline, reproduced_baseline=reproduced_baseline)
    judged_by = {role: (target_qrels if role.startswith("reproduced") else qrels) for role in runs}
    stored = {role: _stored(engine, judged_by[role], run, names) for role, run in runs.items()}
    values = {role: s.frame[names].astype(float) for role, s in stored.items()}
    figures: list[ReproFigure] = []
    notes: list[str] = []
    per_topic = pd.DataFrame(columns=["part", "topic", "KTU", "RBO"])
    parts = [("advanced", "original", "reproduced")]
    if "original_baseline" in runs:
        parts.append(("baseline", "original_baseline", "reproduced_baseline"))
    frames = []
    for part, first, second in parts:
        left = values[first]
        if replicating:
            for measure in names:
                figures.append(
                    _row(
                        part,
                        measure,
                        "p_value",
                        formulas.t_test(left[measure].to_numpy(), values[second][measure].to_numpy(), paired=False),
                    )
                )
            continue
        # reproducibility: the original's topics; one the reproduction lacks counts 0 (trec_eval -c)
        right = values[second].reindex(left.index)
        lacking = int(right.isna().any(axis=1).sum())
        if lacking:
            notes.append(f"run '{runs[second]}' lacks {lacking} of the topics of run '{runs[first]}'; they count 0")
        right = right.fillna(0.0)
        order = formulas.document_order(
            _ranked(engine, runs[first], depth), _ranked(engine, runs[second], depth), depth=depth, p=rbo_p
        )
        figures.append(_row(part, "", "KTU", order.mean_ktu))
        figures.append(_row(part, "", "RBO", order.mean_rbo))
        frames.append(pd.DataFrame({"part": part, "topic": order.topics, "KTU": order.ktu, "RBO": order.rbo}))
        for measure in names:
            a, b = left[measure].to_numpy(), right[measure].to_numpy()
            figures.append(_row(part, measure, "RMSE", formulas.rmse(a, b)))
            figures.append(_row(part, measure, "nRMSE", formulas.nrmse(a, b)))
            figures.append(_row(part, measure, "p_value", formulas.t_test(a, b, paired=True)))
    if frames:
        per_topic = pd.concat(frames, ignore_index=True)
    if "original_baseline" in runs:
        for measure in names:
            arrays = [
                _aligned(values[advanced], values[base], measure)
                for advanced, base in (("original", "original_baseline"), ("reproduced", "reproduced_baseline"))
            ]
            args = (arrays[0][0], arrays[0][1], arrays[1][0], arrays[1][1])
            figures.append(_row("both", measure, "ER", formulas.effect_ratio(*args)))
            figures.append(_row("both", measure, "DeltaRI", formulas.delta_ri(*args)))
    result = Reproduction(
        kind="replicability" if replicating else "reproducibility",
        qrels=qrels,
        reproduced_qrels=target_qrels,
        runs=runs,
        evaluation_ids={role: s.evaluation_id for role, s in stored.items()},
        measures=names,
        params={"depth": depth, "rbo_p": rbo_p},
        figures=figures,
        per_topic=per_topic,
        notes=notes,
    )
    _record(engine, result)
    return result


def _row(part: str, measure: str, figure: str, value: float) -> ReproFigure:
    return ReproFigure(part, measure, figure, float(value))


def _aligned(advanced: pd.DataFrame, baseline: pd.DataFrame, measure: str) -> tuple[np.ndarray, np.ndarray]:
    """An advanced run's and its baseline's values over the advanced run's topics (repro_eval's
    rule); a topic the baseline lacks counts 0."""
    return advanced[measure].to_numpy(), baseline[measure].reindex(advanced.index).fillna(0.0).to_numpy()


def _stored(engine: Engine, qrels: str, run: str, measures: list[str]) -> ranking.StoredResults:
    """The run's newest evaluation on the qrels that holds the measures; evaluated here when there
    is none."""
    try:
        return ranking.results(engine, qrels_name=qrels, run_name=run, measures=measures)
    except NotFoundError:
        with read_only(engine) as session:  # unknown names are reported as such, not evaluated
            repo.get_run(session, run)
            repo.get_qrels(session, qrels)
    orchestration.evaluate_runs(engine, qrels_name=qrels, run_names=[run], measures=measures)
    return ranking.results(engine, qrels_name=qrels, run_name=run, measures=measures)


def _ranked(engine: Engine, run: str, depth: int) -> dict[str, list[str]]:
    _, table = store.run_rows(engine, run)
    return formulas.ranked_documents(table, depth)


def _record(engine: Engine, result: Reproduction) -> None:
    """Store the figures with the evaluations' ids, replacing an earlier row of the same ones."""
    ids = result.evaluation_ids
    keys = {
        "original_evaluation_id": ids["original"],
        "reproduced_evaluation_id": ids["reproduced"],
        "original_baseline_evaluation_id": ids.get("original_baseline"),
        "reproduced_baseline_evaluation_id": ids.get("reproduced_baseline"),
    }
    with unit_of_work(engine) as session:
        conditions = [
            getattr(ReproResult, column).is_(None) if value is None else getattr(ReproResult, column) == value
            for column, value in keys.items()
        ]
        session.execute(delete(ReproResult).where(*conditions))
        session.add(
            ReproResult(
                kind=result.kind,
                **keys,
                params={**result.params, "measures": result.measures, "runs": result.runs},
                figures=[row.as_json() for row in result.figures],
            )
        )


@dataclass(frozen=True)
class StoredReproduction:
    kind: str
    runs: dict[str, str]
    evaluation_ids: dict[str, int | None]
    params: dict[str, Any]  # as stored: depth, rbo_p, measures
    figures: list[ReproFigure]


def reproductions_of(engine: Engine, run: str) -> list[StoredReproduction]:
    """The stored figures in which ``run`` is the reproduced run (or reproduced baseline), newest first."""
    with read_only(engine) as session:
        found = repo.get_run(session, run)
        evaluations = select(Evaluation.id).where(Evaluation.run_id == found.id)
        rows = session.scalars(
            select(ReproResult)
            .where(
                or_(
                    ReproResult.reproduced_evaluation_id.in_(evaluations),
                    ReproResult.reproduced_baseline_evaluation_id.in_(evaluations),
                )
            )
            .order_by(ReproResult.id.desc())
        ).all()
        return [
            StoredReproduction(
                r.kind,
                dict(r.params.get("runs", {})),
                {
                    "original": r.original_evaluation_id,
                    "reproduced": r.reproduced_evaluation_id,
                    "original_baseline": r.original_baseline_evaluation_id,
                    "reproduced_baseline": r.reproduced_baseline_evaluation_id,
                },
                {k: v for k, v in r.params.items() if k != "runs"},
                [ReproFigure.stored(row) for row in r.figures],
            )
            for r in rows
        ]


def log_reproduction(result: Reproduction) -> str:
    """The figures as an MLflow run in the original qrels' experiment: metrics named
    ``FIGURE[.MEASURE][.baseline]``, the runs and evaluation ids as params, the per-topic KTU/RBO
    as an artifact. Returns the MLflow run id."""
    metrics: dict[str, float | None] = {}
    for row in result.figures:
        key = ".".join(
            part
            for part in (row.figure, row.measure.replace("@", "_at_"), "" if row.part != "baseline" else "baseline")
            if part
        )
        metrics[key] = _json_number(row.value)
    payload = MlflowRun(
        experiment=result.qrels,
        name=f"{result.runs['reproduced']} reproduces {result.runs['original']}",
        tags={
            "evalstore.kind": "repro",
            "evalstore.qrels": result.qrels,
            "evalstore.run": result.runs["reproduced"],
            "evalstore.version": __version__,
        },
        params={
            "kind": result.kind,
            "reproduced_qrels": result.reproduced_qrels,
            **result.runs,
            **{f"{role}_evaluation_id": i for role, i in result.evaluation_ids.items()},
            **result.params,
        },
        metrics=metrics,
        texts={
            "repro.csv": pd.DataFrame([row.as_json() for row in result.figures], columns=FIGURE_COLUMNS).to_csv(
                index=False
            ),
            "repro_per_topic.csv": result.per_topic.to_csv(index=False),
        },
    )
    return tracking.log_now(payload, f"the reproduction of run '{result.runs['original']}'")


__all__ = [
    "DEFAULT_MEASURES",
    "ReproFigure",
    "Reproduction",
    "StoredReproduction",
    "log_reproduction",
    "reproduce",
    "reproductions_of",
]
