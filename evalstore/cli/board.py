"""`evalstore evaluate` and `evalstore leaderboard`: evaluate stored runs and rank them."""

from __future__ import annotations

from pathlib import Path

import typer

from evalstore.cli._context import state
from evalstore.cli._output import OutputFormat, ReportFormat, info, render, warn
from evalstore.errors import EvaluationError, InvalidParameterError


def evaluate(
    ctx: typer.Context,
    qrels: str | None = typer.Option(None, "--qrels", help="Name of the stored qrels (ranking runs)."),
    run: list[str] = typer.Option([], "--run", help="Run name (repeatable)."),
    all_runs: bool = typer.Option(False, "--all-runs", help="Evaluate every registered run."),
    measures: str | None = typer.Option(
        None, "--measures", help="Comma-separated measures or groups (default: all_trec plus Judged@10, ERR@20, "
        "nDCG(gain=exp)@10; for subtopic qrels every ndeval measure, for preference judgments every prefs_* one)."),
    relevance_level: int = typer.Option(1, "-l", help="Relevance level: judged at least this is relevant."),
    max_docs: int | None = typer.Option(None, "-M", help="Keep only the top N documents per topic.", min=1),
    missing: str = typer.Option("zero", "--missing", help="A qrels topic the run lacks: 'zero' scores it 0 "
                                "(trec_eval -c), 'skip' leaves it out."),
    force: bool = typer.Option(False, "--force", help="Compute again even if a stored result exists."),
    wait: bool = typer.Option(False, "--wait", help="Wait for the results; with no worker running, compute them "
                              "in this process."),
    max_attempts: int = typer.Option(3, "--max-attempts", min=1, help="Claims before a job is failed."),
    fmt: OutputFormat = typer.Option(OutputFormat.table, "--format"),
    labels: str | None = typer.Option(None, "--labels", help="Gold labels (classification and clustering; "
                                      "instead of --qrels)."),
    predictions: list[str] = typer.Option([], "--predictions", help="Prediction set or clustering (repeatable; "
                                          "default: all of the labels')."),
    cost_matrix: Path | None = typer.Option(None, "--cost-matrix", help="CSV/TSV: true, predicted, cost."),
    threshold: str | None = typer.Option(None, "--threshold", help="Binary scores: a number, or best-f1 | youden "
                                         "| iso-accuracy (default: the predicted labels, else 0.5)."),
    positive: str | None = typer.Option(None, "--positive", help="Positive class of a binary task (default: the "
                                        "last in sorted order)."),
    prior: float | None = typer.Option(None, "--prior", help="P(positive) for --threshold iso-accuracy (default: "
                                       "the gold labels' prevalence)."),
    beta: float = typer.Option(1.0, "--beta", help="F-beta's beta."),
    baseline: str | None = typer.Option(None, "--baseline", help="Prediction set to report RelaImpr against."),
) -> None:
    """Queue evaluations of stored runs against stored qrels (one job per run), or of
    predictions against gold labels (--labels, one job per prediction set).

    The same inputs and options are one job: a finished one is reused unless --force. Without
    --wait the jobs wait for 'evalstore worker'."""
    from evalstore.services import jobs

    if labels is not None:
        from evalstore.cli.classify import evaluate_predictions

        if qrels is not None or run or all_runs:
            raise InvalidParameterError("--labels evaluates predictions; --qrels, --run and --all-runs are for "
                                        "ranking runs. Give one or the other.")
        evaluate_predictions(ctx, labels=labels, predictions=predictions, cost_matrix=cost_matrix,
                             threshold=threshold, positive=positive, prior=prior, beta=beta, baseline=baseline,
                             force=force, wait=wait, max_attempts=max_attempts, fmt=fmt)
        return
    if qrels is None:
        raise InvalidParameterError("Give --qrels NAME (ranking runs) or --labels NAME (predictions).")
    if bool(run) == all_runs:
        raise InvalidParameterError("Name runs with --run NAME (repeatable) or pass --all-runs, not both.")
    engine = state(ctx).engine()
    options = jobs.EvaluationOptions(
        tuple(_split_measures(measures)) if measures else jobs.DEFAULT_MEASURE_SET, relevance_level, max_docs,
        False, missing)
    refs = jobs.enqueue(engine, qrels_name=qrels, run_names=None if all_runs else run, options=options,
                        force=force, max_attempts=max_attempts)
    for ref in refs:
        info(f"job {ref.evaluation_id}: run '{ref.run}' on '{ref.qrels}': {ref.outcome}")
    if wait:
        from evalstore._logging import configure_logging
        from evalstore.config import mlflow_enabled
        from evalstore.services.worker import work_on

        configure_logging()
        work_on(engine, [r.evaluation_id for r in refs if r.outcome != "reused"], mlflow=mlflow_enabled())
    views = [jobs.show_job(engine, r.evaluation_id) for r in refs]
    render([v.as_dict() for v in views], ["id", "run", "qrels", "state", "attempts", "mlflow_state", "error"], fmt,
           title="evaluations")
    failed = [v for v in views if v.state in ("failed", "cancelled")]
    if wait and failed:
        raise EvaluationError(f"{len(failed)} of {len(views)} evaluations did not finish: "
                              + "; ".join(f"job {v.id} ({v.run}) {v.state}: {v.error}" for v in failed))


