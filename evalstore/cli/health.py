"""`evalstore health` and `evalstore standardize`: how much a test collection can be trusted."""

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from evalstore.cli._context import state
from evalstore.cli._output import ReportFormat, info, render

if TYPE_CHECKING:  # the services load when a command runs, not when the CLI starts
    from evalstore.services.health import HealthReport


def health(
    ctx: typer.Context,
    qrels: Annotated[str, typer.Option("--qrels", help="Stored qrels whose evaluated runs are examined.")],
    measure: Annotated[
        list[str], typer.Option("--measure", help="Measures (repeatable; default AP, nDCG@10, P@10).")
    ] = [],
    test: Annotated[
        str,
        typer.Option(
            "--test", help="Paired test of discriminative power: t, randomization, bootstrap, wilcoxon, sign."
        ),
    ] = "t",
    correction: Annotated[
        str,
        typer.Option(
            "--correction", help="holm, bonferroni, bh, hochberg, sidak, holm-sidak, by (Benjamini-Yekutieli), none."
        ),
    ] = "holm",
    alpha: Annotated[float, typer.Option("--alpha")] = 0.05,
    power: Annotated[float, typer.Option("--power", help="Power the topic-set size is designed for.")] = 0.8,
    difference: Annotated[
        float,
        typer.Option(
            "--difference",
            help="The difference in a measure worth detecting (topic-set size) and a 'large' one (swap rates).",
        ),
    ] = 0.05,
    pool_depth: Annotated[
        int, typer.Option("--pool-depth", min=1, help="Depth of the runs' pool for the leave-one-run/team-out test.")
    ] = 100,
    seed: Annotated[
        int | None, typer.Option("--seed", help="Seed of the topic resampling (default: drawn, recorded).")
    ] = None,
    plot: Annotated[Path | None, typer.Option("--plot", help="Write the swap-rate curve to this PNG.")] = None,
    fmt: Annotated[ReportFormat, typer.Option("--format")] = ReportFormat.table,
) -> None:
    """A collection's health from its runs' stored per-topic scores: discriminative power, ranking
    stability over topic subsets (swap rates), the topics needed to detect a difference, pool bias
    (leave one run / team out), Judged@10 per run. Computed now, over every run evaluated on the
    qrels: the report a worker stores for a task's health page is not read."""
    from evalstore.services import health as compute

    report = compute.health(
        state(ctx).engine(),
        qrels_name=qrels,
        measures=measure or list(compute.HEALTH_MEASURES),
        test=test,
        correction=correction,
        alpha=alpha,
        power=power,
        difference=difference,
        seed=seed,
        pool_depth=pool_depth,
    )
    info(f"seed {report.seed} (pass --seed {report.seed} to reproduce the swap rates)")
    if plot is not None:
        _plot(report, qrels, plot)
    if fmt is ReportFormat.json:
        sys.stdout.write(json.dumps(report.as_dict(), indent=2) + "\n")
        return
    _tables(report, qrels, fmt)
    for note in report.notes:
        info(f"note: {note}")


def _plot(report: "HealthReport", qrels: str, plot: Path) -> None:
    from evalstore.plots import swap_rates

    series = {
        m: (
            [s.topics for s in report.stability if s.measure == m],
            [s.swap_rate for s in report.stability if s.measure == m],
        )
        for m in report.measures
    }
    swap_rates(series, title=f"{qrels}: ranking stability over topic subsets ({len(report.runs)} runs)").savefig(plot)
    info(f"plot written to {plot}")


