"""The `evalstore` command line: a root Typer app with one sub-app per noun."""

from __future__ import annotations

import typer

from evalstore.cli import (
    clusters,
    compare,
    correlate,
    db,
    evaluate,
    health,
    jobs,
    judges,
    judgments,
    labels,
    leaderboard,
    measures,
    mlflow,
    ndeval,
    pool,
    predictions,
    qrels,
    results,
    runs,
    serve,
    splits,
    tasks,
    texts,
    tokens,
    trec_eval,
    users,
    worker,
)
from evalstore.cli._context import CliState
from evalstore.cli._errors import ErrorMappingGroup
from evalstore.config import DATABASE_URL_ENV, default_database_url

app = typer.Typer(
    name="evalstore",
    cls=ErrorMappingGroup,
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,  # database URLs may hold passwords
    help="Store runs and qrels, evaluate them, compare systems and build judging pools.\n\n"
    "Exit codes: 0 success, 1 error (message on stderr), 2 usage error.",
)
app.add_typer(db.app, name="db")
app.add_typer(qrels.app, name="qrels")
app.add_typer(runs.app, name="runs")
app.command("trec-eval", context_settings=trec_eval.SETTINGS, add_help_option=False)(trec_eval.trec_eval)
app.command("ndeval")(ndeval.ndeval)
app.command("measures")(measures.measures)
app.command("evaluate")(evaluate.evaluate)
app.command("leaderboard")(leaderboard.leaderboard)
app.command("compare")(compare.compare)
app.command("correlate")(correlate.correlate)
app.command("health")(health.health)
app.command("standardize")(health.standardize)
app.command("worker")(worker.worker)
app.add_typer(jobs.app, name="jobs")
app.add_typer(results.app, name="results")
app.add_typer(mlflow.app, name="mlflow")
app.add_typer(pool.app, name="pool")
app.add_typer(splits.app, name="splits")
app.add_typer(judgments.app, name="judgments")
app.add_typer(labels.app, name="labels")
app.add_typer(predictions.app, name="predictions")
app.add_typer(clusters.app, name="clusters")
app.command("serve")(serve.serve)
app.add_typer(users.app, name="users")
app.add_typer(tokens.app, name="tokens")
app.add_typer(tasks.app, name="tasks")
app.add_typer(texts.topics_app, name="topics")
app.add_typer(texts.documents_app, name="documents")
judges.register(app, qrels.app, judgments.app)  # judges; qrels build/versions; judgments compare/provenance

def _print_version(value: bool) -> None:
    if value:
        from evalstore._version import __version__

        typer.echo(f"evalstore {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    ctx: typer.Context,
    database_url: str | None = typer.Option(
        None, "--database-url", envvar=DATABASE_URL_ENV, show_envvar=True,
        help="SQLAlchemy URL (default: a SQLite file in ~/.evalstore or $EVALSTORE_HOME).",
    ),
    version: bool = typer.Option(False, "--version", is_eager=True, callback=_print_version,
                                 help="Print evalstore's version and exit."),
) -> None:
    ctx.obj = CliState(database_url or default_database_url())



def main() -> None:
    """The typer CLI (the ``evalstore`` entry point runs it: :mod:`evalstore._entry`)."""
    app()
