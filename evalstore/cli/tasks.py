"""`evalstore tasks`: shared tasks that teams submit runs to over HTTP."""

from __future__ import annotations

from datetime import UTC, datetime

import typer

from evalstore.cli._context import state
from evalstore.cli._output import OutputFormat, info, render, render_record

app = typer.Typer(help="Create, list, show and release shared tasks.", no_args_is_help=True)

LIST_COLUMNS = ["name", "qrels", "owner", "hidden", "released_at", "opens_at", "closes_at", "max_runs_per_team"]


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
    qrels: str = typer.Option(..., "--qrels", help="Stored qrels the runs are evaluated against."),
    hidden: bool = typer.Option(
        False, "--hidden", help="Scores visible to the organisers only, until 'evalstore tasks release NAME'."
    ),
    opens: str | None = typer.Option(
        None, "--opens", help="Submissions open at this time (ISO 8601; UTC unless it says)."
    ),
    closes: str | None = typer.Option(None, "--closes", help="Submissions close at this time."),
    max_runs_per_team: int | None = typer.Option(
        None,
        "--max-runs-per-team",
        min=1,
        help="Runs a team may have evaluated (failed or cancelled ones do not count).",
    ),
    measure: list[str] = typer.Option(
        [], "--measure", help="Measures to evaluate (repeatable; default: evaluate's defaults)."
    ),
    owner: str | None = typer.Option(None, "--owner", help="The organiser user who manages the task."),
    official_measure: str | None = typer.Option(
        None, "--official-measure", help="The measure that ranks the leaderboard (one the task evaluates)."
    ),
    private_topics: float | None = typer.Option(
        None,
        "--private-topics",
        help="Keep this share of the topics private (e.g. 0.5): until release, participants' leaderboard "
        "ranks on the other (public) topics only; at release the private ranking is shown beside it.",
    ),
    split_seed: int | None = typer.Option(
        None, "--split-seed", help="The seed that draws the private topics (default: drawn, and recorded)."
    ),
) -> None:
    """Create a shared task over stored qrels."""
    from evalstore.services import tasks

    if split_seed is not None and private_topics is None:
        raise typer.BadParameter("--split-seed draws the private topics: give --private-topics too.")
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
        official_measure=official_measure,
        private_fraction=private_topics,
        split_seed=split_seed,
    )
    info(f"created task '{task.name}' on qrels '{task.qrels}'" + (" (hidden)" if task.hidden else ""))
    if task.private_topics:
        info(_split_said(task.private_topics, task.split_seed))


def _split_said(private: tuple[str, ...], seed: int | None) -> str:
    return f"{len(private)} private topic{'s' if len(private) != 1 else ''} (seed {seed}): {', '.join(private)}"


@app.command()
def update(
    ctx: typer.Context,
    name: str,
    official_measure: str | None = typer.Option(
        None, "--official-measure", help="The measure that ranks the leaderboard (one the task evaluates)."
    ),
    private_topics: float | None = typer.Option(
        None,
        "--private-topics",
        help="Draw this share of the topics as private (0: no split). Fixed once a run is submitted.",
    ),
    split_seed: int | None = typer.Option(
        None, "--split-seed", help="The seed that draws the private topics (default: drawn, and recorded)."
    ),
) -> None:
    """Set a task's official measure, or draw its public/private topic split (the browser's
    console edits the other settings)."""
    from evalstore.services import tasks

    if split_seed is not None and private_topics is None:
        raise typer.BadParameter("--split-seed draws the private topics: give --private-topics too.")
    if private_topics is None and official_measure is None:
        raise typer.BadParameter("Nothing to change: give --official-measure or --private-topics.")
    engine = state(ctx).engine()
    if private_topics is None:
        shown = tasks.show_task(engine, name)
        task = tasks.update_task(
            engine,
            name,
            opens=shown.opens_at,
            closes=shown.closes_at,
            max_runs_per_team=shown.max_runs_per_team,
            measures=shown.measures,
            description=shown.description,
            official_measure=official_measure,
        )
    else:
        task = tasks.set_split(
            engine, name, private_fraction=private_topics, split_seed=split_seed, official_measure=official_measure
        )
    info(f"updated task '{name}'" + (f": official measure {task.official_measure}" if task.official_measure else ""))
    info(_split_said(task.private_topics, task.split_seed) if task.private_topics else "no public/private split")


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
    run: list[str] = typer.Argument(..., help="Stored runs ('evalstore runs list')."),
    team: str | None = typer.Option(None, "--team", help="The runs' team (default: each run's system, else its name)."),
    run_type: str = typer.Option("automatic", "--run-type", help="automatic | manual."),
    fmt: OutputFormat = typer.Option(OutputFormat.table, "--format"),
) -> None:
    """Make stored runs submissions of a task (e.g. a past campaign's runs), queueing their
    evaluation with the task's measures (a finished one is reused)."""
    from evalstore.services import tasks

    rows = tasks.attach_runs(state(ctx).engine(), name, run, team=team, run_type=run_type)
    render(rows, ["run", "team", "job", "state"], fmt, title=f"runs attached to task '{name}'")


@app.command("list")
def list_(ctx: typer.Context, fmt: OutputFormat = typer.Option(OutputFormat.table, "--format")) -> None:
    """List the tasks."""
    from evalstore.services import tasks

    render([t.as_dict() for t in tasks.list_tasks(state(ctx).engine())], LIST_COLUMNS, fmt, title="tasks")


@app.command()
def show(ctx: typer.Context, name: str, fmt: OutputFormat = typer.Option(OutputFormat.table, "--format")) -> None:
    """Show one task."""
    from evalstore.services import tasks

    task = tasks.show_task(state(ctx).engine(), name)
    # the command line is the organisers' (and admins'): it lists the private topics, the pages never do
    render_record({**task.as_dict(), "private_topic_ids": ", ".join(task.private_topics) or None}, fmt, title=name)
