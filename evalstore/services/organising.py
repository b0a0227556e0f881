"""The organiser's console on their own task: creating it, its submissions with their failures,
retry and cancel, its pools (built from its runs, with the texts assessors read and assessors
assigned), their judges (added, probed and run on the task's pools, with their cost), and its
collection-health report.

Each function checks first that the principal manages the task (its organiser, or an admin) and
then acts through the service that owns the object (jobs, pools, judging, health), so the CLI, the
API and the pages keep one meaning for each action. An organiser may touch only the jobs and pools
of their own tasks: a job of another task, or a pool built from other runs, is "not found" here.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from sqlalchemy import Engine, select

from evalstore.db import repositories as repo
from evalstore.db.models import Judge, NuggetBank, Pool, PoolAssignment, QrelsSet, Task, User
from evalstore.db.session import read_only, unit_of_work
from evalstore.errors import (
    AccessDenied,
    ConflictError,
    EvaluationError,
    InvalidParameterError,
    NotFoundError,
    Remedy,
)
from evalstore.services import access, collections, health, jobs, judging, pools, tasks
from evalstore.services.access import Principal
from evalstore.services.judges import probe as judges_probe
from evalstore.services.judges import registry as judges_registry
from evalstore.services.judges import running as judges_running

# measures a task created on the console may name: a leaderboard of more is unreadable
MAX_TASK_MEASURES = 50
# a pool's depth from the console: TREC's customary 100 at most a few hundred, not a whole run
MAX_POOL_DEPTH = 1000


def managed(engine: Engine, principal: Principal, task: str) -> tasks.TaskView:
    """The task, if the principal manages it; AccessDenied otherwise (as for every change to it)."""
    principal.require("tasks:manage")
    if not tasks.task_access(engine, principal, task).manages:
        raise AccessDenied(f"Task '{task}' is managed by its organiser; you may not change it.")
    return tasks.show_task(engine, task)


def submissions(engine: Engine, principal: Principal, task: str) -> list[tasks.SubmissionState]:
    """Every team's runs on the task, each with its job's state, queue position and, for a failed
    job, its error."""
    managed(engine, principal, task)
    return [tasks.submission_state(engine, principal, run) for run in tasks.task_runs(engine, principal, task)]


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


def task_health(engine: Engine, principal: Principal, task: str) -> health.StoredReport | None:
    """The collection-health report (`evalstore health`) over the task's runs evaluated on its
    qrels, with the task's measures when it names them, as a worker stored it (None: none stored
    yet). Reads only: a report is computed by a worker after evaluations finish, never on request."""
    shown = managed(engine, principal, task)
    if shown.qrels is None:
        raise InvalidParameterError(
            f"Task '{task}' takes generated answers; the collection-health report is over ranking runs and qrels."
        )
    submitted = tasks.task_runs(engine, principal, task)
    done = sum(1 for run in submitted if run["state"] == "done")
    if done < 2:
        raise EvaluationError(
            f"The health report compares the task's runs: it needs two or more evaluated, and "
            f"{done} {'is' if done == 1 else 'are'} so far."
        )
    with read_only(engine) as session:
        stored = repo.get_named(
            session, Task, task, f"No task named '{task}'.", Remedy(cli="See 'evalstore tasks list'.")
        )
        return health.stored_report(session, stored)


@dataclass(frozen=True)
class QrelsChoice:
    """A stored qrels set a task may be created over, as the console's form offers it."""

    name: str
    topics: int
    judgments: int
    created_at: str | None


def qrels_choices(engine: Engine, principal: Principal) -> list[QrelsChoice]:
    """The relevance qrels the principal may create a task over: an admin any; an organiser those
    of the tasks they own (another organiser's qrels, or qrels no task claims yet, are an admin's
    to hand out: tasks.create_task refuses them)."""
    principal.require("tasks:manage")
    with read_only(engine) as session:
        query = select(QrelsSet).where(QrelsSet.kind == "relevance").order_by(QrelsSet.name)
        if not principal.is_admin:
            mine = select(Task.qrels_id).where(Task.owner_id == principal.user_id)
            others = select(Task.qrels_id).where(Task.owner_id.is_distinct_from(principal.user_id))
            query = query.where(QrelsSet.id.in_(mine), QrelsSet.id.not_in(others))
        return [
            QrelsChoice(
                q.name,
                q.topic_count,
                q.row_count,
                jobs.as_utc(q.created_at).isoformat(timespec="seconds"),
            )
            for q in session.scalars(query)
        ]


