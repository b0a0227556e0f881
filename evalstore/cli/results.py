"""`evalstore results show`: stored values of one evaluation, as a table or as trec_eval prints them."""

import sys
from enum import StrEnum
from typing import Annotated

import typer

from evalstore.cli._context import state
from evalstore.cli._errors import usage_conflict
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
    qrels: Annotated[str | None, typer.Option("--qrels", help="Name of the stored qrels.")] = None,
    run: Annotated[str | None, typer.Option("--run", help="Name of the stored run.")] = None,
    labels: Annotated[
        str | None, typer.Option("--labels", help="Gold labels (with --predictions, instead of --qrels and --run).")
    ] = None,
    predictions: Annotated[
        str | None, typer.Option("--predictions", help="A prediction set or clustering evaluated on --labels.")
    ] = None,
    per_query: Annotated[
        bool, typer.Option("--per-query", help="One row per query (per group, for predictions) as well as the summary.")
    ] = False,
    measure: Annotated[list[str], typer.Option("--measure", help="Only this measure (repeatable; any spelling).")] = [],
    evaluation: Annotated[
        int | None, typer.Option("--evaluation", help="A specific evaluation id (default: the newest finished one).")
    ] = None,
    fmt: Annotated[
        ResultsFormat,
        typer.Option(
            "--format", help="trec: exactly what 'evalstore trec-eval' prints for the same files and options."
        ),
    ] = ResultsFormat.table,
) -> None:
    """Stored results of a run on qrels: summary values, and per query with --per-query (or of a
    prediction set on gold labels: every aggregate of its newest evaluation, per group with
    --per-query)."""
    from evalstore.services.kinds.ranking import results

    if (labels is None) != (predictions is None) or (labels is not None and (qrels or run)):
        raise usage_conflict(
            ctx, "Give --qrels and --run (a ranking run), or --labels and --predictions (a prediction set)."
        )
    if labels is not None and predictions is not None:
        _show_predictions(ctx, labels, predictions, measure, per_query, fmt)
        return
    if qrels is None or run is None:
        raise usage_conflict(
            ctx, "Give --qrels and --run (a ranking run), or --labels and --predictions (a prediction set)."
        )
    stored = results(
        state(ctx).engine(), qrels_name=qrels, run_name=run, measures=measure or None, evaluation_id=evaluation
    )
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
        render(
            [{"measure": m, "value": stored.aggregates.get(m)} for m in stored.measures],
            ["measure", "value"],
            OutputFormat.table,
            title=title,
        )
        return
    render(rows, ["query", *stored.measures], OutputFormat(fmt.value), title=title)


def _show_predictions(
    ctx: typer.Context, labels: str, name: str, measures: list[str], per_group: bool, fmt: ResultsFormat
) -> None:
    from evalstore.services.kinds import predictions

    result = predictions.newest_results(
        state(ctx).engine(), labels_name=labels, prediction_name=name, measures=measures or None
    )
    title = f"evaluation {result.evaluation_id}: {result.kind} '{result.predictions}' on '{result.labels}'"
    if fmt is ResultsFormat.trec:
        raise usage_conflict(ctx, "--format trec is trec_eval's output, for ranking runs; use table, json or csv.")
    shown = list(result.aggregates)
    if per_group and result.per_group is not None:
        rows: list[dict[str, object]] = [
            {"group": str(group), **{str(m): v for m, v in values.items()}}
            for group, values in result.per_group.to_dict("index").items()
        ]
        rows.append({"group": "all", **{m: result.aggregates.get(m) for m in result.per_group.columns}})
        render(rows, ["group", *map(str, result.per_group.columns)], OutputFormat(fmt.value), title=title)
        return
    render(
        [{"measure": m, "value": result.aggregates[m]} for m in shown],
        ["measure", "value"],
        OutputFormat(fmt.value),
        title=title,
    )
