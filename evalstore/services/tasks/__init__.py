"""Shared tasks: an organiser's qrels, the runs teams submit to them, and who may see what.

A task evaluates every submitted run against its qrels with its measures. A hidden task shows
scores to its organiser (and admins) only, until the organiser releases it: before that, everyone
else sees that a run was evaluated and that its scores are hidden, never a number, a per-topic
value, an error message or an MLflow link that could tell them about the qrels.

Every function takes the :class:`~evalstore.services.access.Principal` asking and decides what
it may see; the HTTP routes only pass it on.

The package's modules, by job: visibility (what a principal may see: tasks, jobs, submissions,
results), admin (organising: create, release, attach runs, export qrels), submissions (submitting
and withdrawing runs and answers: window, quota, the one unit of work of a submission; a task over
a nugget bank's answers queued once assessed), results (a run's
scores as the asker may see them), boards (a task's
leaderboard, kept in the application context) and lab_boards (a qrels set's runs, in or out of
tasks, as a lab sees them: the pages' collections).
"""

from __future__ import annotations

from evalstore.services.embargo import release_due
from evalstore.services.tasks.admin import (
    DESCRIPTION_CHARACTERS,
    MEASURE_CHOICES,
    SettingsConflict,
    TopicFile,
    attach_runs,
    cancel_scheduled_release,
    change_settings,
    check_measures,
    check_settings,
    computed_measures,
    create_task,
    export_qrels,
    list_tasks,
    measure_choices,
    patch_task,
    release_task,
    schedule_release,
    set_split,
    set_topics,
    settings_conflicts,
    show_task,
    task_topics,
    update_task,
)
from evalstore.services.tasks.boards import (
    TaskBoard,
    default_measures,
    task_leaderboard,
)
from evalstore.services.tasks.lab_boards import (
    CollectionAccess,
    collection_access,
    collection_board,
    collection_measures,
    list_collections,
)
from evalstore.services.tasks.results import PER_TOPIC_WITHHELD, run_results
from evalstore.services.tasks.submissions import (
    AnswersQueued,
    Submitted,
    day_used,
    evaluate_answers,
    quota_used,
    record_submission,
    register_run,
    submission_warning,
    submit_answers,
    submit_run,
    withdraw_run,
    withdrawal_keeps_slot,
)
from evalstore.services.tasks.visibility import (
    HIDDEN,
    LEADERBOARD_MEASURES,
    LIVE_JOBS_MAX,
    PENDING,
    RUN_TYPES,
    LiveJob,
    TaskAccess,
    TaskView,
    live_jobs,
    manages,
    public_only,
    public_topics,
    queue,
    show_job,
    show_submission,
    task_access,
    task_runs,
)

__all__ = [
    "AnswersQueued",
    "evaluate_answers",
    "submit_answers",
    "LIVE_JOBS_MAX",
    "PENDING",
    "LiveJob",
    "live_jobs",
    "MEASURE_CHOICES",
    "SettingsConflict",
    "TopicFile",
    "cancel_scheduled_release",
    "check_measures",
    "check_settings",
    "measure_choices",
    "release_due",
    "schedule_release",
    "set_topics",
    "settings_conflicts",
    "task_topics",
    "CollectionAccess",
    "collection_access",
    "collection_board",
    "collection_measures",
    "list_collections",
    "DESCRIPTION_CHARACTERS",
    "change_settings",
    "computed_measures",
    "update_task",
    "day_used",
    "set_split",
    "default_measures",
    "public_only",
    "public_topics",
    "quota_used",
    "HIDDEN",
    "PER_TOPIC_WITHHELD",
    "LEADERBOARD_MEASURES",
    "RUN_TYPES",
    "Submitted",
    "TaskAccess",
    "TaskBoard",
    "TaskView",
    "attach_runs",
    "create_task",
    "export_qrels",
    "list_tasks",
    "patch_task",
    "manages",
    "queue",
    "record_submission",
    "register_run",
    "release_task",
    "run_results",
    "show_job",
    "show_submission",
    "show_task",
    "submission_warning",
    "submit_run",
    "task_access",
    "task_leaderboard",
    "task_runs",
    "withdraw_run",
    "withdrawal_keeps_slot",
]
