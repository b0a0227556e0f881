"""`evalstore labels|predictions|clusters ...`, and the classification side of `evaluate`,
`leaderboard` and `compare` (chosen there by --labels)."""

from __future__ import annotations

from pathlib import Path

import typer

from evalstore.cli._context import state
from evalstore.cli._output import OutputFormat, ReportFormat, info, render
from evalstore.cli.runs import parse_meta

labels_app = typer.Typer(help="Gold labels of classification and clustering tasks.", no_args_is_help=True)
predictions_app = typer.Typer(help="Classifier predictions (labels and/or scores).", no_args_is_help=True)
clusters_app = typer.Typer(help="Clusterings (item_id, cluster_id), evaluated against gold labels.",
                           no_args_is_help=True)

SUMMARY_COLUMNS = ["name", "kind", "rows", "labels", "system", "provides", "created_at"]


@labels_app.command("import")
def import_labels(
    ctx: typer.Context,
    path: Path = typer.Argument(..., help="CSV, TSV or Parquet with columns item_id, label [, group]."),
    name: str = typer.Option(..., "--name"),
    description: str | None = typer.Option(None, "--description"),
    replace: bool = typer.Option(False, "--replace", help="Replace labels of this name holding other content."),
) -> None:
    """Store gold labels; the same file again stores nothing."""
    from evalstore.services import classification

    summary = classification.import_labels(state(ctx).engine(), path, name=name, description=description,
                                           replace=replace)
    verb = "stored" if summary.created else "already stored, nothing new"
    info(f"labels '{summary.name}' {verb}: {summary.rows} items, {len(summary.details['classes'])} classes, "
         f"{summary.details['groups']} groups")


@labels_app.command("list")
def list_labels(ctx: typer.Context, fmt: OutputFormat = typer.Option(OutputFormat.table, "--format")) -> None:
    from evalstore.services import classification

    rows = [s.as_dict() for s in classification.list_label_sets(state(ctx).engine())]
    render(rows, ["name", "rows", "classes", "groups", "created_at"], fmt, title="gold labels")


def _register(ctx: typer.Context, path: Path, name: str, labels: str, kind: str, system: str | None,
              meta: list[str], description: str | None, probabilities: bool, replace: bool) -> None:
    from evalstore.services import classification

    summary = classification.register_predictions(
        state(ctx).engine(), path, name=name, labels_name=labels, kind=kind, system=system,
        metadata=parse_meta(meta), description=description, probabilities=probabilities, replace=replace)
    verb = "registered" if summary.created else "already registered, nothing new"
    info(f"{kind} '{summary.name}' {verb}: {summary.rows} items against '{labels}'")


@predictions_app.command("register")
def register_predictions(
    ctx: typer.Context,
    path: Path = typer.Argument(..., help="CSV, TSV or Parquet: item_id and label and/or score (binary: "
                                "P(positive class)) or one score_<class> column per class; optional group."),
    name: str = typer.Option(..., "--name"),
    labels: str = typer.Option(..., "--labels", help="Gold labels the predictions are for."),
    system: str | None = typer.Option(None, "--system"),
    meta: list[str] = typer.Option([], "--meta", help="KEY=VALUE metadata (repeatable)."),
    description: str | None = typer.Option(None, "--description"),
    probabilities: bool = typer.Option(False, "--probabilities", help="Scores are probabilities: refuse any "
                                       "outside [0, 1]."),
    replace: bool = typer.Option(False, "--replace"),
) -> None:
    """Register a classifier's predictions, checked against the gold labels."""
    _register(ctx, path, name, labels, "classifier", system, meta, description, probabilities, replace)


@predictions_app.command("list")
def list_predictions(ctx: typer.Context, labels: str | None = typer.Option(None, "--labels"),
                     fmt: OutputFormat = typer.Option(OutputFormat.table, "--format")) -> None:
    from evalstore.services import classification

    rows = [s.as_dict() for s in classification.list_prediction_sets(state(ctx).engine(), labels)]
    render(rows, SUMMARY_COLUMNS, fmt, title="predictions")


@predictions_app.command("delete")
def delete_predictions(ctx: typer.Context, name: str = typer.Argument(...)) -> None:
    from evalstore.services import classification

    classification.delete_predictions(state(ctx).engine(), name)
    info(f"predictions '{name}' deleted, with their evaluations")


@clusters_app.command("register")
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
    _register(ctx, path, name, labels, "clustering", system, meta, description, False, replace)


