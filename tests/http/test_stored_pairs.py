"""Comparison pages ready before anyone asks: once its queue is empty the worker stores a task's
paired tests for every pair of its runs on every measure they hold; the compare page reads them
(the same numbers as computed on the request), computes them while what is stored is not of the
runs' evaluations as they are, and says so (both databases)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select, update

from evalstore.db.models import PairTests, QrelsSet
from evalstore.db.session import read_only, unit_of_work
from evalstore.services import comparisons, tasks
from evalstore.services.comparisons import ScoreMatrix
from evalstore.services.kinds import ranking
from evalstore.services.kinds.ranking import pairs
from evalstore.services.worker import Worker, WorkerSettings
from tests.http.conftest import World, run_text

TOPICS = ("301", "302", "303")
RUNS = ["red-open", *(f"run-{i}" for i in range(4))]
PREPARING = "These tests are being prepared"


def _refresh(world: World) -> int:
    """What a worker does once its queue is empty, after storing results on the qrels."""
    with read_only(world.engine) as session:
        qrels_id = session.scalar(select(QrelsSet.id).where(QrelsSet.name == "sample"))
    worker = Worker(world.engine, WorkerSettings(until_empty=True, index_runs=False))
    worker.touched_qrels = {qrels_id}
    return worker.refresh_boards()


def _five_runs(world: World, *, refresh: bool = True) -> None:
    for index, shift in enumerate((2, 4, 6, 9)):
        world.submit("open", f"run-{index}", text=run_text(TOPICS, tag=f"run-{index}", shift=shift))
    if refresh:
        _refresh(world)


def _stored_for(
    world: World, task: str = "open", shown: ranking.TopicFilter | None = None
) -> Callable[[ScoreMatrix], ranking.StoredPairs | None]:
    def stored(matrix: ScoreMatrix) -> ranking.StoredPairs | None:
        return ranking.stored_pairs(
            world.engine,
            task=task,
            qrels_name="sample",
            measure=matrix.measures[0],
            topics=shown,
            evaluations=matrix.evaluation_ids,
            topic_list=matrix.topics,
        )

    return stored


def _both(world: World, runs: list[str], measure: str) -> tuple[comparisons.Comparison, comparisons.Comparison]:
    asked = {
        "qrels_name": "sample",
        "run_names": runs,
        "measures": [measure],
        "missing": "zero",
        "evaluate_missing": False,
    }
    return (
        comparisons.compare(world.engine, **asked, stored=_stored_for(world)),
        comparisons.compare(world.engine, **asked),
    )


@pytest.mark.parametrize("measure", ["AP", "P@20", "nDCG@10", "Bpref"])
def test_the_stored_tests_are_the_tests_computed_on_request(world: World, measure: str) -> None:
    _five_runs(world)
    for runs in (RUNS[:2], RUNS[1::-1], ["run-3", "run-0", "red-open"], RUNS, list(reversed(RUNS))):
        stored, computed = _both(world, runs, measure)
        assert stored.prepared and not computed.prepared
        assert stored.as_dict() == computed.as_dict()  # every number to the bit, every pair's order


def test_every_measure_the_runs_hold_is_stored_once(world: World) -> None:
    _five_runs(world)
    with read_only(world.engine) as session:
        rows = session.execute(select(PairTests.measure, PairTests.runs, PairTests.seed, PairTests.test)).all()
    measures = {m for m, _, _, _ in rows}
    assert {"AP", "P@20", "nDCG@10", "Rprec", "Bpref", "RR"} <= measures
    assert len(rows) == len(measures)  # one a measure: the open task's (the secret one has one run)
    assert all(set(runs) == set(RUNS) and seed is None and test == "t" for _, runs, seed, test in rows)
    assert _refresh(world) == 0  # nothing new: what is stored is current


def test_the_compare_page_reads_the_stored_tests(world: World, client: TestClient) -> None:
    _five_runs(world)
    url = "/tasks/open/compare?run=red-open&run=run-2&measure=AP"
    page = client.get(url, headers=world.headers("owner"))
    assert page.status_code == 200 and PREPARING not in page.text
    # changed in the store, the page shows the change: read, not computed
    with unit_of_work(world.engine) as session:
        row = session.scalars(select(PairTests).where(PairTests.measure == "AP")).one()
        count = len(RUNS) * (len(RUNS) - 1) // 2
        arrays = {k: v.copy() for k, v in pairs.unpack(row.stats, count).items()}
        arrays["effect_size"][:] = 7.77
        session.execute(update(PairTests).where(PairTests.key == row.key).values(stats=pairs.pack(arrays)))
    page = client.get(url, headers=world.headers("owner"))
    assert '<td class="num" data-label="Effect dz">7.77</td>' in page.text
    # another test than the stored one: computed, and never said to be prepared
    other = client.get(url + "&test=wilcoxon", headers=world.headers("owner"))
    assert other.status_code == 200 and "7.77" not in other.text and PREPARING not in other.text


def test_the_page_computes_and_says_so_until_the_worker_stored_the_runs_as_they_are(
    world: World, client: TestClient
) -> None:
    _five_runs(world, refresh=False)
    url = "/tasks/open/compare?run=red-open&run=run-2&measure=AP"
    before = client.get(url, headers=world.headers("owner"))
    assert before.status_code == 200 and PREPARING in before.text
    with read_only(world.engine) as session:  # a GET never writes
        assert session.scalar(select(func.count()).select_from(PairTests)) == 0
    assert _refresh(world) >= 1
    ready = client.get(url, headers=world.headers("owner"))
    assert PREPARING not in ready.text
    # a run evaluated again: the stored tests are of its older evaluation, so the page computes
    world.submit("open", "blue-five", team_user="blue", text=run_text(TOPICS, tag="blue-five", shift=5))
    assert PREPARING not in client.get(url, headers=world.headers("owner")).text  # its runs' tests still hold
    with read_only(world.engine) as session:
        old = set(session.scalars(select(PairTests.key)))
    with_new = client.get(url.replace("run-2", "blue-five"), headers=world.headers("owner"))
    assert with_new.status_code == 200 and PREPARING in with_new.text
    assert _refresh(world) >= 1
    with read_only(world.engine) as session:
        new = set(session.scalars(select(PairTests.key)))
    assert not old & new  # each measure's newest only
    assert PREPARING not in client.get(url.replace("run-2", "blue-five"), headers=world.headers("owner")).text


def test_a_split_tasks_public_topics_are_stored_for_its_participants(world: World, client: TestClient) -> None:
    task = tasks.create_task(
        world.engine, "split", qrels_name="sample", owner="owner", private_fraction=1 / 3, split_seed=11
    )
    for name, shift in (("red-a", 1), ("red-b", 4)):
        world.submit("split", name, text=run_text(TOPICS, tag=name, shift=shift))
    _refresh(world)
    url = "/tasks/split/compare?run=red-a&run=red-b&measure=AP"
    for caller in ("red", "owner"):  # the public topics, every topic
        page = client.get(url, headers=world.headers(caller))
        assert page.status_code == 200 and PREPARING not in page.text
    public = ranking.TopicFilter(frozenset(task.private_topics), exclude=True)
    asked = {"qrels_name": "sample", "run_names": ["red-b", "red-a"], "measures": ["AP"], "missing": "zero"}
    stored = comparisons.compare(world.engine, **asked, topic_filter=public, stored=_stored_for(world, "split", public))
    assert stored.prepared and len(stored.matrix.topics) == 2
    assert stored.as_dict() == comparisons.compare(world.engine, **asked, topic_filter=public).as_dict()


@pytest.mark.parametrize("seed", range(6))
def test_every_pair_at_once_is_each_pair_alone(seed: int) -> None:
    """Random scores with ties, equal runs and constant differences: the arrays the worker stores
    give, pair by pair and either way round, what compare_matrix computes for those runs alone."""
    rng = np.random.default_rng(seed)
    topics = [str(t) for t in range(int(rng.integers(2, 60)))]
    runs = [f"r{i}" for i in range(7)]
    scores = np.round(rng.random((len(runs), len(topics))), int(rng.integers(1, 4)))
    scores[3] = scores[2]  # identical runs
    scores[4] = scores[1] + 0.125  # a constant difference
    stored = ranking.StoredPairs(runs, len(topics), pairs.paired_arrays(scores))
    for chosen in (["r0", "r1"], ["r1", "r0"], ["r2", "r3"], ["r4", "r1", "r6"], list(reversed(runs))):
        rows = [runs.index(r) for r in chosen]
        matrix = ScoreMatrix("q", chosen, topics, ["AP"], {"AP": scores[rows]}, {}, {})
        computed = comparisons.compare_matrix(matrix, missing="zero")
        read = comparisons.stored_comparison(matrix, stored, test="t", correction="holm", alpha=0.05, missing="zero")
        assert read.as_dict() == computed.as_dict()
        for a, b in zip(read.pairs, computed.pairs, strict=True):  # the signs of zeros too (the page prints them)
            assert [np.copysign(1, x) for x in (a.difference, a.statistic, a.ci_low, a.ci_high)] == [
                np.copysign(1, x) for x in (b.difference, b.statistic, b.ci_low, b.ci_high)
            ]
