"""`evalstore compare`: is one system better than another, topic by topic (or group by group)?"""

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from evalstore.cli._context import state
from evalstore.cli._errors import usage_conflict
from evalstore.cli._output import ReportFormat, format_p, info, render, warn
from evalstore.errors import InvalidParameterError

if TYPE_CHECKING:
    from evalstore.services import comparisons

_TABLE_COLUMNS = [
    "measure",
    "run",
    "versus",
    "mean run",
    "mean versus",
    "difference",
    "CI",
    "statistic",
    "p",
    "p adjusted",
    "sig",
    "effect size",
    "W/T/L",
]
_FLAT_COLUMNS = [
    "measure",
    "run",
    "versus",
    "mean_run",
    "mean_versus",
    "difference",
    "ci_low",
    "ci_high",
    "statistic",
    "p_value",
    "p_corrected",
    "significant",
    "effect_size",
    "wins",
    "ties",
    "losses",
    "topics",
]


def compare(
    ctx: typer.Context,
    runs: Annotated[list[str] | None, typer.Argument(help="Runs to compare (with --baseline, one is enough).")] = None,
    qrels: Annotated[str | None, typer.Option("--qrels", help="Name of the stored qrels.")] = None,
    measure: Annotated[list[str], typer.Option("--measure", help="Measure (repeatable).")] = [],
    baseline: Annotated[
        str | None,
        typer.Option(
            "--baseline",
            help="Compare every run with this one only; the "
            "correction family is then these comparisons (default: all pairs).",
        ),
    ] = None,
    test: Annotated[
        str,
        typer.Option(
            "--test",
            help="t | randomization | bootstrap | wilcoxon | sign; "
            "with --labels also mcnemar (item-level correctness).",
        ),
    ] = "t",
    correction: Annotated[
        str,
        typer.Option(
            "--correction",
            help="holm | bonferroni | bh | hochberg | sidak | holm-sidak | by | none, within each measure.",
        ),
    ] = "holm",
    multi: Annotated[
        str | None,
        typer.Option(
            "--multi",
            help="tukey | randomized-tukey: all runs at once on the "
            "system x topic design (replaces --test and --correction).",
        ),
    ] = None,
    alpha: Annotated[float, typer.Option("--alpha", help="Significance level; intervals are at 1 - alpha.")] = 0.05,
    resamples: Annotated[
        int,
        typer.Option("--resamples", help="Resamples of the randomization, bootstrap and randomized Tukey procedures."),
    ] = 10_000,
    seed: Annotated[
        int | None, typer.Option("--seed", help="Seed of the resampling (default: drawn and printed).")
    ] = None,
    missing: Annotated[
        str,
        typer.Option("--missing", help="A topic one run lacks: 'error' (say how to fix it) or 'zero' (score it 0)."),
    ] = "error",
    fmt: Annotated[ReportFormat, typer.Option("--format")] = ReportFormat.table,
    plot: Annotated[
        Path | None, typer.Option("--plot", help="Write the per-topic differences, sorted, to this PNG.")
    ] = None,
    mlflow: Annotated[bool, typer.Option("--mlflow", help="Log the comparison to MLflow (table and plot).")] = False,
    labels: Annotated[
        str | None,
        typer.Option(
            "--labels",
            help="Compare prediction sets on these gold labels: McNemar, or a paired test over per-group values.",
        ),
    ] = None,
    nuggets: Annotated[
        str | None,
        typer.Option(
            "--nuggets",
            help="Compare answer runs on this nugget bank: their per-topic answer measures (default --measure W), "
            "from each run's newest evaluation on it.",
        ),
    ] = None,
    assessor: Annotated[
        str,
        typer.Option(
            "--assessor",
            help="With --nuggets: whose labels the evaluations read: human (people's labels as one set: imported, "
            "else each topic's first assessor's), "
            "human:NAME (one person's on the nugget page) or judge:NAME.",
        ),
    ] = "human",
) -> None:
    """Paired, topic-aligned comparison of runs: mean difference with its confidence interval, test
    statistic, p-value and corrected p-value, effect size (d_z), and per-topic wins/ties/losses.

    Runs without a stored evaluation holding the measures are evaluated first."""
    from evalstore._logging import configure_logging
    from evalstore.services import comparisons

    configure_logging()
    runs = list(runs or [])
    if labels is not None:
        if qrels is not None:
            raise usage_conflict(ctx, "Give --qrels (ranking runs) or --labels (predictions), not both.")
        _compare_predictions(
            ctx,
            labels,
            runs,
            measure,
            test=test,
            baseline=baseline,
            alpha=alpha,
            resamples=resamples,
            seed=seed,
            fmt=fmt,
        )
        return
    if nuggets is not None and qrels is not None:
        raise usage_conflict(ctx, "Give --qrels (ranking runs) or --nuggets (answer runs), not both.")
    if nuggets is not None:
        measure = measure or ["W"]
    elif qrels is None or not measure:
        raise usage_conflict(
            ctx,
            "Give --qrels NAME and --measure M (ranking runs), --nuggets BANK (answer runs), "
            "or --labels NAME (predictions).",
        )
    if plot is not None and plot.suffix.lower() != ".png":
        raise InvalidParameterError(f"--plot writes a PNG image; give a path ending in .png, not '{plot}'.")
    if plot is not None:  # before any work: the plot's size is known from the arguments
        names = list(dict.fromkeys([*([baseline] if baseline else []), *runs]))
        comparisons.check_plot_size(len(measure) * len(comparisons.pairs_for(names, baseline)))
    if nuggets is not None:
        result = comparisons.compare_answers(
            state(ctx).engine(),
            bank_name=nuggets,
            answer_names=runs,
            measures=measure,
            assessor=assessor,
            baseline=baseline,
            test=test,
            correction=correction,
            alpha=alpha,
            resamples=resamples,
            seed=seed,
            missing=missing,
            multi=multi,
        )
    else:
        assert qrels is not None
        result = comparisons.compare(
            state(ctx).engine(),
            qrels_name=qrels,
            run_names=runs,
            measures=measure,
            baseline=baseline,
            test=test,
            correction=correction,
            alpha=alpha,
            resamples=resamples,
            seed=seed,
            missing=missing,
            multi=multi,
        )
    _report(result, seed=seed, plot=plot, mlflow=mlflow, fmt=fmt)


