"""Comparison pages ready before anyone asks: as each job finishes the worker stores its run's
paired tests with the task's other runs on the task's measures, and once its queue is empty any
pair still missing; the compare page reads them (the same numbers as computed on the request),
computes them while a pair of the runs' evaluations as they are is missing, and says so (both
databases)."""

from __future__ import annotations

import itertools
from collections.abc import Callable

import numpy as np
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import delete, func, select, update

from evalstore.db.models import PairTests, QrelsSet, Task
from evalstore.db.session import read_only, unit_of_work
from evalstore.services import comparisons, orchestration, tasks
from evalstore.services.comparisons import ScoreMatrix
from evalstore.services.kinds import ranking
from evalstore.services.kinds.ranking import pairs
from evalstore.services.worker import Worker, WorkerSettings
from tests.http.conftest import World, as_principal, run_text

pytestmark = pytest.mark.both_databases

TOPICS = ("301", "302", "303")
RUNS = ["red-open", *(f"run-{i}" for i in range(4))]
PREPARING = "These tests are being prepared"


def _qrels_id(world: World) -> int:
    with read_only(world.engine) as session:
        found = session.scalar(select(QrelsSet.id).where(QrelsSet.name == "sample"))
    assert found is not None
    return found


def _refresh(world: World) -> int:
    """What a worker does once its queue is empty, after storing results on the qrels."""
    worker = Worker(world.engine, WorkerSettings(until_empty=True, index_runs=False))
    worker.touched_qrels = {_qrels_id(world)}
    return worker.refresh_boards()


def _refresh_pairs(world: World) -> int:
    """The pairs an idle worker stores (and lets go); how many it stored."""
    return ranking.refresh_pairs(world.engine, [_qrels_id(world)])


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


@pytest.mark.parametrize("measure", ["AP", "nDCG@10", "P@10", "RR"])
def test_the_stored_tests_are_the_tests_computed_on_request(five_runs: World, measure: str) -> None:
    # each job stored its run's pairs on the measure the pages open on (AP: the task names no
    # official measure); the board's others once the queue is empty
    world = five_runs
    if measure != "AP":
        _refresh(world)
    for runs in (RUNS[:2], RUNS[1::-1], ["run-3", "run-0", "red-open"], RUNS, list(reversed(RUNS))):
        stored, computed = _both(world, runs, measure)
        assert stored.prepared and not computed.prepared
        assert stored.as_dict() == computed.as_dict()  # every number to the bit, every pair's order


def test_a_measure_the_task_does_not_evaluate_is_computed_on_request(five_runs: World) -> None:
    world = five_runs
    _refresh(world)
    stored, computed = _both(world, RUNS[:3], "P@20")
    assert not stored.prepared and stored.as_dict() == computed.as_dict()


def _rows(world: World) -> dict[str, tuple[str, dict[str, int], bytes]]:
    with read_only(world.engine) as session:
        return {
            key: (measure, runs, stats)
            for key, measure, runs, stats in session.execute(
                select(PairTests.key, PairTests.measure, PairTests.runs, PairTests.stats)
            )
        }


def _by_measure(world: World) -> dict[str, list[dict[str, int]]]:
    by_measure: dict[str, list[dict[str, int]]] = {}
    for measure, runs, _ in _rows(world).values():
        by_measure.setdefault(measure, []).append(runs)
    return by_measure


def test_each_pair_is_stored_once_as_its_jobs_finish_and_the_boards_other_measures_when_idle(
    five_runs: World,
) -> None:
    world = five_runs
    assert set(_by_measure(world)) == {"AP"}  # the measure the pages open on, as the jobs finish
    assert _refresh_pairs(world) == 3 * 10  # the board's three others once the queue is empty
    by_measure = _by_measure(world)
    assert set(by_measure) == {"AP", "nDCG@10", "P@10", "RR"}  # the open task's board measures alone
    for held in by_measure.values():  # every pair of the five runs, once (the secret task has one run)
        assert sorted(tuple(sorted(r)) for r in held) == sorted(itertools.combinations(sorted(RUNS), 2))
    assert _refresh_pairs(world) == 0  # nothing missing now


def test_an_official_measure_is_the_one_stored_as_jobs_finish(world: World) -> None:
    with unit_of_work(world.engine) as session:
        session.execute(update(Task).where(Task.name == "open").values(official_measure="nDCG@10"))
    for index, shift in enumerate((2, 4, 6, 9)):
        world.submit("open", f"run-{index}", text=run_text(TOPICS, tag=f"run-{index}", shift=shift))
    assert set(_by_measure(world)) == {"nDCG@10"}


