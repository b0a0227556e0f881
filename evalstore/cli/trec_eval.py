"""`evalstore trec-eval`: a drop-in for trec_eval 10.0's command line and output."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from evalstore.cli._output import warn
from evalstore.errors import InvalidParameterError


def trec_eval(
    qrels: Path = typer.Argument(..., help="Qrels file (qid iter docno rel)."),
    run: Path = typer.Argument(..., help="Run file (qid Q0 docno rank score tag)."),
    per_query: bool = typer.Option(False, "-q", help="Print per-topic values as well as the summary."),
    complete: bool = typer.Option(False, "-c", help="Average over all qrels topics (a missing topic scores 0)."),
    no_summary: bool = typer.Option(False, "-n", help="Do not print the summary ('all') lines."),
    judged_only: bool = typer.Option(False, "-J", help="Score only judged documents (drop unjudged ones)."),
    relevance_level: int = typer.Option(1, "-l", help="Relevance level: judged at least this is relevant."),
    max_docs: int | None = typer.Option(None, "-M", help="Keep only the top N documents per topic.", min=0),
    measure: list[str] = typer.Option([], "-m", help="Measure or group, trec_eval style: P.5,10 ndcg_cut.10 all_trec."),
    collection_size: int = typer.Option(0, "-N", help="Number of documents in the collection (for utility)."),
    rel_format: str = typer.Option("qrels", "-R", help="Judgments format: qrels; qrels_jg (judgment groups); prefs "
                                                  "(preferences: qid jg jsg docno level); qrels_prefs (a qrels file "
                                                  "read as preferences)."),
    results_format: str = typer.Option("trec_results", "-T", help="Run format: trec_results (the only one)."),
    zscores: Path | None = typer.Option(None, "-Z", help="Print z-scores: per-topic means and standard deviations "
                                                           "of each measure, lines 'qid measure mean stddev'."),
) -> None:
    """Evaluate a run against qrels exactly as trec_eval 10.0 does, with the same output."""
    from evalstore.trec_eval import run_trec_eval

    if rel_format not in ("qrels", "qrels_jg", "prefs", "qrels_prefs"):
        raise InvalidParameterError(f"-R {rel_format} is not a judgments format; use qrels, qrels_jg, prefs or "
                                    "qrels_prefs.")
    if results_format != "trec_results":
        raise InvalidParameterError(f"-T {results_format} is not a results format; trec_eval has only -T trec_results.")
    run_trec_eval(
        str(qrels), str(run), measures=measure, per_query=per_query, complete=complete,
        no_summary=no_summary, judged_only=judged_only, relevance_level=relevance_level,
        max_docs=max_docs, collection_size=collection_size, rel_format=rel_format,
        zscores_path=str(zscores) if zscores is not None else None, out=sys.stdout, warn=warn,
    )
