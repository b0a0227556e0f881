"""`evalstore tasks`: shared tasks that teams submit runs to over HTTP."""

from datetime import UTC, datetime
from typing import Annotated

import typer

from evalstore.cli._context import state
from evalstore.cli._errors import usage_conflict
from evalstore.cli._output import OutputFormat, info, render, render_record

app = typer.Typer(help="Create, list, show and release shared tasks.", no_args_is_help=True)

LIST_COLUMNS = [
    "name",
    "qrels",
    "nuggets",
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


# the options `create` and `update` share
OfficialMeasure = Annotated[
    str | None,
    typer.Option("--official-measure", help="The measure that ranks the leaderboard (one the task evaluates)."),
]
SplitSeed = Annotated[
    int | None,
    typer.Option("--split-seed", help="The seed that draws the private topics (default: drawn, and recorded)."),
]


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
    qrels: Annotated[str | None, typer.Option("--qrels", help="Stored qrels the runs are evaluated against.")] = None,
    nuggets: Annotated[
        str | None,
        typer.Option(
            "--nuggets",
            help="A nugget bank ('evalstore nuggets list'): the task takes generated answers (TREC RAG JSONL), "
            "scored on the bank's assignments once assessed ('evalstore tasks evaluate').",
        ),
    ] = None,
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
    official_measure: OfficialMeasure = None,
    private_topics: Annotated[
        float | None,
        typer.Option(
            "--private-topics",
            help="Keep this share of the topics private (e.g. 0.5): until release, participants' leaderboard "
            "ranks on the other (public) topics only; at release the private ranking is shown beside it.",
        ),
    ] = None,
    split_seed: SplitSeed = None,
) -> None:
    """Create a shared task over stored qrels (teams submit runs) or over a nugget bank (teams
    submit answers)."""
    from evalstore.services import tasks

    if (qrels is None) == (nuggets is None):
        raise usage_conflict(ctx, "Give --qrels (a task of runs) or --nuggets (a task of answers), one of the two.")
    if split_seed is not None and private_topics is None:
        raise typer.BadParameter("--split-seed draws the private topics: give --private-topics too.")
    task = tasks.create_task(
        state(ctx).engine(),
        name,
        qrels_name=qrels,
        nuggets_name=nuggets,
        hidden=hidden,
        opens=_moment(opens, "--opens"),
        closes=_moment(closes, "--closes"),
        max_runs_per_team=max_runs_per_team,
        measures=measure,
        owner=owner,
        daily_cap=daily_cap,
        official_measure=official_measure,
        private_fraction=private_topics,
        split_seed=split_seed,
    )
    over = f"nugget bank '{task.nuggets}' (answers)" if task.takes_answers else f"qrels '{task.qrels}'"
    info(f"created task '{task.name}' on {over}" + (" (hidden)" if task.hidden else ""))
    if task.private_topics:
        info(_split_said(task.private_topics, task.split_seed))


def _split_said(private: tuple[str, ...], seed: int | None) -> str:
    return f"{len(private)} private topic{'s' if len(private) != 1 else ''} (seed {seed}): {', '.join(private)}"


@app.command()
def update(
    ctx: typer.Context,
    name: str,
    opens: Annotated[str | None, typer.Option("--opens", help="Submissions open at this time (ISO 8601).")] = None,
    closes: Annotated[str | None, typer.Option("--closes", help="Submissions close at this time.")] = None,
    max_runs_per_team: Annotated[
        int | None, typer.Option("--max-runs-per-team", min=1, help="Runs a team may have evaluated in all.")
    ] = None,
    daily_cap: Annotated[int | None, typer.Option("--daily-cap", min=1, help=_DAILY_CAP_HELP)] = None,
    no_daily_cap: Annotated[
        bool, typer.Option("--no-daily-cap", help="Drop the task's daily cap (the server's setting applies).")
    ] = False,
    no_quota: Annotated[bool, typer.Option("--no-max-runs-per-team", help="Drop the quota of runs per team.")] = False,
    measure: Annotated[
        list[str], typer.Option("--measure", help="Measures for runs submitted from now on (repeatable).")
    ] = [],
    description: Annotated[str | None, typer.Option("--description", help="What participants are told.")] = None,
    official_measure: OfficialMeasure = None,
    private_topics: Annotated[
        float | None,
        typer.Option(
            "--private-topics",
            help="Draw this share of the topics as private (0: no split). Fixed once a run is submitted.",
        ),
    ] = None,
    split_seed: SplitSeed = None,
    fmt: Annotated[OutputFormat, typer.Option("--format")] = OutputFormat.table,
) -> None:
    """Change some of a task's settings; those not given stay as they are. --private-topics draws
    its public/private topic split (0 removes it)."""
    from evalstore.services import tasks

    if split_seed is not None and private_topics is None:
        raise typer.BadParameter("--split-seed draws the private topics: give --private-topics too.")

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
    if official_measure is not None:
        changes["official_measure"] = official_measure
    if not changes and private_topics is None:
        raise typer.BadParameter("Nothing to change: give at least one setting (see --help).")
    engine = state(ctx).engine()
    task = tasks.patch_task(engine, name, changes) if changes else tasks.show_task(engine, name)
    if private_topics is not None:
        task = tasks.set_split(engine, name, private_fraction=private_topics, split_seed=split_seed)
        info(_split_said(task.private_topics, task.split_seed) if task.private_topics else "no public/private split")
    if official_measure is not None:
        info(f"updated task '{name}': official measure {task.official_measure}")
    render_record(task.as_dict(), fmt, title=name)


