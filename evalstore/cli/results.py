"""`evalstore results show`: stored values of one evaluation, as a table or as trec_eval prints them."""

from __future__ import annotations

import sys
from enum import StrEnum

import typer

from evalstore.cli._context import state
from evalstore.cli._output import OutputFormat, render

app = typer.Typer(help="Read stored evaluation results.", no_args_is_help=True)


class ResultsFormat(StrEnum):
    table = "table"
    json = "json"
    csv = "csv"
    trec = "trec"


@app.command("show")
def show(
    ctx: typer.Context,
    qrels: str = typer.Option(..., "--qrels", help="Name of the stored qrels."),
    run: str = typer.Option(..., "--run", help="Name of the stored run."),
    per_query: bool = typer.Option(False, "--per-query", help="One row per query as well as the summary."),
    measure: list[str] = typer.Option([], "--measure", help="Only this measure (repeatable; any spelling)."),
    evaluation: int | None = typer.Option(None, "--evaluation", help="A specific evaluation id (default: the "
                                          "newest finished one)."),
    fmt: ResultsFormat = typer.Option(ResultsFormat.table, "--format", help="trec: exactly what 'evalstore "
                                      "trec-eval' prints for the same files and options."),
) -> None:
    """Stored results of a run on qrels: summary values, and per query with --per-query."""
    from evalstore.services.kinds.ranking import results

    stored = results(state(ctx).engine(), qrels_name=qrels, run_name=run, measures=measure or None,
                     evaluation_id=evaluation)
    if fmt is ResultsFormat.trec:  # only what was asked for: no runid/num_q lines then
        sys.stdout.write(stored.as_trec_eval(per_query=per_query, with_counts=not measure))
        return
    rows = []
    if per_query:
        for topic, values in zip(stored.topics, stored.frame.itertuples(index=False), strict=True):
            rows.append({"query": topic, **dict(zip(stored.measures, values, strict=True))})
    rows.append({"query": "all", **{m: stored.aggregates.get(m) for m in stored.measures}})
    title = f"evaluation {stored.evaluation_id}: run '{stored.run}' on '{stored.qrels}'"
    if fmt is ResultsFormat.table and not per_query:
        render([{"measure": m, "value": stored.aggregates.get(m)} for m in stored.measures],
               ["measure", "value"], OutputFormat.table, title=title)
        return
    render(rows, ["query", *stored.measures], OutputFormat(fmt.value), title=title)