@dataclass(frozen=True)
class BankChoice:
    """A nugget bank a task over generated answers may be created over, as the console offers it."""

    name: str
    topics: int
    nuggets: int


def owner_choices(engine: Engine, principal: Principal) -> list[str]:
    """Whom an admin may make a new task's organiser (the organisers and admins, by name); an
    organiser owns the tasks they create, and is offered no one."""
    principal.require("tasks:manage")
    if not principal.is_admin:
        return []
    return [u.name for u in access.list_users(engine) if u.role in ("organiser", "admin") and not u.disabled]


def bank_choices(engine: Engine, principal: Principal) -> list[BankChoice]:
    """The nugget banks the principal may create an answer task over, as :func:`qrels_choices`
    for qrels: an admin any accepted bank; an organiser those of the tasks they own. A judge's
    draft that no person has accepted is not offered."""
    principal.require("tasks:manage")
    with read_only(engine) as session:
        query = (
            select(NuggetBank)
            .where(NuggetBank.drafted_by.is_(None) | NuggetBank.accepted_at.is_not(None))
            .order_by(NuggetBank.name)
        )
        if not principal.is_admin:
            mine = select(Task.nugget_bank_id).where(Task.owner_id == principal.user_id)
            others = select(Task.nugget_bank_id).where(
                Task.owner_id.is_distinct_from(principal.user_id), Task.nugget_bank_id.is_not(None)
            )
            query = query.where(NuggetBank.id.in_(mine), NuggetBank.id.not_in(others))
        return [BankChoice(b.name, b.topic_count, b.nugget_count) for b in session.scalars(query)]


def create_console_task(
    engine: Engine,
    principal: Principal,
    name: str,
    *,
    qrels: str | None,
    nuggets: str | None = None,
    hidden: bool,
    private_fraction: float | None = None,
    split_seed: int | None = None,
    opens: datetime | None = None,
    closes: datetime | None = None,
    max_runs_per_team: int | None = None,
    daily_cap: int | None = None,
    measures: Sequence[str] = (),
    official_measure: str | None = None,
    description: str | None = None,
    topics_file: Path | None = None,
    topics_shown: str | None = None,
    owner: str | None = None,
) -> tasks.TaskView:
    """A task created from the console, owned by the principal (an admin names its organiser,
    ``owner``): its settings checked as the CLI's are, its topics file (if any) read and stored
    with it, all in one unit of work."""
    principal.require("tasks:manage")
    if not name:
        raise InvalidParameterError("Give the task a name.")
    if not qrels and not nuggets:
        raise InvalidParameterError(
            "Choose the qrels (ranked runs) or the nugget bank (generated answers) the task's runs are evaluated "
            "against."
        )
    if qrels and nuggets:
        raise InvalidParameterError(
            "A task evaluates ranked runs against qrels or generated answers on a nugget bank; choose one of the two."
        )
    if len(measures) > MAX_TASK_MEASURES:
        raise InvalidParameterError(
            f"A task evaluates at most {MAX_TASK_MEASURES} measures; {len(measures)} were given."
        )
    if private_fraction is not None and not 0 < private_fraction < 1:
        raise InvalidParameterError(
            "The private share is the fraction of topics kept private, between 0 and 1 (e.g. 0.5); "
            f"got {private_fraction}."
        )
    topics = None
    if topics_file is not None:
        shown = topics_shown or topics_file.name
        topics = tasks.TopicFile(collections.read_topic_file(topics_file, shown), shown)
    return tasks.create_task(
        engine,
        name,
        qrels_name=qrels or None,
        nuggets_name=nuggets or None,
        hidden=hidden,
        opens=opens,
        closes=closes,
        max_runs_per_team=max_runs_per_team,
        measures=measures,
        daily_cap=daily_cap,
        official_measure=official_measure,
        private_fraction=private_fraction,
        split_seed=split_seed,
        description=description,
        topics=topics,
        owner=owner or None,
        by=principal,
    )


