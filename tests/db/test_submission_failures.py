"""A submission refused, or failing at the last step of its unit of work, leaves nothing stored: not
the run, its rows, topics or judged ranks, its job, the submission or the audit entry; and one that
is stored says where its time went. SQLite and PostgreSQL."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, func, select

from evalstore.db import repositories as repo
from evalstore.db.models import AuditEntry, Evaluation, Run, RunJudgedRanks, RunRow, RunTopic, Submission
from evalstore.db.session import read_only
from evalstore.errors import InputFormatError, LimitExceeded, NotFoundError
from evalstore.services import access, store, tasks
from evalstore.services.access import Principal
from evalstore.services.context import AppContext
from evalstore.services.tasks import submissions
from tests.factories import SAMPLE
from tests.http.conftest import as_principal, run_text

STORED = (Run, RunRow, RunTopic, RunJudgedRanks, Submission, Evaluation, AuditEntry)


@pytest.fixture
def red(engine: Engine) -> Principal:
    """A participant of team red, on a task over trec_eval's sample qrels."""
    store.import_qrels(engine, SAMPLE / "qrels.test", name="sample")
    access.add_user(engine, "red", role="participant", team="red")
    tasks.create_task(engine, "t", qrels_name="sample")
    return as_principal(engine, "red")


def _stored(engine: Engine) -> dict[str, int]:
    with read_only(engine) as session:
        return {model.__tablename__: session.scalar(select(func.count()).select_from(model)) or 0 for model in STORED}


def test_a_stored_submission_says_where_its_time_went(engine: Engine, red: Principal, tmp_path: Path) -> None:
    path = tmp_path / "a.txt"
    path.write_text(run_text(tag="a"))
    submitted = tasks.submit_run(engine, red, "t", path, name="a")
    assert list(submitted.seconds) == ["slot", "parse", "stage", "judged", "turn", "write"]
    assert all(seconds >= 0 for seconds in submitted.seconds.values())
    assert _stored(engine)["runs"] == 1


def test_a_submission_waits_for_an_upload_slot(
    engine: Engine, red: Principal, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With every upload slot of the process taken, a submission passes its checks and then waits:
    it parses nothing until a slot is given back, and is stored once one is."""
    monkeypatch.setenv("EVALSTORE_UPLOAD_SLOTS", "1")
    context = AppContext(engine)
    parsing = threading.Event()
    prepare = store.prepare_run

    def noted(*args: Any, **kwargs: Any) -> Any:
        parsing.set()
        return prepare(*args, **kwargs)

    monkeypatch.setattr(store, "prepare_run", noted)
    path = tmp_path / "a.txt"
    path.write_text(run_text(tag="a"))
    done: list[tasks.Submitted] = []
    context.upload_slots.acquire()
    with pytest.raises(NotFoundError):  # the checks come before the slot: a refusal waits for none
        tasks.submit_run(engine, red, "no-such-task", path, name="a", context=context)
    waiting = threading.Thread(
        target=lambda: done.append(tasks.submit_run(engine, red, "t", path, name="a", context=context))
    )
    waiting.start()
    assert not parsing.wait(0.5)
    assert done == [] and _stored(engine)["runs"] == 0
    context.upload_slots.release()
    waiting.join()
    assert parsing.is_set() and done[0].run.name == "a" and done[0].seconds["slot"] > 0
    assert _stored(engine)["runs"] == 1


def test_a_submission_that_waits_too_long_for_a_slot_is_refused_as_busy_and_nothing_is_stored(
    engine: Engine, red: Principal, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Refused before anything of it is read: the sender is told to send it again, never told
    it failed while it is stored after all."""
    monkeypatch.setenv("EVALSTORE_UPLOAD_SLOTS", "1")
    monkeypatch.setattr(submissions, "SLOT_WAIT_SECONDS", 0.2)
    context = AppContext(engine)
    path = tmp_path / "a.txt"
    path.write_text(run_text(tag="a"))
    context.upload_slots.acquire()
    with pytest.raises(LimitExceeded) as refused:
        tasks.submit_run(engine, red, "t", path, name="a", context=context)
    assert refused.value.limit == "busy" and refused.value.retry_after == submissions.SLOT_RETRY_AFTER
    assert str(refused.value) == (
        "The server is storing as many uploads as it may at once and none finished within 0.2 s; "
        "nothing of this run was stored."
    )
    assert _stored(engine)["runs"] == 0
    context.upload_slots.release()  # the refused one gave back nothing it did not take
    assert context.upload_slots.acquire(blocking=False)
    context.upload_slots.release()
    assert tasks.submit_run(engine, red, "t", path, name="a", context=context).run.name == "a"


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("301 Q0 d1 1 one r\n", "1: score 'one' is not a number"),
        # found by the check that runs beside the insert: the rows are in the transaction by then
        (
            "301 Q0 d1 1 2.0 r\n301 Q0 d1 2 1.0 r\n",
            "2: docno 'd1' appears twice in topic '301' (first at line 1); trec_eval refuses duplicate documents, "
            "so remove one of them",
        ),
    ],
)
def test_a_refused_submission_stores_nothing(
    engine: Engine, red: Principal, tmp_path: Path, text: str, problem: str
) -> None:
    path = tmp_path / "bad.txt"
    path.write_text(text)
    before = _stored(engine)
    with pytest.raises(InputFormatError) as refused:
        tasks.submit_run(engine, red, "t", path, name="bad", shown_path="bad.txt")
    assert str(refused.value) == f"bad.txt:{problem}"
    assert _stored(engine) == before
    path.write_text(run_text(tag="good"))
    assert tasks.submit_run(engine, red, "t", path, name="bad").run.name == "bad"


def test_a_failure_at_the_end_of_the_unit_of_work_stores_nothing(
    engine: Engine, red: Principal, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run's rows, its job, the submission and the audit entry are in the transaction when its
    last step fails: all of them roll back."""
    path = tmp_path / "a.txt"
    path.write_text(run_text(tag="a"))
    before = _stored(engine)

    def failing(*_: object) -> None:
        raise OSError("the disk went away")

    monkeypatch.setattr(repo, "keep_judged_ranks", failing)
    with pytest.raises(OSError, match="the disk went away"):
        tasks.submit_run(engine, red, "t", path, name="a")
    assert _stored(engine) == before
