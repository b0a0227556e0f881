"""`evalstore clusters ...`: clusterings (item_id, cluster_id), evaluated against gold labels."""

from __future__ import annotations

from pathlib import Path

import typer

from evalstore.cli.predictions import register_set

app = typer.Typer(help="Clusterings (item_id, cluster_id), evaluated against gold labels.", no_args_is_help=True)


@app.command("register")
def register_clusters(
    ctx: typer.Context,
    path: Path = typer.Argument(..., help="CSV, TSV or Parquet with columns item_id, cluster_id."),
    name: str = typer.Option(..., "--name"),
    labels: str = typer.Option(..., "--labels", help="Gold labels (the classes the clusters should recover)."),
    system: str | None = typer.Option(None, "--system"),
    meta: list[str] = typer.Option([], "--meta", help="KEY=VALUE metadata (repeatable)."),
    description: str | None = typer.Option(None, "--description"),
    replace: bool = typer.Option(False, "--replace"),
) -> None:
    """Register a clustering, checked against the gold labels' items."""
    register_set(ctx, path, name, labels, "clustering", system, meta, description, False, replace)