def _split_measures(text: str) -> list[str]:
    """Split on commas outside parentheses: 'AP,P(rel=2)@5,nDCG(gain=exp,discount=jk)@10'."""
    parts, depth, current = [], 0, ""
    for char in text:
        depth += (char == "(") - (char == ")")
        if char == "," and depth == 0:
            parts.append(current.strip())
            current = ""
        else:
            current += char
    parts.append(current.strip())
    return [p for p in parts if p]


def leaderboard(
    ctx: typer.Context,
    qrels: str | None = typer.Option(None, "--qrels", help="Name of the stored qrels."),
    measure: list[str] = typer.Option([], "--measure", help="Measure to show (repeatable; default AP, nDCG@10, "
                                      "P@10, RR; with --labels f1_macro, accuracy, mcc)."),
    sort: str | None = typer.Option(None, "--sort", help="Measure to sort by (default: the first)."),
    fmt: ReportFormat = typer.Option(ReportFormat.table, "--format"),
    labels: str | None = typer.Option(None, "--labels", help="Rank prediction sets on these gold labels instead."),
) -> None:
    """Every run evaluated on the qrels: mean with 95% confidence interval, topics, judged@10
    (or, with --labels, every prediction set evaluated on the gold labels).

    markdown and latex print the table ready to paste into a report."""
    from evalstore.services.evaluations import leaderboard as build

    if labels is not None:
        from evalstore.cli.classify import leaderboard_predictions

        if qrels is not None:
            raise InvalidParameterError("Give --qrels (ranking runs) or --labels (predictions), not both.")
        leaderboard_predictions(ctx, labels=labels, measures=[sort, *measure] if sort else measure, fmt=fmt)
        return
    if qrels is None:
        raise InvalidParameterError("Give --qrels NAME (ranking runs) or --labels NAME (predictions).")

    names, rows = build(state(ctx).engine(), qrels_name=qrels, measures=measure or None, sort=sort)
    if fmt in (ReportFormat.json, ReportFormat.csv):
        interval = [f"{n} CI {end}" for n in names for end in ("low", "high")]
        render([r.as_dict() for r in rows], ["run", "system", "topics", *names, *interval, "Judged@10"], fmt,
               title=f"leaderboard: {qrels}")
        return
    # subtopic and preference judgments have no Judged@10: no empty column for them
    coverage = ["Judged@10"] if any(row.judged_at_10 is not None for row in rows) else []
    header = ["#", "run", "topics", *[f"{n} [95% CI]" for n in names], *coverage]
    table_rows = []
    for rank, row in enumerate(rows, start=1):
        cells = {"#": str(rank), "run": row.run, "topics": str(row.topics),
                 "Judged@10": "" if row.judged_at_10 is None else f"{row.judged_at_10:.2f}"}
        for name in names:
            mean, low, high = row.values.get(name, (float("nan"),) * 3)
            cells[f"{name} [95% CI]"] = f"{mean:.4f} [{low:.4f}, {high:.4f}]"
        table_rows.append(cells)
    title = f"leaderboard: {qrels} (sorted by {sort or names[0]})"
    render(table_rows, header, fmt, title=title)
    poorly = [r.run for r in rows if r.judged_at_10 is not None and r.judged_at_10 < 0.5]
    if poorly:
        warn(f"less than half of the top 10 is judged for: {', '.join(poorly)}; their scores are unreliable")
