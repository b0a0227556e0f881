"""`evalstore evaluate`: queue evaluations of stored runs (or of predictions) and, with --wait, get them done."""

from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer

from evalstore.cli._context import state
from evalstore.cli._errors import usage_conflict
from evalstore.cli._output import OutputFormat, info, render, warn


class BackendName(StrEnum):
    """evalstore.backends.BACKENDS, as typer lists the choices."""

    local = "local"
    duckdb = "duckdb"
    spark = "spark"


def evaluate(
    ctx: typer.Context,
    qrels: Annotated[str | None, typer.Option("--qrels", help="Name of the stored qrels (ranking runs).")] = None,
    run: Annotated[list[str], typer.Option("--run", help="Run name (repeatable).")] = [],
    all_runs: Annotated[bool, typer.Option("--all-runs", help="Evaluate every registered run.")] = False,
    measures: Annotated[
        str | None,
        typer.Option(
            "--measures",
            help="Comma-separated measures or groups (default: all_trec plus Judged@10, ERR@20, "
            "nDCG(gain=exp)@10 and Compat; for subtopic qrels every ndeval measure, for preference judgments "
            "every prefs_* one).",
        ),
    ] = None,
    relevance_level: Annotated[int, typer.Option("-l", help="Relevance level: judged at least this is relevant.")] = 1,
    max_docs: Annotated[int | None, typer.Option("-M", help="Keep only the top N documents per topic.", min=1)] = None,
    known: Annotated[
        str | None,
        typer.Option(
            "--known",
            help="Qrels of the relevant documents the user already knew: "
            "adds Coverage, Novelty, RelativeRecall and RecallEffort.",
        ),
    ] = None,
    missing: Annotated[
        str,
        typer.Option(
            "--missing", help="A qrels topic the run lacks: 'zero' scores it 0 (trec_eval -c), 'skip' leaves it out."
        ),
    ] = "zero",
    force: Annotated[bool, typer.Option("--force", help="Compute again even if a stored result exists.")] = False,
    wait: Annotated[
        bool,
        typer.Option(
            "--wait",
            help="Wait for the results; with no worker running, compute them "
            "in this process, print the main measures, and hand MLflow logging to a "
            "background process.",
        ),
    ] = False,
    wait_mlflow: Annotated[
        bool, typer.Option("--wait-mlflow", help="With --wait: log to MLflow before returning.")
    ] = False,
    max_attempts: Annotated[int, typer.Option("--max-attempts", min=1, help="Claims before a job is failed.")] = 3,
    fmt: Annotated[OutputFormat, typer.Option("--format")] = OutputFormat.table,
    labels: Annotated[
        str | None, typer.Option("--labels", help="Gold labels (classification and clustering; instead of --qrels).")
    ] = None,
    predictions: Annotated[
        list[str],
        typer.Option("--predictions", help="Prediction set or clustering (repeatable; default: all of the labels')."),
    ] = [],
    cost_matrix: Annotated[Path | None, typer.Option("--cost-matrix", help="CSV/TSV: true, predicted, cost.")] = None,
    threshold: Annotated[
        str | None,
        typer.Option(
            "--threshold",
            help="Binary scores: a number, or best-f1 | youden | iso-accuracy "
            "(default: the predicted labels, else 0.5).",
        ),
    ] = None,
    positive: Annotated[
        str | None,
        typer.Option("--positive", help="Positive class of a binary task (default: the last in sorted order)."),
    ] = None,
    prior: Annotated[
        float | None,
        typer.Option(
            "--prior", help="P(positive) for --threshold iso-accuracy (default: the gold labels' prevalence)."
        ),
    ] = None,
    beta: Annotated[float, typer.Option("--beta", help="F-beta's beta.")] = 1.0,
    baseline: Annotated[
        str | None, typer.Option("--baseline", help="Prediction set to report RelaImpr against.")
    ] = None,
    nuggets: Annotated[
        str | None,
        typer.Option(
            "--nuggets", help="Nugget bank: evaluate generated answers on its assignments (instead of --qrels)."
        ),
    ] = None,
    answers: Annotated[list[str], typer.Option("--answers", help="Answer run (repeatable; with --nuggets).")] = [],
    all_answers: Annotated[
        bool, typer.Option("--all-answers", help="With --nuggets: every answer run assessed on the bank.")
    ] = False,
    assessor: Annotated[
        str,
        typer.Option(
            "--assessor",
            help="With --nuggets: whose assignments: human (people's labels as one set: imported, "
            "else each topic's first assessor's), "
            "human:NAME (one person's on the nugget page) or judge:NAME.",
        ),
    ] = "human",
    splits: Annotated[
        str | None,
        typer.Option(
            "--splits",
            help="With --wait: each fold's mean over its test topics "
            "(a split of these qrels' topics), and the mean and spread over the folds.",
        ),
    ] = None,
    backend: Annotated[
        BackendName,
        typer.Option(
            "--backend",
            help="Where the part that grows with the inputs runs: local (the database "
            "joins a run with its qrels; predictions are read into memory), duckdb (out of core, spilling to disk) or "
            "spark. duckdb and spark take relevance qrels, and binary predictions with a score.",
        ),
    ] = BackendName.local,
    memory_limit: Annotated[
        str | None, typer.Option("--memory-limit", help="--backend duckdb: DuckDB's memory limit (default 2GB).")
    ] = None,
    temp_directory: Annotated[
        str | None,
        typer.Option(
            "--temp-directory",
            help="--backend duckdb: where DuckDB spills (default: under the system's temporary folder).",
        ),
    ] = None,
    spark_master: Annotated[
        str | None, typer.Option("--spark-master", help="--backend spark: the master URL (default local[*]).")
    ] = None,
    spark_staging: Annotated[
        str | None,
        typer.Option(
            "--spark-staging",
            help="--backend spark: the folder the stored "
            "rows are written to as Parquet for Spark to read (on a cluster: a "
            "shared one; default: the system's temporary folder).",
        ),
    ] = None,
) -> None:
    """Queue evaluations of stored runs against stored qrels (one job per run), of
    predictions against gold labels (--labels, one job per prediction set), or of answer runs
    against a nugget bank's assignments (--nuggets, one job per answer run).

    The same inputs and options are one job: a finished one is reused unless --force. Without
    --wait the jobs wait for 'evalstore worker'. --backend duckdb|spark hands the part
    that grows with the inputs to DuckDB or Spark; the numbers are the same."""
    from evalstore.backends import Backend
    from evalstore.errors import InvalidParameterError
    from evalstore.services import orchestration
    from evalstore.services.jobs import DEFAULT_MEASURE_SET, EvaluationOptions

    try:
        chosen = Backend(backend.value, memory_limit, temp_directory, spark_master, spark_staging)
    except InvalidParameterError as conflict:  # a setting of the other backend's
        raise usage_conflict(ctx, str(conflict)) from None
    request: orchestration.Request
    if nuggets is not None:
        if qrels is not None or labels is not None or run or all_runs:
            raise usage_conflict(
                ctx, "--nuggets evaluates answer runs; --qrels, --labels, --run and --all-runs are for the others."
            )
        if bool(answers) == all_answers:
            raise usage_conflict(ctx, "Name answer runs with --answers NAME (repeatable) or pass --all-answers.")
        request = orchestration.AnswerRequest(nuggets, None if all_answers else answers, assessor, force, max_attempts)
    elif labels is not None:
        if qrels is not None or run or all_runs:
            raise usage_conflict(
                ctx,
                "--labels evaluates predictions; --qrels, --run and --all-runs are for ranking "
                "runs. Give one or the other.",
            )
        request = orchestration.PredictionRequest(
            labels,
            predictions or None,
            cost_matrix,
            threshold,
            positive,
            prior,
            beta,
            baseline,
            force,
            max_attempts,
            chosen,
        )
    else:
        if qrels is None:
            raise usage_conflict(ctx, "Give --qrels NAME (ranking runs) or --labels NAME (predictions).")
        if bool(run) == all_runs:
            raise usage_conflict(ctx, "Name runs with --run NAME (repeatable) or pass --all-runs, not both.")
        options = EvaluationOptions(
            tuple(split_measures(measures)) if measures else DEFAULT_MEASURE_SET,
            relevance_level,
            max_docs,
            False,
            missing,
            known,
        )
        request = orchestration.RankingRequest(qrels, None if all_runs else run, options, force, max_attempts, chosen)

    def announce(ref: orchestration.JobRef) -> None:
        info(f"job {ref.evaluation_id}: {ref.describe()}: {ref.outcome}")

    outcome = orchestration.evaluate(
        state(ctx).engine(),
        request,
        wait=wait,
        wait_for_mlflow=wait_mlflow,
        announce=announce,
        context=state(ctx).context(),
    )
    _report(
        ctx,
        outcome,
        qrels=qrels,
        splits=splits,
        other_kind=labels is not None or nuggets is not None,
        wait=wait,
        measures=measures,
        fmt=fmt,
    )