def evaluate_predictions(ctx: typer.Context, *, labels: str, predictions: list[str], cost_matrix: Path | None,
                         threshold: str | None, positive: str | None, prior: float | None, beta: float,
                         baseline: str | None, force: bool, wait: bool, max_attempts: int,
                         fmt: OutputFormat) -> None:
    """`evaluate --labels`: one queued job per prediction set, as for runs; with --wait, done
    here when no worker is running, and the main measures shown."""
    from evalstore.errors import EvaluationError
    from evalstore.services import classification, jobs

    engine = state(ctx).engine()
    refs = classification.enqueue(
        engine, labels_name=labels, prediction_names=predictions or None, cost_matrix=cost_matrix,
        threshold=threshold, positive=positive, prior=prior, beta=beta, baseline=baseline, force=force,
        max_attempts=max_attempts)
    for ref in refs:
        info(f"job {ref.evaluation_id}: predictions '{ref.run}' on '{ref.qrels}': {ref.outcome}")
    if not wait:
        views = [jobs.show_job(engine, r.evaluation_id) for r in refs]
        render([v.as_dict() for v in views], ["id", "kind", "run", "qrels", "state", "attempts", "mlflow_state"],
               fmt, title="evaluations")
        return
    from evalstore._logging import configure_logging
    from evalstore.config import mlflow_enabled
    from evalstore.services.worker import work_on

    configure_logging()
    work_on(engine, [r.evaluation_id for r in refs if r.outcome != "reused"], mlflow=mlflow_enabled())
    views = [jobs.show_job(engine, r.evaluation_id) for r in refs]
    failed = [v for v in views if v.state != "done"]
    if failed:
        raise EvaluationError(f"{len(failed)} of {len(views)} evaluations did not finish: "
                              + "; ".join(f"job {v.id} ({v.run}) {v.state}: {v.error}" for v in failed))
    shown = ["accuracy", "f1_macro", "mcc", "auc", "gauc", "average_precision", "cost", "purity", "purity_f", "nmi"]
    rows = []
    for view in views:
        result = classification.stored_evaluation(engine, view.id, with_groups=False)
        rows.append({"evaluation": result.evaluation_id, "predictions": result.predictions, "kind": result.kind,
                     **{m: result.aggregates.get(m) for m in shown},
                     "threshold": result.settings.get("threshold"), "mlflow_state": view.mlflow_state})
    columns = ["evaluation", "predictions", "kind",
               *[m for m in [*shown, "threshold"] if any(r[m] is not None for r in rows)], "mlflow_state"]
    render(rows, columns, fmt, title=f"evaluations on '{labels}'")


def leaderboard_predictions(ctx: typer.Context, *, labels: str, measures: list[str], fmt: ReportFormat) -> None:
    from evalstore.services import classification

    names = measures or ["f1_macro", "accuracy", "mcc"]
    frame = classification.leaderboard(state(ctx).engine(), labels_name=labels, measure_names=names)
    rows = [{"#": str(i), **{k: (f"{v:.4f}" if isinstance(v, float) else v) for k, v in row.items()}}
            for i, row in enumerate(frame.to_dict("records"), start=1)]
    if fmt in (ReportFormat.json, ReportFormat.csv):
        rows = frame.to_dict("records")
        render(rows, ["predictions", "system", "kind", *names], fmt, title=f"leaderboard: {labels}")
        return
    render(rows, ["#", "predictions", "system", *names], fmt, title=f"leaderboard: {labels} (by {names[0]})")


def compare_predictions(ctx: typer.Context, *, labels: str, names: list[str], measures: list[str], test: str,
                        baseline: str | None, alpha: float, resamples: int, seed: int | None,
                        fmt: ReportFormat) -> None:
    """McNemar on item-level correctness, or a paired test over per-group values."""
    import secrets

    from evalstore.services import classification

    engine = state(ctx).engine()
    pairs = classification.pairs_of(names, baseline)
    if test == "mcnemar":
        rows = []
        for first, second in pairs:
            result = classification.mcnemar(engine, labels_name=labels, first=first, second=second)
            rows.append({"first": first, "second": second, "only first right": result.only_first_right,
                         "only second right": result.only_second_right, "statistic": result.statistic,
                         "p": result.p_value, "significant": result.p_value < alpha})
        render(rows, list(rows[0]), fmt, title=f"McNemar on '{labels}'")
        return
    seed = secrets.randbits(31) if seed is None else seed
    rows = classification.compare_groups(engine, labels_name=labels, pairs=pairs, measures_=measures or ["accuracy"],
                                         test=test, alpha=alpha, resamples=resamples, seed=seed)
    info(f"seed {seed} (pass --seed {seed} to reproduce)")
    render(rows, list(rows[0]), fmt, title=f"per-group comparison on '{labels}' ({test})")
