"""A fake LLM endpoint, and a tiny store with a pool whose topics and documents a judge can read."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine

from evalstore.services import collections, pools, store
from evalstore.services.judging import configure_pool
from tests.judges.fake_llm import Script, serve

TOPICS = {"1": "supersonic wing flutter", "2": "boundary layer heat transfer", "3": "helicopter rotor noise"}
DOCS = {
    "d1": "flutter of a supersonic wing at high speed",  # topic 1: 3 words
    "d2": "wing design for gliders",  # topic 1: 1
    "d3": "heat transfer in a laminar boundary layer",  # topic 2: 3
    "d4": "boundary conditions of elasticity",  # topic 2: 1
    "d5": "noise of a helicopter rotor in hover",  # topic 3: 3
    "d6": "rotor dynamics",  # topic 3: 1
    "d7": "nothing of interest here",  # 0 everywhere
}
HUMAN = "1 0 d1 3\n1 0 d2 1\n1 0 d7 0\n2 0 d3 2\n2 0 d4 0\n3 0 d5 3\n3 0 d6 1\n"
RUNS = {
    "good": {"1": ["d1", "d2", "d7"], "2": ["d3", "d4", "d7"], "3": ["d5", "d6", "d7"]},
    "fair": {"1": ["d2", "d1", "d7"], "2": ["d4", "d3", "d7"], "3": ["d6", "d5", "d7"]},
    "poor": {"1": ["d7", "d2", "d1"], "2": ["d7", "d4", "d3"], "3": ["d7", "d6", "d5"]},
}


def run_text(name: str) -> str:
    return "".join(
        f"{topic} Q0 {doc} {rank} {10 - rank} {name}\n"
        for topic, docs in RUNS[name].items()
        for rank, doc in enumerate(docs, start=1)
    )


@pytest.fixture
def script() -> Script:
    return Script()


@pytest.fixture
def endpoint(script: Script) -> Iterator[str]:
    with serve(script) as url:
        yield url


@pytest.fixture
def world(engine: Engine, tmp_path: Path) -> Engine:
    """Qrels 'human', runs good/fair/poor, pool 'p' (depth 3) configured with topics 't' and
    collection 'c'."""
    return build_world(engine, tmp_path)


@pytest.fixture
def sqlite_world(sqlite_engine: Engine, tmp_path: Path) -> Engine:
    return build_world(sqlite_engine, tmp_path)


def build_world(engine: Engine, tmp_path: Path) -> Engine:
    (tmp_path / "human.txt").write_text(HUMAN)
    store.import_qrels(engine, tmp_path / "human.txt", name="human")
    for name in RUNS:
        (tmp_path / f"{name}.txt").write_text(run_text(name))
        store.register_run(engine, tmp_path / f"{name}.txt", name=name)
    (tmp_path / "topics.tsv").write_text("".join(f"{t}\t{q}\n" for t, q in TOPICS.items()))
    collections.import_topics(engine, tmp_path / "topics.tsv", name="t")
    (tmp_path / "docs.jsonl").write_text(
        "".join(json.dumps({"doc_id": d, "text": text}) + "\n" for d, text in DOCS.items())
    )
    collections.import_documents(engine, tmp_path / "docs.jsonl", collection="c")
    pools.build_pool(engine, name="p", run_names=list(RUNS), depth=3)
    configure_pool(engine, "p", topic_set="t", collection="c")
    return engine
