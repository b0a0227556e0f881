"""`evalstore users`: the people the HTTP service knows, and their roles."""

import sys
from enum import StrEnum
from typing import Annotated

import typer

from evalstore.cli._context import state
from evalstore.cli._output import OutputFormat, info, render

app = typer.Typer(help="Add, list and disable the HTTP service's users.", no_args_is_help=True)


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