def _report(
    ctx: typer.Context,
    outcome: Any,
    *,
    qrels: str | None,
    splits: str | None,
    other_kind: bool,
    wait: bool,
    measures: str | None,
    fmt: OutputFormat,
) -> None:
    """What the evaluations came to: the runs skipped, the table, a failure, the per-fold values."""
    for name in outcome.skipped:
        warn(f"skipped run '{name}': it shares no topic with qrels '{qrels}' and would score 0 on every topic")
    if outcome.skipped:
        info(
            f"{len(outcome.skipped)} of the runs skipped: they share no topic with qrels '{qrels}' "
            f"(EVALSTORE_REFUSE_NO_SHARED_TOPIC=off evaluates them)"
        )
    report = outcome.report
    if splits is None or fmt is OutputFormat.table:  # json/csv: one document, the per-fold table
        render(report.rows, report.columns, fmt, title=report.title)
    if wait and outcome.unfinished:
        raise outcome.failure()
    if splits is not None:
        if other_kind or not wait:
            raise usage_conflict(
                ctx, "--splits gives per-fold values of ranking runs (--qrels) once evaluated: pass --wait."
            )
        _per_fold(ctx, splits, outcome, split_measures(measures) if measures else ["AP", "nDCG@10", "P@10"], fmt)


