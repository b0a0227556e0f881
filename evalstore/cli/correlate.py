"""`evalstore correlate`: do two orderings of the systems agree?"""

import json
import sys
from typing import Annotated

import typer

from evalstore.cli._context import state
from evalstore.cli._errors import usage_conflict
from evalstore.cli._output import ReportFormat, render


def correlate(
    ctx: typer.Context,
    qrels: Annotated[list[str], typer.Option("--qrels", help="Qrels name (once, or twice with one --measure).")],
    measure: Annotated[list[str], typer.Option("--measure", help="Measure (twice, or once with two --qrels).")],
    fmt: Annotated[ReportFormat, typer.Option("--format")] = ReportFormat.table,
    relevance_level: Annotated[int, typer.Option("-l", help="Order the runs by evaluations made with this level.")] = 1,
    max_docs: Annotated[int | None, typer.Option("-M", min=1, help="... made with this -M.")] = None,
    missing: Annotated[str, typer.Option("--missing", help="... made with this missing-topic policy.")] = "zero",
) -> None:
    """Agreement of two system rankings (by mean score): Kendall's tau, tau-AP (the first ordering is
    the reference) and Spearman's rho, with the pairs of systems the two orderings swap. The means
    come from evaluations made with the same options (-l, -M, --missing), as the leaderboard's."""
    from evalstore.services.comparisons import correlate as compute
    from evalstore.services.kinds.ranking import Selection

    if sorted((len(qrels), len(measure))) != [1, 2]:
        raise usage_conflict(ctx, "Give one --qrels and two --measure, or two --qrels and one --measure.")
    result = compute(
        state(ctx).engine(),
        qrels_names=qrels,
        measures=measure,
        selection=Selection(relevance_level=relevance_level, max_docs=max_docs, missing_topics=missing),
    )
    if fmt is ReportFormat.json:
        sys.stdout.write(json.dumps(result.as_dict(), indent=2) + "\n")
        return
    r = result.result
    summary = {
        "reference": result.first,
        "other": result.second,
        "systems": r.systems,
        "Kendall tau": f"{r.kendall_tau:.4f}",
        "tau-AP": f"{r.tau_ap:.4f}",
        "Spearman rho": f"{r.spearman_rho:.4f}",
        "concordant": r.concordant,
        "discordant": r.discordant,
    }
    render([summary], list(summary), fmt, title=f"rank correlation ({result.selection.describe()})")
    if fmt is ReportFormat.csv:
        return
    scores = dict(zip(result.systems, zip(result.first_scores, result.second_scores, strict=True), strict=True))
    swapped = [
        {
            "above in reference": a,
            "above in other": b,
            "reference": f"{scores[a][0]:.4f} > {scores[b][0]:.4f}",
            "other": f"{scores[a][1]:.4f} < {scores[b][1]:.4f}",
        }
        for a, b in r.swapped
    ]
    if swapped:
        render(swapped, list(swapped[0]), fmt, title=f"{len(swapped)} swapped pairs")
