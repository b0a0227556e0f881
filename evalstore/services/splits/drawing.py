"""Splits drawn, imported, listed and exported (see the package's docstring)."""

from __future__ import annotations

import json
import secrets
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from sqlalchemy import Engine, func, select

from evalstore.db import repositories as repo
from evalstore.db.models import Split, SplitMember
from evalstore.db.session import read_only, unit_of_work
from evalstore.errors import ConflictError, InputFormatError, InvalidParameterError, NotFoundError, Remedy
from evalstore.services import labels
from evalstore.services.kinds import ranking

METHODS = ("holdout", "subsample", "kfold", "loo", "bootstrap")
IMPORTED = "given"  # the method of a split read from a file (a collection's official folds)
STRATA = ("none", "difficulty", "label")
HOLDOUT_SHARE = 1 / 3  # the textbook's holdout: two thirds to train, one third to test
PARTITIONING = ("holdout", "kfold", "loo", IMPORTED)  # test parts never overlap: a cross-validated run is defined
_ANOTHER_NAME = Remedy(cli="Choose another --name.", web="Choose another name.")


@dataclass(frozen=True)
class SplitSummary:
    name: str
    source_kind: str
    source: str
    method: str
    folds: int
    seed: int | None
    params: dict[str, Any]
    sizes: list[dict[str, int]]  # per fold: train units (with multiplicity), distinct train units, test units

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "source": f"{self.source_kind} {self.source}",
            "method": self.method,
            "folds": self.folds,
            "seed": self.seed,
            **self.params,
        }


def make_split(
    engine: Engine,
    name: str,
    *,
    qrels: str | None = None,
    labels_name: str | None = None,
    method: str = "holdout",
    test_share: float = HOLDOUT_SHARE,
    k: int = 5,
    repeats: int = 10,
    stratify_by: str = "none",
    seed: int | None = None,
) -> SplitSummary:
    """Split a qrels set's topics (or a label set's items) and store the split with its seed."""
    if (qrels is None) == (labels_name is None):
        raise InvalidParameterError(
            "A split splits the topics of one qrels set or the items of one label set: "
            + ("both were named." if qrels is not None else "neither was named."),
            remedy=Remedy(cli="Give --qrels NAME or --labels NAME."),
        )
    if method not in METHODS:
        raise InvalidParameterError(
            f"A split's method is one of {', '.join(METHODS)}; not '{method}'.",
            remedy=Remedy(cli="Choose one with --method."),
        )
    if stratify_by not in STRATA:
        raise InvalidParameterError(
            f"A split is stratified by one of {', '.join(STRATA)}; not '{stratify_by}'.",
            remedy=Remedy(cli="Choose one with --stratify-by."),
        )
    if stratify_by == "difficulty" and qrels is None or stratify_by == "label" and labels_name is None:
        given, by = ("topics", "difficulty") if qrels is not None else ("items", "label")
        raise InvalidParameterError(
            f"Topics (of qrels) are stratified by difficulty, and items (of labels) by label; these are {given}.",
            remedy=Remedy(cli=f"Give --stratify-by {by} or none."),
        )
    if not 0 < test_share < 1:
        raise InvalidParameterError(
            f"The test share is between 0 and 1, not {test_share}.", remedy=Remedy(cli="Give another --test-share.")
        )
    seed = secrets.randbits(31) if seed is None else seed
    with read_only(engine) as session:
        if repo.find_split(session, name) is not None:
            raise ConflictError(f"A split named '{name}' exists.", remedy=_ANOTHER_NAME)
    if method == "loo" and stratify_by != "none":
        raise InvalidParameterError(
            "Leave-one-out tests one unit at a time: it has no strata.", remedy=Remedy(cli="Drop --stratify-by.")
        )
    units, strata, strata_note = (
        split_topics(engine, qrels, stratify_by)
        if qrels is not None
        else split_items(engine, labels_name or "", stratify_by)
    )
    if method == "kfold" and not 2 <= k <= len(units):
        raise InvalidParameterError(
            f"A k-fold split's k is between 2 and the {len(units)} units to split, not {k}.",
            remedy=Remedy(cli="Give another --k."),
        )
    if repeats < 1:
        raise InvalidParameterError(
            f"A split's draws are repeated at least once, not {repeats} times.",
            remedy=Remedy(cli="Give --repeats 1 or more."),
        )
    folds = _draw(method, len(units), strata, test_share, k, repeats, seed)
    params: dict[str, Any] = {"stratify_by": stratify_by}
    if method in ("holdout", "subsample"):
        params["test_share"] = test_share
    if method == "kfold":
        params["k"] = k
    if method in ("subsample", "bootstrap"):
        params["repeats"] = repeats
    if strata_note:
        params["strata"] = strata_note
    _store(
        engine,
        Split(
            name=name,
            source_kind="qrels" if qrels else "labels",
            source=qrels or labels_name,
            method=method,
            params=params,
            seed=seed,
            folds=len(folds),
        ),
        units,
        folds,
    )
    return show_split(engine, name)


