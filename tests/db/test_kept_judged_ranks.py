"""A task's submission keeps its judged ranks against the task's qrels, worked out in memory when it
is stored (store.keep_judged_ranks), and the worker reads them instead of joining the run's rows
with the judgments: they equal the database's join row for row (in SQLite's order too), and the
evaluations computed from them equal those of the same runs registered without them, value for
value; ranks kept for other contents are never read. SQLite and PostgreSQL."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from sqlalchemy import Engine, select, update

from evalstore.db import repositories as repo
from evalstore.db.models import RunJudgedRanks
from evalstore.db.session import read_only, unit_of_work
from evalstore.services import access, jobs, store, tasks
from evalstore.services.worker import Worker, WorkerSettings
from tests.db.test_batching import _stored
from tests.factories import SYNTHETIC_TOPICS, synthetic_qrels_text, synthetic_run_text
from tests.http.conftest import as_principal

# the same (topic, doc) judged again under a second iteration (trec_eval's judgment groups: a
# conflicting grade is refused); a judged-but-unpooled document (-1); a topic no run has
QRELS = (
    synthetic_qrels_text()
    + f"{SYNTHETIC_TOPICS[0]} 1 d0 2\n{SYNTHETIC_TOPICS[0]} 1 d4 0\n{SYNTHETIC_TOPICS[1]} 1 d3 1\n"
    + f"{SYNTHETIC_TOPICS[2]} 0 x7 -1\n999 0 d1 1\n"
)


def _runs() -> dict[str, str]:
    """Runs with unjudged documents, ties, a topic the qrels lack, topics left out, the -1 document."""
    tied = "".join(f"{t} Q0 d{d} {d + 1} {(12 - d) // 2}.0 tied\n" for t in SYNTHETIC_TOPICS for d in range(12))
    return {
        "full": synthetic_run_text(1, "full") + "".join(f"{t} Q0 u{t} 13 0.1 full\n" for t in SYNTHETIC_TOPICS),
        "tied": tied + f"555 Q0 d1 1 5.0 tied\n{SYNTHETIC_TOPICS[2]} Q0 x7 13 0.5 tied\n",
        "half": synthetic_run_text(5, "half", SYNTHETIC_TOPICS[::2]),
    }


@pytest.fixture
def submitted(engine: Engine, tmp_path: Path) -> Engine:
    """The qrels as a task's, each run submitted to it by a team, and the same files registered
    outside any task under 'plain-' names, all queued against the same qrels."""
    (tmp_path / "qrels").write_text(QRELS)
    store.import_qrels(engine, tmp_path / "qrels", name="judged")
    access.add_user(engine, "red", role="participant", team="red")
    task = tasks.create_task(engine, "t", qrels_name="judged", measures=["all_trec"])
    red = as_principal(engine, "red")
    plain = []
    for name, text in _runs().items():
        path = tmp_path / f"{name}.run"
        path.write_text(text)
        tasks.submit_run(engine, red, "t", path, name=name)
        store.register_run(engine, path, name=f"plain-{name}")
        plain.append(f"plain-{name}")
    jobs.enqueue(
        engine, qrels_name="judged", run_names=plain, options=jobs.EvaluationOptions(measures=tuple(task.measures))
    )
    return engine


def _rows(table: pa.Table) -> list[tuple[Any, ...]]:
    return list(zip(*(table[name].to_pylist() for name in ("topic", "rank", "relevance")), strict=True))


def test_kept_judged_ranks_equal_the_database_join(submitted: Engine, db_backend: str) -> None:
    with read_only(submitted) as session:
        qrels = repo.get_qrels(session, "judged")
        kept_for = set(session.scalars(select(RunJudgedRanks.run_id)))
        for name in _runs():
            run = repo.get_run(session, name)
            assert run.id in kept_for
            kept = repo.kept_judged_ranks(session, run, qrels)
            assert kept is not None
            retrieved, joined = repo.judged_ranks(session, run, qrels, kept=False)
            assert kept.schema == joined.schema == repo.JUDGED_SCHEMA
            assert kept.num_rows > 0
            # the doc under two iterations is there twice, as the join has it
            assert sorted(_rows(kept)) == sorted(_rows(joined))
            if db_backend == "sqlite":  # SQLite's nested loop: the run's file order, then relevance
                assert _rows(kept) == _rows(joined)
            assert repo.judged_ranks(session, run, qrels)[0].equals(retrieved)
        # runs registered outside a task keep nothing: the worker joins them in the database
        assert repo.kept_judged_ranks(session, repo.get_run(session, "plain-full"), qrels) is None


def test_evaluations_from_kept_ranks_equal_those_joined(submitted: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    read: list[str] = []
    kept_judged_ranks = repo.kept_judged_ranks

    def spied(session: Any, run: Any, qrels: Any) -> pa.Table | None:
        found = kept_judged_ranks(session, run, qrels)
        if found is not None:
            read.append(run.name)
        return found

    monkeypatch.setattr(repo, "kept_judged_ranks", spied)
    Worker(submitted, WorkerSettings(until_empty=True, poll_interval=0.01, index_runs=False)).run()
    assert sorted(read) == sorted(_runs())  # the submissions' evaluations read the kept ranks
    stored = _stored(submitted, "judged")
    for name in _runs():
        assert stored[name]["evaluation"]["state"] == "done"
        assert stored[name]["values"] == stored[f"plain-{name}"]["values"]
        assert stored[name]["aggregates"] == stored[f"plain-{name}"]["aggregates"]
        assert stored[name]["queries"] == stored[f"plain-{name}"]["queries"]


def test_ranks_kept_for_other_contents_are_not_read(submitted: Engine) -> None:
    with unit_of_work(submitted) as session:
        session.execute(update(RunJudgedRanks).values(qrels_hash="0" * 64).where(RunJudgedRanks.run_id.isnot(None)))
    with read_only(submitted) as session:
        qrels, run = repo.get_qrels(session, "judged"), repo.get_run(session, "full")
        assert repo.kept_judged_ranks(session, run, qrels) is None
        assert _rows(repo.judged_ranks(session, run, qrels)[1]) == _rows(
            repo.judged_ranks(session, run, qrels, kept=False)[1]
        )
    with unit_of_work(submitted) as session:
        session.execute(update(RunJudgedRanks).values(qrels_hash=qrels.content_hash, run_hash="0" * 64))
    with read_only(submitted) as session:
        assert repo.kept_judged_ranks(session, repo.get_run(session, "full"), repo.get_qrels(session, "judged")) is None
    with unit_of_work(submitted) as session:  # worked out another way (an older JUDGED_RANKS_VERSION)
        session.execute(update(RunJudgedRanks).values(run_hash=run.content_hash, version=0))
    with read_only(submitted) as session:
        assert repo.kept_judged_ranks(session, repo.get_run(session, "full"), repo.get_qrels(session, "judged")) is None
    with unit_of_work(submitted) as session:
        session.execute(update(RunJudgedRanks).values(version=repo.JUDGED_RANKS_VERSION))
    with read_only(submitted) as session:  # the test's own premise: as kept, they are read
        assert repo.kept_judged_ranks(session, repo.get_run(session, "full"), repo.get_qrels(session, "judged"))


def test_withdrawing_a_run_takes_what_was_kept_with_it(submitted: Engine) -> None:
    with read_only(submitted) as session:
        run_id = repo.get_run(session, "tied").id
    tasks.withdraw_run(submitted, as_principal(submitted, "red"), "tied")
    with read_only(submitted) as session:
        assert session.scalars(select(RunJudgedRanks).where(RunJudgedRanks.run_id == run_id)).all() == []
        assert len(session.scalars(select(RunJudgedRanks)).all()) == len(_runs()) - 1


def test_a_submission_whose_ranks_cannot_be_worked_out_is_stored_all_the_same(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Keeping the judged ranks saves the worker time; it never refuses a submission."""
    (tmp_path / "qrels").write_text(QRELS)
    store.import_qrels(engine, tmp_path / "qrels", name="judged")
    access.add_user(engine, "red", role="participant", team="red")
    tasks.create_task(engine, "t", qrels_name="judged", measures=["P@5"])

    def broken(rows: pa.Table, qrels: pa.Table) -> pa.Table:
        raise pa.ArrowInvalid("no memory left")

    monkeypatch.setattr(repo, "judged_ranks_in_memory", broken)
    (tmp_path / "full.run").write_text(_runs()["full"])
    submitted = tasks.submit_run(engine, as_principal(engine, "red"), "t", tmp_path / "full.run", name="full")
    assert "the judged ranks of" in caplog.text and "no memory left" in caplog.text
    with read_only(engine) as session:
        assert session.scalars(select(RunJudgedRanks)).all() == []
    Worker(engine, WorkerSettings(until_empty=True, poll_interval=0.01, index_runs=False)).run()
    assert jobs.show_job(engine, submitted.job.evaluation_id).state == "done"
