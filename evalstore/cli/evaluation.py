"""`evalstore trec-eval` (a drop-in for trec_eval) and `evalstore measures`."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from evalstore.cli._output import OutputFormat, render, warn
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


def ndeval(
    qrels: Path = typer.Argument(..., help="Subtopic qrels (topic subtopic docno judgment)."),
    run: Path = typer.Argument(..., help="Run file (qid Q0 docno rank score tag)."),
    alpha: float = typer.Option(0.5, "-alpha", min=0.0, max=1.0, help="Redundancy intolerance (alpha-nDCG, NRBP)."),
    beta: float = typer.Option(0.5, "-beta", min=0.0, max=1.0, help="Patience (NRBP)."),
    max_docs: int | None = typer.Option(None, "-M", min=1, help="Keep only the top N documents per topic."),
    complete: bool = typer.Option(False, "-c", help="Average over every qrels topic."),
    traditional: bool = typer.Option(True, "-traditional", hidden=True,
                                     help="Accepted for ndeval's command lines; the order is always trec_eval's."),
) -> None:
    """The TREC Web track's diversity measures, exactly as ndeval -traditional prints them (CSV)."""
    from evalstore.io.formats import read_qrels, read_run
    from evalstore.metrics.diversity import evaluate_diversity, render_ndeval

    subtopics = read_qrels(qrels, judgment_groups=True, strict=False)
    parsed = read_run(run, strict=False, content_hash=False)
    result = evaluate_diversity(subtopics.table, parsed.table, alpha=alpha, beta=beta, max_docs=max_docs,
                                qrels_path=str(qrels), run_path=str(run))
    sys.stdout.write(render_ndeval(result, _first_run_tag(run), complete=complete))


def _first_run_tag(path: Path) -> str:
    """ndeval names the run after the tag on its first line (trec_eval: the last)."""
    import gzip

    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as lines:  # type: ignore[operator]
        for line in lines:
            fields = line.split()
            if len(fields) >= 6 and not fields[0].startswith("#"):
                return fields[5]
    return "unknown"


def measures(
    fmt: OutputFormat = typer.Option(OutputFormat.table, "--format"),
    trec: bool = typer.Option(False, "--trec", help="List trec_eval's measure names and what they map to."),
) -> None:
    """Every measure: canonical name, aliases, parameters, the judgments it needs, definition, what
    trec_eval and ir_measures call it and whether their values are the same, reference."""
    from evalstore.metrics import list_measures
    from evalstore.metrics._registry import TREC_FAMILIES
    from evalstore.metrics.peers import PEERS
    from evalstore.metrics.preferences import PREFS_MEASURES

    if trec:
        rows = [{"trec_eval": name, "evalstore": spec.family, "parameters": spec.param or "", "mode": "-R qrels"}
                for name, spec in TREC_FAMILIES.items()]
        rows += [{"trec_eval": name, "evalstore": name, "parameters": "", "mode": "-R prefs, -R qrels_prefs"}
                 for name in PREFS_MEASURES]
        render(rows, ["trec_eval", "evalstore", "parameters", "mode"], fmt, title="trec_eval measures")
        return
    rows = []
    for family in list_measures():
        params = ", ".join(
            f"{name}={_show(p.default)}" + (f" ({p.doc})" if p.doc else "") for name, p in family.params.items()
        )
        rows.append({
            "name": family.name, "aliases": ", ".join(family.aliases), "parameters": params,
            "summary": family.summary, "judgments": family.judgments,
            "definition": " ".join(family.description.split()), "peers": PEERS[family.name],
            "reference": family.reference,
        })
    render(rows, ["name", "aliases", "parameters", "summary", "judgments", "definition", "peers", "reference"], fmt,
           title="measures")


def _show(value: object) -> str:
    from evalstore.metrics._registry import _REQUIRED

    return "required" if value is _REQUIRED else ("default" if value is None else str(value))
