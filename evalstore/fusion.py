"""Run fusion and score normalisation: several rankings of the same topics made into one.

The methods and normalisations are ranx's (``ranx.fuse``, ranx 0.3.21), with its definitions,
its names accepted beside ours (``sum`` for combsum, ``min_max`` for min-max, ...), and its
answers: tests/differential/test_fusion_against_ranx.py holds every method under every normalisation equal to
ranx's on hand-made and real runs. Where ranx's answer depends on something other than the runs
(the order its sort leaves tied scores in, or Python's string hashing), ours follows trec_eval's
order instead, and :func:`fuse` says so in its warnings (docs/guide/fusion.md).

Everything is computed over all topics at once: the runs' documents become the rows of one
candidate-by-run matrix (a candidate is a topic's document retrieved by any run), each method one
expression over its columns. Only Condorcet fusion sorts candidates one comparison at a time (its
majority vote is not a total order: its answer is the one a comparison sort gives).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from evalstore.errors import InvalidParameterError

# ranx floors every normalisation's denominator at this (min-max, max, sum, zmuv)
_FLOOR = 1e-9
# ranx's stand-ins for a document a run lacks: combmax's and combmin's, and Condorcet's rank
_ABSENT_MAX = -1e9
_ABSENT_MIN = 1e9
_ABSENT_RANK = 1_000_000
# Condorcet compares every pair of a topic's candidates: a topic of more is refused (the pairs'
# votes take candidates^2 x 8 bytes, 72 MB at this size)
CONDORCET_MAX_CANDIDATES = 3000
# probfuse's segments and slidefuse's half-window (ranx's optimisers try 1 to 100): bounded, as
# slidefuse takes a vector step per position of its window
MAX_SEGMENTS = 10_000
MAX_WINDOW = 1000
# segfuse's segments: positions [0, 5), [5, 15), [15, 35), ... (the k-th ending at 10 x 2^(k-1) - 5, ranx's)
_SEGFUSE_BOUNDS = np.array([0] + [10 * 2 ** (k - 1) - 5 for k in range(1, 11)])
# bayesfuse's segments of positions, ranx's; its log-odds for a document a run lacks
_BAYES_CUTS = np.array([0, 5, 10, 15, 20, 30, 100, 200, 500, 1000])
_BAYES_ABSENT = float(np.log(0.001 / 0.999))


@dataclass(frozen=True)
class Method:
    """A fusion method: its canonical name, ranx's name for it, the parameters it takes (their
    defaults: None for none), whether it reads ranks instead of scores, and its source."""

    name: str
    ranx: str
    reference: str
    params: Mapping[str, float | None] = field(default_factory=dict)
    weighted: bool = False
    by_rank: bool = False
    trained: bool = False  # trained on qrels first (:meth:`Normalised.train`)


_FOX = "Fox and Shaw, Combination of Multiple Searches, TREC-2 (1993)"
_MOURAO = "Mourão et al., Inverse Square Rank Fusion for Multimodal Search, CBMI (2014)"
_WU = "Wu, Data Fusion in Information Retrieval, Springer (2012)"
_ASLAM = "Aslam and Montague, Models for Metasearch, SIGIR (2001)"
_MONTAGUE = "Montague and Aslam, Condorcet Fusion for Improved Retrieval, CIKM (2002)"
_LILLIS10 = "Lillis et al., Estimating Probabilities for Effective Data Fusion, SIGIR (2010)"

METHODS: dict[str, Method] = {
    m.name: m
    for m in (
        Method("combsum", "sum", _FOX),
        Method("combmnz", "mnz", _FOX),
        Method("combmax", "max", _FOX),
        Method("combmin", "min", _FOX),
        Method("combmed", "med", _FOX),
        Method("combanz", "anz", _FOX),
        Method(
            "combgmnz",
            "gmnz",
            "Joon Ho Lee, Analyses of Multiple Evidence Combination, SIGIR (1997)",
            {"gamma": None},
        ),
        Method(
            "rrf",
            "rrf",
            "Cormack, Clarke and Büttcher, Reciprocal Rank Fusion, SIGIR (2009)",
            {"k": 60},
            by_rank=True,
        ),
        Method("isr", "isr", _MOURAO, by_rank=True),
        Method("log_isr", "log_isr", _MOURAO, by_rank=True),
        Method("logn_isr", "logn_isr", _MOURAO, {"sigma": 0.01}, by_rank=True),
        Method(
            "rbc",
            "rbc",
            "Bailey et al., Retrieval Consistency in the Presence of Query Variations, SIGIR (2017)",
            {"phi": None},
            by_rank=True,
        ),
        Method("wsum", "wsum", _WU, weighted=True),
        Method("wmnz", "wmnz", _WU, weighted=True),
        Method(
            "mixed",
            "mixed",
            "Kurland and Culpepper, Fusion in Information Retrieval, SIGIR tutorial (2018)",
            weighted=True,
        ),
        Method("bordafuse", "bordafuse", _ASLAM, by_rank=True),
        Method("w_bordafuse", "w_bordafuse", _ASLAM, weighted=True, by_rank=True),
        Method("condorcet", "condorcet", _MONTAGUE, by_rank=True),
        Method("w_condorcet", "w_condorcet", _MONTAGUE, weighted=True, by_rank=True),
        Method(
            "probfuse",
            "probfuse",
            "Lillis et al., ProbFuse: a Probabilistic Approach to Data Fusion, SIGIR (2006)",
            {"n_segments": None},
            by_rank=True,
            trained=True,
        ),
        Method(
            "segfuse",
            "segfuse",
            "Shokouhi, Segmentation of Search Engine Results for Effective Data-Fusion, ECIR (2007)",
            by_rank=True,
            trained=True,
        ),
        Method(
            "slidefuse",
            "slidefuse",
            "Lillis et al., Extending Probabilistic Data Fusion Using Sliding Windows, ECIR (2008)",
            {"w": None},
            by_rank=True,
            trained=True,
        ),
        Method("bayesfuse", "bayesfuse", _ASLAM, by_rank=True, trained=True),
        Method("mapfuse", "mapfuse", _LILLIS10, by_rank=True, trained=True),
        Method("posfuse", "posfuse", _LILLIS10, by_rank=True, trained=True),
    )
}

# other spellings: ranx's (its ``fuse(method=...)`` names and its functions' names)
METHOD_ALIASES: dict[str, str] = {
    **{m.ranx: m.name for m in METHODS.values()},
    **{f"comb_{m.ranx}": m.name for m in METHODS.values() if m.name.startswith("comb")},
    "weighted_sum": "wsum",
    "weighted_bordafuse": "w_bordafuse",
    "weighted_condorcet": "w_condorcet",
}

NORMS = ("none", "min-max", "min-max-inverted", "max", "sum", "zmuv", "rank", "borda")
NORM_ALIASES = {"min_max": "min-max", "min_max_inverted": "min-max-inverted"}


def method_named(name: str) -> Method:
    """The method of a name in any accepted spelling; an unknown one names every method."""
    key = name.strip().lower()
    canonical = key if key in METHODS else METHOD_ALIASES.get(key)
    if canonical is None:
        raise InvalidParameterError(f"Unknown fusion method '{name}'; the methods are {', '.join(METHODS)}.")
    return METHODS[canonical]


def norm_named(name: str | None) -> str:
    key = "none" if name is None else name.strip().lower()
    key = NORM_ALIASES.get(key, key)
    if key not in NORMS:
        raise InvalidParameterError(f"Unknown normalisation '{name}'; the normalisations are {', '.join(NORMS)}.")
    return key


@dataclass(frozen=True)
class Fused:
    """A fused run: ``table`` (topic, doc, rank, score; each topic's documents by fused score
    descending, then docno descending, ranks from 1), the method, normalisation and parameters it
    was made with (every default filled in), and what differs from ranx on these inputs."""

    table: pa.Table
    method: str
    norm: str
    params: dict[str, Any]
    warnings: tuple[str, ...] = ()
    undecided: tuple[str, ...] = ()  # condorcet: the topics where the runs' majority ties or cycles
    trained: Trained | None = None  # the trained methods: what was learnt from the training qrels


@dataclass(frozen=True)
class Trained:
    """What a trained method learnt from the training qrels, per run (in the runs' order):
    ``values`` are probfuse's, segfuse's, posfuse's and slidefuse's probabilities of relevance
    (per segment, or per position from 0), bayesfuse's log-odds per position, mapfuse's MAP;
    ``topics`` the training topics (the qrels' topics the runs have)."""

    values: tuple[tuple[float, ...], ...]
    topics: int


def fuse(
    runs: Sequence[pa.Table],
    method: str,
    norm: str | None = "min-max",
    *,
    weights: Sequence[float] | None = None,
    params: Mapping[str, float] | None = None,
    depth: int | None = None,
    names: Sequence[str] | None = None,
    qrels: pa.Table | None = None,
) -> Fused:
    """Fuse ``runs`` (tables with columns topic, doc, score; each topic's documents unique) by
    ``method`` after normalising each run's scores by ``norm``, as ``ranx.fuse(runs, norm,
    method, params)``. ``weights``: one per run, for the weighted methods (default: 1 each);
    ``params``: k (rrf), phi (rbc), gamma (combgmnz), sigma (logn_isr), n_segments (probfuse),
    w (slidefuse); ``depth``: keep each topic's first ``depth`` fused documents (ranx keeps them
    all). ``names`` name the runs in messages (default: run 1, run 2, ...). Every run must have
    the same topics. ``qrels`` (topic, doc, relevance): the trained methods' training judgments,
    as ``ranx.optimize_fusion(qrels, runs, ...)`` takes them (a document of relevance 1 or more
    is relevant); the methods are trained on the runs' topics the qrels have."""
    return Normalised.of(runs, norm, names=names).fuse(method, weights=weights, params=params, depth=depth, qrels=qrels)


@dataclass(frozen=True)
class Normalised:
    """Runs normalised once, to be fused many times (weights searched for: services.fusion)."""

    grid: _Grid
    norm: str

    @classmethod
    def of(
        cls, runs: Sequence[pa.Table], norm: str | None = "min-max", *, names: Sequence[str] | None = None
    ) -> Normalised:
        norm = norm_named(norm)
        labels = list(names) if names is not None else [f"run {i + 1}" for i in range(len(runs))]
        if len(runs) < 2:
            raise InvalidParameterError(f"Fusion takes two runs or more; {len(runs)} given.")
        return cls(_Grid.of(runs, labels, norm), norm)

    @property
    def runs(self) -> int:
        return self.grid.scores.shape[1]

    def fuse(
        self,
        method: str,
        *,
        weights: Sequence[float] | None = None,
        params: Mapping[str, float] | None = None,
        depth: int | None = None,
        qrels: pa.Table | None = None,
    ) -> Fused:
        """These runs fused by ``method`` (see :func:`fuse`)."""
        chosen = method_named(method)
        if chosen.trained and qrels is None:
            raise InvalidParameterError(f"{chosen.name} is trained on judgments first; give the training qrels.")
        if not chosen.trained and qrels is not None:
            trained = ", ".join(m.name for m in METHODS.values() if m.trained)
            raise InvalidParameterError(
                f"{chosen.name} is not trained on judgments; the trained methods are {trained}."
            )
        values = _parameters(chosen, params or {})
        w = _weights(chosen, weights, self.runs)
        if chosen.weighted:
            values["weights"] = w
        if depth is not None and depth < 1:
            raise InvalidParameterError(f"The depth must be 1 or more, not {depth}.")
        if chosen.by_rank and self.norm == "borda":
            raise InvalidParameterError(
                f"{chosen.name} ranks each run's documents, and the borda normalisation gives every document a "
                "run lacks one score, so their ranks are arbitrary (ranx ranks them in Python's string-hashing "
                "order, which changes from one process to the next); fuse with another normalisation."
            )
        grid = self.grid
        warnings = grid.warnings(chosen, self.norm)
        undecided: list[str] = []
        if chosen.name in ("condorcet", "w_condorcet"):
            scores, undecided = _condorcet(grid, w)
            if undecided:
                shown = ", ".join(undecided[:5]) + (f" and {len(undecided) - 5} more" if len(undecided) > 5 else "")
                warnings += (
                    f"the runs' majority vote ties or cycles on {len(undecided)} "
                    f"topic{'s' if len(undecided) > 1 else ''} ({shown}): the order there is Python's sort's "
                    "from docno order, where ranx's changes with Python's string hashing from one process to "
                    "the next",
                )
        elif chosen.trained:
            assert qrels is not None
            learnt = _train(grid, chosen.name, values, _relevant(grid, qrels))
            scores = _fuse_trained(grid, chosen.name, values, learnt)
        else:
            scores = _fuse(grid, chosen, values)
        return Fused(
            _ranked(grid, scores, depth),
            chosen.name,
            self.norm,
            values,
            warnings,
            tuple(undecided),
            learnt if chosen.trained else None,
        )


def _parameters(method: Method, given: Mapping[str, float]) -> dict[str, Any]:
    unknown = sorted(set(given) - set(method.params))
    if unknown:
        takes = ", ".join(method.params) or "no parameter"
        raise InvalidParameterError(f"{method.name} takes {takes}; not {unknown[0]}.")
    values: dict[str, Any] = {}
    for key, default in method.params.items():
        value = given.get(key, default)
        if value is None:
            raise InvalidParameterError(f"{method.name} needs its parameter {key}.")
        value = float(value)
        if not np.isfinite(value):
            raise InvalidParameterError(f"{method.name}'s {key} must be a number, not {value}.")
        if key == "phi" and not 0 < value < 1:
            raise InvalidParameterError(f"rbc's phi must be between 0 and 1 (exclusive), not {value}.")
        if key == "k" and value < 0:
            raise InvalidParameterError(f"rrf's k must be 0 or more, not {value}.")
        if key == "n_segments" and not (value.is_integer() and 1 <= value <= MAX_SEGMENTS):
            raise InvalidParameterError(
                f"probfuse's n_segments must be a whole number from 1 to {MAX_SEGMENTS}, not {value}."
            )
        if key == "w" and not (value.is_integer() and 0 <= value <= MAX_WINDOW):
            raise InvalidParameterError(f"slidefuse's w must be a whole number from 0 to {MAX_WINDOW}, not {value}.")
        values[key] = int(value) if key in ("k", "n_segments", "w") and value.is_integer() else value
    return values


def _weights(method: Method, weights: Sequence[float] | None, runs: int) -> list[float]:
    if weights is None:
        return [1.0] * runs
    if not method.weighted:
        weighted = ", ".join(m.name for m in METHODS.values() if m.weighted)
        raise InvalidParameterError(f"{method.name} takes no weights; the weighted methods are {weighted}.")
    if len(weights) != runs:
        raise InvalidParameterError(f"{len(weights)} weights for {runs} runs; give one weight per run.")
    out = []
    for value in weights:
        number = float(value)
        if not np.isfinite(number) or number < 0:
            raise InvalidParameterError(f"A weight must be a number of 0 or more, not {value}.")
        out.append(number)
    return out


@dataclass
class _Grid:
    """The runs as one candidate-by-run matrix: ``scores`` (normalised; NaN where the run lacks
    the candidate), ``ranks`` (0-based, in the run's order after normalising; -1 where absent),
    each candidate's topic code, and the counts per topic."""

    topics: np.ndarray  # the topics, sorted (object array of str)
    topic_of: np.ndarray  # per candidate, its topic's code
    docs: np.ndarray  # per candidate, its docno (object array)
    scores: np.ndarray  # (candidates, runs) float64
    ranks: np.ndarray  # (candidates, runs) int64
    candidates: np.ndarray  # per topic, its number of candidates
    retrieved: np.ndarray  # (runs, topics): each run's documents per topic
    tied: list[int]  # per run, its documents tied in score with the one ranked above them
    names: list[str]

    @classmethod
    def of(cls, runs: Sequence[pa.Table], names: list[str], norm: str) -> _Grid:
        frames = [_frame(run) for run in runs]
        _same_topics(frames, names)
        stacked = pd.concat(frames, keys=range(len(frames)), names=["run", None]).reset_index(level=0)
        run = stacked["run"].to_numpy(np.int64)
        topics, topic = np.unique(stacked["topic"].to_numpy(object), return_inverse=True)
        doc_codes, doc_names = pd.factorize(stacked["doc"], sort=True)  # code order = byte order
        score = stacked["score"].to_numpy(np.float64)
        n_runs, n_topics = len(frames), len(topics)
        # each run's topic in trec_eval's order: score descending, then docno descending
        order = np.lexsort((-doc_codes, -score, topic, run))
        group = (run * n_topics + topic)[order]
        starts = np.r_[0, np.flatnonzero(np.diff(group)) + 1]
        sizes = np.diff(np.r_[starts, len(order)])
        rank = np.empty(len(order), np.int64)
        rank[order] = np.arange(len(order)) - np.repeat(starts, sizes)
        sorted_score = score[order]
        tie = np.r_[False, (sorted_score[1:] == sorted_score[:-1]) & (group[1:] == group[:-1])]
        tied = np.bincount(run[order][tie], minlength=n_runs).tolist()
        retrieved = np.zeros((n_runs, n_topics), np.int64)
        np.add.at(retrieved, (run, topic), 1)
        normalised, rank = _normalise(score, rank, run * n_topics + topic, norm)
        # the candidates: a topic's documents retrieved by any run
        key = topic.astype(np.int64) * len(doc_names) + doc_codes
        unique_keys, candidate = np.unique(key, return_inverse=True)
        topic_of = (unique_keys // len(doc_names)).astype(np.int64)
        docs = np.asarray(doc_names, dtype=object)[unique_keys % len(doc_names)]
        scores = np.full((len(unique_keys), n_runs), np.nan)
        scores[candidate, run] = normalised
        ranks = np.full((len(unique_keys), n_runs), -1, np.int64)
        ranks[candidate, run] = rank
        grid = cls(
            topics, topic_of, docs, scores, ranks, np.bincount(topic_of, minlength=n_topics), retrieved, tied, names
        )
        if norm == "borda":
            grid._borda_norm()
        return grid

    def present(self) -> np.ndarray:
        return ~np.isnan(self.scores)

    def _borda_norm(self) -> None:
        """ranx's borda normalisation: a run's document at rank r (from 0) of a topic with n
        candidates scores 1 - r/n; every candidate the run lacks scores 0.5 - (m - 1)/2n, m the
        run's documents in the topic; so every run has every candidate."""
        n = self.candidates[self.topic_of][:, None].astype(np.float64)
        m = self.retrieved.T[self.topic_of].astype(np.float64)
        self.scores = np.where(self.present(), 1 - self.ranks / n, 0.5 - (m - 1) / (2 * n))

    def warnings(self, method: Method, norm: str) -> tuple[str, ...]:
        if not (method.by_rank or norm in ("rank", "borda")):
            return ()
        return tuple(
            f"{name} has {count} document{'s' if count != 1 else ''} tied in score with the one above: "
            "they are ranked by docno descending (trec_eval's order), where ranx ranks them in its sort's "
            "order, so their fused scores can differ from ranx's"
            for name, count in zip(self.names, self.tied, strict=True)
            if count
        )


def _frame(run: pa.Table | pd.DataFrame) -> pd.DataFrame:
    table = run if isinstance(run, pa.Table) else pa.Table.from_pandas(run, preserve_index=False)
    return pd.DataFrame(
        {
            "topic": table["topic"].cast(pa.string()).to_numpy(zero_copy_only=False),
            "doc": table["doc"].cast(pa.string()).to_numpy(zero_copy_only=False),
            "score": table["score"].cast(pa.float64()).to_numpy(zero_copy_only=False),
        }
    )


def _same_topics(frames: list[pd.DataFrame], names: list[str]) -> None:
    """ranx fuses runs of the same topics only: name a topic one run has and another lacks."""
    sets = [set(frame["topic"].unique()) for frame in frames]
    every = set().union(*sets)
    for name, topics in zip(names, sets, strict=True):
        missing = sorted(every - topics)
        if missing:
            other = next(n for n, s in zip(names, sets, strict=True) if missing[0] in s)
            shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
            raise InvalidParameterError(
                f"The runs' topics differ: {name} lacks topic{'s' if len(missing) > 1 else ''} {shown} that "
                f"{other} has; fuse runs of the same topics."
            )


def _normalise(score: np.ndarray, rank: np.ndarray, group: np.ndarray, norm: str) -> tuple[np.ndarray, np.ndarray]:
    """Each run's scores normalised per topic (``group``: run and topic), as ranx's
    normalisations are (their denominators floored at 1e-9); and the ranks after it
    (min-max-inverted reverses them)."""
    if norm in ("none", "borda"):
        return score, rank
    frame = pd.DataFrame({"g": group, "s": score})
    by = frame.groupby("g")["s"]
    if norm == "rank":
        n = by.transform("size").to_numpy(np.float64)
        return 1 - rank / n, rank
    low = by.transform("min").to_numpy()
    high = by.transform("max").to_numpy()
    if norm == "min-max":
        return (score - low) / np.maximum(high - low, _FLOOR), rank
    if norm == "min-max-inverted":
        n = by.transform("size").to_numpy()
        return (high - score) / np.maximum(high - low, _FLOOR), n - 1 - rank
    if norm == "max":
        return score / np.maximum(high, _FLOOR), rank
    if norm == "sum":
        total = by.transform("sum").to_numpy()
        n = by.transform("size").to_numpy(np.float64)
        return (score - low) / np.maximum(total - low * n, _FLOOR), rank
    # zmuv: the standard deviation over the run's documents of the topic (ddof 0, numpy's)
    mean = by.transform("mean").to_numpy()
    deviation = score - mean
    spread = np.sqrt(pd.Series(deviation**2).groupby(group).transform("mean").to_numpy())
    return deviation / np.maximum(spread, _FLOOR), rank


def _in_turn(columns: np.ndarray) -> np.ndarray:
    """The columns' sum added up run by run (as ranx adds them: the same floating-point sums)."""
    total = np.zeros(columns.shape[0])
    for i in range(columns.shape[1]):  # a step per run, not per document
        total = total + columns[:, i]
    return total


def _fuse(grid: _Grid, method: Method, params: Mapping[str, Any]) -> np.ndarray:
    """Each candidate's fused score."""
    present = grid.present()
    count = present.sum(axis=1)
    name = method.name
    if method.by_rank:
        scores = _rank_scores(grid, name, params)
        if name in ("bordafuse", "w_bordafuse"):
            present = np.ones_like(present)
            count = present.sum(axis=1)
    else:
        scores = grid.scores
    filled = np.where(present, scores, 0.0)
    if name in ("combsum", "rrf", "rbc", "bordafuse"):
        return _in_turn(filled)
    if name in ("combmnz", "isr"):
        return _in_turn(filled) * count
    if name == "log_isr":
        return _in_turn(filled) * np.log(count)
    if name == "logn_isr":
        return _in_turn(filled) * np.log(count + params["sigma"])
    if name == "combgmnz":
        return _in_turn(filled) * count.astype(np.float64) ** params["gamma"]
    if name == "combanz":
        return _in_turn(filled) / count
    if name == "combmax":
        return np.where(present, scores, _ABSENT_MAX).max(axis=1)
    if name == "combmin":
        return np.where(present, scores, _ABSENT_MIN).min(axis=1)
    if name == "combmed":
        return np.nanmedian(np.where(present, scores, np.nan), axis=1)
    weights = np.asarray(params["weights"], np.float64)
    if name in ("wsum", "w_bordafuse"):
        return _in_turn(filled * weights)
    if name == "wmnz":
        return _in_turn(filled) * _in_turn(np.where(present, weights, 0.0))
    if name == "mixed":
        return _in_turn(filled * weights) * np.sqrt(count)
    raise AssertionError(f"no fusion for {name}")  # every method in METHODS is handled above


def _rank_scores(grid: _Grid, name: str, params: Mapping[str, Any]) -> np.ndarray:
    """A rank-based method's score of each run's document (NaN where the run lacks it, except
    bordafuse's, which gives those (n - m + 1)/2 points: n candidates, m retrieved)."""
    present = grid.present()
    rank = np.where(present, grid.ranks, 0).astype(np.float64)  # absent: any rank, its score is dropped
    if name == "rrf":
        return np.where(present, 1 / (params["k"] + rank + 1), np.nan)
    if name in ("isr", "log_isr", "logn_isr"):
        return np.where(present, 1 / (rank + 1) ** 2, np.nan)
    if name == "rbc":
        phi = params["phi"]
        return np.where(present, (1 - phi) * phi**rank, np.nan)
    # bordafuse, w_bordafuse
    n = grid.candidates[grid.topic_of][:, None].astype(np.float64)
    m = grid.retrieved.T[grid.topic_of].astype(np.float64)
    return np.where(present, n - rank, (n - m + 1) / 2)


@dataclass(frozen=True)
class _Judged:
    """The training qrels on the grid: per candidate, relevant (relevance 1 or more) and in a
    training topic (a topic the qrels have); per topic, its relevant documents in the qrels."""

    relevant: np.ndarray
    training: np.ndarray  # per topic: a training topic
    relevant_count: np.ndarray  # per topic

    @property
    def topics(self) -> int:
        return int(self.training.sum())


def _relevant(grid: _Grid, qrels: pa.Table) -> _Judged:
    missing = {"topic", "doc", "relevance"} - set(qrels.column_names)
    if missing:
        raise InvalidParameterError(f"The training qrels lack the column {sorted(missing)[0]}.")
    judged = pd.DataFrame(
        {
            "topic": qrels["topic"].cast(pa.string()).to_numpy(zero_copy_only=False),
            "doc": qrels["doc"].cast(pa.string()).to_numpy(zero_copy_only=False),
            "relevance": qrels["relevance"].cast(pa.float64()).to_numpy(zero_copy_only=False),
        }
    )
    training = np.isin(grid.topics, judged["topic"].unique())
    if not training.any():
        raise InvalidParameterError(
            "The training qrels judge none of the runs' topics; train on judgments of the runs' topics."
        )
    relevant = judged[judged["relevance"] >= 1].drop_duplicates(["topic", "doc"])
    counts = relevant.groupby("topic").size()
    relevant_count = counts.reindex(grid.topics, fill_value=0).to_numpy(np.int64)
    wanted = pd.MultiIndex.from_arrays([relevant["topic"], relevant["doc"]])
    mine = pd.MultiIndex.from_arrays([grid.topics[grid.topic_of].astype(str), grid.docs.astype(str)])
    return _Judged(np.asarray(mine.isin(wanted)), training, relevant_count)


def _training_positions(grid: _Grid, judged: _Judged, run: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A run's documents in the training topics, by topic then rank: their topic codes, ranks
    (from 0) and hits (1.0 relevant, 0.0 not)."""
    rows = np.flatnonzero(judged.training[grid.topic_of] & (grid.ranks[:, run] >= 0))
    topic, rank = grid.topic_of[rows], grid.ranks[rows, run]
    order = np.lexsort((rank, topic))
    rows = rows[order]
    return topic[order], rank[order], judged.relevant[rows].astype(np.float64)


def _segment_means(
    topic: np.ndarray, segment: np.ndarray, hits: np.ndarray, size: np.ndarray, n: int, per: int = 1
) -> np.ndarray:
    """Per segment, its topics' precisions (hits / ``size``) added up topic by topic (ranx's
    order of sums), each divided by ``per`` first: ``topic`` and ``segment`` per document,
    sorted by topic."""
    key = topic.astype(np.int64) * n + segment
    keys, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    found = np.bincount(inverse, weights=hits)
    return np.bincount(keys % n, weights=found / size[first] / per, minlength=n)


def _train(grid: _Grid, name: str, params: Mapping[str, Any], judged: _Judged) -> Trained:
    """What ``name`` learns from each run's hits in the training topics (ranx's *_train)."""
    topics = judged.topics
    learnt: list[tuple[float, ...]] = []
    for j in range(grid.scores.shape[1]):  # a step per run
        topic, rank, hits = _training_positions(grid, judged, j)
        if name in ("posfuse", "slidefuse"):
            # per position, the share of the training topics retrieving a document there whose one is relevant
            length = int(rank.max()) + 1
            values = np.bincount(rank, weights=hits, minlength=length) / np.bincount(rank, minlength=length)
        elif name == "probfuse":
            segments = int(params["n_segments"])
            n = grid.retrieved[j, topic]
            width = -(-n // segments)  # each topic of the run cut into n_segments of ceil(n / n_segments)
            segment = rank // width
            size = np.minimum(width, n - segment * width)
            values = _segment_means(topic, segment, hits, size.astype(np.float64), segments) / topics
        elif name == "segfuse":
            kept = rank < _SEGFUSE_BOUNDS[-1]
            segment = np.searchsorted(_SEGFUSE_BOUNDS, rank[kept], side="right") - 1
            size = np.diff(_SEGFUSE_BOUNDS)[segment].astype(np.float64)
            values = _segment_means(topic[kept], segment, hits[kept], size, len(_SEGFUSE_BOUNDS) - 1) / topics
        elif name == "bayesfuse":
            kept = rank < _BAYES_CUTS[-1]
            segment = np.searchsorted(_BAYES_CUTS, rank[kept], side="right") - 1
            size = np.diff(_BAYES_CUTS)[segment].astype(np.float64)
            precision = _segment_means(topic[kept], segment, hits[kept], size, len(_BAYES_CUTS) - 1, per=topics)
            precision = np.where(precision == 0, 0.001, precision)
            against = 1 - precision
            values = np.log(precision / np.where(against == 0, against + 0.001, against))
        else:  # mapfuse: the run's MAP over the training topics (ranx's: a topic without relevant documents scores 0)
            starts = np.r_[0, np.flatnonzero(np.diff(topic)) + 1]
            found = np.cumsum(hits)
            found = found - np.repeat(np.r_[0.0, found[starts[1:] - 1]], np.diff(np.r_[starts, len(topic)]))
            precision = np.bincount(
                topic, weights=np.where(hits > 0, found / (rank + 1), 0.0), minlength=len(grid.topics)
            )
            relevant = judged.relevant_count
            ap = np.divide(precision, relevant, out=np.zeros(len(relevant)), where=relevant > 0)
            values = np.array([ap[judged.training].mean()])
        learnt.append(tuple(float(v) for v in values))
    return Trained(tuple(learnt), topics)


def _fuse_trained(grid: _Grid, name: str, params: Mapping[str, Any], trained: Trained) -> np.ndarray:
    """Each candidate's fused score by a trained method: each run's documents scored by their
    position (from 0, in the run's order) and what was learnt, then added up (bayesfuse: a
    document a run lacks counts its log-odds of 0.001)."""
    present = grid.present()
    columns = np.zeros(grid.scores.shape)
    for j, learnt in enumerate(trained.values):  # a step per run
        values = np.asarray(learnt, np.float64)
        rank = np.where(present[:, j], grid.ranks[:, j], 0)
        n = grid.retrieved[j, grid.topic_of]
        if name == "probfuse":
            segment = rank // -(-n // len(values))
            column = values[segment] / (segment + 1)
        elif name == "segfuse":
            segment = np.searchsorted(_SEGFUSE_BOUNDS, rank, side="right") - 1
            padded = np.r_[values, 0.0]  # past the last segment: probability 0
            column = padded[np.minimum(segment, len(values))] * (np.nan_to_num(grid.scores[:, j]) + 1)
        elif name == "posfuse":
            column = np.where(rank < len(values), values[np.minimum(rank, len(values) - 1)], 0.0)
        elif name == "slidefuse":
            w = int(params["w"])
            low, high = np.maximum(rank - w, 0), np.minimum(rank + w, n - 1)
            padded = np.r_[values, 0.0]
            total = np.zeros(len(rank))
            for offset in range(-w, w + 1):  # a step per position of the window, added in ranx's order
                at = rank + offset
                inside = (at >= low) & (at <= high)
                total = total + np.where(inside, padded[np.clip(at, 0, len(values))], 0.0)
            column = total / (high - low + 1)
        elif name == "bayesfuse":
            deep = present[:, j] & (rank >= _BAYES_CUTS[-1])
            if deep.any():
                topic = grid.topics[grid.topic_of[np.argmax(deep)]]
                raise InvalidParameterError(
                    f"bayesfuse learns log-odds for the first {_BAYES_CUTS[-1]} positions; {grid.names[j]} has more "
                    f"documents in topic {topic}; fuse runs cut to {_BAYES_CUTS[-1]} documents per topic."
                )
            odds = np.repeat(values, np.diff(_BAYES_CUTS))
            columns[:, j] = np.where(present[:, j], odds[np.minimum(rank, len(odds) - 1)], _BAYES_ABSENT)
            continue
        else:  # mapfuse
            column = values[0] / (rank + 1)
        columns[:, j] = np.where(present[:, j], column, 0.0)
    return _in_turn(columns)


def _condorcet(grid: _Grid, weights: Sequence[float]) -> tuple[np.ndarray, list[str]]:
    """Condorcet fusion (ranx's): a topic's candidates sorted by the majority of the runs (a run
    votes for x over y when it ranks x above y, or has x but not y), x first when x's votes are
    at least y's; the i-th of n scores n - i. The majority is not a total order (votes tie, and
    cycle), so the answer is the one a comparison sort gives: Python's, as in ranx, from the
    candidates in docno order (ranx starts from a set's order, which changes with Python's
    string hashing). Also the topics where the majority ties or cycles: there ranx's answer
    changes from one process to the next, ours is the same every time."""
    out = np.empty(len(grid.docs))
    undecided: list[str] = []
    starts = np.r_[0, np.cumsum(grid.candidates)]
    w = [float(x) for x in weights]
    ranks = np.where(grid.ranks < 0, _ABSENT_RANK, grid.ranks)
    for t, topic in enumerate(grid.topics):  # a step per topic; the sort is the comparisons'
        lo, hi = int(starts[t]), int(starts[t + 1])
        n = hi - lo
        if n > CONDORCET_MAX_CANDIDATES:
            raise InvalidParameterError(
                f"Condorcet fusion compares every pair of a topic's documents: topic {topic} has {n} documents "
                f"in the runs, more than {CONDORCET_MAX_CANDIDATES}; fuse runs cut to fewer documents per topic."
            )
        block = ranks[lo:hi]
        x_votes = np.zeros((n, n))
        y_votes = np.zeros((n, n))
        for i in range(block.shape[1]):  # a step per run
            ahead = block[:, i][:, None] < block[:, i][None, :]
            x_votes = x_votes + np.where(ahead, w[i], 0.0)
            y_votes = y_votes + np.where(ahead, 0.0, w[i])
        first = (x_votes >= y_votes).tobytes()

        def compare(x: int, y: int, first: bytes = first, n: int = n) -> int:
            return -1 if first[x * n + y] else 1

        # the candidates in docno order: the grid's rows of a topic are sorted by docno
        order = np.asarray(sorted(range(n), key=functools.cmp_to_key(compare)), np.int64)
        out[lo + order] = n - np.arange(n, dtype=np.float64)
        # the majority is a strict total order when every document beats every one after it,
        # and none the one before it; then every comparison sort, ranx's included, agrees
        beats = (x_votes > y_votes)[np.ix_(order, order)]
        if not (np.triu(beats, 1).sum() == n * (n - 1) // 2 and not np.tril(beats, -1).any()):
            undecided.append(str(topic))
    return out, undecided


def _ranked(grid: _Grid, scores: np.ndarray, depth: int | None) -> pa.Table:
    """The fused run: each topic's candidates by fused score descending, then docno descending
    (grid rows of a topic are in docno order), cut at ``depth``."""
    rows = np.arange(len(scores))
    order = np.lexsort((-rows, -scores, grid.topic_of))
    topic_sorted = grid.topic_of[order]
    starts = np.searchsorted(topic_sorted, np.arange(len(grid.topics)))
    rank = np.arange(len(order)) - starts[topic_sorted]
    keep = rank < depth if depth is not None else np.ones(len(order), bool)
    chosen = order[keep]
    return pa.table(
        {
            "topic": pa.array(grid.topics[grid.topic_of[chosen]].astype(str).tolist(), pa.string()),
            "doc": pa.array(grid.docs[chosen].tolist(), pa.string()),
            "rank": pa.array(rank[keep] + 1, pa.int64()),
            "score": pa.array(scores[chosen], pa.float64()),
        }
    )
