"""A task's public/private topic split (Kaggle-style): the step that draws the private topics."""

from __future__ import annotations

import secrets

import numpy as np
from sqlalchemy import select
from sqlalchemy.orm import Session

from evalstore.db.models import Judgment, Task
from evalstore.errors import InvalidParameterError, Remedy


def draw_split(session: Session, task: Task, fraction: float, seed: int | None) -> None:
    """The step of :func:`set_split`: draw ``fraction`` of the qrels' topics (sorted, then a
    permutation from ``seed``) as the task's private topics, and record the fraction and seed."""
    if not 0 < fraction < 1:
        raise InvalidParameterError(
            f"The share of topics kept private is between 0 and 1; not {fraction}.",
            remedy=Remedy(cli="Give it with --private-topics."),
        )
    topics = sorted(set(session.scalars(select(Judgment.topic).where(Judgment.qrels_id == task.qrels_id).distinct())))
    count = round(fraction * len(topics))
    if not 1 <= count < len(topics):
        raise InvalidParameterError(
            f"A share of {fraction} of the {len(topics)} topics leaves no public or no private topic; "
            "pick a share that keeps at least one of each."
        )
    seed = secrets.randbits(31) if seed is None else seed
    chosen = np.random.default_rng(seed).permutation(len(topics))[:count]
    task.private_topics = sorted((topics[i] for i in chosen), key=_topic_order)
    task.private_fraction, task.split_seed = fraction, seed


def _topic_order(topic: str) -> tuple[int, int | str]:
    return (0, int(topic)) if topic.isdigit() else (1, topic)
