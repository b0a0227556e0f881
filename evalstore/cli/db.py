"""`evalstore db`: create, upgrade and inspect the schema."""

from typing import Annotated

import typer

from evalstore.cli._context import state
from evalstore.cli._output import info
from evalstore.config import mlflow_enabled, mlflow_tracking_uri

app = typer.Typer(help="Create, upgrade and inspect the database schema.", no_args_is_help=True)


@app.command()
def upgrade(ctx: typer.Context, revision: Annotated[str, typer.Argument(help="Target revision.")] = "head") -> None:
    """Create the schema or upgrade it to the latest revision (Alembic)."""
    from evalstore.db import engine as db_engine

    engine = state(ctx).engine(check_schema=False)
    db_engine.upgrade(engine, revision)
    info(
        f"database {engine.url.render_as_string(hide_password=True)} is at revision "
        f"{db_engine.current_revision(engine)}"
    )
    if mlflow_enabled() and revision == "head":
        _prepare_mlflow(ctx)


def _prepare_mlflow(ctx: typer.Context) -> None:
    """MLflow's store and experiments made now, so the first delivery does not wait for them; a
    failure leaves that to the first delivery (the upgrade itself is done)."""
    from evalstore.errors import TrackingError
    from evalstore.services.tracking import prepare

    cli = state(ctx)
    try:
        experiments = prepare(cli.engine(), context=cli.context())
    except TrackingError as error:
        info(f"warning: {error}. The first delivery to MLflow will try again.")
        return
    info(f"MLflow store {mlflow_tracking_uri()} ready ({len(experiments)} experiments)")


@app.command()
def downgrade(ctx: typer.Context, revision: Annotated[str, typer.Argument(help="Target revision, e.g. base.")]) -> None:
    """Downgrade the schema to an older revision (data in dropped tables is lost)."""
    from evalstore.db import engine as db_engine

    engine = state(ctx).engine(check_schema=False)
    db_engine.downgrade(engine, revision)
    info(f"database is at revision {db_engine.current_revision(engine) or 'base'}")


@app.command()
def current(ctx: typer.Context) -> None:
    """Print the schema revision of the database and the one this evalstore needs."""
    from evalstore.db import engine as db_engine

    engine = state(ctx).engine(check_schema=False)
    typer.echo(f"current: {db_engine.current_revision(engine) or 'none'}")
    typer.echo(f"head: {db_engine.head_revision()}")
