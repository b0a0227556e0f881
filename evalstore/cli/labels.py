"""`evalstore labels ...`: gold labels of classification and clustering tasks."""

from pathlib import Path
from typing import Annotated

import typer

from evalstore.cli._context import state
from evalstore.cli._output import OutputFormat, info, render

app = typer.Typer(help="Gold labels of classification and clustering tasks.", no_args_is_help=True)


@app.command("import")
def import_labels(
    ctx: typer.Context,
    path: Annotated[
        Path,
        typer.Argument(
            help="CSV, TSV or Parquet with columns item_id, label [, group] [, weight]; "
            "a multilabel task has 'labels' (each item's labels joined by '|') in "
            "place of 'label'; 'weight' holds sample weights."
        ),
    ],
    name: Annotated[str, typer.Option("--name")],
    description: Annotated[str | None, typer.Option("--description")] = None,
    replace: Annotated[
        bool, typer.Option("--replace", help="Replace labels of this name holding other content.")
    ] = False,
) -> None:
    """Store gold labels; the same file again stores nothing."""
    from evalstore.services import labels as catalogue

    summary = catalogue.import_labels(state(ctx).engine(), path, name=name, description=description, replace=replace)
    verb = "stored" if summary.created else "already stored, nothing new"
    kind = "".join(f", {what}" for what in ("multilabel", "weighted") if summary.details[what])
    info(
        f"labels '{summary.name}' {verb}: {summary.rows} items, {len(summary.details['classes'])} classes, "
        f"{summary.details['groups']} groups{kind}"
    )


@app.command("list")
def list_labels(
    ctx: typer.Context, fmt: Annotated[OutputFormat, typer.Option("--format")] = OutputFormat.table
) -> None:
    from evalstore.services import labels as catalogue

    rows = [s.as_dict() for s in catalogue.list_label_sets(state(ctx).engine())]
    render(
        rows, ["name", "rows", "classes", "groups", "multilabel", "weighted", "created_at"], fmt, title="gold labels"
    )
