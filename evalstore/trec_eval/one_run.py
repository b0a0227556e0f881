"""One run evaluated against one qrels (or judgment groups, or preferences), as ``trec_eval
[flags] QRELS RUN`` does: the measures asked for, the run prepared and ranked, the values computed
and printed by :mod:`evalstore.trec_eval.output`.

One deliberate difference from trec_eval 10.0: without ``-c``, a qrels topic missing from the run
is skipped with a warning naming it (trec_eval 10.0 aborts; 9.x and pytrec_eval skip silently).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TextIO

import numpy as np
import pyarrow as pa

from evalstore import _kernels as pc
from evalstore.errors import EvaluationError, InvalidParameterError
from evalstore.io.formats import ParsedFile, read_qrels, read_run
from evalstore.io.parsed_cache import ParsedCache, cache_dir
from evalstore.metrics import compute, prepare_run_file, summarise
from evalstore.metrics.preparation import PrepareOptions, Ranking, prepare, qrels_lookups, remember_qrels_lookups
from evalstore.metrics.registry import Measure, TrecFamily, make
from evalstore.metrics.trec_names import expand, expand_root, expand_trec_spec, parse_trec_specs
from evalstore.trec_eval.output import render_lines
from evalstore.trec_eval.zscores import read_zscores, standardize

if TYPE_CHECKING:
    from evalstore.backends.duckdb_engine import DuckDBSettings

# where a run file is ranked: in this process's memory, or by DuckDB in bounded memory (spilling)
BACKENDS = ("local", "duckdb")


# -R qrels_jg: a measure computed against each judgment group's qrels, averaged over the groups.
JG_FAMILIES = {
    "map_avgjg": TrecFamily("AP"),
    "P_avgjg": TrecFamily("P", param="cutoff", kind="long", defaults=(5, 10, 15, 20, 30, 100, 200, 500, 1000)),
    "Rprec_mult_avgjg": TrecFamily(
        "RprecMult", param="x", kind="double", defaults=(0.2, 0.4, 0.6, 0.8, 1.0, 1.2, 1.4, 1.6, 1.8, 2.0)
    ),
}
JG_ORDER = ["runid", "num_q", *JG_FAMILIES]


def _expand_jg(specs: list[str]) -> list[tuple[str, str, Measure | None]]:
    if not specs:  # trec_eval asks for its qrels measures, which -R qrels_jg cannot compute (exit 4)
        raise InvalidParameterError(
            "-R qrels_jg needs -m: trec_eval's default measures (official) are not "
            "computed from judgment groups, so trec_eval fails without one; pass -m qrels_jg "
            "(or map_avgjg, P_avgjg, Rprec_mult_avgjg)."
        )
    chosen: dict[str, str | None] = {}
    for spec in specs:
        root, dot, raw = spec.partition(".")
        if root == "qrels_jg":
            for name in JG_ORDER:
                chosen.setdefault(name, None)
            continue
        if root not in JG_ORDER:
            raise InvalidParameterError(
                f"Measure '{root}' is not available with -R qrels_jg; use map_avgjg, P_avgjg or Rprec_mult_avgjg."
            )
        if dot and not raw:
            raise InvalidParameterError(
                f"-m {spec}: the parameters after '.' are empty (trec_eval refuses them too); "
                f"write -m {root} for the defaults."
            )
        if chosen.get(root) is None:  # the first parameters given count, as in qrels mode (meas_init.c)
            chosen[root] = raw if dot else None
    rows: list[tuple[str, str, Measure | None]] = []
    for root in (name for name in JG_ORDER if name in chosen):
        if root in ("runid", "num_q"):
            rows.append((root, root, None))
        else:
            rows.extend((root, name, measure) for name, measure in expand_root(root, chosen[root], JG_FAMILIES[root]))
    return rows


def _jg_values(
    qrels: pa.Table,
    run: pa.Table,
    measures: list[Measure],
    options: PrepareOptions,
    relevance_level: int,
    warn: Any = None,
) -> tuple[list[str], dict[Measure, np.ndarray]]:
    """Per topic, each measure averaged over the judgment groups that judged the topic. Without
    -c a judged topic missing from the run is skipped with a warning, as in qrels mode."""
    sums: dict[str, dict[Measure, float]] = {}
    counts: dict[str, int] = {}
    missing: set[str] = set()
    for group in sorted(set(qrels["iteration"].to_pylist())):
        part = pc.filter(qrels, pc.equal(qrels["iteration"], group))
        rk = prepare(part, run, options)
        missing.update(rk.missing_topics)
        values = compute(rk, measures, relevance_level=relevance_level)
        for t, topic in enumerate(rk.topics):
            counts[topic] = counts.get(topic, 0) + 1
            bucket = sums.setdefault(topic, dict.fromkeys(measures, 0.0))
            for measure in measures:
                bucket[measure] += float(values[measure][t])
    for topic in sorted(missing) if warn is not None and not options.complete else []:
        warn(f"qrels topic {topic} has no results in the run; skipped (pass -c to score it as 0)")
    topics = sorted(sums)
    return topics, {m: np.array([sums[t][m] / counts[t] for t in topics]) for m in measures}


def read_qrels_to_evaluate(path: str, *, evaluated_topic: str | None = None) -> ParsedFile:
    """-R qrels judgments read as trec_eval reads them (nothing stored), kept between commands
    in the cache of :mod:`evalstore.io.parsed_cache` unless ``EVALSTORE_CACHE_DIR=off``, with
    what :func:`~evalstore.metrics.preparation.prepare` works out of them alone."""

    def reader() -> ParsedFile:
        return read_qrels(path, strict=False, content_hash=False, evaluated_topic=evaluated_topic)

    folder = cache_dir()
    if folder is None:
        return reader()
    options = {"path": os.path.abspath(path), "strict": False, "evaluated_topic": evaluated_topic}
    parsed, lookups = ParsedCache(folder).read(path, options, reader, lambda read: qrels_lookups(read.table))
    if lookups is not None:  # what prepare works out of the qrels alone, kept with them
        remember_qrels_lookups(parsed.table, lookups)
    return parsed


def _prepare_in_memory(qrels: ParsedFile, run_path: str, options: PrepareOptions) -> tuple[Ranking, str | None]:
    rk, run = prepare_run_file(qrels.table, run_path, options)
    tag = run.tag
    del run  # the ranking holds what the measures need; free the run's columns
    pa.default_memory_pool().release_unused()  # and give them back to the OS before the kernels run
    return rk, tag


def run_trec_eval(
    qrels_path: str,
    run_path: str,
    *,
    measures: list[str],
    per_query: bool,
    complete: bool,
    no_summary: bool,
    judged_only: bool,
    relevance_level: int,
    max_docs: int | None,
    collection_size: int,
    rel_format: str = "qrels",
    zscores_path: str | None = None,
    out: TextIO,
    warn: Any,
    backend: str = "local",
    duckdb_settings: DuckDBSettings | None = None,
    debug_level: int = 0,
    debug_query: str | None = None,
) -> None:
    """trec_eval's evaluation of ``run_path`` against ``qrels_path``, its lines written to ``out``.
    ``debug_query`` (``-D LEVEL.QID``) evaluates that qrels topic only; ``debug_level`` above 0 is
    refused for the measures whose trec_eval debugging trace evalstore does not print."""

    if backend not in BACKENDS:
        raise InvalidParameterError(f"--backend must be one of {', '.join(BACKENDS)}, not '{backend}'.")
    if backend != "local" and rel_format != "qrels":
        raise InvalidParameterError(
            f"--backend {backend} evaluates -R qrels judgments only; drop --backend for -R {rel_format}."
        )
    _check_debug_level(debug_level, measures, rel_format)
    _check_negative_level(relevance_level, judged_only, measures, rel_format)
    if rel_format in ("prefs", "qrels_prefs"):
        out.write(
            _preference_lines(
                qrels_path,
                run_path,
                measures,
                qrels_layout=rel_format == "qrels_prefs",
                per_query=per_query,
                complete=complete,
                no_summary=no_summary,
                max_docs=max_docs,
                zscores_path=zscores_path,
                warn=warn,
                debug_query=debug_query,
            )
        )
        return
    judgment_groups = rel_format == "qrels_jg"
    options = PrepareOptions(max_docs=max_docs, judged_only=judged_only, complete=complete)
    if judgment_groups:
        rows = _expand_jg(measures)
        qrels = _only_topic(read_qrels(qrels_path, judgment_groups=True, strict=False), debug_query)
        run = read_run(run_path, strict=False, content_hash=False)
        measures_needed = list(dict.fromkeys(m for _, _, m in rows if m is not None))
        topics, values = _jg_values(qrels.table, run.table, measures_needed, options, relevance_level, warn)
        runid = run.tag
        ranking = None  # the values are averages over judgment groups, not one ranking's
    else:
        requests = parse_trec_specs(measures or ["official"])
        rows = [(request.root, name, measure) for request in requests for name, measure in expand(request)]
        qrels = _only_topic(read_qrels_to_evaluate(qrels_path, evaluated_topic=debug_query), debug_query)
        if backend == "duckdb":  # a run of any size, in bounded memory (evalstore.backends.duckdb_engine)
            from evalstore.backends import duckdb_engine

            rk, runid = duckdb_engine.prepare_file(
                qrels.table, run_path, options, duckdb_settings or duckdb_engine.DuckDBSettings()
            )
        else:
            rk, runid = _prepare_in_memory(qrels, run_path, options)
        for topic in rk.missing_topics if not complete else []:
            warn(f"qrels topic {topic} has no results in the run; skipped (pass -c to score it as 0)")
        measures_needed = list(dict.fromkeys(m for _, _, m in rows if m is not None))
        values = compute(rk, measures_needed, relevance_level=relevance_level, collection_size=collection_size)
        keep_stand_in_values(rows, values, rk)
        topics = rk.topics
        ranking = rk
    if not topics:
        raise EvaluationError("No queries with both results and relevance info; check that the topic ids match.")
    if zscores_path is not None:
        values = standardize(rows, topics, values, read_zscores(zscores_path))

    zscored = zscores_path is not None
    out.write(
        render_lines(
            rows,
            topics,
            values.__getitem__,
            lambda m: summary_value(m, values[m], ranking, zscored),
            runid,
            per_query=per_query,
            summary=not no_summary,
            zscores=zscored,
        )
    )


# trec_eval prints a debugging trace (on stdout, among the results) from these measures' code when
# -D is above the level given (m_ndcg.c, m_ndcg_rel.c, m_Rndcg.c, m_G.c, m_binG.c, m_rbp.c: 0;
# m_gm_bpref.c: 1; form_prefs_counts.c: 2, for every preference measure)
_TRACED_ABOVE = {
    "dcg": 0,
    "ideal_dcg": 0,
    "ndcg": 0,
    "ndcg_rel": 0,
    "Rndcg": 0,
    "G": 0,
    "binG": 0,
    "rbp": 0,
    "gm_bpref": 1,
}


# At a negative -l trec_eval counts a retrieved document that is not in the qrels (its level -1)
# as relevant while it walks the ranking back (m_Rprec_mult.c, m_Rprec_mult_avgjg.c,
# m_iprec_at_recall.c, and 11pt_avg from it), but not in the relevant retrieved it starts from
# (form_res_rels.c): the values mix two definitions, which evalstore does not reproduce
_MIXED_AT_NEGATIVE_LEVEL = frozenset({"Rprec_mult", "Rprec_mult_avgjg", "iprec_at_recall", "11pt_avg"})


def _check_negative_level(level: int, judged_only: bool, measures: list[str], rel_format: str) -> None:
    if level >= 0 or judged_only or rel_format not in ("qrels", "qrels_jg"):
        return
    if rel_format == "qrels_jg":  # its measures (the _avgjg ones) are named, not parsed as -R qrels' are
        roots = {measure.split(".", 1)[0] for measure in measures}
    else:
        roots = {request.root for request in parse_trec_specs(measures or ["official"])}
    names = sorted(roots & _MIXED_AT_NEGATIVE_LEVEL)
    if names:
        raise InvalidParameterError(
            f"-l {level}: at a negative relevance level trec_eval 10.0 counts a retrieved document "
            f"missing from the qrels as relevant in one part of {', '.join(names)} and not in "
            "another, which evalstore does not reproduce; use -l 0 or more, add -J, or leave "
            "those measures out."
        )


def _check_debug_level(level: int, measures: list[str], rel_format: str) -> None:
    if level <= 0:
        return
    if rel_format in ("prefs", "qrels_prefs") and level > 2:
        raise InvalidParameterError(
            f"-D {level}: trec_eval prints a debugging trace of the preference counts at "
            "this level, which evalstore does not; use -D 0 (or 0.QID for one topic)."
        )
    if rel_format != "qrels":
        return
    names = {
        name
        for request in parse_trec_specs(measures or ["official"])
        for name in [request.root]
        if _TRACED_ABOVE.get(name, level) < level
    }
    if names:
        raise InvalidParameterError(
            f"-D {level}: trec_eval prints a debugging trace of {', '.join(sorted(names))} "
            "among its results at this level, which evalstore does not; use -D 0 (or "
            "0.QID for one topic), or leave those measures out."
        )


def _only_topic(qrels: ParsedFile, topic: str | None) -> ParsedFile:
    """The qrels of one topic (``-D LEVEL.QID``: trec_eval skips every other qrels topic)."""
    if topic is None:
        return qrels
    table = qrels.table
    return ParsedFile(pc.filter(table, pc.equal(table["topic"], topic)), qrels.content_hash, qrels.tag, qrels.warnings)


def _preference_lines(
    qrels_path: str,
    run_path: str,
    measures: list[str],
    *,
    qrels_layout: bool,
    per_query: bool,
    complete: bool,
    no_summary: bool,
    max_docs: int | None,
    zscores_path: str | None,
    warn: Any,
    debug_query: str | None = None,
) -> str:
    """trec_eval -R prefs / -R qrels_prefs (with -Z, each value standardised and printed as
    ``Z<name>`` with 4 decimals, counts too). Without -m, the 'prefs' group (trec_eval would ask
    for its qrels-only default measures and fail)."""
    from evalstore.io.judgment_kinds import read_prefs
    from evalstore.metrics.preferences import evaluate_preferences, expand_prefs_specs

    names = expand_prefs_specs(measures or ["prefs"])
    # the prefs_* families of the registry: printed, summarised and standardised as every measure is
    rows = [(name, name, None if name in ("runid", "num_q") else make(name)) for name in names]
    prefs = read_prefs(qrels_path, qrels_layout=qrels_layout)
    if debug_query is not None:  # -D LEVEL.QID: that topic's judgments only
        keep = prefs.topic == debug_query
        prefs = dataclasses.replace(
            prefs, **{field.name: getattr(prefs, field.name)[keep] for field in dataclasses.fields(prefs)}
        )
    run = read_run(run_path, strict=False, content_hash=False, check_duplicates=False)
    result = evaluate_preferences(
        prefs,
        run.table,
        max_docs=max_docs,
        complete=complete,
        measures=any(measure is not None for _, _, measure in rows),
    )
    for topic in result.missing if not complete else []:
        warn(f"judged topic {topic} has no results in the run; skipped (pass -c to score it as 0)")
    if not result.topics:
        raise EvaluationError("No queries with both results and relevance info; check that the topic ids match.")
    values = {measure: result.values[measure.family] for _, _, measure in rows if measure is not None}
    if zscores_path is not None:
        values = standardize(rows, result.topics, values, read_zscores(zscores_path))
    return render_lines(
        rows,
        result.topics,
        values.__getitem__,
        lambda m: summarise(m, values[m]),
        run.tag,
        per_query=per_query,
        summary=not no_summary,
        zscores=zscores_path is not None,
    )


def summary_value(measure: Measure, column: np.ndarray, ranking: Ranking | None, zscored: bool) -> float | None:
    if zscored and measure.spec.summary == "gmean" and len(column):
        # the z-scores are of the per-topic logs (m_gm_map.c keeps log(max(AP, 1e-5))): average, then exp
        return float(np.exp(np.cumsum(column)[-1] / len(column)))
    return summarise(measure, column, ranking)


# What the stand-in document of a missing topic (trec_eval -c) gives where it is not reset
_STAND_IN_EFFECT: dict[str, Callable[[Measure, np.ndarray], np.ndarray]] = {
    # one retrieved non-relevant document more, one non-retrieved non-relevant one fewer
    "utility": lambda m, v: v + m.param("coefficients")[1] - m.param("coefficients")[3],
    "relstring": lambda m, v: np.full(len(v), "-" if m.param("cutoff") >= 1 else "", dtype=object),
    "rbp_resid": lambda m, v: np.ones(len(v)),  # one unjudged document at rank 1: p + (1 - p)
}


def keep_stand_in_values(
    rows: list[tuple[str, str, Measure | None]], values: dict[Measure, np.ndarray], rk: Ranking
) -> None:
    """trec_eval -c ranks a missing topic as one non-pool stand-in document, then resets num_ret,
    unj, utility, relstring and rbp_resid to their empty-ranking values, matching the printed
    name exactly (trec_eval.c). Under a name with parameters (``utility_2,-1,0,0``) the reset
    misses and the stand-in's value is printed; evalstore prints the same."""
    if not rk.stand_in.any():
        return
    for root, name, measure in rows:
        if root in _STAND_IN_EFFECT and name != root and measure is not None:
            column = np.array(values[measure], copy=True)
            column[rk.stand_in] = _STAND_IN_EFFECT[root](measure, column[rk.stand_in])
            values[measure] = column


__all__ = ["expand_trec_spec", "parse_trec_specs", "run_trec_eval"]