def _report(
    result: "comparisons.Comparison", *, seed: int | None, plot: Path | None, mlflow: bool, fmt: ReportFormat
) -> None:
    """A comparison's notes on stderr, its figure written or logged, its table printed."""
    from evalstore.services import comparisons

    settings = result.settings
    if settings.seed is not None and seed is None:
        info(f"seed {settings.seed} (pass --seed {settings.seed} to reproduce)")
    for run, topics in result.matrix.zero_filled.items():
        info(f"run '{run}': {len(topics)} topic(s) scored 0 (--missing zero)")
    for note in result.notes:
        warn(note)
    figure = comparisons.comparison_figure(result) if plot is not None or mlflow else None
    if plot is not None and figure is not None:
        figure.savefig(plot)
        info(f"plot written to {plot}")
    _print_comparison(result, fmt)
    if mlflow:
        run_id = comparisons.log_comparison(result, figure)
        info(f"logged to MLflow run {run_id}")


def _compare_predictions(
    ctx: typer.Context,
    labels: str,
    runs: list[str],
    measure: list[str],
    *,
    test: str,
    baseline: str | None,
    alpha: float,
    resamples: int,
    seed: int | None,
    fmt: ReportFormat,
) -> None:
    """`compare --labels`: prediction sets compared on the gold labels, printed."""
    from evalstore.services import comparisons
    from evalstore.services.plain import plain

    outcome = comparisons.compare_predictions(
        state(ctx).engine(),
        labels_name=labels,
        names=runs,
        measures=measure,
        test=test,
        baseline=baseline,
        alpha=alpha,
        resamples=resamples,
        seed=seed,
    )
    if outcome.seed is not None:
        info(f"seed {outcome.seed} (pass --seed {outcome.seed} to reproduce)")
    for note in outcome.notes:
        warn(note)
    rows = plain(outcome.rows)
    shown = (
        rows
        if fmt in (ReportFormat.json, ReportFormat.csv)
        else [{key: format_p(value) if key == "p" else value for key, value in row.items()} for row in rows]
    )
    render(shown, list(rows[0]), fmt, title=outcome.title)


def _print_comparison(result: "comparisons.Comparison", fmt: ReportFormat) -> None:
    from evalstore.statistics.significance import STATISTIC_NAMES

    settings = result.settings
    if fmt is ReportFormat.json:
        sys.stdout.write(json.dumps(result.as_dict(), indent=2) + "\n")
        return
    if fmt is ReportFormat.csv:
        render([p.as_dict() for p in result.pairs], _FLAT_COLUMNS, fmt)
        return
    level = round(100 * (1 - settings.alpha))
    statistic = f"statistic ({STATISTIC_NAMES[settings.test]})"
    rows = [
        {
            "measure": p.measure,
            "run": p.run,
            "versus": p.versus,
            "mean run": f"{p.mean_run:.4f}",
            "mean versus": f"{p.mean_versus:.4f}",
            "difference": f"{p.difference:+.4f}",
            f"{level}% CI": f"[{p.ci_low:+.4f}, {p.ci_high:+.4f}]",
            statistic: f"{p.statistic:.3f}",
            "p": format_p(p.p_value),
            "p adjusted": format_p(p.p_corrected),
            "sig": "*" if p.significant else "",
            "effect size": f"{p.effect_size:+.2f}",
            "W/T/L": f"{p.wins}/{p.ties}/{p.losses}",
        }
        for p in result.pairs
    ]
    columns = [{"CI": f"{level}% CI", "statistic": statistic}.get(c, c) for c in _TABLE_COLUMNS]
    procedure = settings.test if settings.correction == "tukey" else f"{settings.test} test, {settings.correction}"
    seed_text = f", seed {settings.seed}, {settings.resamples} resamples" if settings.seed is not None else ""
    render(
        rows,
        columns,
        fmt,
        title=f"{settings.qrels}: {procedure} (alpha {settings.alpha}{seed_text}; {len(result.matrix.topics)} topics)",
    )
