"""Seeded samples that every process draws alike."""

from __future__ import annotations

import zlib
from collections.abc import Sequence

import numpy as np


def double_sample(seed: int, share: float, topic: str, items: Sequence[str]) -> set[str]:
    """The items of a topic a second assessor sees (documents of a pool, answers of a nugget bank):
    ``share`` of them (at least one when the share is above 0), drawn by a generator seeded with
    the pool's or bank's seed and the topic, so every assessor and every server process draws the
    same ones."""
    if share <= 0 or not items:
        return set()
    count = min(len(items), max(1, round(share * len(items))))
    rng = np.random.default_rng([seed, zlib.crc32(topic.encode())])
    ordered = sorted(items)
    return {ordered[i] for i in rng.choice(len(ordered), size=count, replace=False)}
