"""`evalstore clusters ...`: clusterings (item_id, cluster_id), evaluated against gold labels."""

from pathlib import Path
from typing import Annotated

import typer

from evalstore.cli.predictions import register_set

app = typer.Typer(help="Clusterings (item_id, cluster_id), evaluated against gold labels.", no_args_is_help=True)


@app.command("register")
def register_clusters(
    ctx: typer.Context,
    path: Annotated[Path, typer.Argument(help="CSV, TSV or Parquet with columns item_id, cluster_id.")],
    name: Annotated[str, typer.Option("--name")],
    labels: Annotated[str, typer.Option("--labels", help="Gold labels (the classes the clusters should recover).")],
    system: Annotated[str | None, typer.Option("--system")] = None,
    meta: Annotated[list[str], typer.Option("--meta", help="KEY=VALUE metadata (repeatable).")] = [],
    description: Annotated[str | None, typer.Option("--description")] = None,
    replace: Annotated[bool, typer.Option("--replace")] = False,
) -> None:
    """Register a clustering, checked against the gold labels' items."""
    register_set(ctx, path, name, labels, "clustering", system, meta, description, False, replace)