def _tables(report: "HealthReport", qrels: str, fmt: ReportFormat) -> None:
    """The report's tables: discriminative power, stability, topic-set size, pool bias, Judged@10."""
    head = f"{qrels}: {len(report.runs)} runs, {report.topics} topics"
    render(
        [
            {
                "measure": d.measure,
                "pairs": d.pairs,
                "significant": d.significant,
                "share": round(d.share, 4),
                "smallest significant difference": None
                if d.smallest_significant_difference is None
                else round(d.smallest_significant_difference, 4),
            }
            for d in report.discriminative_power
        ],
        ["measure", "pairs", "significant", "share", "smallest significant difference"],
        fmt,
        title=f"{head}: discriminative power ({report.test} test, {report.correction}, alpha {report.alpha})",
    )
    render(
        [
            {
                "measure": s.measure,
                "topics per set": s.topics,
                "swap rate": round(s.swap_rate, 4),
                f"swap rate, difference > {report.large_difference}": None
                if s.swap_rate_large is None
                else round(s.swap_rate_large, 4),
            }
            for s in report.stability
        ],
        ["measure", "topics per set", "swap rate", f"swap rate, difference > {report.large_difference}"],
        fmt,
        title="ranking stability: two disjoint topic sets (Voorhees & Buckley)",
    )
    render(
        [
            {
                "measure": t.measure,
                "residual variance": round(t.residual_variance, 6),
                "difference": t.difference,
                "topics needed": t.topics_needed,
                f"detectable with {report.topics}": round(t.detectable_with_these_topics, 4),
            }
            for t in report.topic_set_size
        ],
        ["measure", "residual variance", "difference", "topics needed", f"detectable with {report.topics}"],
        fmt,
        title=f"topic-set size: paired t-test, power {report.power}, alpha {report.alpha} (Sakai)",
    )
    _pool_bias_tables(report, fmt)
    render(
        [{"run": run, "Judged@10": None if v is None else round(v, 4)} for run, v in report.judged_at_10.items()],
        ["run", "Judged@10"],
        fmt,
        title="Judged@10 per run",
    )


def _pool_bias_tables(report: "HealthReport", fmt: ReportFormat) -> None:
    """Pool bias: each run's (and team's) unique relevant documents, and its first measure with and
    without them."""
    main = report.measures[0]
    for title, rows in (
        (f"pool bias, leave one run out (depth-{report.pool_depth} pool of the runs)", report.leave_one_run_out),
        ("pool bias, leave one team out", [r for r in report.leave_one_team_out if "group" in r]),
    ):
        if rows:
            render(
                [
                    {
                        **{k: r[k] for k in ("group", "run") if k in r},
                        "unique relevant": r["unique_relevant"],
                        main: round(r[main], 4),
                        f"{main} without": round(r[f"{main} without"], 4),
                        "change": round(r[f"{main} change"], 4),
                        "rank": r[f"{main} rank"],
                        "rank without": r[f"{main} rank without"],
                    }
                    for r in rows
                ],
                [
                    *(k for k in ("group", "run") if k in rows[0]),
                    "unique relevant",
                    main,
                    f"{main} without",
                    "change",
                    "rank",
                    "rank without",
                ],
                fmt,
                title=title,
            )


def standardize(
    ctx: typer.Context,
    qrels: Annotated[str, typer.Option("--qrels")],
    measure: Annotated[list[str], typer.Option("--measure", help="Measures (repeatable).")],
    output: Annotated[
        Path | None,
        typer.Option(
            "-o",
            "--output",
            help="Write trec_eval's -Z file here (qid measure mean stddev), for 'evalstore trec-eval -Z FILE'.",
        ),
    ] = None,
    name: Annotated[
        str | None,
        typer.Option(
            "--name",
            help="Store the statistics and z-scores under this name (default QRELS-z), replacing what it held.",
        ),
    ] = None,
    fmt: Annotated[ReportFormat, typer.Option("--format")] = ReportFormat.table,
) -> None:
    """Per-topic z-scores (Webber, Moffat & Zobel 2008): each topic's mean and standard deviation
    over the runs evaluated on the qrels, and each run's mean z-score; stored, and written as
    trec_eval's -Z file with -o."""
    from evalstore.services import health as compute

    result = compute.standardize(state(ctx).engine(), qrels_name=qrels, measures=measure, path=output, name=name)
    info(f"standardisation '{result.name}' stored: {len(result.runs)} runs x {len(result.zscores)} measure(s)")
    if output is not None:
        info(f"z-score statistics of {len(result.runs)} runs written to {output}")
    means = {m: frame.mean(axis=1) for m, frame in result.zscores.items()}  # each run's mean z over topics
    first = next(iter(means))
    rows = [
        {"run": run, **{f"mean z {m}": round(float(means[m][run]), 4) for m in means}}
        for run in sorted(result.runs, key=lambda r: -float(means[first][r]))
    ]
    render(rows, list(rows[0]), fmt, title=f"{qrels}: standardised scores")