def _per_fold(ctx: typer.Context, splits: str, outcome: Any, measures: list[str], fmt: OutputFormat) -> None:
    """Each run's fold values: printed, stored beside its evaluation, logged to MLflow (when on)."""
    from evalstore.config import mlflow_enabled
    from evalstore.services import splits as service

    rows: list[dict[str, Any]] = []
    names: list[str] = []
    for ref in outcome.refs:
        folds = service.fold_values(state(ctx).engine(), splits=splits, run=ref.inputs, measures=measures)
        service.record_fold_values(state(ctx).engine(), folds)
        if mlflow_enabled():
            info(f"fold values of '{ref.inputs}' logged to MLflow run {service.log_fold_values(folds)}")
        names = folds.measures
        for row in folds.per_fold.to_dict(orient="records"):
            rows.append({"run": ref.inputs, **{str(k): v for k, v in row.items()}})
        rows.append({"run": ref.inputs, "fold": "mean", **folds.mean})
        rows.append({"run": ref.inputs, "fold": "sd", **folds.spread})
    render(rows, ["run", "fold", "topics", *names], fmt, title=f"per fold of split '{splits}'")


def split_measures(text: str) -> list[str]:
    """Split on commas outside parentheses and trec_eval lists: 'AP,P(rel=2)@5,P_5,10'."""
    from evalstore.metrics import split_measure_names

    return split_measure_names(text)
