"""An answer task's board letters as a worker stores them and a page reads them: what decides
them (:func:`tiers_key`), reading them back, and storing them (steps: a session in, no commit).
They are computed above this layer (:mod:`evalstore.services.reports.boards`), where the
comparisons are."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable

from sqlalchemy import select
from sqlalchemy.orm import Session

from evalstore.db.models import AnswerTiers
from evalstore.db.repositories import let_go_oldest

# letters kept per answer task: each board measure for the newest states of its board
TIERS_KEPT_PER_TASK = 256


def tiers_key(bank_name: str, measure: str, rows: Iterable[tuple[str, int | None, float | None]]) -> str:
    """What decides an answer board's letters on ``measure``: the bank, and each run's evaluation
    and mean on the measure (None: the run has none; a new evaluation or new labels change them)."""
    decided = sorted((run, evaluation, None if mean is None else repr(float(mean))) for run, evaluation, mean in rows)
    payload = json.dumps(["answers", bank_name, measure, decided], separators=(",", ":"))
    return hashlib.sha256(payload.encode()).hexdigest()


def stored_tiers(session: Session, key: str) -> dict[str, str] | None:
    letters = session.scalar(select(AnswerTiers.letters).where(AnswerTiers.key == key))
    return None if letters is None else {str(run): str(letter) for run, letter in letters.items()}


def store_tiers(session: Session, task_id: int, letters: dict[str, dict[str, str]]) -> int:
    """A step: a task's letters by key (each kept if another worker stored it first), then its
    oldest beyond :data:`TIERS_KEPT_PER_TASK` let go; how many were new. Never commits."""
    have = set(session.scalars(select(AnswerTiers.key).where(AnswerTiers.key.in_(sorted(letters)))))
    new = [AnswerTiers(key=key, task_id=task_id, letters=made) for key, made in letters.items() if key not in have]
    session.add_all(new)
    session.flush()
    let_go_oldest(session, AnswerTiers, AnswerTiers.task_id == task_id, TIERS_KEPT_PER_TASK)
    return len(new)
