"""`evalstore users`: the people the HTTP service knows, and their roles."""

import sys
from enum import StrEnum
from typing import Annotated

import typer

from evalstore.cli._context import state
from evalstore.cli._output import OutputFormat, info, render

app = typer.Typer(
    help="Add, invite, list and disable the HTTP service's users; move them between teams.", no_args_is_help=True
)


class Role(StrEnum):
    admin = "admin"
    organiser = "organiser"
    participant = "participant"
    assessor = "assessor"
    viewer = "viewer"


@app.command()
def add(
    ctx: typer.Context,
    name: str,
    role: Annotated[
        Role,
        typer.Option(
            "--role",
            help="admin: everything; organiser: their tasks; participant: their "
            "team's runs; assessor: the pools assigned to them; viewer: public leaderboards.",
        ),
    ],
    team: Annotated[
        str | None, typer.Option("--team", help="The participant's team (required for participants).")
    ] = None,
    password_stdin: Annotated[
        bool,
        typer.Option(
            "--password-stdin",
            help="Read a password for the web pages' sign-in from standard input (kept as an argon2 hash).",
        ),
    ] = False,
) -> None:
    """Add a user. Tokens for the API: 'evalstore tokens create --user NAME'."""
    from evalstore.services import access

    password = sys.stdin.readline().rstrip("\r\n") if password_stdin else None
    user = access.add_user(state(ctx).engine(), name, role=role.value, team=team, password=password)
    info(f"added {user.role} '{user.name}'" + (f" of team '{user.team}'" if user.team else ""))


@app.command("set-password")
def set_password(ctx: typer.Context, name: str) -> None:
    """Set a user's password for the web pages' sign-in, read from standard input (a terminal asks
    twice, without echo). Their signed-in browser sessions end; API tokens stay valid."""
    from evalstore.services import access

    if sys.stdin.isatty():
        import getpass

        password = getpass.getpass(f"new password for {name}: ")
        if getpass.getpass("again: ") != password:
            raise typer.BadParameter("The two passwords differ; nothing was changed.")
    else:
        password = sys.stdin.readline().rstrip("\r\n")
    user = access.set_password(state(ctx).engine(), name, password)
    info(f"set the password of {user.role} '{user.name}'")


@app.command("list")
def list_(ctx: typer.Context, fmt: Annotated[OutputFormat, typer.Option("--format")] = OutputFormat.table) -> None:
    """List the users."""
    from evalstore.services import access

    rows = [u.as_dict() for u in access.list_users(state(ctx).engine())]
    render(rows, ["name", "role", "team", "created_at", "disabled"], fmt, title="users")


@app.command()
def disable(ctx: typer.Context, name: str) -> None:
    """Disable a user: their tokens and sessions stop working at once."""
    from evalstore.services import access

    access.disable_user(state(ctx).engine(), name)
    info(f"disabled user '{name}'")


@app.command()
def invite(
    ctx: typer.Context,
    role: Annotated[Role, typer.Option("--role", help="The role of the account the invite makes.")],
    team: Annotated[str | None, typer.Option("--team", help="Its team (required for participants).")] = None,
    url: Annotated[
        str, typer.Option("--url", help="The server's address, put before the link's path.")
    ] = "http://127.0.0.1:8000",
) -> None:
    """Make a single-use invite link: whoever opens it chooses a name and password and is signed
    in with ROLE (and TEAM). It expires after EVALSTORE_INVITE_DAYS (7) days."""
    from evalstore.services import people

    context = state(ctx).context()
    issued = people.create_invite(
        state(ctx).engine(), role=role.value, team=team, days=context.settings.invite_days, by=None
    )
    typer.echo(url.rstrip("/") + issued.path)
    info(
        f"invite {issued.id} for a {issued.role}"
        + (f" of team '{issued.team}'" if issued.team else "")
        + f", until {issued.expires_at:%Y-%m-%d %H:%M} UTC (shown this once)"
    )


@app.command("reset-link")
def reset_link(
    ctx: typer.Context,
    name: str,
    url: Annotated[
        str, typer.Option("--url", help="The server's address, put before the link's path.")
    ] = "http://127.0.0.1:8000",
) -> None:
    """Make a single-use link with which NAME chooses a new password in the browser (it replaces
    their open ones; it expires after EVALSTORE_RESET_HOURS (24) hours)."""
    from evalstore.services import people

    context = state(ctx).context()
    issued = people.create_reset_link(state(ctx).engine(), name, hours=context.settings.reset_hours)
    typer.echo(url.rstrip("/") + issued.path)
    info(f"reset link {issued.id} for '{name}', until {issued.expires_at:%Y-%m-%d %H:%M} UTC (shown this once)")


@app.command("set-team")
def set_team(ctx: typer.Context, name: str, team: str) -> None:
    """Move NAME into TEAM: what they submit from now on is the team's (its runs, quota and daily
    cap); their earlier runs stay their old team's."""
    from evalstore.services import people

    user = people.set_team(state(ctx).engine(), name, team)
    info(f"'{user.name}' is now in team '{user.team}'")


@app.command()
def links(ctx: typer.Context, fmt: Annotated[OutputFormat, typer.Option("--format")] = OutputFormat.table) -> None:
    """List the invite and password-reset links (never their secrets), newest first."""
    from evalstore.services import people

    rows = [k.as_dict() for k in people.list_links(state(ctx).engine())]
    render(
        rows, ["id", "kind", "role", "team", "user", "created_by", "expires_at", "state", "used_by"], fmt, title="links"
    )


@app.command("revoke-link")
def revoke_link(ctx: typer.Context, link_id: int) -> None:
    """Revoke an open invite or reset link: it stops working at once."""
    from evalstore.services import people

    people.revoke_link(state(ctx).engine(), link_id)
    info(f"revoked link {link_id}")
