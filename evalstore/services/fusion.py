"""Fusing runs (evalstore.fusion) as use cases: stored runs fused into a new stored run with its
provenance, run files fused into a run file, and a method's weights or parameter chosen on a
split's training topics for a measure, as ranx's ``optimize_fusion`` chooses them.

The provenance is the fused run's metadata, flat ``fusion.*`` keys (``runs show`` lists them,
``runs list --meta fusion.method=rrf`` finds the runs): the inputs by name and content hash, the
method, the normalisation, every parameter (weights included), the depth, evalstore's version and,
when optimised, the measure, split, fold, its seed, the step and the training topics' count; when
trained (probfuse, segfuse, slidefuse, bayesfuse, mapfuse, posfuse), the training qrels by name and
content hash, or the split, fold and seed, the training topics' count and what was learnt.
"""

from __future__ import annotations

import io
import itertools
import json
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from sqlalchemy import Engine

from evalstore import fusion
from evalstore._version import __version__
from evalstore.errors import InvalidParameterError
from evalstore.io.formats import read_qrels, read_run
from evalstore.io.writers import write_run
from evalstore.metrics import evaluate, resolve_measures
from evalstore.services import splits, store

# the weighted methods' weights are searched for on a grid; more trials than this is refused
# (ranx tries every one: 5 runs at step 0.05 would be 10,626 fusions and evaluations)
MAX_TRIALS = 2000


@dataclass(frozen=True)
class Optimised:
    """Weights chosen on a split's training topics: the best of ``trials`` configurations for
    ``measure`` (its mean over ``topics`` training topics), ranx's way (the last best wins)."""

    measure: str
    split: str
    fold: int
    seed: int | None  # the split's: the draw that chose the training topics
    step: float
    topics: int
    weights: list[float]  # empty: the method takes none (rrf: its k was chosen)
    value: float
    trials: int
    params: dict[str, float] = field(default_factory=dict)  # rrf: the k chosen

    def chosen(self) -> str:
        """What was chosen, as a user reads it."""
        if self.weights:
            return "weights " + ",".join(repr(w) for w in self.weights)
        return ", ".join(f"{key} {value!r}" for key, value in self.params.items())

    def provenance(self) -> dict[str, str]:
        return {
            "fusion.optimised_for": self.measure,
            "fusion.split": self.split,
            "fusion.fold": str(self.fold),
            "fusion.seed": "" if self.seed is None else str(self.seed),
            "fusion.step": repr(self.step),
            "fusion.training_topics": str(self.topics),
            "fusion.training_value": repr(self.value),
        }


@dataclass(frozen=True)
class Training:
    """The judgments a trained method learnt from: stored qrels (``qrels``), or the training
    topics of a split's fold (``split``, ``fold``, ``seed``), or a qrels file (``path``)."""

    table: pa.Table
    provenance: dict[str, str]


def training_qrels(engine: Engine, name: str) -> Training:
    """Stored qrels ``name`` as a trained method's training judgments."""
    summary, table = store.qrels_rows(engine, name)
    return Training(table, {"fusion.training_qrels": f"{summary.name} ({summary.content_hash})"})


def training_file(path: Path) -> Training:
    """A qrels file as a trained method's training judgments (nothing stored)."""
    parsed = read_qrels(path)
    return Training(parsed.table, {"fusion.training_qrels": f"{path} ({parsed.content_hash})"})


def training_split(engine: Engine, split: str, fold: int | None) -> Training:
    """The judgments of the training topics of ``split``'s ``fold`` (a holdout split's one)."""
    seed, fold, _, qrels = _split_training(engine, split, fold)
    return Training(
        qrels,
        {
            "fusion.split": split,
            "fusion.fold": str(fold),
            "fusion.seed": "" if seed is None else str(seed),
        },
    )


@dataclass(frozen=True)
class FusedRun:
    """A fused run stored (``registered``) with its ``provenance`` (the run's metadata)."""

    registered: store.Registered
    provenance: dict[str, str]
    warnings: tuple[str, ...] = ()
    optimised: Optimised | None = None


@dataclass(frozen=True)
class FusedFile:
    path: Path
    rows: int
    topics: int
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class Recipe:
    """How to fuse: the method, the normalisation, its weights and parameters, the depth kept."""

    method: str
    norm: str = "min-max"
    weights: Sequence[float] | None = None
    params: Mapping[str, float] = field(default_factory=dict)
    depth: int | None = None