def _store(engine: Engine, split: Split, units: list[str], folds: list[tuple[np.ndarray, np.ndarray]]) -> None:
    """The split and its members, in one transaction."""
    rows: dict[str, list[Any]] = {"fold": [], "part": [], "unit": [], "weight": []}
    for number, (train, test) in enumerate(folds, start=1):
        for part, counts in (("train", train), ("test", test)):
            chosen = np.flatnonzero(counts)
            rows["fold"] += [number] * len(chosen)
            rows["part"] += [part] * len(chosen)
            rows["unit"] += [units[i] for i in chosen]
            rows["weight"] += counts[chosen].tolist()
    with unit_of_work(engine) as session:
        if repo.find_split(session, split.name) is not None:
            raise ConflictError(f"A split named '{split.name}' exists.", remedy=_ANOTHER_NAME)
        session.add(split)
        session.flush()
        table = pa.table(
            {
                "split_id": pa.array([split.id] * len(rows["unit"]), pa.int32()),
                "fold": pa.array(rows["fold"], pa.int32()),
                "part": pa.array(rows["part"], pa.string()),
                "unit": pa.array(rows["unit"], pa.string()),
                "weight": pa.array(rows["weight"], pa.int32()),
            }
        )
        repo.copy_batches(session, SplitMember.__tablename__, table.to_batches(max_chunksize=repo.BATCH_ROWS))


def import_split(engine: Engine, path: Path, *, qrels: str, name: str) -> SplitSummary:
    """A collection's own folds (DL-HARD's folds.json): a JSON object of fold name -> the topics it
    tests; each fold trains on the qrels' other topics. The folds' test parts may not overlap."""
    try:
        given = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputFormatError(str(path), None, f"not a JSON file of folds ({exc})") from None
    if not isinstance(given, dict) or not given or not all(isinstance(v, list) for v in given.values()):
        raise InputFormatError(str(path), None, 'expected a JSON object of folds: {"1": [topic, ...], ...}')
    topics, _, _ = split_topics(engine, qrels, "none")
    position = {topic: i for i, topic in enumerate(topics)}
    owner: dict[str, str] = {}
    folds = []
    for fold, listed in given.items():
        test = np.zeros(len(topics), dtype=np.int64)
        for topic in map(str, listed):
            if topic not in position:
                raise InputFormatError(
                    str(path), None, f"fold {fold} names topic {topic}, which qrels '{qrels}' do not judge"
                )
            if topic in owner:
                raise InputFormatError(
                    str(path),
                    None,
                    f"topic {topic} is in folds {owner[topic]} and {fold}; a topic is tested by one fold",
                )
            owner[topic] = fold
            test[position[topic]] = 1
        folds.append((1 - test, test))
    _store(
        engine,
        Split(
            name=name,
            source_kind="qrels",
            source=qrels,
            method=IMPORTED,
            params={"stratify_by": "none", "file": str(path), "fold_names": list(given)},
            seed=None,
            folds=len(folds),
        ),
        topics,
        folds,
    )
    return show_split(engine, name)