def replace_topics(engine: Engine, principal: Principal, task: str, file: TextFile) -> tasks.TaskView:
    """The task's topics file, uploaded on its console: read (errors at ``file:line``), then stored."""
    managed(engine, principal, task)
    statements = collections.read_topic_file(file.path, file.shown)
    return tasks.set_topics(engine, task, tasks.TopicFile(statements, file.shown), by=principal)


@dataclass(frozen=True)
class TextFile:
    """An uploaded file: where it is, and the name its errors call it by."""

    path: Path
    shown: str


@dataclass(frozen=True)
class PoolTexts:
    """What a pool's assessors read: its topic set and collection (names), and what was stored."""

    pool: str
    topic_set: str | None
    collection: str | None
    topics_stored: int = 0
    documents_stored: int = 0


def pool_texts(engine: Engine, principal: Principal, task: str) -> dict[str, PoolTexts]:
    """The texts attached to each of the task's pools, by pool name."""
    names = [p.name for p in task_pools(engine, principal, task)]
    with read_only(engine) as session:
        rows = session.execute(select(Pool.name, Pool.topic_set, Pool.collection).where(Pool.name.in_(names)))
        return {name: PoolTexts(name, topic_set, collection) for name, topic_set, collection in rows}


def text_sets(engine: Engine, principal: Principal) -> tuple[list[str], list[str]]:
    """The imported topic sets and collections (names) an organiser may pick for a pool."""
    principal.require("tasks:manage")
    stored = collections.list_text_sets(engine)
    return [t.name for t in stored if t.kind == "topics"], [t.name for t in stored if t.kind == "documents"]


def attach_pool_texts(
    engine: Engine,
    principal: Principal,
    task: str,
    pool: str,
    *,
    topic_set: str | None = None,
    collection: str | None = None,
    topics_file: TextFile | None = None,
    documents_file: TextFile | None = None,
) -> PoolTexts:
    """Attach topic statements and documents' text to one of the task's pools, each picked (an
    imported set) or uploaded (stored as a new set named for the pool), all in one unit of work:
    a file with an error stores nothing and names its line."""
    if pool not in {p.name for p in task_pools(engine, principal, task)}:
        raise NotFoundError(f"No pool named '{pool}' of task '{task}'; build one from its runs first.")
    if topic_set and topics_file:
        raise InvalidParameterError("Pick imported topics or upload a topics file, not both.")
    if collection and documents_file:
        raise InvalidParameterError("Pick an imported collection or upload a documents file, not both.")
    if not (topic_set or collection or topics_file or documents_file):
        raise InvalidParameterError("Pick or upload the topics or the documents to attach.")
    statements = collections.read_topic_file(topics_file.path, topics_file.shown) if topics_file else None
    topics_stored = documents_stored = 0
    with unit_of_work(engine) as session:
        row = repo.get_pool(session, pool)
        if statements is not None:
            topic_set = collections.free_topic_set_name(session, f"{pool}-topics")
            collections.add_topic_set(session, topic_set, statements, topics_file.shown if topics_file else None)
            topics_stored = len(statements)
        elif topic_set:
            repo.get_topic_set(session, topic_set)
        if documents_file is not None:
            collection = collections.free_collection_name(session, f"{pool}-documents")
            documents_stored = collections.add_documents(
                session, documents_file.path, collection=collection, shown=documents_file.shown
            ).count
        elif collection:
            repo.get_collection(session, collection)
        if topic_set:
            row.topic_set = topic_set
        if collection:
            row.collection = collection
        access.audit(
            session, principal.name, "pools.texts", pool, {"topics": row.topic_set, "collection": row.collection}
        )
        return PoolTexts(pool, row.topic_set, row.collection, topics_stored, documents_stored)