def fuse_runs(
    engine: Engine,
    runs: Sequence[str],
    recipe: Recipe,
    *,
    name: str,
    optimise_for: str | None = None,
    split: str | None = None,
    fold: int | None = None,
    step: float = 0.1,
    description: str | None = None,
    replace: bool = False,
    train_qrels: str | None = None,
) -> FusedRun:
    """Fuse stored runs into a new stored run ``name`` (through store.register_run, as any run),
    with the provenance as its metadata. ``optimise_for`` a measure: the weights are chosen first,
    on the training topics of ``split``'s ``fold`` (:func:`optimise`). A trained method learns
    from stored qrels ``train_qrels``, or else from the judgments of ``split``'s training topics."""
    _distinct(runs)
    training = None
    if fusion.method_named(recipe.method).trained and optimise_for is None:
        if train_qrels is not None:
            training = training_qrels(engine, train_qrels)
        elif split is not None:
            training = training_split(engine, split, fold)
    tables, summaries = [], []
    for run in runs:
        summary, table = store.run_rows(engine, run)
        summaries.append(summary)
        tables.append(table)
    optimised = None
    if optimise_for is not None:
        if split is None:
            raise InvalidParameterError("Weights are chosen on a split's training topics; name the split.")
        optimised = optimise(engine, tables, recipe, runs=runs, measure=optimise_for, split=split, fold=fold, step=step)
        recipe = Recipe(
            recipe.method,
            recipe.norm,
            optimised.weights or None,
            {**recipe.params, **optimised.params},
            recipe.depth,
        )
    fused = fusion.fuse(
        tables,
        recipe.method,
        recipe.norm,
        weights=recipe.weights,
        params=recipe.params,
        depth=recipe.depth,
        names=[f"run '{r}'" for r in runs],
        qrels=training.table if training is not None else None,
    )
    provenance = {
        "fusion.inputs": ", ".join(f"{s.name} ({s.content_hash})" for s in summaries),
        **_recipe_provenance(fused, recipe.depth),
        **(optimised.provenance() if optimised is not None else {}),
        **(training.provenance if training is not None else {}),
    }
    buffer = io.BytesIO()
    write_run(fused.table, buffer, "trec", tag=name)
    with tempfile.TemporaryDirectory(prefix="evalstore-fuse-") as folder:
        path = Path(folder) / f"{name}.txt"
        path.write_bytes(buffer.getvalue())
        registered = store.register_run(
            engine,
            path,
            name=name,
            metadata=provenance,
            description=description or f"{fused.method} fusion of {', '.join(runs)} ({fused.norm} normalised)",
            replace=replace,
        )
    return FusedRun(registered, provenance, fused.warnings, optimised)


def fuse_files(
    paths: Sequence[Path], recipe: Recipe, *, out: Path, tag: str, train_qrels: Path | None = None
) -> FusedFile:
    """Fuse run files into a TREC run file ``out`` (every file read and checked first; nothing is
    written when one is refused); a trained method learns from the qrels file ``train_qrels``."""
    _distinct([str(p) for p in paths])
    tables = [read_run(path).table for path in paths]
    training = training_file(train_qrels) if train_qrels is not None else None
    fused = fusion.fuse(
        tables,
        recipe.method,
        recipe.norm,
        weights=recipe.weights,
        params=recipe.params,
        depth=recipe.depth,
        names=[str(p) for p in paths],
        qrels=training.table if training is not None else None,
    )
    buffer = io.BytesIO()
    write_run(fused.table, buffer, "trec", tag=tag)
    out.write_bytes(buffer.getvalue())
    topics = len(pc.unique(fused.table["topic"]))
    return FusedFile(out, fused.table.num_rows, topics, fused.warnings)


def optimise(
    engine: Engine,
    tables: Sequence[pa.Table],
    recipe: Recipe,
    *,
    runs: Sequence[str],
    measure: str,
    split: str,
    fold: int | None,
    step: float,
) -> Optimised:
    """The weights of ``recipe``'s weighted method (or rrf's k) that give the best mean
    ``measure`` over the training topics of ``split``'s ``fold`` (against the split's qrels), as
    ranx's ``optimize_fusion``: every combination of weights from 0 to 1 in ``step``s that adds up
    to 1 (rrf: k from 10 to 100 in 10s, ranx's default), each fused and evaluated; the last of the
    best wins."""
    method = fusion.method_named(recipe.method)
    configs: list[tuple[list[float], dict[str, float]]]
    if method.name == "rrf":
        if "k" in recipe.params:
            raise InvalidParameterError("Either give rrf's k or have it chosen on a split, not both.")
        configs = [([], {"k": k}) for k in range(10, 101, 10)]  # ranx's optimize_rrf: min_k 10, max_k 100, step 10
    elif method.weighted:
        if recipe.weights is not None:
            raise InvalidParameterError("Either give the weights or have them chosen on a split, not both.")
        configs = [(w, {}) for w in weight_trials(step, len(tables))]
    else:
        weighted = ", ".join(m.name for m in fusion.METHODS.values() if m.weighted)
        raise InvalidParameterError(
            f"Weights (or rrf's k) are chosen on a split; {method.name} has neither (the weighted methods: {weighted})."
        )
    seed, fold, topics, qrels = _split_training(engine, split, fold)
    name = str(resolve_measures([measure])[0])
    chosen = [t.filter(pc.is_in(t["topic"], pa.array(topics, pa.string()))) for t in tables]
    for run, table in zip(runs, chosen, strict=True):
        if table.num_rows == 0:
            raise InvalidParameterError(
                f"Run '{run}' has none of the {len(topics)} training topics of split '{split}' (fold {fold})."
            )
    normalised = fusion.Normalised.of(chosen, recipe.norm, names=[f"run '{r}'" for r in runs])
    values = [
        _mean(
            qrels,
            normalised.fuse(method.name, weights=w or None, params={**recipe.params, **p}, depth=recipe.depth).table,
            name,
        )
        for w, p in configs
    ]
    best, best_value = configs[0], 0.0
    for config, value in zip(configs, values, strict=True):
        if value >= best_value:  # ranx's rule: the last of equal bests
            best, best_value = config, value
    return Optimised(name, split, fold, seed, step, len(topics), list(best[0]), best_value, len(configs), dict(best[1]))


