"""What tests store before they act, written once: the sample data's paths, synthetic qrels and
runs, and the sample stored (and queued) in a store. Fixtures live in the conftest files; these are
the plain functions they and the tests call."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from sqlalchemy import Engine

from evalstore.services import jobs, store
from evalstore.services.jobs import EvaluationOptions

SAMPLE = Path(__file__).resolve().parents[1] / "evalstore" / "sample_data"  # trec_eval's sample qrels and run
SYNTHETIC_TOPICS = [str(t) for t in range(401, 409)]


def synthetic_qrels_text() -> str:
    """Qrels for eight topics of twelve documents d0..d11, d0 graded 2 and every third one 1."""
    lines = []
    for t in SYNTHETIC_TOPICS:
        for d in range(12):
            lines.append(f"{t} 0 d{d} {int(d % 3 == 0) + int(d == 0)}")
    return "\n".join(lines) + "\n"


def synthetic_run_text(seed: int, tag: str, topics: list[str] = SYNTHETIC_TOPICS) -> str:
    """A run ranking the twelve documents of each topic in an order drawn from ``seed``."""
    rng = np.random.default_rng(seed)
    lines = []
    for t in topics:
        for rank, d in enumerate(rng.permutation(12)):
            lines.append(f"{t} Q0 d{d} {rank + 1} {12 - rank + rng.random():.4f} {tag}")
    return "\n".join(lines) + "\n"


def store_sample(engine: Engine, *, qrels: str = "test", run: str = "std") -> None:
    """trec_eval's sample qrels and run stored under those names."""
    store.import_qrels(engine, SAMPLE / "qrels.test", name=qrels)
    store.register_run(engine, SAMPLE / "results.test", name=run)


def queue_sample(engine: Engine) -> int:
    """trec_eval's sample qrels and run stored, their all_trec evaluation queued; its id."""
    store_sample(engine)
    [ref] = jobs.enqueue(engine, qrels_name="test", run_names=["std"], options=EvaluationOptions(("all_trec",)))
    return ref.evaluation_id