# --- judges from the console ----------------------------------------------------------------------

# an organiser names the environment variable a judge's key is read from: only variables with this
# prefix, so that no other secret of the server's (its database's URL, a cloud key) can be named
# and sent to an endpoint the organiser chose
JUDGE_KEY_PREFIX = "EVALSTORE_JUDGE_KEY_"
# a run or probe from the console at most: a budget is an organiser's guard; this bounds a form
MAX_PROBE_DOCUMENTS = 200


def console_judges(engine: Engine, principal: Principal) -> list[judges_registry.JudgeView]:
    """The judges the principal may run and read on the console: an organiser's own (added from
    the console), every judge for an admin."""
    principal.require("tasks:manage")
    with read_only(engine) as session:
        query = select(Judge.name).order_by(Judge.name)
        if not principal.is_admin:
            query = query.where(Judge.owner_id == principal.user_id)
        names = list(session.scalars(query))
    return [judges_registry.show_judge(engine, name) for name in names]


def _owned_judge(engine: Engine, principal: Principal, name: str) -> None:
    principal.require("tasks:manage")
    with read_only(engine) as session:
        owner = session.execute(select(Judge.id, Judge.owner_id).where(Judge.name == name)).first()
    if owner is None or not (principal.is_admin or owner.owner_id == principal.user_id):
        raise NotFoundError(f"No judge named '{name}' of yours.")


def console_judge(engine: Engine, principal: Principal, name: str) -> judges_registry.JudgeView:
    """One of the principal's judges as its page shows it: its configuration (the name of the
    variable its key is read from, never the key), its labels per pool, its probes, and its cost
    so far (tokens, time, money; the unrateable labels with their reason)."""
    _owned_judge(engine, principal, name)
    return judges_registry.show_judge(engine, name)


def add_console_judge(
    engine: Engine,
    principal: Principal,
    name: str,
    *,
    endpoint: str,
    model: str,
    api_key_env: str | None = None,
    scale: str = "0-3",
    temperature: float = 0.0,
    max_concurrency: int = 4,
    price_in: float | None = None,
    price_out: float | None = None,
) -> judges_registry.JudgeView:
    """A judge added from the console, owned by the principal, with the built-in prompt (a prompt
    file is the command line's: the server reads no file a form names)."""
    principal.require("tasks:manage")
    if not name:
        raise InvalidParameterError("Give the judge a name.")
    if not model:
        raise InvalidParameterError("Give the model's name, as the endpoint knows it.")
    if api_key_env is not None and not (
        api_key_env.startswith(JUDGE_KEY_PREFIX) and len(api_key_env) > len(JUDGE_KEY_PREFIX)
    ):
        raise InvalidParameterError(
            f"The key's variable is one whose name begins with {JUDGE_KEY_PREFIX} (the server's operator sets it); "
            f"'{api_key_env}' does not."
        )
    if not 1 <= max_concurrency <= 32:
        raise InvalidParameterError(f"Requests at once are 1 to 32; not {max_concurrency}.")
    # the registry's own checks name the command line's options; these say the same in the form's words
    if not re.match(r"https?://", endpoint):
        raise InvalidParameterError(
            f"The endpoint is the http(s) URL of an OpenAI-compatible API, e.g. http://127.0.0.1:8000/v1; "
            f"not '{endpoint}'."
        )
    if not re.fullmatch(r"\s*\d\s*-\s*\d\s*", scale) or int(scale.split("-")[0]) >= int(scale.split("-")[1]):
        raise InvalidParameterError(f"The grades are LOW-HIGH, 0-9 with LOW below HIGH (e.g. 0-3); not '{scale}'.")
    if not 0 <= temperature <= 2:
        raise InvalidParameterError(f"The temperature is 0 to 2; not {temperature:g}.")
    with read_only(engine) as session:
        if session.scalar(select(Judge.id).where(Judge.name == name)) is not None:
            raise ConflictError(f"A judge named '{name}' exists already; choose another name.")
    return judges_registry.add_judge(
        engine,
        name,
        endpoint=endpoint,
        model=model,
        api_key_env=api_key_env,
        scale=scale,
        temperature=temperature,
        max_concurrency=max_concurrency,
        price_in=price_in,
        price_out=price_out,
        owner_id=principal.user_id,
    )