def split_topics(engine: Engine, qrels: str, stratify_by: str) -> tuple[list[str], np.ndarray | None, str | None]:
    """The qrels' topics, and with ``difficulty`` their quartile of difficulty: the mean AP of the
    runs evaluated on the qrels, or, with none, the number of relevant documents."""
    with read_only(engine) as session:
        judged = repo.qrels_table(session, repo.get_qrels(session, qrels)).to_pandas()
    relevant = (judged["relevance"] > 0).groupby(judged["topic"]).sum()
    topics = sorted(relevant.index)
    if stratify_by == "none":
        return topics, None, None
    try:
        board = ranking.leaderboard(engine, qrels_name=qrels, measures=["AP"])
        runs = [row.run for row in board.rows if "AP" in row.values]
    except NotFoundError:  # no run evaluated on the qrels yet
        runs = []
    if runs:
        frames = [ranking.results(engine, qrels_name=qrels, run_name=run, measures=["AP"]).frame["AP"] for run in runs]
        difficulty = pd.concat(frames, axis=1).astype(float).mean(axis=1).reindex(topics).fillna(0.0)
        note = f"quartiles of mean AP over {len(runs)} runs"
    else:
        difficulty = relevant.reindex(topics).astype(float)
        note = "quartiles of the number of relevant documents (no run evaluated yet)"
    bins = pd.qcut(difficulty.rank(method="first"), 4, labels=False).to_numpy()
    return topics, bins, note


def split_items(engine: Engine, labels_name: str, stratify_by: str) -> tuple[list[str], np.ndarray | None, str | None]:
    with read_only(engine) as session:
        gold = labels.read_gold(session, labels.get_label_set(session, labels_name))
    items = gold.items.to_pylist()
    if stratify_by == "none":
        return items, None, None
    return items, pc.dictionary_encode(gold.labels).combine_chunks().indices.to_numpy(zero_copy_only=False), "label"


