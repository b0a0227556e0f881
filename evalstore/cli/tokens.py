"""`evalstore tokens`: API tokens (shown once, stored hashed)."""

from typing import Annotated

import typer

from evalstore.cli._context import state
from evalstore.cli._output import OutputFormat, info, render

app = typer.Typer(help="Create, list and revoke API tokens.", no_args_is_help=True)


@app.command()
def create(
    ctx: typer.Context,
    user: Annotated[str, typer.Option("--user", help="Whose token it is.")],
    expires: Annotated[float | None, typer.Option("--expires", help="Days until it expires.")] = 90,
    never_expires: Annotated[bool, typer.Option("--never-expires", help="A token that does not expire.")] = False,
) -> None:
    """Make a token and print it on stdout, this once: only its hash is kept."""
    from evalstore.services import access

    issued = access.create_token(state(ctx).engine(), user, expires_days=None if never_expires else expires)
    until = f"expires {issued.expires_at:%Y-%m-%d %H:%M} UTC" if issued.expires_at else "never expires"
    info(f"token {issued.id} for '{issued.user}' ({until}); it is shown once, keep it safe")
    typer.echo(issued.token)


@app.command("list")
def list_(
    ctx: typer.Context,
    user: Annotated[str | None, typer.Option("--user")] = None,
    fmt: Annotated[OutputFormat, typer.Option("--format")] = OutputFormat.table,
) -> None:
    """List tokens (never their secrets)."""
    from evalstore.services import access
    from evalstore.services.plain import plain

    render(
        plain(access.list_tokens(state(ctx).engine(), user)),
        ["id", "user", "created_at", "expires_at", "revoked_at"],
        fmt,
        title="tokens",
    )


@app.command()
def revoke(
    ctx: typer.Context, token_id: Annotated[int, typer.Argument(help="The token's id (see 'tokens list').")]
) -> None:
    """Revoke a token: it stops working at once."""
    from evalstore.services import access

    access.revoke_token(state(ctx).engine(), token_id)
    info(f"revoked token {token_id}")