def test_a_batchs_runs_store_their_pairs_together_as_a_full_refresh_would(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    for index, shift in enumerate((2, 4, 6, 9)):
        world.submit("open", f"run-{index}", text=run_text(TOPICS, tag=f"run-{index}", shift=shift), evaluate=False)
    worker = Worker(world.engine, WorkerSettings(index_runs=False, settle=0))
    with caplog.at_level("INFO", logger="evalstore.worker"):
        assert worker.process_one()  # the four jobs in one batch, their pairs stored once it is done
    assert "in a batch of 4" in caplog.text and "paired tests of 4 run(s)" in caplog.text
    batched = _rows(world)
    assert len(batched) == 10  # every pair of the five runs, on the measure the pages open on
    with unit_of_work(world.engine) as session:
        session.execute(delete(PairTests))
    assert _refresh_pairs(world) == 4 * 10
    assert {key: row for key, row in _rows(world).items() if row[0] == "AP"} == batched


def test_the_pairs_stored_job_by_job_are_those_of_a_full_refresh(five_runs: World) -> None:
    world = five_runs
    incremental = _rows(world)
    with unit_of_work(world.engine) as session:
        session.execute(delete(PairTests))
    assert _refresh_pairs(world) == 4 * len(incremental)
    full = {key: row for key, row in _rows(world).items() if row[0] == "AP"}
    assert full == incremental  # the same keys, the same bytes


def test_the_compare_page_reads_the_stored_tests(five_runs: World, five_runs_client: TestClient) -> None:
    world, client = five_runs, five_runs_client
    _refresh(world)
    url = "/tasks/open/compare?run=red-open&run=run-2&measure=AP"
    page = client.get(url, headers=world.headers("owner"))
    assert page.status_code == 200 and PREPARING not in page.text
    # changed in the store, the page shows the change: read, not computed
    with unit_of_work(world.engine) as session:
        row = session.scalars(select(PairTests).where(PairTests.measure == "AP")).all()
        (pair,) = [r for r in row if set(r.runs) == {"red-open", "run-2"}]
        arrays = {k: v.copy() for k, v in pairs.unpack(pair.stats, 1).items()}
        arrays["effect_size"][:] = 7.77
        session.execute(update(PairTests).where(PairTests.key == pair.key).values(stats=pairs.pack(arrays)))
    page = client.get(url, headers=world.headers("owner"))
    assert '<td class="num" data-label="Effect dz">7.77</td>' in page.text
    # another test than the stored one: computed, and never said to be prepared
    other = client.get(url + "&test=wilcoxon", headers=world.headers("owner"))
    assert other.status_code == 200 and "7.77" not in other.text and PREPARING not in other.text


def _keys_of(world: World, run: str) -> set[str]:
    with read_only(world.engine) as session:
        return {key for key, runs in session.execute(select(PairTests.key, PairTests.runs)) if run in runs}


def test_a_run_replaced_has_its_pairs_stored_by_its_job_and_the_old_ones_let_go(
    five_runs: World, five_runs_client: TestClient
) -> None:
    world, client = five_runs, five_runs_client
    _refresh(world)
    old = _keys_of(world, "run-2")
    # evaluated again on the same inputs: the same evaluation, the same numbers, nothing recomputed
    orchestration.evaluate(world.engine, orchestration.RankingRequest("sample", ["run-2"], force=True), wait=True)
    assert _keys_of(world, "run-2") == old and _refresh_pairs(world) == 0
    # withdrawn and submitted again with other rankings: its job stores its pairs as it finishes
    tasks.withdraw_run(world.engine, as_principal(world.engine, "owner"), "run-2")
    world.submit("open", "run-2", text=run_text(TOPICS, tag="run-2", shift=7))
    url = "/tasks/open/compare?run=red-open&run=run-2&measure=AP"
    page = client.get(url, headers=world.headers("owner"))
    assert page.status_code == 200 and PREPARING not in page.text
    now = _keys_of(world, "run-2")
    assert now - old and old <= now  # the older evaluation's pairs wait for the idle refresh
    assert len(now - old) == 4  # four other runs, on the measure the pages open on
    assert _refresh_pairs(world) == 3 * 4  # the board's three other measures once idle
    after = _keys_of(world, "run-2")
    assert now - old <= after and not after & old and len(after) == 4 * 4  # four other runs, four measures
    # withdrawn for good: its pairs are let go by the next idle refresh
    tasks.withdraw_run(world.engine, as_principal(world.engine, "owner"), "run-2")
    _refresh_pairs(world)
    assert not _keys_of(world, "run-2")
    with read_only(world.engine) as session:
        assert session.scalar(select(func.count()).select_from(PairTests)) == 6 * 4  # four runs' pairs


def test_the_page_computes_and_says_so_while_a_pair_is_missing(five_runs: World, five_runs_client: TestClient) -> None:
    world, client = five_runs, five_runs_client
    _refresh(world)
    with unit_of_work(world.engine) as session:
        session.execute(delete(PairTests))
    url = "/tasks/open/compare?run=red-open&run=run-2&measure=AP"
    before = client.get(url, headers=world.headers("owner"))
    assert before.status_code == 200 and PREPARING in before.text
    with read_only(world.engine) as session:  # a GET never writes
        assert session.scalar(select(func.count()).select_from(PairTests)) == 0
    assert _refresh(world) >= 1
    assert PREPARING not in client.get(url, headers=world.headers("owner")).text


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
