"""Judging pools through the service: which assessor judges which pool, what each sees next,
and the judgments they make (in the browser, one document at a time, or through the API).

Judgments land in ``pool_judgments``, the table ``evalstore judgments import`` fills, so
``judgments agreement`` and ``pool qrels`` read them unchanged. An assessor sees only the pools
assigned to them, and never another assessor's labels (judging is blind).

The package's modules, by job: assignments (who judges which pool, the pool's judging settings),
roles (an assessor's role on a topic when topics are judged twice), screens (what an assessor
sees) and recording (judgments made, revised and taken back).
"""

from __future__ import annotations

from evalstore.services.judging.assignments import (
    POOL_GRADES,
    AssessorPool,
    PoolSettings,
    assessor_pools,
    assign_assessor,
    configure_pool,
)
from evalstore.services.judging.recording import (
    LONGEST_JUDGMENT_SECONDS,
    NOTE_CHARACTERS,
    SKIPPED,
    judge_document,
    record_judgments,
    revise_judgment,
    undo_last,
)
from evalstore.services.judging.roles import (
    ROLE_CODES,
    ROLE_EVERY,
    ROLE_FIRST,
    ROLE_OPEN,
    ROLE_SECOND,
    double_sample,
    role_changed,
    topic_role,
)
from evalstore.services.judging.screens import (
    UNDOS_SEARCHED,
    EntryToJudge,
    JudgingScreen,
    MyJudgment,
    TopicProgress,
    judging_screen,
    my_judgments,
    pool_entries,
    topic_progress,
)

__all__ = [
    "AssessorPool",
    "EntryToJudge",
    "PoolSettings",
    "LONGEST_JUDGMENT_SECONDS",
    "NOTE_CHARACTERS",
    "POOL_GRADES",
    "ROLE_CODES",
    "ROLE_EVERY",
    "ROLE_FIRST",
    "ROLE_OPEN",
    "ROLE_SECOND",
    "SKIPPED",
    "UNDOS_SEARCHED",
    "JudgingScreen",
    "MyJudgment",
    "TopicProgress",
    "assessor_pools",
    "assign_assessor",
    "configure_pool",
    "double_sample",
    "judge_document",
    "judging_screen",
    "my_judgments",
    "pool_entries",
    "record_judgments",
    "revise_judgment",
    "role_changed",
    "topic_progress",
    "topic_role",
    "undo_last",
]