def _split_training(engine: Engine, split: str, fold: int | None) -> tuple[int | None, int, list[str], pa.Table]:
    """A split of topics' fold (a holdout split's one): its seed, the fold, its training topics
    and their judgments."""
    summary, train = splits.members(engine, split, "train")
    if summary.source_kind != "qrels":
        raise InvalidParameterError(
            f"Split '{split}' splits the items of labels '{summary.source}'; runs need a split of topics."
        )
    if fold is None:
        if summary.folds != 1:
            raise InvalidParameterError(f"Split '{split}' has {summary.folds} folds; choose the fold to train on.")
        fold = 1
    if fold not in train:
        raise InvalidParameterError(f"Split '{split}' has folds 1-{summary.folds}; there is no fold {fold}.")
    topics = sorted(set(train[fold]))
    _, qrels = store.qrels_rows(engine, summary.source)
    qrels = qrels.filter(pc.is_in(qrels["topic"], pa.array(topics, pa.string())))
    return summary.seed, fold, topics, qrels


def weight_trials(step: float, runs: int) -> list[list[float]]:
    """ranx's grid of weights: 0 to 1 in ``step``s (rounded to the step's decimals), every
    combination, one weight per run, whose float sum is exactly 1.0 (so ranx leaves some out,
    e.g. 0.1 + 0.2 + 0.7; and so do we, to choose what ranx chooses)."""
    if not 0 < step <= 1:
        raise InvalidParameterError(f"The step of the weights must be above 0 and at most 1, not {step}.")
    digits = str(step)[::-1].find(".")
    grid = [round(x, digits) for x in np.arange(0, 1 + step, step)]
    count = len(grid) ** runs
    if count > MAX_TRIALS * 100:  # the product is walked before the sums are known
        raise InvalidParameterError(f"A step of {step} over {runs} runs is too fine a grid; take a larger step.")
    trials = [[float(x) for x in seq] for seq in itertools.product(*[grid] * runs) if sum(seq) == 1.0]
    if len(trials) > MAX_TRIALS:
        raise InvalidParameterError(
            f"A step of {step} over {runs} runs makes {len(trials)} weightings to try, more than {MAX_TRIALS}; "
            "take a larger step."
        )
    if not trials:
        raise InvalidParameterError(f"No weights in steps of {step} add up to 1; take a step that divides 1.")
    return trials


def _mean(qrels: pa.Table, run: pa.Table, measure: str) -> float:
    result = evaluate(qrels, run, [measure], per_query=False)
    return float(result.aggregates[measure])


def _recipe_provenance(fused: fusion.Fused, depth: int | None) -> dict[str, str]:
    params = {k: v for k, v in fused.params.items() if k != "weights"}
    out = {
        "fusion.method": fused.method,
        "fusion.norm": fused.norm,
        "fusion.params": json.dumps(params, sort_keys=True),
        "fusion.depth": "all" if depth is None else str(depth),
        "fusion.evalstore_version": __version__,
    }
    if "weights" in fused.params:
        out["fusion.weights"] = ",".join(repr(float(w)) for w in fused.params["weights"])
    if fused.trained is not None:
        out["fusion.training_topics"] = str(fused.trained.topics)
        out["fusion.trained"] = json.dumps([list(values) for values in fused.trained.values])
    return out


def provenance_of(metadata: Mapping[str, Any]) -> dict[str, str]:
    """A run's fusion provenance (empty: it was not made by fusion)."""
    return {k: str(v) for k, v in metadata.items() if k.startswith("fusion.")}


def _distinct(runs: Sequence[str]) -> None:
    repeated = sorted({r for r in runs if list(runs).count(r) > 1})
    if repeated:
        raise InvalidParameterError(f"'{repeated[0]}' is given twice; fuse each run once (weigh it instead).")
