"""`evalstore tasks release NAME --at TIME` schedules a release that an idle worker performs;
`--cancel` cancels it (the console's Schedule and Cancel, on the command line); a time gone by
is refused."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlalchemy import update

from evalstore.db.engine import make_engine
from evalstore.db.models import Task
from evalstore.db.session import unit_of_work
from evalstore.services import store, tasks
from tests.conftest import Cli
from tests.http.conftest import SAMPLE


def test_a_release_is_scheduled_cancelled_and_performed(cli: Cli) -> None:
    cli.upgrade()
    engine = make_engine(cli.url)
    store.import_qrels(engine, SAMPLE / "qrels.test", name="sample")
    tasks.create_task(engine, "hidden", qrels_name="sample", hidden=True)
    when = (datetime.now(UTC) + timedelta(days=1)).replace(microsecond=0)
    scheduled = cli("tasks", "release", "hidden", "--at", when.isoformat())
    assert scheduled.exit_code == 0, scheduled.output
    assert f"task 'hidden' is released at {when.isoformat()} (by an evaluation worker)" in scheduled.output
    assert tasks.show_task(engine, "hidden").released_at is None
    cancelled = cli("tasks", "release", "hidden", "--cancel")
    assert cancelled.exit_code == 0 and tasks.show_task(engine, "hidden").release_at is None
    again = cli("tasks", "release", "hidden", "--cancel")
    assert again.exit_code != 0 and "Task 'hidden' has no scheduled release to cancel." in again.output

    assert cli("tasks", "release", "hidden", "--at", when.isoformat()).exit_code == 0
    with unit_of_work(engine) as session:  # its time comes
        session.execute(update(Task).values(release_at=datetime.now(UTC) - timedelta(seconds=1)))
    assert tasks.release_due(engine) == ["hidden"]  # what an idle worker runs (tests/http/test_console_setup.py)
    assert tasks.show_task(engine, "hidden").released_at is not None
    past = cli("tasks", "release", "hidden", "--at", "2020-01-01T00:00Z")
    assert past.exit_code != 0 and "is released already; there is nothing to schedule" in past.output
    engine.dispose()
