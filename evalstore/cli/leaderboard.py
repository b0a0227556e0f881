"""`evalstore leaderboard`: everything evaluated against one set of judgments, best first."""

from typing import Annotated

import typer

from evalstore.cli._context import state
from evalstore.cli._errors import usage_conflict
from evalstore.cli._output import ReportFormat, render, warn


def leaderboard(
    ctx: typer.Context,
    qrels: Annotated[str | None, typer.Option("--qrels", help="Name of the stored qrels.")] = None,
    measure: Annotated[
        list[str],
        typer.Option(
            "--measure",
            help="Measure to show (repeatable; default AP, nDCG@10, P@10, RR; with --labels f1_macro, accuracy, mcc; "
            "with --nuggets V_strict, A_strict, V, A, W).",
        ),
    ] = [],
    sort: Annotated[str | None, typer.Option("--sort", help="Measure to sort by (default: the first).")] = None,
    fmt: Annotated[ReportFormat, typer.Option("--format")] = ReportFormat.table,
    labels: Annotated[
        str | None, typer.Option("--labels", help="Rank prediction sets on these gold labels instead.")
    ] = None,
    nuggets: Annotated[
        str | None, typer.Option("--nuggets", help="Rank answer runs on this nugget bank's assignments instead.")
    ] = None,
    assessor: Annotated[
        str,
        typer.Option(
            "--assessor",
            help="With --nuggets: whose assignments: human (people's labels as one set: imported, "
            "else each topic's first assessor's), "
            "human:NAME (one person's on the nugget page) or judge:NAME.",
        ),
    ] = "human",
    relevance_level: Annotated[int, typer.Option("-l", help="Compare evaluations made with this relevance level.")] = 1,
    max_docs: Annotated[int | None, typer.Option("-M", min=1, help="Compare evaluations made with this -M.")] = None,
    missing: Annotated[
        str, typer.Option("--missing", help="Compare evaluations made with this missing-topic policy (zero or skip).")
    ] = "zero",
    known: Annotated[
        str | None,
        typer.Option(
            "--known",
            help="The user-oriented measures (Coverage, Novelty, ...) "
            "against these known qrels (as evaluated with --known).",
        ),
    ] = None,
    ppi: Annotated[
        bool,
        typer.Option(
            "--ppi",
            help="On a hybrid qrels version: prediction-powered means and 95% intervals (the judge's labels "
            "corrected by people's), and tiers from them; computed from the labels, for the first --measure.",
        ),
    ] = False,
) -> None:
    """Every run evaluated on the qrels: mean with 95% confidence interval, topics, judged@10
    (or, with --labels, every prediction set evaluated on the gold labels; with --nuggets, every
    answer run evaluated on the nugget bank: V_strict, A_strict, V, A, W by default).

    An answer run's references are a ranking run of its name: --qrels lists them beside the
    ranking runs.

    Only evaluations made with the same options are put side by side (-l, -M, --missing; by
    default evaluate's defaults): each measure comes from a run's newest evaluation with them that
    holds it, and the title (JSON, CSV: columns) says which options they are. markdown and latex
    print the table ready to paste into a report."""
    from evalstore.services import comparisons

    given = [name for name in (qrels, labels, nuggets) if name is not None]
    if len(given) > 1:
        raise usage_conflict(
            ctx, "Give one of --qrels (ranking runs), --labels (predictions) or --nuggets (answer runs)."
        )
    if not given:
        raise usage_conflict(
            ctx, "Give --qrels NAME (ranking runs), --labels NAME (predictions) or --nuggets NAME (answer runs)."
        )
    if ppi:
        if qrels is None:
            raise usage_conflict(ctx, "--ppi ranks runs on a hybrid qrels version: give --qrels NAME.")
        _ppi_board(ctx, qrels, measure[0] if measure else "nDCG@10", fmt)
        return
    kind = "ranking" if qrels is not None else "classifier" if labels is not None else "answers"
    judgments = given[0]
    options: dict[str, object] | None = None
    if kind == "ranking":
        options = {
            "relevance_level": relevance_level,
            "max_docs": max_docs,
            "missing_topics": missing,
            "known_qrels": known,
        }
    elif kind == "answers":
        options = {"assessor": assessor}
    board = comparisons.leaderboard(
        state(ctx).engine(), kind=kind, judgments=judgments, measures=measure, sort=sort, options=options
    )
    if fmt in (ReportFormat.json, ReportFormat.csv):
        render(board.records, board.record_columns, fmt, title=board.title)
        return
    render(board.cells, board.cell_columns, fmt, title=board.title)
    for message in board.warnings:
        warn(message)
    if kind == "ranking":  # on a judge's labels: the judge's probe, and the runs that use its model
        from evalstore.services.tasks.judge_made import board_notes

        for message in board_notes(state(ctx).engine(), judgments, [r["run"] for r in board.records]):
            warn(message)


def _ppi_board(ctx: typer.Context, qrels: str, measure: str, fmt: ReportFormat) -> None:
    from evalstore.services.judges import ppi_board
    from evalstore.services.plain import plain

    board = plain(ppi_board.ppi_board(state(ctx).engine(), qrels, measure=measure))
    columns = ["tier", "run", "mean", "low", "high", "half_width", "llm_mean", "correction", "human_mean"]
    columns += ["human_half_width", "half_width_independent"]
    title = (
        f"{board['measure']} on {board['qrels']}: prediction-powered means, {board['confidence']:.0%} intervals "
        f"(judge {board['judge']} on {board['llm_topics']} topics, corrected by people's labels on "
        f"{board['human_topics']})"
    )
    rows = board["rows"]
    if fmt not in (ReportFormat.json, ReportFormat.csv):
        rows = [{k: f"{v:.4f}" if isinstance(v, float) else v for k, v in row.items()} for row in rows]
    render(rows, columns, fmt, title=title)
    if board["partly_judged_topics"]:
        warn(f"topics people judged in part are left out of the correction: {', '.join(board['partly_judged_topics'])}")
