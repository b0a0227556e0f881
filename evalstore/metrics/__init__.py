"""Measures: the registry, the one-sort preparation and the vectorised kernels.

Entry points: :func:`parse_measure`, :func:`list_measures`, :func:`compute`, :func:`evaluate`.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, overload

import numpy as np
import pyarrow as pa

from evalstore import _kernels as pc
from evalstore.errors import EvaluationError, InvalidParameterError, NoRowsError, Remedy
from evalstore.io import formats, ir_measures_compat
from evalstore.io.formats import (
    ParsedFile,
    duplicate_docno_error,
    has_duplicate_docs,
    read_qrels,
    read_run,
)
from evalstore.io.hashing import doc_hashes
from evalstore.metrics import ranking as _ranking  # noqa: F401  (registers; the others: registry.LAZY_FAMILIES)
from evalstore.metrics.preparation import PrepareOptions, Ranking, attach_known, prepare
from evalstore.metrics.ranking import MIN_GEO_MEAN
from evalstore.metrics.registry import (
    JUDGMENTS_NAMED,
    PREDICTION_REGISTRY,
    REGISTRY,
    TREC_GROUPS,
    Family,
    Measure,
    mlflow_key,
    parse,
    prediction_family_in,
)
from evalstore.metrics.stacked import STACK_CELLS, compute_stacked
from evalstore.metrics.trec_names import expand_trec_spec, split_measure_names, trec_list
from evalstore.trec_order import encoded_ranks

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "EvaluationResult",
    "Measure",
    "PrepareOptions",
    "Ranking",
    "compute",
    "evaluate",
    "headline_measures",
    "higher_is_better",
    "list_measures",
    "mlflow_key",
    "parse_measure",
    "prediction_measures",
    "prepare",
    "resolve_measures",
    "split_measure_names",
    "summarise",
]

DEFAULT_MEASURES = ("AP", "nDCG@10", "P@10", "R@1000", "RR", "Rprec", "Bpref", "nDCG", "Judged@10")


def parse_measure(text: str | Measure) -> Measure:
    """A measure from any accepted spelling (canonical, ir_measures-style or trec_eval)."""
    return text if isinstance(text, Measure) else parse(text)


def list_measures() -> list[Family]:
    """The ranking families (the names :func:`parse_measure` reads), by name."""
    return [REGISTRY[name] for name in sorted(REGISTRY, key=str.lower)]


def prediction_registry() -> dict[str, Family]:
    """The classification measures, registered when first asked for: importing their module
    costs ~10 ms that `trec-eval` on an ordinary run need not spend."""
    from evalstore.metrics import answers, classification  # noqa: F401  (register the families)

    return PREDICTION_REGISTRY


def prediction_family(stored: str) -> Family | None:
    """The family of a stored classification value: ``f1_macro``, ``f1_macro_beta2``,
    ``precision.cat`` (one class's), ``threshold_youden_value``."""
    return prediction_family_in(prediction_registry(), stored)


def prediction_measures(kind: str) -> list[Family]:
    """The classifier's, the clustering's or the answers' measures, in the suite's order."""
    return [family for family in prediction_registry().values() if family.kind == kind]


def headline_measures(kind: str) -> list[str]:
    """What summaries of a kind's results show by default (``evaluate --labels --wait``, a task's
    leaderboard, MLflow's per-topic figure): the families registered with ``headline``, in its
    order, a ranking measure at its ``headline_cutoff``."""
    registry = REGISTRY if kind == "ranking" else prediction_registry()
    chosen = sorted((f for f in registry.values() if f.kind == kind and f.headline), key=lambda f: int(f.headline))
    return [f.name if f.headline_cutoff is None else f"{f.name}@{f.headline_cutoff}" for f in chosen]


def higher_is_better(name: str) -> bool:
    """Whether a larger value of the stored measure ``name`` is better (leaderboards sort by it):
    a classification value (``error_rate``, ``fallout.cat``) or any spelling of a ranking measure."""
    family = prediction_family(name)
    return family.higher_is_better if family is not None else parse_measure(name).spec.higher_is_better


def resolve_measures(names: Iterable[str | Measure]) -> list[Measure]:
    """Measures from names; trec_eval groups (``all_trec``, ``official``, ``set``) and trec_eval
    lists (``P_5,10``, ``ndcg_cut.5,10``) expand."""
    resolved: dict[Measure, None] = {}  # insertion-ordered and deduplicated (all_trec alone is ~100)
    for name in names:
        if isinstance(name, str) and name in TREC_GROUPS:
            resolved.update((measure, None) for _, measure in expand_trec_spec(name) if measure is not None)
            continue
        listed = trec_list(name) if isinstance(name, str) else None
        if listed is not None:  # P_5,10: ir_measures' parse_trec_measure reads trec_eval lists
            resolved.update((measure, None) for measure in listed)
            continue
        resolved[parse_measure(name)] = None
    return list(resolved)


# Rankings larger than this many cells (topics x depth) are evaluated in batches of topics, so
# that the kernels' (n, depth) intermediates stay near this size (40 MB as float64)
BATCH_CELLS = 5_000_000
THREADED_CELLS = 1_000_000  # rankings at least this large are evaluated on several threads


def compute(
    rk: Ranking,
    measures: Sequence[Measure],
    *,
    relevance_level: int = 1,
    collection_size: int = 0,
    threads: int | None = None,
    batch_cells: int = BATCH_CELLS,
) -> dict[Measure, np.ndarray]:
    """Per-topic values of each measure, as arrays aligned with ``rk.topics``.

    Families run on ``threads`` threads (default: the CPU count, at most 4, for a ranking of at least
    :data:`THREADED_CELLS` cells; one for a smaller one): numpy releases the GIL
    inside its loops, so independent kernels overlap. The matrices every kernel shares are built
    first, so threads do not race to build them twice. A ranking of more than ``batch_cells``
    cells is evaluated in batches of topics (:meth:`Ranking.topic_rows`).
    """
    other = next((m for m in measures if m.spec.judgments != "relevance"), None)
    if other is not None:
        raise InvalidParameterError(
            f"{other} is computed from {JUDGMENTS_NAMED[other.spec.judgments]} judgments, not from relevance qrels.",
            remedy=Remedy(cli=f"Evaluate it against qrels imported with --kind {other.spec.judgments}."),
        )
    if rk.n > 1 and rk.n * max(rk.depth, 1) > batch_cells:
        step = max(1, batch_cells // max(rk.depth, 1))
        batches = [
            compute(
                rk.topic_rows(start, min(start + step, rk.n)),
                measures,
                relevance_level=relevance_level,
                collection_size=collection_size,
                threads=threads,
                batch_cells=batch_cells,
            )
            for start in range(0, rk.n, step)
        ]
        return {m: np.concatenate([batch[m] for batch in batches]) for m in measures}

    def one(measure: Measure) -> np.ndarray:
        kwargs = measure.kwargs(relevance_level)
        if measure.family == "Utility":
            kwargs["collection_size"] = kwargs.get("collection_size") or collection_size
        return measure.spec.kernel(rk, **kwargs)

    # threads pay off on large rankings only: on robust03's (100 topics x 1,000) all_trec took
    # ~22 ms on two threads and ~15 ms on one; on 7,000 x 1,000, 0.22 s against 0.29 s
    default = min(os.cpu_count() or 1, 4) if rk.n * rk.depth >= THREADED_CELLS else 1
    workers = threads if threads is not None else default
    if workers <= 1 or len(measures) < 4:
        return {measure: one(measure) for measure in measures}
    levels = {m.kwargs(relevance_level).get("rel") for m in measures}
    for level in sorted(level for level in levels if level is not None and level < 0):
        # at a negative level the kernels share this matrix (documents outside the qrels count);
        # at the others they read the judged entries
        rk.cum_rel(level)  # build it once, before the threads start
    # the heaviest families first, so the two threads finish together
    order = sorted(measures, key=lambda m: m.family not in _HEAVY)
    from concurrent.futures import ThreadPoolExecutor  # here: it imports logging (~4 ms of start-up)

    with ThreadPoolExecutor(max_workers=workers) as pool:
        results = dict(zip(order, pool.map(one, order), strict=True))
    return {measure: results[measure] for measure in measures}


_HEAVY = {"infAP", "G", "Bpref", "nDCG", "IPrec", "RnDCG", "nDCG_rel", "binG", "RBP"}


def summarise(measure: Measure, per_topic: np.ndarray, rk: Ranking | None = None) -> float | None:
    """The ``all`` value: mean, sum or geometric mean (floored at 1e-5) over topics, or the
    measure's own rule when ``rk`` holds every qrels topic (-c) and it has one."""
    how = measure.spec.summary
    if how == "none":
        return None
    if rk is not None and rk.complete and measure.spec.complete_summary is not None:
        return measure.spec.complete_summary(rk)
    if how == "defined_mean":  # a topic where the measure is undefined (NaN) has no value to average
        per_topic = per_topic[~np.isnan(per_topic)]
    if len(per_topic) == 0:
        return 0.0
    # topic by topic, left to right, as trec_eval accumulates (numpy's pairwise sum can round the
    # 4th decimal differently; seen on robust03's SABIR03BASE)
    if how == "sum":
        return float(np.cumsum(per_topic)[-1])
    if how == "gmean":
        return float(np.exp(np.cumsum(np.log(np.maximum(per_topic, MIN_GEO_MEAN)))[-1] / len(per_topic)))
    return float(np.cumsum(per_topic)[-1] / len(per_topic))


class MeasureValues(dict[str, Any]):
    """Values keyed by canonical measure name that also answer to any accepted spelling:
    ``aggregates["map"]`` and ``aggregates["P_10"]`` find ``AP`` and ``P@10``."""

    def __missing__(self, key: object) -> Any:
        if not isinstance(key, str):
            if type(key).__module__.startswith("ir_measures"):
                return self[str(key)]  # an ir_measures measure object: its string form
            raise KeyError(key)
        try:
            canonical = str(parse_measure(key))
        except InvalidParameterError:
            raise KeyError(key) from None
        if canonical == key or canonical not in self:
            raise KeyError(key)
        return self[canonical]

    def __contains__(self, key: object) -> bool:
        if dict.__contains__(self, key):
            return True
        if not isinstance(key, str) and type(key).__module__.startswith("ir_measures"):
            key = str(key)  # an ir_measures measure object
        try:
            return isinstance(key, str) and dict.__contains__(self, str(parse_measure(key)))
        except InvalidParameterError:
            return False

    def get(self, key: str, default: Any = None) -> Any:
        return self[key] if key in self else default


@dataclass
class EvaluationResult:
    """Per-query values (long format) and aggregates of one run against one qrels set.
    ``aggregates`` is keyed by canonical name and answers to any spelling of it."""

    aggregates: MeasureValues
    topics: list[str]
    missing_topics: list[str] = field(default_factory=list)
    dropped_run_topics: list[str] = field(default_factory=list)
    options: dict[str, Any] = field(default_factory=dict)
    # per measure (canonical name), its value for each of ``topics``: the frame is built from these
    values: dict[str, np.ndarray] = field(default_factory=dict, repr=False)
    _frame: pd.DataFrame | None = field(default=None, repr=False, compare=False)

    @property
    def per_query(self) -> pd.DataFrame:
        """Columns query_id, measure, value (text_value for string measures, as the store names
        them), one row per (measure, topic); built when first read, as pandas takes ~0.2 s to
        import and a caller after the aggregates alone never needs it."""
        if self._frame is None:
            self._frame = _per_query_frame(self.topics, self.values)
        return self._frame


def _per_query_frame(topics: list[str], values: dict[str, np.ndarray]) -> pd.DataFrame:
    import pandas as pd

    n = len(topics)
    if not values or not n:
        return pd.DataFrame(columns=["query_id", "measure", "value", "text_value"])
    # one frame from stacked columns: a frame per measure and a concat cost ~30 ms a run for
    # all_trec's hundred measures, more than computing them
    texts = np.full(n * len(values), None, dtype=object)
    numbers = np.full(n * len(values), np.nan)
    for i, array in enumerate(values.values()):
        block = slice(i * n, (i + 1) * n)
        if array.dtype == object:  # a string measure (RelString)
            texts[block] = array
        else:
            numbers[block] = array
    return pd.DataFrame(
        {
            "query_id": np.tile(np.array(topics, dtype=object), len(values)),
            "measure": np.repeat(np.array(list(values), dtype=object), n),
            "value": numbers,
            "text_value": texts,
        }
    )


# evaluate's forms: one run gives one result; a list of runs a list of results, a mapping of names
# to runs a dict of results by the same names (_evaluate_runs, at the end of this module)
if TYPE_CHECKING:
    from typing import TypeAlias

    _Qrels: TypeAlias = str | Path | pd.DataFrame | Mapping[str, Mapping[str, int]] | pa.Table
    _Run: TypeAlias = str | Path | pd.DataFrame | Mapping[str, Mapping[str, float]] | pa.Table


@overload
def evaluate(
    qrels: _Qrels,
    run: _Run,
    measures: Iterable[str | Measure] = ...,
    *,
    per_query: bool = ...,
    relevance_level: int = ...,
    max_docs: int | None = ...,
    judged_only: bool = ...,
    missing_topics: str = ...,
    known: _Qrels | None = ...,
    as_ir_measures: bool = ...,
) -> EvaluationResult: ...
@overload
def evaluate(
    qrels: _Qrels,
    run: list[_Run] | tuple[_Run, ...],
    measures: Iterable[str | Measure] = ...,
    *,
    per_query: bool = ...,
    relevance_level: int = ...,
    max_docs: int | None = ...,
    judged_only: bool = ...,
    missing_topics: str = ...,
    known: _Qrels | None = ...,
) -> list[EvaluationResult]: ...
@overload
def evaluate(
    qrels: _Qrels,
    run: Mapping[str, str | Path | pd.DataFrame | pa.Table | Mapping[str, Mapping[str, float]]],
    measures: Iterable[str | Measure] = ...,
    *,
    per_query: bool = ...,
    relevance_level: int = ...,
    max_docs: int | None = ...,
    judged_only: bool = ...,
    missing_topics: str = ...,
    known: _Qrels | None = ...,
) -> dict[str, EvaluationResult]: ...


def evaluate(
    qrels: str | Path | pd.DataFrame | Mapping[str, Mapping[str, int]] | pa.Table,
    run: Any,
    measures: Iterable[str | Measure] = DEFAULT_MEASURES,
    *,
    per_query: bool = True,
    relevance_level: int = 1,
    max_docs: int | None = None,
    judged_only: bool = False,
    missing_topics: str = "zero",
    known: str | Path | pd.DataFrame | Mapping[str, Mapping[str, int]] | pa.Table | None = None,
    as_ir_measures: bool = False,
) -> Any:
    """Evaluate a run against qrels, as trec_eval 10.0 would (``trec_eval -c`` by default).

    Parameters
    ----------
    qrels
        Relevance judgments: a file path (TREC ``qid iter docno rel``, CSV, TSV or Parquet), a
        pandas DataFrame with columns query_id, doc_id, relevance, a pyarrow Table with columns
        topic, doc, relevance, or a dict ``{query_id: {doc_id: relevance}}``.
    run
        The ranking, or several: a list of runs, or a mapping of names to runs, evaluated against
        the qrels read once (a list or dict of results, in the same order or by the same names,
        each the one this function returns for that run alone). One ranking: a file path (TREC
        ``qid Q0 docno rank score tag``, CSV, TSV or Parquet), a
        DataFrame with query_id, doc_id, score, a Table with topic, doc, score, or a dict
        ``{query_id: {doc_id: score}}``. Documents are ranked by score descending, then doc_id
        descending (trec_eval's order); a rank column is never read.
    measures
        Measure names in any accepted spelling: canonical (``AP``, ``nDCG@10``,
        ``P(rel=2)@5``), ir_measures' (``map``, ``R@1000``) or trec_eval's (``P_10``,
        ``ndcg_cut_10``), and trec_eval's groups (``all_trec``, ``official``). ``evalstore
        measures`` lists them. ir_measures' measure objects (``ir_measures.nDCG@10``,
        ``AP(rel=2)``) are read by their string forms; qrels and runs may also be iterables of its
        ``Qrel``/``ScoredDoc`` namedtuples (evalstore.io.ir_measures_compat).
    per_query
        Whether to keep the per-query values (``per_query``, a frame built when first read).
    relevance_level
        Judged at least this is relevant (trec_eval ``-l``).
    max_docs
        Keep only the top ``max_docs`` documents of each query (trec_eval ``-M``).
    judged_only
        Drop unjudged documents before scoring (trec_eval ``-J``).
    missing_topics
        ``"zero"``: a qrels query absent from the run scores 0 (trec_eval ``-c``, ir_measures);
        ``"skip"``: averages are over the queries the run has.
    known
        The relevant documents the user already knew (qrels, in any form ``qrels`` takes), for the
        user-oriented measures Coverage, Novelty, RelativeRecall and RecallEffort.
    as_ir_measures
        ``per_query`` in ir_measures' shape: columns query_id, measure, value, each measure named
        as it was passed (an object by its string form).

    Returns
    -------
    EvaluationResult
        ``aggregates`` (the ``all`` value of each measure, by canonical name, answering to any
        spelling), ``per_query`` (long frame: query_id, measure, value, text_value), the
        ``topics`` evaluated, and the qrels topics the run lacks (``missing_topics``). For several
        runs, a list of them (a list or tuple of runs) or a dict by name (a mapping of runs).

    Raises
    ------
    InvalidParameterError
        An unknown measure or parameter, or a bad ``missing_topics``.
    InputFormatError
        A file that cannot be read, with ``path:line`` and what is wrong.
    EvaluationError
        The run and the qrels share no query.

    Examples
    --------
    >>> import evalstore
    >>> qrels = {"q1": {"d1": 1, "d2": 0, "d3": 2}, "q2": {"d4": 1}}
    >>> run = {"q1": {"d1": 0.9, "d2": 0.8, "d3": 0.1}, "q2": {"d5": 1.0, "d4": 0.5}}
    >>> result = evalstore.evaluate(qrels, run, ["AP", "nDCG@10", "P@2"])
    >>> {name: round(value, 4) for name, value in result.aggregates.items()}
    {'AP': 0.6667, 'nDCG@10': 0.6956, 'P@2': 0.5}
    >>> round(result.aggregates["map"], 4)  # trec_eval's name for AP
    0.6667
    >>> result.per_query.query("measure == 'AP'")[["query_id", "value"]].round(4).to_dict("records")
    [{'query_id': 'q1', 'value': 0.8333}, {'query_id': 'q2', 'value': 0.5}]
    """
    if _several_runs(run):  # its own path (below): the qrels read once, the runs evaluated together
        if as_ir_measures:
            raise InvalidParameterError("as_ir_measures=True takes one run; evaluate several runs one at a time.")
        return _evaluate_several(
            qrels,
            run,
            measures,
            per_query=per_query,
            relevance_level=relevance_level,
            max_docs=max_docs,
            judged_only=judged_only,
            missing_topics=missing_topics,
            known=known,
        )
    qrels, run, measures = ir_measures_compat.adapt(qrels, run, measures)  # ir_measures' objects and shapes
    if missing_topics not in ("zero", "skip"):
        raise InvalidParameterError(
            f"The 'missing_topics' parameter of evaluate must be 'zero' or 'skip'. Got {missing_topics!r} instead."
        )
    if any(parse_measure(m).spec.judgments == "subtopics" for m in _named(measures)):
        return _evaluate_subtopics(
            qrels,
            run,
            resolve_measures(measures),
            max_docs=max_docs,
            judged_only=judged_only,
            missing_topics=missing_topics,
        )
    options = PrepareOptions(max_docs=max_docs, judged_only=judged_only, complete=missing_topics == "zero")
    rk = _joined(qrels, run, options, known=known, judged_only=judged_only)
    wanted = resolve_measures(measures)
    values = compute(rk, wanted, relevance_level=relevance_level)
    aggregates = MeasureValues({str(m): summarise(m, v, rk) for m, v in values.items()})
    result = EvaluationResult(
        aggregates=aggregates,
        topics=rk.topics,
        missing_topics=rk.missing_topics,
        dropped_run_topics=rk.dropped_run_topics,
        options={
            "relevance_level": relevance_level,
            "max_docs": max_docs,
            "judged_only": judged_only,
            "missing_topics": missing_topics,
            "tie_rule": "score desc, docno desc",
        },
        values={str(m): v for m, v in values.items()} if per_query else {},
    )
    if as_ir_measures:  # per-query values as ir_measures names them: query_id, measure (as spelled), value
        spelled = {str(parse_measure(m)): str(m) for m in _named(measures)}
        result._frame = ir_measures_compat.per_query_frame(result.per_query, spelled)
    return result


def _evaluate_several(
    qrels: Any,
    run: Any,
    measures: Iterable[str | Measure],
    *,
    per_query: bool,
    relevance_level: int,
    max_docs: int | None,
    judged_only: bool,
    missing_topics: str,
    known: Any,
) -> Any:
    """:func:`evaluate` of several runs (a list or a mapping of them): the qrels read once."""
    qrels, measures = ir_measures_compat.as_table(qrels, "qrels"), ir_measures_compat.measure_names(measures)
    runs = (
        {name: ir_measures_compat.as_table(r, "run") for name, r in run.items()}
        if isinstance(run, Mapping)
        else [ir_measures_compat.as_table(r, "run") for r in run]
    )
    if any(parse_measure(m).spec.judgments == "subtopics" for m in _named(measures)):
        wanted = resolve_measures(measures)

        def one(each: Any) -> EvaluationResult:
            return _evaluate_subtopics(
                qrels, each, wanted, max_docs=max_docs, judged_only=judged_only, missing_topics=missing_topics
            )

        return {name: one(r) for name, r in runs.items()} if isinstance(runs, Mapping) else [one(r) for r in runs]
    return _evaluate_runs(
        qrels,
        runs,
        measures,
        per_query=per_query,
        relevance_level=relevance_level,
        max_docs=max_docs,
        judged_only=judged_only,
        missing_topics=missing_topics,
        known=known,
    )


def _joined(qrels: Any, run: Any, options: PrepareOptions, *, known: Any, judged_only: bool) -> Ranking:
    """The run joined with the qrels (and with the ``known`` documents), as :func:`evaluate` scores it."""
    qrels_table = _as_table(qrels, "qrels")
    if isinstance(run, (str, Path)):
        rk, parsed = prepare_run_file(qrels_table, run, options)
        run_table = parsed.table
    else:
        run_table = _as_table(run, "run")
        rk = prepare(qrels_table, run_table, options)
        if has_duplicate_docs(run_table):  # refused where trec_eval refuses it, as for a file (counted_duplicate)
            twice = counted_duplicate(qrels_table, run_table, options)
            if twice is not None:
                raise formats.duplicate_row_error(f"run {type(run).__name__}", run_table, *twice)
    if rk.n == 0:
        raise EvaluationError("The run and the qrels share no topic; check that the topic ids match.")
    if known is not None:
        if judged_only:
            raise InvalidParameterError(
                "-J closes up the ranking by the main qrels' judgments; the user-oriented "
                "measures (known) need the ranking whole."
            )
        attach_known(rk, prepare(_as_table(known, "qrels"), run_table, options))
    return rk


def _named(measures: Iterable[str | Measure]) -> list[str | Measure]:
    """The measures named one by one (trec_eval's groups and lists are of relevance measures)."""
    return [m for m in measures if not (isinstance(m, str) and (m in TREC_GROUPS or trec_list(m) is not None))]


def _evaluate_subtopics(
    qrels: Any, run: Any, wanted: list[Measure], *, max_docs: int | None, judged_only: bool, missing_topics: str
) -> EvaluationResult:
    """``evaluate`` of the diversity measures (ndeval's, :mod:`evalstore.metrics.diversity`) on
    subtopic qrels (``topic subtopic docno judgment``): per judged run topic ndeval's values, and
    with ``missing_topics="zero"`` a 0 for each qrels topic the run lacks (ndeval -c)."""
    other = next((m for m in wanted if m.spec.judgments != "subtopics"), None)
    if other is not None:
        raise InvalidParameterError(
            f"{other} is computed from {JUDGMENTS_NAMED[other.spec.judgments]} judgments and the diversity measures "
            "from subtopic judgments: evaluate them in two calls."
        )
    if judged_only:
        raise InvalidParameterError(
            "The diversity measures have no judged-only mode (ndeval has none); evaluate them without it."
        )
    qrels_table = _subtopic_table(qrels)
    run_table = _as_table(run, "run")
    from evalstore.metrics.diversity import diversity_values

    topics, values = diversity_values(qrels_table, run_table, wanted, max_docs=max_docs)
    qrels_topics = sorted({int(t) for t in pc.unique(qrels_table["topic"]).to_pylist()})
    evaluated = set(topics)
    missing = [str(t) for t in qrels_topics if str(t) not in evaluated]
    if not topics and (missing_topics == "skip" or not missing):
        raise EvaluationError("The run and the qrels share no topic; check that the topic ids match.")
    if missing_topics == "zero" and missing:
        order = np.argsort([int(t) for t in topics + missing], kind="stable")
        topics = [(topics + missing)[i] for i in order]
        values = {m: np.concatenate([v, np.zeros(len(missing))])[order] for m, v in values.items()}
    return EvaluationResult(
        aggregates=MeasureValues({str(m): summarise(m, v) for m, v in values.items()}),
        topics=topics,
        missing_topics=missing,
        options={"max_docs": max_docs, "missing_topics": missing_topics, "tie_rule": "score desc, docno desc"},
        values={str(m): v for m, v in values.items()},
    )


def _subtopic_table(qrels: Any) -> pa.Table:
    """Subtopic qrels as ndeval reads them: a file, or a table with the subtopic in ``iteration``
    (or ``subtopic``) beside topic, doc and relevance."""
    if isinstance(qrels, (str, Path)):
        return formats.read_subtopic_qrels(qrels).table
    if isinstance(qrels, pa.Table):
        table = qrels.rename_columns(["iteration" if c == "subtopic" else c for c in qrels.column_names])
        if {"topic", "iteration", "doc", "relevance"} <= set(table.column_names):
            return table.select(["topic", "iteration", "doc", "relevance"])
    raise InvalidParameterError(
        "The diversity measures need subtopic qrels: a file of 'topic subtopic docno judgment' lines, or a table "
        "with columns topic, subtopic, doc and relevance."
    )


# a run this long checks for duplicate docnos on a thread of its own while it is ranked; an
# ordinary one in turn (robust03's 100k rows: ~6 ms, and a thread beside the ranking made the two
# contend: 60-130 ms together against ~45 ms in turn)
PARALLEL_CHECK_ROWS = 1_000_000


def read_run_to_evaluate(path: str | Path) -> ParsedFile:
    """A run file read to be evaluated (nothing stored: no content hash), its duplicate-docno check
    left to :func:`prepare_run_file`. A file of comments or blank lines alone is a run with no
    results (every qrels topic scores 0 under -c, as in trec_eval); an empty file (0 bytes) is
    refused, as trec_eval cannot read it."""
    try:
        return read_run(path, strict=False, content_hash=False, check_duplicates=False, coded_topics=True)
    except NoRowsError as error:
        if error.zero_bytes:
            raise NoRowsError(
                error.path,
                "the file is empty (0 bytes), which trec_eval cannot read either; a run with no results at all "
                "is a file of comment lines (# ...), or no rows in memory",
                zero_bytes=True,
            ) from None
        return ParsedFile(EMPTY_RUN, "", None)


# A run with no rows, made of nulls, not pa.array([]): pyarrow imports pandas to look at the first
# Python objects it is given, which at this module's import loaded pandas into every command, most
# of which build no array
EMPTY_RUN = pa.Table.from_arrays(
    [pa.nulls(0, pa.string()), pa.nulls(0, pa.string()), pa.nulls(0, pa.float64())], names=["topic", "doc", "score"]
)


def prepare_run_file(
    qrels: pa.Table, path: str | Path, options: PrepareOptions, run: ParsedFile | None = None
) -> tuple[Ranking, ParsedFile]:
    """Read a run file to evaluate it (:func:`read_run_to_evaluate`, or ``run``, what it read
    already) and rank it against ``qrels``. trec_eval refuses a docno twice in a topic: that check
    runs beside the ranking for a large run; if it finds one, the file is read again the precise
    way, which raises with the line."""
    run = read_run_to_evaluate(path) if run is None else run
    if run.table.num_rows < PARALLEL_CHECK_ROWS:
        # the docnos hashed and the topics coded once, for the check and the look-up of judgments
        ranked, keys = encoded_ranks(run.table), doc_hashes(run.table["doc"])
        duplicated = has_duplicate_docs(run.table, ranked.codes, keys)
        rk = prepare(qrels, run.table, options, runid=run.tag, ranked=ranked, doc_keys=keys)
    else:
        # the parser's spare buffers back to the OS before ranking allocates: ~100 MB of a 7M-row
        # run's peak, in a few milliseconds
        pa.default_memory_pool().release_unused()
        ranked = encoded_ranks(run.table)  # its topic codes serve the check too
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=1) as pool:
            duplicates = pool.submit(has_duplicate_docs, run.table, ranked.codes)
            rk = prepare(qrels, run.table, options, runid=run.tag, ranked=ranked)
            duplicated = duplicates.result()
    if duplicated:
        twice = counted_duplicate(qrels, run.table, options)
        if twice is not None:  # path:line of both places (or none: it was a hash collision)
            raise duplicate_docno_error(path, *twice)
    return rk, run


def counted_duplicate(qrels: pa.Table, run: pa.Table, options: PrepareOptions) -> tuple[str, str] | None:
    """A (topic, docno) twice in the part of a run trec_eval evaluates, or None: form_res_rels.c
    checks a topic's documents only when the qrels have the topic (and -D does not skip it), and
    only the top -M of them in its order (score descending, docno descending); a docno twice in a
    topic the qrels lack, or below the -M cut, is no error there."""
    topics = pc.cast(run["topic"], pa.string()) if pa.types.is_dictionary(run["topic"].type) else run["topic"]
    table = pa.table({"topic": topics, "doc": run["doc"], "score": run["score"]})
    table = pc.filter(table, pc.is_in(table["topic"], pc.unique(qrels["topic"])))
    if options.max_docs is not None and table.num_rows:
        order = pc.sort_indices(table, [("topic", "ascending"), ("score", "descending"), ("doc", "descending")])
        table = pc.take(table, order)
        codes = pc.dictionary_encode(table["topic"].combine_chunks()).indices.to_numpy()
        starts = np.flatnonzero(np.r_[True, codes[1:] != codes[:-1]])
        position = np.arange(len(codes)) - np.repeat(starts, np.diff(np.r_[starts, len(codes)]))
        table = pc.filter(table, pa.array(position < options.max_docs))
    if not table.num_rows or not has_duplicate_docs(table):
        return None
    seen: set[tuple[str, str]] = set()
    for pair in zip(table["topic"].to_pylist(), table["doc"].to_pylist(), strict=True):
        if pair in seen:
            return pair
        seen.add(pair)
    return None  # a hash collision


def _as_table(source: Any, kind: str) -> pa.Table:
    """The qrels or run as a Table (topic, doc, relevance or score); in-memory input is validated
    as a file is (:func:`evalstore.io.formats.check_in_memory`: messages name the row)."""
    if isinstance(source, (str, Path)):
        # evaluating stores nothing: files are read as trec-eval reads them (no content hash; a
        # plain run file streamed, evalstore.io.trec_text._stream_trec_run)
        parsed = (
            read_qrels(source, strict=False, content_hash=False)
            if kind == "qrels"
            else read_run(source, strict=False, content_hash=False)
        )
        return parsed.table
    value = "relevance" if kind == "qrels" else "score"
    if kind == "run" and _no_rows(source):  # a run with no results: -c scores every qrels topic 0
        return EMPTY_RUN
    if isinstance(source, pa.Table):
        missing = [name for name in ("topic", "doc", value) if name not in source.column_names]
        if missing:
            raise InvalidParameterError(
                f"The {kind} table needs columns topic, doc and {value}; it lacks {', '.join(missing)}."
            )
        table = source.select(["topic", "doc", value])
    else:
        table = _frame_table(source, kind, value)
    return formats.check_in_memory(
        table, "qrels" if kind == "qrels" else "run", f"{kind} {type(source).__name__}", check_duplicates=False
    ).select(["topic", "doc", value])


def _no_rows(source: Any) -> bool:
    """An in-memory run with no rows: ``{}``, ``{query: {}}``, an empty frame or table."""
    if isinstance(source, Mapping):
        return all(isinstance(docs, Mapping) and not docs for docs in source.values())
    return (
        isinstance(source, pa.Table) and source.num_rows == 0 or type(source).__name__ == "DataFrame" and source.empty
    )


def _frame_table(source: Any, kind: str, value: str) -> pa.Table:
    import pandas as pd  # frames and dicts only: pandas takes ~0.2 s to import

    from evalstore.io.tables import id_texts_of

    if isinstance(source, Mapping):
        rows = [(q, d, v) for q, docs in source.items() for d, v in docs.items()]
        source = pd.DataFrame(rows, columns=["query_id", "doc_id", value], dtype=object)
    if not isinstance(source, pd.DataFrame):
        raise InvalidParameterError(
            f"Cannot read {kind} from a {type(source).__name__}; pass a path, DataFrame or dict."
        )
    columns = {c.lower(): c for c in source.columns}

    def pick(*names: str) -> pd.Series:
        for n in names:
            if n in columns:
                return source[columns[n]]
        raise InvalidParameterError(f"The {kind} frame needs a column named one of {', '.join(names)}.")

    def text(
        series: pd.Series,
    ) -> pa.Array:  # ids as a Table's or a file's are, missing ones as nulls (refused with their row)
        return id_texts_of(series.to_numpy(dtype=object))

    numbers = pick("relevance", "rel", "label") if kind == "qrels" else pick("score", "sim")
    try:
        raw = pa.array(numbers.to_numpy(), from_pandas=False)
    except (pa.ArrowInvalid, pa.ArrowTypeError):  # mixed types: compared as text, as a file's would be
        raw = text(numbers)
    return pa.table(
        {"topic": text(pick("query_id", "qid", "topic")), "doc": text(pick("doc_id", "docno", "doc")), value: raw}
    )


# --- several runs against one qrels: evaluate(qrels, [run, ...]) or evaluate(qrels, {name: run}) ---------------
# Each result is the one evaluate(qrels, run, measures) returns for that run, value for value; the qrels
# are read once and the runs' rankings evaluated together (evalstore.metrics.stacked).


def _several_runs(run: object) -> bool:
    """Whether ``evaluate``'s ``run`` is several runs: a list or tuple of runs, or a mapping of
    names to runs (a mapping whose values are files, frames, tables or ``{query_id: {doc_id:
    score}}`` dicts; one run as a dict maps query ids to ``{doc_id: score}``)."""
    if isinstance(run, (list, tuple)):  # but a list of ScoredDoc rows (tuples) is one run, as ir_measures has it
        return not run or not isinstance(run[0], tuple)
    if not isinstance(run, Mapping) or not run:
        return False
    first = next(iter(run.values()))
    if isinstance(first, Mapping):  # a run's {doc_id: score}, or a run given as a dict of them
        return bool(first) and isinstance(next(iter(first.values())), Mapping)
    return isinstance(first, (str, Path, pa.Table)) or type(first).__name__ == "DataFrame"


def _evaluate_runs(
    qrels: Any,
    runs: Sequence[Any] | Mapping[str, Any],
    measures: Iterable[str | Measure],
    *,
    per_query: bool,
    relevance_level: int,
    max_docs: int | None,
    judged_only: bool,
    missing_topics: str,
    known: Any = None,
    stack_cells: int = STACK_CELLS,
) -> list[EvaluationResult] | dict[str, EvaluationResult]:
    """``evaluate`` of each run (see :func:`evalstore.metrics.evaluate`): a list of results for a
    list of runs, a dict by the same names for a mapping. The runs are ranked and evaluated in
    batches of up to ``stack_cells`` cells (topics x depth); a run that shares no topic with the
    qrels is an error naming it."""
    if missing_topics not in ("zero", "skip"):
        raise InvalidParameterError(
            f"The 'missing_topics' parameter of evaluate must be 'zero' or 'skip'. Got {missing_topics!r} instead."
        )
    if known is not None and judged_only:
        raise InvalidParameterError(
            "-J closes up the ranking by the main qrels' judgments; the user-oriented "
            "measures (known) need the ranking whole."
        )
    named: list[tuple[object, Any]] = list(runs.items()) if isinstance(runs, Mapping) else list(enumerate(runs))
    options = PrepareOptions(max_docs=max_docs, judged_only=judged_only, complete=missing_topics == "zero")
    qrels_table = _as_table(qrels, "qrels")
    known_table = _as_table(known, "qrels") if known is not None else None
    wanted = resolve_measures(measures)
    settings = {
        "relevance_level": relevance_level,
        "max_docs": max_docs,
        "judged_only": judged_only,
        "missing_topics": missing_topics,
        "tie_rule": "score desc, docno desc",
    }
    results: list[EvaluationResult] = []
    batch: list[Ranking] = []
    cells = 0
    for name, run in named:
        rk = _run_ranking(qrels_table, run, options, known_table)
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


def _run_ranking(qrels: pa.Table, run: Any, options: PrepareOptions, known: pa.Table | None) -> Ranking:
    """The run ranked against the qrels as ``evaluate`` ranks one (with what the user knew)."""
    if isinstance(run, (str, Path)):
        rk, parsed = prepare_run_file(qrels, run, options)
        run_table = parsed.table
    else:
        run_table = _as_table(run, "run")
        rk = prepare(qrels, run_table, options)
        if has_duplicate_docs(run_table):  # refused as evaluate refuses it for one run
            twice = counted_duplicate(qrels, run_table, options)
            if twice is not None:
                raise formats.duplicate_row_error(f"run {type(run).__name__}", run_table, *twice)
    if known is not None and rk.n:
        attach_known(rk, prepare(known, run_table, options))
    return rk


def _results(
    batch: list[Ranking], wanted: list[Measure], relevance_level: int, per_query: bool, settings: dict[str, Any]
) -> list[EvaluationResult]:
    if not batch:
        return []
    results = []
    for rk, values in zip(batch, compute_stacked(compute, batch, wanted, relevance_level=relevance_level), strict=True):
        aggregates = MeasureValues({str(m): summarise(m, v, rk) for m, v in values.items()})
        results.append(
            EvaluationResult(
                aggregates=aggregates,
                topics=rk.topics,
                missing_topics=rk.missing_topics,
                dropped_run_topics=rk.dropped_run_topics,
                options=dict(settings),
                # each run's own arrays, not views that would keep the batch's alive
                values={str(m): np.array(v, copy=True) for m, v in values.items()} if per_query else {},
            )
        )
    return results