@app.command()
def release(
    ctx: typer.Context,
    name: str,
    at: Annotated[
        str | None,
        typer.Option(
            "--at",
            help="Release at this time instead of now (ISO 8601; UTC unless it says): an evaluation worker "
            "performs it then.",
        ),
    ] = None,
    cancel: Annotated[bool, typer.Option("--cancel", help="Cancel the task's scheduled release.")] = False,
) -> None:
    """Make a hidden task's scores visible to everyone who may see the task (now, or at a set time)."""
    from evalstore.services import tasks

    if cancel:
        tasks.cancel_scheduled_release(state(ctx).engine(), name)
        info(f"task '{name}': its scheduled release is cancelled; its scores stay hidden")
        return
    if at is not None:
        moment = _moment(at, "--at")
        assert moment is not None
        task = tasks.schedule_release(state(ctx).engine(), name, moment)
        info(f"task '{name}' is released at {task.as_dict()['release_at']} (by an evaluation worker)")
        return
    tasks.release_task(state(ctx).engine(), name)
    info(f"released task '{name}': its scores are visible")


@app.command()
def evaluate(
    ctx: typer.Context,
    name: str,
    assessor: Annotated[
        str,
        typer.Option(
            "--assessor",
            help="Whose assignments score the answers: human (people's labels as one set: imported, "
            "else each topic's first assessor's), "
            "human:NAME (one person's on the nugget page) or judge:NAME (default: human).",
        ),
    ] = "human",
    force: Annotated[bool, typer.Option("--force", help="Evaluate again even when nothing changed.")] = False,
    wait: Annotated[
        bool, typer.Option("--wait", help="Run the jobs here when no worker is alive, and wait for them.")
    ] = False,
    fmt: Annotated[OutputFormat, typer.Option("--format")] = OutputFormat.table,
) -> None:
    """A task over a nugget bank: queue the evaluation of every answer run submitted to it, on the
    bank's assignments (import them with 'evalstore nuggets import', or have a judge make them
    with 'evalstore nuggets assign'); the leaderboard shows each run's scores once its job is done.
    Runs no one has assessed yet are listed and left waiting."""
    from evalstore.services import jobs, orchestration, tasks

    engine = state(ctx).engine()
    queued = tasks.evaluate_answers(engine, name, assessor=assessor, force=force)
    for run, reason in queued.waiting:
        info(f"waiting: {run}: {reason}")
    if wait and queued.jobs:
        orchestration.work_on(
            engine,
            [ref.evaluation_id for _, ref in queued.jobs if ref.outcome != "reused"],
            mlflow=False,
            context=state(ctx).context(),
        )
    rows = []
    for run, ref in queued.jobs:
        view = jobs.show_job(engine, ref.evaluation_id)
        rows.append({"run": run, "job": ref.evaluation_id, "state": view.state, "error": view.error})
    render(rows, ["run", "job", "state", "error"], fmt, title=f"answers of task '{name}' ({assessor} assignments)")


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
    from evalstore.services.plain import plain

    rows = tasks.attach_runs(state(ctx).engine(), name, run, team=team, run_type=run_type)
    render(plain(rows), ["run", "team", "job", "state"], fmt, title=f"runs attached to task '{name}'")


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

    task = tasks.show_task(state(ctx).engine(), name)
    # the command line is the organisers' (and admins'): it lists the private topics, the pages never do
    render_record({**task.as_dict(), "private_topic_ids": ", ".join(task.private_topics) or None}, fmt, title=name)