@dataclass(frozen=True)
class JudgeablePool:
    """A pool of one of the principal's tasks, and whether a judge can read it (its texts)."""

    name: str
    task: str
    qrels: str
    documents: int
    readable: bool


def judgeable_pools(engine: Engine, principal: Principal) -> list[JudgeablePool]:
    """The pools of the tasks the principal manages, each with whether its topics and documents
    are attached (what a judge reads)."""
    principal.require("tasks:manage")
    managed_tasks = {  # a task over a nugget bank pools no documents
        t.name: t.qrels for t in tasks.list_tasks(engine) if t.qrels is not None and _manages(engine, principal, t.name)
    }
    found = [p for p in pools.list_pools(engine) if p.params.get("task") in managed_tasks]
    with read_only(engine) as session:
        texts = {
            name: topic_set is not None and collection is not None
            for name, topic_set, collection in session.execute(
                select(Pool.name, Pool.topic_set, Pool.collection).where(Pool.name.in_([p.name for p in found]))
            )
        }
    return [
        JudgeablePool(p.name, str(p.params["task"]), managed_tasks[str(p.params["task"])], p.documents, texts[p.name])
        for p in found
    ]


def _manages(engine: Engine, principal: Principal, task: str) -> bool:
    return tasks.task_access(engine, principal, task).manages


def judge_pool(engine: Engine, principal: Principal, judge: str, pool: str) -> JudgeablePool:
    """The principal's judge and one of their tasks' pools, checked before a run or a probe is
    started: the pool must name its topics and documents (what the judge reads)."""
    _owned_judge(engine, principal, judge)
    found = next((p for p in judgeable_pools(engine, principal) if p.name == pool), None)
    if found is None:
        raise NotFoundError(f"No pool named '{pool}' of your tasks.")
    if not found.readable:
        raise InvalidParameterError(
            f"Pool '{pool}' has no topics or documents attached for the judge to read; attach them on task "
            f"{found.task}'s console first."
        )
    return found


def run_console_judge(
    engine: Engine,
    principal: Principal,
    judge: str,
    pool: str,
    *,
    max_cost: float | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> judges_running.JudgeRun:
    """Run the judge over the pool's documents it has not rated yet (resumable: labels are stored
    as they arrive); the console calls it on a background job, never in a request."""
    judge_pool(engine, principal, judge, pool)
    if max_cost is not None and not 0 < max_cost < 1e6:
        raise InvalidParameterError(f"The budget is above 0 dollars (below a million); not {max_cost:g}.")
    return judges_running.run_judge(engine, judge, pool_name=pool, max_cost=max_cost, progress=progress)


def probe_console_judge(
    engine: Engine,
    principal: Principal,
    judge: str,
    pool: str,
    *,
    limit: int = 10,
    seed: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> judges_probe.ProbeResult:
    """Probe the judge (plain and attacked passages) on documents the pool's task's qrels judge,
    read from the pool's topics and documents; the seed is drawn and recorded when None."""
    found = judge_pool(engine, principal, judge, pool)
    if not 1 <= limit <= MAX_PROBE_DOCUMENTS:
        raise InvalidParameterError(f"A probe asks about 1 to {MAX_PROBE_DOCUMENTS} documents; not {limit}.")
    with read_only(engine) as session:
        row = repo.get_pool(session, pool)
        collection, topic_set = str(row.collection), str(row.topic_set)
    return judges_probe.probe(
        engine,
        judge,
        collection=collection,
        qrels_name=found.qrels,
        topic_set=topic_set,
        limit=limit,
        seed=secrets.randbits(31) if seed is None else seed,
        progress=progress,
    )
