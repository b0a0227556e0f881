"""`evalstore repro`: reproducibility and replicability figures of a reproduced run (Breuer et al. 2020)."""

import json
import sys
from typing import Annotated

import typer

from evalstore.cli._context import state
from evalstore.cli._output import OutputFormat, info, render, warn


def repro(
    *,
    ctx: typer.Context,
    qrels: Annotated[str, typer.Option("--qrels", help="The qrels the original runs were evaluated on.")],
    original: Annotated[str, typer.Option("--original", help="The original (advanced) run.")],
    original_baseline: Annotated[
        str | None,
        typer.Option(
            "--original-baseline", help="The original baseline run (with --reproduced-baseline: ER and DeltaRI)."
        ),
    ] = None,
    reproduced: Annotated[str, typer.Option("--reproduced", help="The reproduced (or replicated) advanced run.")],
    reproduced_baseline: Annotated[
        str | None, typer.Option("--reproduced-baseline", help="The reproduced baseline.")
    ] = None,
    reproduced_qrels: Annotated[
        str | None,
        typer.Option(
            "--reproduced-qrels",
            help="Replicability: the other "
            "collection's qrels the reproduced runs are evaluated on (unpaired "
            "t-test, ER, DeltaRI; no KTU, RBO or RMSE across collections).",
        ),
    ] = None,
    measure: Annotated[
        list[str], typer.Option("--measure", help="Measure (repeatable; default AP, nDCG@10, P@10).")
    ] = [],
    depth: Annotated[
        int, typer.Option("--depth", help="KTU and RBO compare the top DEPTH documents (repro_eval: 1000).")
    ] = 1000,
    rbo_p: Annotated[float, typer.Option("--rbo-p", help="RBO's persistence (repro_eval: 0.95).")] = 0.95,
    per_topic: Annotated[
        bool, typer.Option("--per-topic", help="Print each topic's KTU and RBO (table, csv).")
    ] = False,
    fmt: Annotated[OutputFormat, typer.Option("--format")] = OutputFormat.table,
) -> None:
    """How far a reproduced run is from the original: KTU and RBO (document order), RMSE and nRMSE
    (per-topic values), the t-test's p-value (paired on the same qrels, unpaired across
    collections) and, with both baselines, ER and DeltaRI. Runs not yet evaluated on the qrels are
    evaluated first. The figures are stored with the evaluations' ids (shown on the reproduced
    run's page) and logged to MLflow unless EVALSTORE_MLFLOW=off."""
    from evalstore.config import mlflow_enabled
    from evalstore.services import repro as service
    from evalstore.services.plain import plain

    result = service.reproduce(
        state(ctx).engine(),
        qrels=qrels,
        original=original,
        reproduced=reproduced,
        original_baseline=original_baseline,
        reproduced_baseline=reproduced_baseline,
        reproduced_qrels=reproduced_qrels,
        measures=measure or None,
        depth=depth,
        rbo_p=rbo_p,
    )
    for note in result.notes:
        warn(note)
    info(
        f"{result.kind} of run '{original}' by run '{reproduced}' (evaluations "
        f"{', '.join(f'{role} {i}' for role, i in result.evaluation_ids.items())})"
    )
    if fmt is OutputFormat.json:
        sys.stdout.write(json.dumps(result.as_dict(), indent=2) + "\n")
    elif per_topic:
        render(
            [{str(k): v for k, v in row.items()} for row in result.per_topic.to_dict(orient="records")],
            ["part", "topic", "KTU", "RBO"],
            fmt,
            title=f"KTU and RBO per topic (top {depth})",
        )
    else:
        render(
            plain(result.figures), service.FIGURE_COLUMNS, fmt, title=f"'{reproduced}' {result.kind} of '{original}'"
        )
    if mlflow_enabled():
        info(f"logged to MLflow run {service.log_reproduction(result)}")
