"""`evalstore tasks`: shared tasks that teams submit runs to over HTTP."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

import typer

from evalstore.cli._context import state
from evalstore.cli._output import OutputFormat, info, render, render_record

app = typer.Typer(help="Create, list, show and release shared tasks.", no_args_is_help=True)

LIST_COLUMNS = [
    "name",
    "qrels",
    "owner",
    "hidden",
    "released_at",
    "opens_at",
    "closes_at",
    "max_runs_per_team",
    "daily_cap",
]
_DAILY_CAP_HELP = (
    "Runs a team may submit per UTC day (evaluated ones count, withdrawn or not; failed or cancelled "
    "ones do not). Default: the server's EVALSTORE_RUNS_PER_DAY."
)


def _moment(value: str | None, option: str) -> datetime | None:
    if value is None:
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise typer.BadParameter(f"'{value}' is not a time; write e.g. 2026-12-01T12:00Z", param_hint=option) from None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


@app.command()
def create(
    ctx: typer.Context,
    name: str,
    qrels: Annotated[str, typer.Option("--qrels", help="Stored qrels the runs are evaluated against.")],
    hidden: Annotated[
        bool,
        typer.Option("--hidden", help="Scores visible to the organisers only, until 'evalstore tasks release NAME'."),
    ] = False,
    opens: Annotated[
        str | None, typer.Option("--opens", help="Submissions open at this time (ISO 8601; UTC unless it says).")
    ] = None,
    closes: Annotated[str | None, typer.Option("--closes", help="Submissions close at this time.")] = None,
    max_runs_per_team: Annotated[
        int | None,
        typer.Option(
            "--max-runs-per-team", min=1, help="Runs a team may have evaluated (failed or cancelled ones do not count)."
        ),
    ] = None,
    measure: Annotated[
        list[str], typer.Option("--measure", help="Measures to evaluate (repeatable; default: evaluate's defaults).")
    ] = [],
    owner: Annotated[str | None, typer.Option("--owner", help="The organiser user who manages the task.")] = None,
    daily_cap: Annotated[int | None, typer.Option("--daily-cap", min=1, help=_DAILY_CAP_HELP)] = None,
) -> None:
    """Create a shared task over stored qrels."""
    from evalstore.services import tasks

    task = tasks.create_task(
        state(ctx).engine(),
        name,
        qrels_name=qrels,
        hidden=hidden,
        opens=_moment(opens, "--opens"),
        closes=_moment(closes, "--closes"),
        max_runs_per_team=max_runs_per_team,
        measures=measure,
        owner=owner,
        daily_cap=daily_cap,
    )
    info(f"created task '{task.name}' on qrels '{task.qrels}'" + (" (hidden)" if task.hidden else ""))


@app.command()
def update(
    ctx: typer.Context,
    name: str,
    opens: str | None = typer.Option(None, "--opens", help="Submissions open at this time (ISO 8601)."),
    closes: str | None = typer.Option(None, "--closes", help="Submissions close at this time."),
    max_runs_per_team: int | None = typer.Option(
        None, "--max-runs-per-team", min=1, help="Runs a team may have evaluated in all."
    ),
    daily_cap: int | None = typer.Option(None, "--daily-cap", min=1, help=_DAILY_CAP_HELP),
    no_daily_cap: bool = typer.Option(
        False, "--no-daily-cap", help="Drop the task's daily cap (the server's setting applies)."
    ),
    no_quota: bool = typer.Option(False, "--no-max-runs-per-team", help="Drop the quota of runs per team."),
    measure: list[str] = typer.Option([], "--measure", help="Measures for runs submitted from now on (repeatable)."),
    description: str | None = typer.Option(None, "--description", help="What participants are told."),
    fmt: OutputFormat = typer.Option(OutputFormat.table, "--format"),
) -> None:
    """Change some of a task's settings; those not given stay as they are."""
    from evalstore.services import tasks

    if daily_cap is not None and no_daily_cap:
        raise typer.BadParameter("give --daily-cap N or --no-daily-cap, not both", param_hint="--daily-cap")
    if max_runs_per_team is not None and no_quota:
        raise typer.BadParameter(
            "give --max-runs-per-team N or --no-max-runs-per-team, not both", param_hint="--max-runs-per-team"
        )
    changes: dict[str, object] = {}
    if opens is not None:
        changes["opens"] = _moment(opens, "--opens")
    if closes is not None:
        changes["closes"] = _moment(closes, "--closes")
    if max_runs_per_team is not None or no_quota:
        changes["max_runs_per_team"] = max_runs_per_team
    if daily_cap is not None or no_daily_cap:
        changes["daily_cap"] = daily_cap
    if measure:
        changes["measures"] = measure
    if description is not None:
        changes["description"] = description
    task = tasks.patch_task(state(ctx).engine(), name, changes)
    render_record(task.as_dict(), fmt, title=name)


@app.command()
def release(ctx: typer.Context, name: str) -> None:
    """Make a hidden task's scores visible to everyone who may see the task."""
    from evalstore.services import tasks

    tasks.release_task(state(ctx).engine(), name)
    info(f"released task '{name}': its scores are visible")


@app.command()
def attach(
    ctx: typer.Context,
    name: str,
    run: Annotated[list[str], typer.Argument(help="Stored runs ('evalstore runs list').")],
    team: Annotated[
        str | None, typer.Option("--team", help="The runs' team (default: each run's system, else its name).")
    ] = None,
    run_type: Annotated[str, typer.Option("--run-type", help="automatic | manual.")] = "automatic",
    fmt: Annotated[OutputFormat, typer.Option("--format")] = OutputFormat.table,
) -> None:
    """Make stored runs submissions of a task (e.g. a past campaign's runs), queueing their
    evaluation with the task's measures (a finished one is reused)."""
    from evalstore.services import tasks

    rows = tasks.attach_runs(state(ctx).engine(), name, run, team=team, run_type=run_type)
    render(rows, ["run", "team", "job", "state"], fmt, title=f"runs attached to task '{name}'")


@app.command("list")
def list_(ctx: typer.Context, fmt: Annotated[OutputFormat, typer.Option("--format")] = OutputFormat.table) -> None:
    """List the tasks."""
    from evalstore.services import tasks

    render([t.as_dict() for t in tasks.list_tasks(state(ctx).engine())], LIST_COLUMNS, fmt, title="tasks")


@app.command()
def show(
    ctx: typer.Context, name: str, fmt: Annotated[OutputFormat, typer.Option("--format")] = OutputFormat.table
) -> None:
    """Show one task."""
    from evalstore.services import tasks

    render_record(tasks.show_task(state(ctx).engine(), name).as_dict(), fmt, title=name)
