"""`evalstore db`: create, upgrade and inspect the schema."""

from typing import Annotated

import typer

from evalstore.cli._context import state
from evalstore.cli._output import info

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
