"""`evalstore splits ...`: topic and item splits for estimating a system's quality."""

import json
import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from evalstore.cli._context import state
from evalstore.cli._output import OutputFormat, info, render, render_record
from evalstore.errors import InvalidParameterError

app = typer.Typer(no_args_is_help=True, help="Holdout, subsampling, k-fold, leave-one-out and bootstrap splits.")


@app.command("make")
def make(
    ctx: typer.Context,
    name: Annotated[str, typer.Option("--name", help="Name of the new split.")],
    qrels: Annotated[str | None, typer.Option("--qrels", help="Split these qrels' topics.")] = None,
    labels: Annotated[str | None, typer.Option("--labels", help="Split these gold labels' items.")] = None,
    method: Annotated[str, typer.Option("--method", help="holdout | subsample | kfold | loo | bootstrap.")] = "holdout",
    test_share: Annotated[
        float, typer.Option("--test-share", help="holdout, subsample: the test part's share (default one third).")
    ] = 1 / 3,
    k: Annotated[int, typer.Option("--k", help="kfold: the number of folds.")] = 5,
    repeats: Annotated[int, typer.Option("--repeats", help="subsample, bootstrap: the number of draws.")] = 10,
    stratify_by: Annotated[
        str,
        typer.Option(
            "--stratify-by",
            help="none | difficulty (topics: quartiles of mean AP over the evaluated runs) | label (items).",
        ),
    ] = "none",
    seed: Annotated[int | None, typer.Option("--seed", help="Seed (default: drawn, recorded).")] = None,
    fmt: Annotated[OutputFormat, typer.Option("--format")] = OutputFormat.table,
) -> None:
    """Split topics (--qrels) or items (--labels) into folds and store the split with its seed."""
    from evalstore.services import splits

    made = splits.make_split(
        state(ctx).engine(),
        name,
        qrels=qrels,
        labels_name=labels,
        method=method,
        test_share=test_share,
        k=k,
        repeats=repeats,
        stratify_by=stratify_by,
        seed=seed,
    )
    info(f"split '{name}': {made.folds} fold(s) by {made.method}, seed {made.seed}")
    render(made.sizes, ["fold", "train", "train_distinct", "test"], fmt, title=f"split '{name}'")


@app.command("import")
def import_(
    ctx: typer.Context,
    path: Path,
    qrels: Annotated[str, typer.Option("--qrels", help="The qrels whose topics the folds name.")],
    name: Annotated[str, typer.Option("--name", help="Name of the split.")],
    fmt: Annotated[OutputFormat, typer.Option("--format")] = OutputFormat.table,
) -> None:
    """Import a collection's own folds: JSON {"1": [topic, ...], "2": [...]}, each fold's test
    topics (DL-HARD's folds.json); each fold trains on the other topics."""
    from evalstore.services import splits

    made = splits.import_split(state(ctx).engine(), path, qrels=qrels, name=name)
    info(f"split '{name}': {made.folds} fold(s) from {path}")
    render(made.sizes, ["fold", "train", "train_distinct", "test"], fmt, title=f"split '{name}'")


@app.command("list")
def list_(ctx: typer.Context, fmt: Annotated[OutputFormat, typer.Option("--format")] = OutputFormat.table) -> None:
    """List the splits."""
    from evalstore.services import splits

    rows = [s.as_dict() for s in splits.list_splits(state(ctx).engine())]
    render(rows, ["name", "source", "method", "folds", "seed", "stratify_by"], fmt, title="splits")


@app.command("show")
def show(
    ctx: typer.Context, name: str, fmt: Annotated[OutputFormat, typer.Option("--format")] = OutputFormat.table
) -> None:
    """A split's settings and each fold's sizes."""
    from evalstore.services import splits

    found = splits.show_split(state(ctx).engine(), name)
    render_record(found.as_dict(), fmt, title=f"split '{name}'")
    if fmt is OutputFormat.table:
        render(found.sizes, ["fold", "train", "train_distinct", "test"], fmt, title="folds")


class ExportFormat(StrEnum):
    json = "json"
    tsv = "tsv"


@app.command("export")
def export(
    ctx: typer.Context,
    name: str,
    fold: Annotated[int | None, typer.Option("--fold", help="Only this fold (1-based).")] = None,
    part: Annotated[str | None, typer.Option("--part", help="Only the train or the test units.")] = None,
    fmt: Annotated[
        ExportFormat,
        typer.Option(
            "--format",
            help="json: the settings, seed and each fold's lists | tsv: one line per fold, part, unit, weight.",
        ),
    ] = ExportFormat.json,
) -> None:
    """Each fold's train and test topics (or items), in the split's order, with its seed: what to
    train a learned system on."""
    from evalstore.services import splits

    exported = splits.export_split(state(ctx).engine(), name, fold=fold, part=part)
    if fmt is ExportFormat.json:
        sys.stdout.write(json.dumps(exported.as_dict(), indent=2) + "\n")
        return
    awkward = next(
        (u for e in exported.folds for p in (e.train, e.test) for u in p or () if "\t" in u or "\n" in u or "\r" in u),
        None,
    )
    if awkward is not None:
        raise InvalidParameterError(
            f"Unit {awkward!r} holds a tab or a line break, which TSV cannot carry; use --format json."
        )
    sys.stdout.write("fold\tpart\tunit\tweight\n")
    for entry in exported.folds:
        for part_name, units in (("train", entry.train), ("test", entry.test)):
            for unit in units or ():
                weight = entry.train_weights.get(unit, 1) if part_name == "train" else 1
                sys.stdout.write(f"{entry.fold}\t{part_name}\t{unit}\t{weight}\n")


@app.command("results")
def results(
    ctx: typer.Context, name: str, fmt: Annotated[OutputFormat, typer.Option("--format")] = OutputFormat.table
) -> None:
    """The fold values stored for a split by 'evaluate --splits'."""
    from evalstore.services import splits

    rows = splits.stored_fold_values(state(ctx).engine(), name).to_dict(orient="records")
    render(
        [{str(k): v for k, v in row.items()} for row in rows],
        ["run", "evaluation", "fold", "measure", "value"],
        fmt,
        title=f"fold values of split '{name}'",
    )
