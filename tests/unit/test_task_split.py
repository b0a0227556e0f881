"""A task's public/private topic split (Kaggle-style): drawn once from its seed and stored; until
the task is released, a participant's board, run results and per-topic values are the public
topics' only, computed from the stored per-topic values; its organiser sees both rankings, with
the swaps, and so does everyone after the release."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import Engine

from evalstore.errors import ConflictError, InvalidParameterError
from evalstore.services import access, embargo, reports, store, tasks
from evalstore.services.kinds import ranking
from evalstore.services.orchestration import work_on
from tests.http.conftest import SAMPLE, as_principal, run_text

TOPICS = ("301", "302", "303")


def _task(
    engine: Engine, seed: int = 7, fraction: float = 1 / 3, measures: tuple[str, ...] = ("AP", "P@10")
) -> tasks.TaskView:
    store.import_qrels(engine, SAMPLE / "qrels.test", name="sample")
    access.add_user(engine, "owner", role="organiser")
    for team in ("red", "blue"):
        access.add_user(engine, team, role="participant", team=team)
    return tasks.create_task(
        engine,
        "split",
        qrels_name="sample",
        owner="owner",
        measures=list(measures),
        official_measure="map",
        private_fraction=fraction,
        split_seed=seed,
    )


def _submit(engine: Engine, tmp: Path, team: str, name: str, topics: tuple[str, ...], shift: int = 0) -> None:
    path = tmp / f"{name}.txt"
    path.write_text(run_text(topics, tag=name, shift=shift))
    submitted = tasks.submit_run(engine, as_principal(engine, team), "split", path, name=name)
    work_on(engine, [submitted.job.evaluation_id], mlflow=False)


def _swapping_runs(engine: Engine, tmp: Path, private: tuple[str, ...]) -> None:
    """red retrieves for the public topics only, blue for the private ones only: red leads the
    public ranking and blue the private one."""
    public = tuple(t for t in TOPICS if t not in private)
    _submit(engine, tmp, "red", "red-public", public)
    _submit(engine, tmp, "blue", "blue-private", private)


def test_the_split_is_drawn_from_its_seed_stored_and_recorded(sqlite_engine: Engine) -> None:
    task = _task(sqlite_engine, seed=7)
    assert task.split_seed == 7 and task.private_fraction == pytest.approx(1 / 3)
    assert len(task.private_topics) == 1 and set(task.private_topics) <= set(TOPICS)
    assert task.official_measure == "AP"  # the canonical name of what was typed
    # the same seed draws the same topics: the draw is a permutation of the sorted topics
    expected = sorted(TOPICS)[int(np.random.default_rng(7).permutation(3)[0])]
    assert task.private_topics == (expected,)
    assert tasks.show_task(sqlite_engine, "split").private_topics == task.private_topics
    # the pages and the API say how many topics are private, never which
    assert task.as_dict()["private_topics"] == 1 and expected not in str(task.as_dict())
    again = tasks.set_split(sqlite_engine, "split", private_fraction=2 / 3, split_seed=7)
    assert len(again.private_topics) == 2  # redrawn: no run was submitted yet
    assert tasks.set_split(sqlite_engine, "split", private_fraction=0).private_topics == ()


def test_a_split_that_leaves_no_public_or_private_topic_is_refused(sqlite_engine: Engine) -> None:
    with pytest.raises(InvalidParameterError, match="leaves no public or no private topic"):
        _task(sqlite_engine, fraction=0.05)
    with pytest.raises(InvalidParameterError, match="between 0 and 1"):
        tasks.create_task(sqlite_engine, "x", qrels_name="sample", private_fraction=1.0)
    with pytest.raises(InvalidParameterError, match="not one the task evaluates"):
        tasks.create_task(sqlite_engine, "y", qrels_name="sample", measures=["AP"], official_measure="P@10")


def test_the_split_is_fixed_once_a_run_is_submitted(sqlite_engine: Engine, tmp_path: Path) -> None:
    task = _task(sqlite_engine)
    _submit(sqlite_engine, tmp_path, "red", "red-run", TOPICS)
    with pytest.raises(ConflictError, match="private topics are fixed"):
        tasks.set_split(sqlite_engine, "split", private_fraction=0.5, split_seed=1)
    assert tasks.show_task(sqlite_engine, "split").private_topics == task.private_topics


def test_a_participant_ranks_on_the_public_topics_from_the_stored_values(sqlite_engine: Engine, tmp_path: Path) -> None:
    task = _task(sqlite_engine, measures=("AP", "P@10", "num_ret"))
    _submit(sqlite_engine, tmp_path, "red", "red-all", TOPICS, shift=1)
    _submit(sqlite_engine, tmp_path, "blue", "blue-all", TOPICS, shift=3)
    stored = ranking.results(sqlite_engine, qrels_name="sample", run_name="red-all", measures=["AP"]).frame["AP"]
    public = [t for t in TOPICS if t not in task.private_topics]
    red = as_principal(sqlite_engine, "red")
    board = tasks.task_leaderboard(sqlite_engine, red, "split").body
    row = next(r for r in board["rows"] if r["run"] == "red-all")
    assert board["measures"][0] == "AP"  # the official measure leads
    assert row["scores"]["AP"]["mean"] == pytest.approx(stored[public].mean())
    assert row["scores"]["AP"]["mean"] != pytest.approx(stored.mean())
    assert row["topics"] == len(public)
    assert "private" not in row and board["split"] == {
        "public": "every topic but the private ones",
        "private_topics": 1,
        "final": False,
        "private_shown": False,
    }
    results = tasks.run_results(sqlite_engine, red, "red-all", per_query=True)
    # before the release a participant has aggregates only: no topic, so not which are private
    assert results["per_query"] is None and results["topics"] == len(public)
    assert results["aggregates"]["AP"] == pytest.approx(stored[public].mean())
    counts = ranking.results(sqlite_engine, qrels_name="sample", run_name="red-all", measures=["num_ret"]).frame
    assert results["aggregates"]["NumRet"] == counts["NumRet"][public].sum()  # a count sums, as trec_eval's does
    # nor the run page's per-topic picture
    page = reports.run_page(sqlite_engine, red, "red-all")
    assert not page.topics and not page.per_topic
    # the organiser sees everything
    owner = as_principal(sqlite_engine, "owner")
    assert sorted(tasks.run_results(sqlite_engine, owner, "red-all", per_query=True)["per_query"]) == list(TOPICS)


def test_the_private_ranking_and_its_swaps_are_shown_to_the_organiser_then_to_all(
    sqlite_engine: Engine, tmp_path: Path
) -> None:
    task = _task(sqlite_engine)
    _swapping_runs(sqlite_engine, tmp_path, task.private_topics)
    owner, blue = as_principal(sqlite_engine, "owner"), as_principal(sqlite_engine, "blue")
    rows = {r["run"]: r for r in tasks.task_leaderboard(sqlite_engine, owner, "split").body["rows"]}
    assert (rows["red-public"]["rank"], rows["red-public"]["private"]["rank"], rows["red-public"]["swap"]) == (1, 2, -1)
    assert (rows["blue-private"]["rank"], rows["blue-private"]["private"]["rank"]) == (2, 1)
    assert rows["blue-private"]["swap"] == 1 and rows["blue-private"]["private"]["topics"] == 1
    assert rows["blue-private"]["scores"]["AP"]["mean"] == 0.0  # no public topic retrieved for
    assert not any("private" in r for r in tasks.task_leaderboard(sqlite_engine, blue, "split").body["rows"])
    tasks.release_task(sqlite_engine, "split")
    board = tasks.task_leaderboard(sqlite_engine, blue, "split").body
    assert board["split"]["final"] and board["split"]["private_shown"]
    assert {r["run"]: r["swap"] for r in board["rows"]} == {"red-public": -1, "blue-private": 1}
    page = reports.leaderboard(sqlite_engine, blue, "split")  # the final ranking leads once released
    assert page.sort == "final"
    assert [(r.run, r.rank, r.private["rank"] if r.private else None, r.swap) for r in page.rows] == [
        ("blue-private", 2, 1, 1),
        ("red-public", 1, 2, -1),
    ]
    assert [r.run for r in reports.leaderboard(sqlite_engine, blue, "split", sort="AP").rows] == [
        "red-public",
        "blue-private",
    ]


def test_downloads_carry_interval_bounds_topic_counts_and_the_private_ranking(
    sqlite_engine: Engine, tmp_path: Path
) -> None:
    task = _task(sqlite_engine)
    _swapping_runs(sqlite_engine, tmp_path, task.private_topics)
    blue = as_principal(sqlite_engine, "blue")
    page = reports.leaderboard(sqlite_engine, blue, "split")
    header = reports.board_download(page, "csv").splitlines()[0]
    assert header == "rank,run,team,type,AP,AP CI low,AP CI high,P@10,P@10 CI low,P@10 CI high,topics,tier,judged@10"
    tasks.release_task(sqlite_engine, "split")
    page = reports.leaderboard(sqlite_engine, blue, "split")
    lines = reports.board_download(page, "csv").splitlines()
    assert lines[0].endswith(",judged@10,private rank,private AP,private P@10,private topics,swap")
    # in the final order, as the page shows it
    assert lines[1].startswith("1,blue-private,blue,automatic,") and lines[1].endswith(",1,0.0324,0.2000,1,+1")
    assert lines[2].startswith("2,red-public,red,automatic,") and lines[2].endswith(",2,0.0000,0.0000,1,-1")
    assert "\\begin{tabular}{rlll" in reports.board_download(page, "tex")
    assert "| private rank |" in reports.board_download(page, "md")


def test_mlflow_gets_a_split_tasks_results_only_at_its_release(sqlite_engine: Engine, tmp_path: Path) -> None:
    """MLflow knows no roles: whoever reads it would read the private topics' values."""
    _task(sqlite_engine)
    _submit(sqlite_engine, tmp_path, "red", "red-run", TOPICS)
    job = tasks.show_submission(sqlite_engine, as_principal(sqlite_engine, "owner"), "red-run")["job"]
    assert embargo.is_embargoed(sqlite_engine, job)
    tasks.release_task(sqlite_engine, "split")
    assert not embargo.is_embargoed(sqlite_engine, job)
