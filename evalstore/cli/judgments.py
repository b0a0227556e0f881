"""`evalstore judgments ...`: assessors' judgments of a pool, and their agreement."""

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from evalstore.cli._context import state
from evalstore.cli._output import ReportFormat, info, render

app = typer.Typer(no_args_is_help=True, help="Assessors' judgments of a pool, and their agreement.")


@app.command("import")
def import_judgments(
    ctx: typer.Context,
    path: Annotated[
        Path, typer.Argument(help="Filled-in sheet: TSV/CSV with topic, doc, relevance columns, or TREC qrels lines.")
    ],
    pool: Annotated[str, typer.Option("--pool")],
    assessor: Annotated[str, typer.Option("--assessor")],
    allow_outside_pool: Annotated[
        bool, typer.Option("--allow-outside-pool", help="Keep judgments of documents the pool does not hold.")
    ] = False,
) -> None:
    """Store one assessor's judgments (all or nothing); a re-import replaces that assessor's labels."""
    from evalstore.services import pools

    count = pools.import_judgments(
        state(ctx).engine(), path, pool_name=pool, assessor=assessor, allow_outside_pool=allow_outside_pool
    )
    info(f"{count} judgments by '{assessor}' stored for pool '{pool}'")


@app.command("agreement")
def agreement(
    ctx: typer.Context,
    pool: Annotated[str, typer.Option("--pool")],
    fmt: Annotated[ReportFormat, typer.Option("--format")] = ReportFormat.table,
) -> None:
    """Cohen's kappa per pair of assessors (linearly weighted too for graded labels), Fleiss' kappa and
    Krippendorff's ordinal alpha, with the number of items each is computed over."""
    from dataclasses import asdict

    from evalstore.services import pools

    result = pools.pool_agreement(state(ctx).engine(), pool)
    if fmt is ReportFormat.json:
        sys.stdout.write(json.dumps(asdict(result), indent=2) + "\n")
        return
    render(
        [asdict(p) for p in result.pairs],
        ["first", "second", "items", "observed", "kappa", "weighted_kappa", "quadratic_kappa"],
        fmt,
        title=f"pool {pool}: Cohen's kappa per pair",
    )
    overall = [
        {"statistic": "Fleiss' kappa", "value": result.fleiss_kappa, "items": result.items_all},
        {"statistic": "Krippendorff's alpha (ordinal)", "value": result.krippendorff_alpha, "items": result.items_any},
        *(
            {"statistic": f"Krippendorff's alpha ({level})", "value": value, "items": result.items_any}
            for level, value in result.krippendorff_by_level.items()
        ),
    ]
    render(overall, ["statistic", "value", "items"], fmt, title=f"pool {pool}: all assessors")