def _draw(
    method: str, n: int, strata: np.ndarray | None, test_share: float, k: int, repeats: int, seed: int
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per fold, (train counts, test counts) over the n units, by scikit-learn's splitters."""
    from sklearn import model_selection as ms
    from sklearn.utils import resample

    indices = np.arange(n)

    def counts(chosen: np.ndarray) -> np.ndarray:
        return np.bincount(chosen, minlength=n)

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # a stratum too small for the folds is an error here
            if method == "holdout":
                train, test = ms.train_test_split(indices, test_size=test_share, random_state=seed, stratify=strata)
                return [(counts(train), counts(test))]
            if method == "loo":
                return [(counts(tr), counts(te)) for tr, te in ms.LeaveOneOut().split(indices)]
            if method == "kfold":
                kfold = (
                    ms.StratifiedKFold(k, shuffle=True, random_state=seed)
                    if strata is not None
                    else ms.KFold(k, shuffle=True, random_state=seed)
                )
                return [(counts(tr), counts(te)) for tr, te in kfold.split(indices, strata)]
            if method == "subsample":
                shuffle = (
                    ms.StratifiedShuffleSplit(repeats, test_size=test_share, random_state=seed)
                    if strata is not None
                    else ms.ShuffleSplit(repeats, test_size=test_share, random_state=seed)
                )
                return [(counts(tr), counts(te)) for tr, te in shuffle.split(indices, strata)]
            rng = np.random.RandomState(seed)
            folds = []
            for _ in range(repeats):  # the bootstrap: train on a resample, test on the units it missed
                drawn = resample(indices, replace=True, n_samples=n, random_state=rng, stratify=strata)
                train = counts(np.asarray(drawn))
                folds.append((train, (train == 0).astype(np.int64)))
            return folds
    except (ValueError, Warning) as exc:
        raise InvalidParameterError(f"Cannot split {n} units this way: {exc}") from None


def list_splits(engine: Engine) -> list[SplitSummary]:
    with read_only(engine) as session:
        names = list(session.scalars(select(Split.name).order_by(Split.name)))
    return [show_split(engine, name) for name in names]


def show_split(engine: Engine, name: str) -> SplitSummary:
    with read_only(engine) as session:
        split = repo.get_split(session, name)
        sizes = session.execute(
            select(SplitMember.fold, SplitMember.part, func.count(), func.sum(SplitMember.weight))
            .where(SplitMember.split_id == split.id)
            .group_by(SplitMember.fold, SplitMember.part)
        ).all()
        per_fold: dict[int, dict[str, int]] = {}
        for fold, part, distinct, total in sizes:
            entry = per_fold.setdefault(int(fold), {"fold": int(fold), "train": 0, "train_distinct": 0, "test": 0})
            if part == "train":
                entry["train"], entry["train_distinct"] = int(total), int(distinct)
            else:
                entry["test"] = int(distinct)
        return SplitSummary(
            split.name,
            split.source_kind,
            split.source,
            split.method,
            split.folds,
            split.seed,
            dict(split.params),
            [per_fold[f] for f in sorted(per_fold)],
        )


def members(engine: Engine, name: str, part: str = "test") -> tuple[Split, dict[int, list[str]]]:
    """The split, and each fold's ``part`` units."""
    with read_only(engine) as session:
        split = repo.get_split(session, name)
        rows = session.execute(
            select(SplitMember.fold, SplitMember.unit)
            .where(SplitMember.split_id == split.id, SplitMember.part == part)
            .order_by(SplitMember.fold, SplitMember.unit)
        )
        by_fold: dict[int, list[str]] = {}
        for fold, unit in rows:
            by_fold.setdefault(int(fold), []).append(unit)
        session.expunge(split)
    return split, by_fold


@dataclass(frozen=True)
class FoldUnits:
    """A fold's train and test units (None: the part was not asked for); ``train_weights``: the
    train units drawn more than once (a bootstrap's), with how many times."""

    fold: int
    train: list[str] | None
    test: list[str] | None
    train_weights: dict[str, int]

    def as_dict(self) -> dict[str, object]:
        parts = {name: units for name, units in (("train", self.train), ("test", self.test)) if units is not None}
        weights = {"train_weights": self.train_weights} if self.train_weights else {}
        return {"fold": self.fold, **parts, **weights}


@dataclass(frozen=True)
class SplitExport:
    """Each fold's train and test units, in the split's own unit order (the qrels' topics sorted as
    ``splits make`` sorted them; a label set's items in the gold file's order), with the seed the
    split recorded. ``weights``: per fold, the train units a bootstrap drew more than once."""

    summary: SplitSummary
    folds: list[FoldUnits]

    def as_dict(self) -> dict[str, Any]:
        return {**self.summary.as_dict(), "fold_sets": [fold.as_dict() for fold in self.folds]}


def export_split(engine: Engine, name: str, *, fold: int | None = None, part: str | None = None) -> SplitExport:
    """The units of each fold (or of ``fold``), train and test (or ``part`` only)."""
    if part is not None and part not in ("train", "test"):
        raise InvalidParameterError(
            f"A fold's parts are train and test, not '{part}'.", remedy=Remedy(cli="Choose one with --part.")
        )
    summary = show_split(engine, name)
    if fold is not None and not 1 <= fold <= summary.folds:
        raise InvalidParameterError(f"Split '{name}' has folds 1-{summary.folds}; there is no fold {fold}.")
    with read_only(engine) as session:
        split = repo.get_split(session, name)
        query = select(SplitMember.fold, SplitMember.part, SplitMember.unit, SplitMember.weight).where(
            SplitMember.split_id == split.id
        )
        if fold is not None:
            query = query.where(SplitMember.fold == fold)
        if part is not None:
            query = query.where(SplitMember.part == part)
        rows = list(session.execute(query).all())
    if summary.source_kind == "qrels":
        order: dict[str, int] | None = None  # the topics sorted by code point, as split_topics sorted them
    else:
        with read_only(engine) as session:
            items = labels.read_gold(session, labels.get_label_set(session, summary.source)).items.to_pylist()
        order = {item: i for i, item in enumerate(items)}
    # in Python, not ORDER BY: a database's collation may order text otherwise than the split did
    rows.sort(key=lambda r: (r.fold, r.part != "train", order[r.unit] if order is not None else 0, r.unit))
    wanted = [part] if part is not None else ["train", "test"]
    numbers = [fold] if fold is not None else list(range(1, summary.folds + 1))
    units: dict[tuple[int, str], list[str]] = {(number, p): [] for number in numbers for p in wanted}
    weights: dict[int, dict[str, int]] = {number: {} for number in numbers}
    for row in rows:
        units[int(row.fold), row.part].append(row.unit)
        if row.weight != 1:
            weights[int(row.fold)][row.unit] = int(row.weight)
    return SplitExport(
        summary,
        [
            FoldUnits(number, units.get((number, "train")), units.get((number, "test")), weights[number])
            for number in sorted(numbers)
        ],
    )
