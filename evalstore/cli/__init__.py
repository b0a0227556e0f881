"""The `evalstore` command line: a root Typer app with one sub-app per noun."""

from typing import Annotated

import typer

from evalstore.cli import (
    answers,
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
    nuggets,
    pool,
    predictions,
    qrels,
    repro,
    results,
    runs,
    serve,
    splits,
    support,
    tasks,
    texts,
    tokens,
    trec_eval,
    users,
    worker,
)
from evalstore.cli._context import CliState
from evalstore.cli._errors import ErrorMappingGroup
from evalstore.config import DATABASE_URL_ENV, check_environment, default_database_url
from evalstore.errors import InvalidParameterError

# `evalstore --help` groups the commands into these panels (so does the docs' CLI reference)
_STORE = "Store"
_CLASSIFICATION = "Classification"
_ANSWERS = "Generated answers"
_EVALUATE_FILES = "Evaluate files"
_EVALUATE_STORED_RUNS = "Evaluate stored runs"
_COMPARE_AND_ANALYSE = "Compare and analyse"
_JUDGING = "Judging"
_SERVICE = "Service"

app = typer.Typer(
    name="evalstore",
    cls=ErrorMappingGroup,
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,  # database URLs may hold passwords
    help="Store runs and qrels, evaluate them, compare systems and build judging pools.\n\n"
    "Exit codes: 0 success, 1 error (message on stderr), 2 usage error.",
)
app.add_typer(db.app, name="db", rich_help_panel=_STORE)
app.add_typer(qrels.app, name="qrels", rich_help_panel=_STORE)
app.add_typer(runs.app, name="runs", rich_help_panel=_STORE)
app.command("trec-eval", context_settings=trec_eval.SETTINGS, add_help_option=False, rich_help_panel=_EVALUATE_FILES)(
    trec_eval.trec_eval
)
app.command("ndeval", rich_help_panel=_EVALUATE_FILES)(ndeval.ndeval)
app.command("measures", rich_help_panel=_EVALUATE_FILES)(measures.measures)
app.command("evaluate", rich_help_panel=_EVALUATE_STORED_RUNS)(evaluate.evaluate)
app.command("leaderboard", rich_help_panel=_EVALUATE_STORED_RUNS)(leaderboard.leaderboard)
app.command("compare", rich_help_panel=_COMPARE_AND_ANALYSE)(compare.compare)
app.command("correlate", rich_help_panel=_COMPARE_AND_ANALYSE)(correlate.correlate)
app.command("repro", rich_help_panel=_COMPARE_AND_ANALYSE)(repro.repro)
app.command("health", rich_help_panel=_COMPARE_AND_ANALYSE)(health.health)
app.command("standardize", rich_help_panel=_COMPARE_AND_ANALYSE)(health.standardize)
app.command("worker", rich_help_panel=_EVALUATE_STORED_RUNS)(worker.worker)
app.add_typer(jobs.app, name="jobs", rich_help_panel=_EVALUATE_STORED_RUNS)
app.add_typer(results.app, name="results", rich_help_panel=_EVALUATE_STORED_RUNS)
app.add_typer(mlflow.app, name="mlflow", rich_help_panel=_EVALUATE_STORED_RUNS)
app.add_typer(pool.app, name="pool", rich_help_panel=_JUDGING)
app.add_typer(splits.app, name="splits", rich_help_panel=_COMPARE_AND_ANALYSE)
app.add_typer(judgments.app, name="judgments", rich_help_panel=_JUDGING)
app.add_typer(labels.app, name="labels", rich_help_panel=_CLASSIFICATION)
app.add_typer(predictions.app, name="predictions", rich_help_panel=_CLASSIFICATION)
app.add_typer(clusters.app, name="clusters", rich_help_panel=_CLASSIFICATION)
app.add_typer(answers.app, name="answers", rich_help_panel=_ANSWERS)
app.add_typer(nuggets.app, name="nuggets", rich_help_panel=_ANSWERS)
app.add_typer(support.app, name="support", rich_help_panel=_ANSWERS)
app.command("serve", rich_help_panel=_SERVICE)(serve.serve)
app.add_typer(users.app, name="users", rich_help_panel=_SERVICE)
app.add_typer(tokens.app, name="tokens", rich_help_panel=_SERVICE)
app.add_typer(tasks.app, name="tasks", rich_help_panel=_SERVICE)
app.add_typer(texts.topics_app, name="topics", rich_help_panel=_STORE)
app.add_typer(texts.documents_app, name="documents", rich_help_panel=_STORE)
# judges; qrels build/versions; judgments compare/provenance
judges.register(app, qrels.app, judgments.app, panel=_JUDGING)


def _print_version(value: bool) -> None:
    if value:
        from evalstore._version import __version__

        typer.echo(f"evalstore {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    ctx: typer.Context,
    database_url: Annotated[
        str | None,
        typer.Option(
            "--database-url",
            envvar=DATABASE_URL_ENV,
            show_envvar=True,
            help="SQLAlchemy URL (default: a SQLite file in ~/.evalstore or $EVALSTORE_HOME).",
        ),
    ] = None,
    version: Annotated[
        bool,
        typer.Option("--version", is_eager=True, callback=_print_version, help="Print evalstore's version and exit."),
    ] = False,
) -> None:
    problems = check_environment()  # a typo in a setting stops every command, named, before it acts
    if problems:
        raise InvalidParameterError(" ".join(str(problem) for problem in problems))
    url = database_url or default_database_url()
    # a caller may hand in its own state (a test that reaps the MLflow loggers a command starts)
    if not (isinstance(ctx.obj, CliState) and ctx.obj.database_url == url):
        ctx.obj = CliState(url)
    ctx.call_on_close(ctx.obj.release)


def main() -> None:
    """The typer CLI (the ``evalstore`` entry point runs it: :mod:`evalstore._entry`)."""
    app()
