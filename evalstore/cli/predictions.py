"""`evalstore predictions ...`: a classifier's predictions (labels and/or scores)."""

from pathlib import Path
from typing import Annotated

import typer

from evalstore.cli._context import state
from evalstore.cli._output import OutputFormat, info, render
from evalstore.cli.runs import parse_meta

app = typer.Typer(help="Classifier predictions (labels and/or scores).", no_args_is_help=True)

SUMMARY_COLUMNS = ["name", "kind", "rows", "labels", "system", "provides", "created_at"]


def register_set(
    ctx: typer.Context,
    path: Path,
    name: str,
    labels: str,
    kind: str,
    system: str | None,
    meta: list[str],
    description: str | None,
    probabilities: bool,
    replace: bool,
) -> None:
    from evalstore.services import labels as catalogue

    summary = catalogue.register_predictions(
        state(ctx).engine(),
        path,
        name=name,
        labels_name=labels,
        kind=kind,
        system=system,
        metadata=parse_meta(meta),
        description=description,
        probabilities=probabilities,
        replace=replace,
    )
    verb = "registered" if summary.created else "already registered, nothing new"
    info(f"{kind} '{summary.name}' {verb}: {summary.rows} items against '{labels}'")


@app.command("register")
def register_predictions(
    ctx: typer.Context,
    path: Annotated[
        Path,
        typer.Argument(
            help="CSV, TSV or Parquet: item_id and label and/or score (binary: "
            "P(positive class)) or one score_<class> column per class; optional group. "
            "For multilabel gold labels: 'labels' (joined by '|') and/or score_<class>."
        ),
    ],
    name: Annotated[str, typer.Option("--name")],
    labels: Annotated[str, typer.Option("--labels", help="Gold labels the predictions are for.")],
    system: Annotated[str | None, typer.Option("--system")] = None,
    meta: Annotated[list[str], typer.Option("--meta", help="KEY=VALUE metadata (repeatable).")] = [],
    description: Annotated[str | None, typer.Option("--description")] = None,
    probabilities: Annotated[
        bool, typer.Option("--probabilities", help="Scores are probabilities: refuse any outside [0, 1].")
    ] = False,
    replace: Annotated[bool, typer.Option("--replace")] = False,
) -> None:
    """Register a classifier's predictions, checked against the gold labels."""
    register_set(ctx, path, name, labels, "classifier", system, meta, description, probabilities, replace)


@app.command("list")
def list_predictions(
    ctx: typer.Context,
    labels: Annotated[str | None, typer.Option("--labels")] = None,
    fmt: Annotated[OutputFormat, typer.Option("--format")] = OutputFormat.table,
) -> None:
    from evalstore.services import labels as catalogue

    rows = [s.as_dict() for s in catalogue.list_prediction_sets(state(ctx).engine(), labels)]
    render(rows, SUMMARY_COLUMNS, fmt, title="predictions")


@app.command("delete")
def delete_predictions(ctx: typer.Context, name: Annotated[str, typer.Argument()]) -> None:
    from evalstore.services import labels as catalogue

    catalogue.delete_predictions(state(ctx).engine(), name)
    info(f"predictions '{name}' deleted, with their evaluations")
