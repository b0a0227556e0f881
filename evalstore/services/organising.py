"""The organiser's console on their own task: its submissions with their failures, retry and
cancel, its pools (built from its runs, with assessors assigned), and its collection-health report.

Each function checks first that the principal manages the task (its organiser, or an admin) and
then acts through the service that owns the object (jobs, pools, judging, health), so the CLI, the
API and the pages keep one meaning for each action. An organiser may touch only the jobs and pools
of their own tasks: a job of another task, or a pool built from other runs, is "not found" here.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine, select

from evalstore.db.models import Pool, PoolAssignment, User
from evalstore.db.session import read_only
from evalstore.errors import AccessDenied, EvaluationError, InvalidParameterError, NotFoundError
from evalstore.services import access, health, jobs, judging, pools, tasks
from evalstore.services.access import Principal

# a pool's depth from the console: TREC's customary 100 at most a few hundred, not a whole run
MAX_POOL_DEPTH = 1000


def managed(engine: Engine, principal: Principal, task: str) -> tasks.TaskView:
    """The task, if the principal manages it; AccessDenied otherwise (as for every change to it)."""
    principal.require("tasks:manage")
    if not tasks.task_access(engine, principal, task).manages:
        raise AccessDenied(f"Task '{task}' is managed by its organiser; you may not change it.")
    return tasks.show_task(engine, task)


def submissions(engine: Engine, principal: Principal, task: str) -> list[dict[str, Any]]:
    """Every team's runs on the task, each with its job's state, queue position and, for a failed
    job, its error."""
    managed(engine, principal, task)
    runs = tasks.task_runs(engine, principal, task)
    for run in runs:
        job = tasks.show_job(engine, principal, run["job"]) if run["job"] else None
        run["queue_position"] = job["queue_position"] if job else None
        run["error"] = job["error"] if job else None
        run["attempts"] = job["attempts"] if job else None
    return runs


def _task_job(engine: Engine, principal: Principal, task: str, job_id: int) -> None:
    if job_id not in {run["job"] for run in tasks.task_runs(engine, principal, task)}:
        raise NotFoundError(f"No job {job_id} among the submissions of task '{task}'.")


def retry_job(engine: Engine, principal: Principal, task: str, job_id: int) -> jobs.JobView:
    """Queue a failed or cancelled submission of the task again."""
    managed(engine, principal, task)
    _task_job(engine, principal, task, job_id)
    return jobs.retry(engine, job_id)


def cancel_job(engine: Engine, principal: Principal, task: str, job_id: int) -> jobs.JobView:
    """Cancel a queued or running submission of the task (its team's slot is free again)."""
    managed(engine, principal, task)
    _task_job(engine, principal, task, job_id)
    return jobs.cancel(engine, job_id)


def task_pools(engine: Engine, principal: Principal, task: str) -> list[pools.PoolSummary]:
    """The pools built from the task's runs on its console."""
    managed(engine, principal, task)
    return [p for p in pools.list_pools(engine) if p.params.get("task") == task]


# the topics a pool built on the console may list: 100,000 take ~1.5 s on either database; the
# bound keeps a form's list (up to the upload limit) from costing more
MAX_POOL_TOPICS = 100_000


def build_task_pool(
    engine: Engine, principal: Principal, task: str, *, name: str, depth: int, topics: list[str] | None = None
) -> pools.PoolSummary:
    """A depth-k pool of the task's submitted runs (all teams'), over ``topics`` (None: all),
    named ``<task>:<name>``: pool names are unique per task, so another organiser's pools are
    never in the way (nor told of)."""
    managed(engine, principal, task)
    if not name:
        raise InvalidParameterError("Give the pool a name.")
    pools.stored_pool_name(name, task)
    if not 1 <= depth <= MAX_POOL_DEPTH:
        raise InvalidParameterError(
            f"The depth is the number of top documents pooled from each run, 1 to {MAX_POOL_DEPTH}; got {depth}."
        )
    topics = list(dict.fromkeys(topics or ()))
    if len(topics) > MAX_POOL_TOPICS:
        raise InvalidParameterError(
            f"A pool is built over at most {MAX_POOL_TOPICS:,} listed topics; {len(topics):,} were listed. "
            "Leave the topics empty to pool every topic of the task's runs."
        )
    runs = [run["run"] for run in tasks.task_runs(engine, principal, task)]
    if not runs:
        raise InvalidParameterError(f"Task '{task}' has no submitted runs to pool yet.")
    return pools.build_pool(engine, name=name, run_names=runs, depth=depth, topics=topics or None, task=task)


def assign_assessor(engine: Engine, principal: Principal, task: str, pool: str, user: str) -> None:
    """Let an assessor judge one of the task's pools."""
    if pool not in {p.name for p in task_pools(engine, principal, task)}:
        raise NotFoundError(f"No pool named '{pool}' of task '{task}'; build one from its runs first.")
    judging.assign_assessor(engine, pool, user, by=principal)


def assigned_assessors(engine: Engine, principal: Principal, task: str) -> dict[str, list[str]]:
    """The assessors assigned to each of the task's pools, by pool name."""
    names = [p.name for p in task_pools(engine, principal, task)]
    out: dict[str, list[str]] = {name: [] for name in names}
    with read_only(engine) as session:
        for pool, user in session.execute(
            select(Pool.name, User.name)
            .join(PoolAssignment, PoolAssignment.pool_id == Pool.id)
            .join(User, User.id == PoolAssignment.user_id)
            .where(Pool.name.in_(names))
            .order_by(User.name)
        ):
            out[pool].append(user)
    return out


def assessors(engine: Engine, principal: Principal, task: str) -> list[str]:
    """The users who may be assigned to the task's pools (assessors), by name."""
    managed(engine, principal, task)
    return [u.name for u in access.list_users(engine) if u.role == "assessor" and not u.disabled]


def task_health(engine: Engine, principal: Principal, task: str, *, seed: int | None = None) -> health.HealthReport:
    """The collection-health report (`evalstore health`) over the task's runs evaluated on its
    qrels, with the task's measures when it names them (the seed drawn and recorded when None)."""
    shown = managed(engine, principal, task)
    if shown.qrels is None:
        raise InvalidParameterError(
            f"Task '{task}' takes generated answers; the collection-health report is over ranking runs and qrels."
        )
    measures = [m for m in shown.measures if not m.startswith("num_")][:3] or list(health.HEALTH_MEASURES)
    submitted = tasks.task_runs(engine, principal, task)
    done = sum(1 for run in submitted if run["state"] == "done")
    if done < 2:
        raise EvaluationError(
            f"The health report compares the task's runs: it needs two or more evaluated, and "
            f"{done} {'is' if done == 1 else 'are'} so far."
        )
    runs = [run["run"] for run in submitted]
    return health.health(engine, qrels_name=shown.qrels, measures=measures, seed=seed, only_runs=runs)
