"""Shared fixtures: a fresh, migrated database per test, on SQLite and (marked) PostgreSQL."""
# ruff: noqa: E402  (the collector is tuned before the imports)

from __future__ import annotations

from evalstore._entry import tune_collector

# As in the `evalstore` command: each test process imports ~3,000 modules and collecting its first
# generation every 700 allocations walked them again and again (a pytest worker's collection:
# ~0.6 s of CPU). Set before the imports below.
tune_collector()

import gc
import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.pool import NullPool

from evalstore.db.engine import make_engine, upgrade

# ../shared/data beside the checkout; EVALSTORE_TEST_SHARED_DATA names it for a checkout elsewhere
# (a git worktree)
SHARED = Path(
    os.environ.get("EVALSTORE_TEST_SHARED_DATA") or Path(__file__).resolve().parents[1].parent / "shared" / "data"
)
TREC_EVAL_TEST = SHARED / "trec_eval_test"
PG_ENV = "EVALSTORE_TEST_DATABASE_URL"

# argon2 at its production cost takes 100-200 ms of CPU for each password set or checked on our
# two-core machines, and the tests set and check hundreds (in-process, and in the servers and
# CLIs they start, which inherit this): the tests' passwords get argon2's cheapest cost.
# tests/http/test_password_cost.py holds the default and the setting to what they must do.
os.environ.setdefault("EVALSTORE_PASSWORD_COST", "1,8,1")


VENDORED = Path(__file__).resolve().parent / "data"  # trec_eval's own test files, with the NIST notice


def shared_path(*parts: str) -> Path:
    """A file under ../shared/data, or skip the test with the reason (fail it under CI=true). trec_eval's test files are
    vendored in tests/data (NOTICE.md there) and read from there, so they run on every machine."""
    vendored = VENDORED.joinpath(*parts)
    if vendored.exists():
        return vendored
    path = SHARED.joinpath(*parts)
    if not path.exists():
        if os.environ.get("CI") == "true":  # under CI a missing data set must not pass as skips
            pytest.fail(f"shared data not found under CI: {path} (check out ../shared next to the repository)")
        pytest.skip(f"shared data not found: {path}")
    return path


def pytest_configure(config: pytest.Config) -> None:
    """typer's CliRunner builds the app's click command afresh on every invoke: ~0.1 s of CPU (the
    type hints of every option of ~30 commands), more than most commands take. Tests invoke the CLI
    in-process ~2,000 times (each hypothesis example of the differential tests is one), so each app's
    command is built once per test process: the same command typer would build."""
    import functools

    import typer.main
    import typer.testing

    typer.testing._get_command = functools.cache(typer.main.get_command)  # noqa: SLF001


def pytest_collection_finish(session: pytest.Session) -> None:
    """What a test process holds once its tests are collected (the modules they import, ~1M
    objects) lives as long as it does: it is moved out of the cyclic collector's sight, as
    `evalstore serve` does before it listens. A full collection had walked all of it again each
    time: ~8% of a test process's CPU went to collections (3.6 s of 43 s in one process on four of
    the HTTP, unit and judges modules), 2.7 s with this."""
    gc.collect()
    gc.freeze()


# tests that share one expensive session fixture run in one xdist worker (``--dist loadgroup``):
# one Spark JVM (2 GB) for the session instead of one per worker; the tests of a module with a
# module-scoped fixture run in one worker too (_module_fixture_group)
XDIST_GROUPS = {"spark": "spark"}


def _xdist_group(item: pytest.Item) -> str | None:
    callspec = getattr(item, "callspec", None)
    for fixture, group in XDIST_GROUPS.items():
        params = callspec.params.values() if callspec is not None else ()
        # a parameter may be anything (a DataFrame has no truth value): compare names only
        if fixture in getattr(item, "fixturenames", ()) or any(isinstance(p, str) and p == fixture for p in params):
            return group
    return None


def _module_fixture_group(item: pytest.Item) -> str | None:
    """The test's module, when the test uses a module-scoped fixture (a Chromium, a served site, a
    model's server, generated inputs): a worker sets such a fixture up once for the module's tests
    it runs, and the module's tests dealt one by one to three workers set it up three times."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return None
    for definitions in info.name2fixturedefs.values():
        if any(definition.scope == "module" for definition in definitions):
            return item.nodeid.split("::")[0]
    return None


# Modules of tests that wait on processes, servers and timeouts for many seconds each (real workers
# through outages, the wheel's install, a model's server), and the Spark group's first module (one
# worker runs the group, ~75 s with its JVM): collected first, so that xdist deals them out at the
# start, not as the run's last tests that the other workers wait for.
SLOW_FIRST = (
    "tests/db/test_stored_backends.py",
    "tests/db/test_mlflow_outage.py",
    "tests/db/test_worker_outages.py",
    "tests/packaging/",
    "tests/judges/test_real_model.py",
    "tests/http/test_serve_worker.py",
    "tests/http/test_cli_service.py",
    "tests/db/test_workers.py",
    "tests/http/test_database_outage.py",
)


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups (its hook runs before plain conftest ones)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # a stable sort: each module's tests stay together and in their order
    items.sort(key=lambda item: not item.nodeid.startswith(SLOW_FIRST))
    if config.pluginmanager.hasplugin("xdist"):
        for item in items:
            group = _xdist_group(item)
            if group is None and item.get_closest_marker("xdist_group") is None:
                group = _module_fixture_group(item)
            if group is not None:
                item.add_marker(pytest.mark.xdist_group(group))
    if os.environ.get(PG_ENV):
        return
    if os.environ.get("CI") == "true":
        raise pytest.UsageError(f"CI=true but {PG_ENV} is not set: the postgres tests must run in CI")
    skip = pytest.mark.skip(reason=f"set {PG_ENV}=postgresql+psycopg://... to run the PostgreSQL tests")
    for item in items:
        if "postgres" in item.keywords:
            item.add_marker(skip)


# the modules whose values test_reference_coverage counts as checked against a reference: a skip
# there under CI would leave that test green with nothing checked
REFERENCE_MODULES = ("tests/differential/", "tests/unit/test_textbook_examples.py", "tests/unit/test_classification.py")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """Under CI (CI=true) a skip for want of ../shared, or any skip in a reference module, fails."""
    report = yield
    if os.environ.get("CI") == "true" and report.skipped and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        if "shared" in reason or item.nodeid.startswith(REFERENCE_MODULES):
            report.outcome = "failed"
            report.longrepr = f"skipped under CI, where it must run: {reason}"
    return report


# the folders evalstore writes to outside a test's own, each given a folder of the session's own
# (unless set: tests that need another set it themselves):
# - $EVALSTORE_HOME: no test writes to ~/.evalstore, and no two xdist workers share a store;
# - $EVALSTORE_CACHE_DIR: `trec-eval`'s kept qrels (evalstore.io.parsed_cache) do not go to
#   ~/.cache; the shared data's qrels are kept there and used by later tests, as by a user's loop
#   over runs (a file a test has just written is too new to be kept).
SESSION_FOLDERS = {"EVALSTORE_HOME": "evalstore-home", "EVALSTORE_CACHE_DIR": "evalstore-cache"}


@pytest.fixture(scope="session", autouse=True)
def _session_folders(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    made = [name for name in SESSION_FOLDERS if not os.environ.get(name)]
    for name in made:
        os.environ[name] = str(tmp_path_factory.mktemp(SESSION_FOLDERS[name]))
    try:
        yield
    finally:
        for name in made:
            os.environ.pop(name, None)


@pytest.fixture(autouse=True)
def _priority_kept() -> Iterator[None]:
    """A test that runs `evalstore worker` in this process gives it --nice 0: its default lowers
    the process's CPU priority for good, and the rest of this xdist worker's tests would run behind
    the other workers'."""
    before = os.nice(0)
    yield
    assert os.nice(0) == before, "a test lowered this process's CPU priority (give an in-process worker --nice 0)"


# the programs of this checkout's environment: `evalstore ...`, `python -c ...`, uv
_OUR_PROGRAMS = str(Path(sys.executable).parent) + os.sep


# multiprocessing's resource tracker and fork server: started by the first test that uses
# multiprocessing and kept by Python for the rest of the process (a later test finding the tracker
# killed warns "resource_tracker: process died unexpectedly", an error under the warning filter)
_PROCESS_LONG_HELPERS = (b"multiprocessing.resource_tracker", b"multiprocessing.forkserver")


def _children() -> set[int]:
    """The processes this one started from this environment's programs that have not been waited
    for (the kernel's list). A browser, a JVM and Playwright's driver are left out: a module or
    session fixture may start them in the middle of a test, for the tests after it; so are
    multiprocessing's own helpers (:data:`_PROCESS_LONG_HELPERS`)."""
    found: set[int] = set()
    for task in Path("/proc/self/task").glob("*/children"):
        try:
            pids = [int(pid) for pid in task.read_text().split()]
        except OSError:  # the thread has just ended
            continue
        for pid in pids:
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
                argv = cmdline.split(b"\0")[:2]
                # no command line: a zombie, or a child between its fork and its exec (ours)
                ours = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
            except OSError:  # gone meanwhile
                continue
            if any(argv) and not any(arg.decode(errors="replace").startswith(_OUR_PROGRAMS) for arg in argv):
                ours = False
            if any(helper in cmdline for helper in _PROCESS_LONG_HELPERS):
                ours = False
            if ours:
                found.add(pid)
    return found


@contextmanager
def processes_killed_at_the_end() -> Iterator[None]:
    """Processes of this environment's programs started in the block and still running at its end
    are killed (with their process group, when they lead one)."""
    if not Path("/proc/self/task").is_dir():  # not Linux: nothing to look at
        yield
        return
    before = _children()
    yield
    killed = _children() - before
    for pid in killed:
        try:
            os.killpg(pid, signal.SIGKILL) if os.getpgid(pid) == pid else os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:  # gone meanwhile
            pass
    if killed:
        # waited for through their Popen objects: a Popen collected while it knows no exit code
        # warns "still running" (an error under the tests' warning filter) in whichever later test
        # the collector happens to run
        for found in gc.get_objects():
            if isinstance(found, subprocess.Popen) and found.pid in killed:
                with suppress(subprocess.TimeoutExpired):  # SIGKILL ends it at once
                    found.wait(timeout=60)
                killed.discard(found.pid)
        for pid in killed:  # started some other way
            with suppress(ChildProcessError):
                os.waitpid(pid, 0)


@pytest.fixture(autouse=True)
def _no_process_outlives_its_test() -> Iterator[None]:
    """A process a test started and left running (a worker or a server of a test that failed
    before its own clean-up) is killed when the test ends: left, it would poll its database on
    the cores for the rest of the run, slowing every later test, and hold the xdist worker open
    at its end. Processes of module and session fixtures were started before the test; a test's
    own fixtures have stopped theirs by now."""
    with processes_killed_at_the_end():
        yield


@pytest.fixture(scope="session")
def postgres_server_url() -> Iterator[str]:
    """A scratch database created for this test session on the server in $EVALSTORE_TEST_DATABASE_URL."""
    base = make_url(os.environ[PG_ENV])
    name = f"evalstore_test_{uuid.uuid4().hex[:10]}"
    admin = create_engine(base, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield base.set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def _reset_postgres(url: str) -> None:
    engine = create_engine(url, isolation_level="AUTOCOMMIT")
    with engine.connect() as connection:
        connection.execute(text("DROP SCHEMA public CASCADE"))
        connection.execute(text("CREATE SCHEMA public"))
    engine.dispose()


class Templates:
    """Databases built once per test session (per xdist worker) and copied for every test that
    asks for one: migrating 18 times per test was most of the suite's set-up time.

    A template is named (``"migrated"``, ``"world"``, ...) and built by a function that gets an
    engine on an empty database. SQLite: the template is a file and a copy is a file copy (about a
    millisecond); PostgreSQL: a database on the session's server, copied with
    ``CREATE DATABASE ... TEMPLATE ...`` (a few tens of milliseconds, against ~2 s to migrate).
    Copies are independent: a test may write anything to its own.

    On PostgreSQL a copy of a template that holds no rows (``"migrated"``) is not dropped when its
    test is done but emptied and handed to the next test that asks for one: creating and dropping
    a database cost the server ~110 ms of CPU (writing and then unlinking its ~1,000 files, and the
    checkpoint every drop waits for), emptying it ~45 ms. A copy is handed on only if it then has
    exactly the template's schema (tables, columns, indexes, constraints, functions, triggers,
    schemas, extensions, settings, the alembic version); anything else a test left is dropped."""

    def __init__(self, folder: Path, postgres_base: str | None) -> None:
        self.folder = folder
        self.postgres_base = postgres_base  # the server URL, or None when PostgreSQL is not set up
        self.built: dict[tuple[str, str], Any] = {}  # (backend, name) -> what the builder returned
        self.created: list[str] = []  # PostgreSQL databases to drop at the end
        self.copies = 0
        self._to_drop: queue.SimpleQueue[str | None] = queue.SimpleQueue()
        self._dropper: threading.Thread | None = None
        # PostgreSQL: the schema fingerprint of each template that holds no rows (its copies are
        # emptied and used again), the template each copy was made from, and the emptied copies
        # ready for the next test, by template
        self._fingerprints: dict[str, str] = {}
        self._copy_of: dict[str, str] = {}
        self._emptied: dict[str, list[str]] = {}
        self._returned: set[str] = set()  # copies being emptied or emptied: handed back once
        self._emptied_lock = threading.Lock()

    def _postgres_name(self, name: str) -> str:
        return f"evalstore_test_{uuid.uuid4().hex[:10]}_{name}"[:63]

    def _admin(self) -> Engine:
        assert self.postgres_base is not None
        return create_engine(self.postgres_base, isolation_level="AUTOCOMMIT")

    def build(
        self, backend: str, name: str, builder: Callable[[Engine], Any], based_on: str | None = None
    ) -> tuple[str, Any]:
        """The template ``name`` (built on a copy of ``based_on`` when given): its URL and what
        its builder returned."""
        key = (backend, name)
        if key not in self.built:
            url = self.copy(backend, based_on) if based_on else self._empty(backend, name)
            engine = make_engine(url)
            try:
                self.built[key] = (url, builder(engine))
                if backend == "sqlite":  # everything in the main file, so a copy is one file
                    with engine.connect() as connection:
                        connection.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
            finally:
                engine.dispose()
            if backend == "postgres":  # a template takes no connections: end any left behind
                self._disconnect(make_url(url).database)
                fingerprint = _empty_fingerprint(url)
                if fingerprint is not None:
                    self._fingerprints[name] = fingerprint
        return self.built[key]  # type: ignore[no-any-return]

    def _disconnect(self, database: str | None) -> None:
        admin = self._admin()
        with admin.connect() as connection:
            _end_other_sessions(connection, database)
        admin.dispose()

    def _empty(self, backend: str, name: str) -> str:
        if backend == "sqlite":
            return f"sqlite:///{self.folder / f'template-{name}.db'}"
        database = self._postgres_name(f"tmpl_{name}")
        admin = self._admin()
        with admin.connect() as connection:
            connection.execute(text(f'CREATE DATABASE "{database}"'))
        admin.dispose()
        self.created.append(database)
        assert self.postgres_base is not None
        return make_url(self.postgres_base).set(database=database).render_as_string(hide_password=False)

    def copy(self, backend: str, name: str, into: Path | None = None) -> str:
        """A new database holding what template ``name`` holds (SQLite: the file ``into``)."""
        template_url, _ = self.built[(backend, name)]
        self.copies += 1
        if backend == "sqlite":
            target = into or self.folder / f"copy-{self.copies}.db"
            shutil.copyfile(make_url(template_url).database, target)
            return f"sqlite:///{target}"
        with self._emptied_lock:
            ready = self._emptied.get(name)
            database = ready.pop() if ready else None
            self._returned.discard(database or "")
        if database is not None:
            assert self.postgres_base is not None
            return make_url(self.postgres_base).set(database=database).render_as_string(hide_password=False)
        database = self._postgres_name(f"c{self.copies}")
        if name in self._fingerprints:
            self._copy_of[database] = name
        admin = self._admin()
        with admin.connect() as connection:
            connection.execute(text(f'CREATE DATABASE "{database}" TEMPLATE "{make_url(template_url).database}"'))
        admin.dispose()
        self.created.append(database)
        assert self.postgres_base is not None
        return make_url(self.postgres_base).set(database=database).render_as_string(hide_password=False)

    def drop(self, url: str, *, empty_for_reuse: bool = True) -> None:
        """Drop a PostgreSQL copy once its test is done (SQLite copies go with the test's folder),
        or empty it for the next test (a copy of a template without rows; see the class). DROP
        DATABASE waits for a checkpoint (1-3 s here), so copies are dropped (and emptied) by a
        background thread, in batches whose checkpoints coincide, while the next tests run."""
        database = make_url(url).database
        if make_url(url).get_backend_name() == "sqlite" or database not in self.created:
            return
        if empty_for_reuse and database in self._copy_of:
            with self._emptied_lock:
                if database in self._returned:  # handed back already (a test's own drop, then its fixture's)
                    return
                self._returned.add(database)
        else:
            self.created.remove(database)
        if self._dropper is None:
            self._dropper = threading.Thread(target=self._drop_in_batches, name="drop-test-databases", daemon=True)
            self._dropper.start()
        self._to_drop.put(database)

    def _drop_in_batches(self) -> None:
        admin = create_engine(self.postgres_base or "", isolation_level="AUTOCOMMIT", pool_size=8)

        def drop_one(database: str) -> None:
            template = self._copy_of.get(database)
            if template is not None and database in self.created:
                assert self.postgres_base is not None
                url = make_url(self.postgres_base).set(database=database).render_as_string(hide_password=False)
                if _emptied(url, self._fingerprints[template]):
                    with self._emptied_lock:
                        self._emptied.setdefault(template, []).append(database)
                    return
                self.created.remove(database)
            with admin.connect() as connection:
                connection.execute(text(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)'))

        with ThreadPoolExecutor(8) as pool:
            while True:
                batch = [self._to_drop.get()]
                while not self._to_drop.empty():
                    batch.append(self._to_drop.get())
                list(pool.map(drop_one, [name for name in batch if name is not None]))
                if None in batch:  # drop_all's signal: all done
                    break
        admin.dispose()

    def drop_all(self) -> None:
        """Drop every database this session made (at its end)."""
        self._copy_of.clear()  # nothing is emptied for reuse any more
        for database in list(self.created):
            self.drop(
                make_url(self.postgres_base or "").set(database=database).render_as_string(hide_password=False),
                empty_for_reuse=False,
            )
        if self._dropper is not None:
            self._to_drop.put(None)
            self._dropper.join(timeout=600)


# A PostgreSQL database's schema as one text: what a copy handed to the next test must hold just
# as its template does (the tests' own objects live in public; extensions, schemas and settings
# are compared whole).
_SCHEMA_FINGERPRINT = """
SELECT md5(string_agg(item, E'\\n' ORDER BY item)) FROM (
    SELECT 'relation ' || n.nspname || '.' || c.relname || ' ' || c.relkind::text || c.relpersistence::text
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg_toast%'
        AND n.nspname NOT LIKE 'pg_temp%'
    UNION ALL
    SELECT 'column ' || c.relname || '.' || a.attname || ' ' || format_type(a.atttypid, a.atttypmod)
        || ' ' || a.attnotnull || ' ' || coalesce(pg_get_expr(d.adbin, d.adrelid), '')
    FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace
        LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
    WHERE n.nspname = 'public' AND a.attnum > 0 AND NOT a.attisdropped
    UNION ALL
    SELECT 'constraint ' || conrelid::regclass || ' ' || conname || ' ' || pg_get_constraintdef(oid)
    FROM pg_constraint WHERE connamespace = 'public'::regnamespace
    UNION ALL SELECT 'index ' || indexdef FROM pg_indexes WHERE schemaname = 'public'
    UNION ALL
    SELECT 'function ' || p.proname || '(' || pg_get_function_identity_arguments(p.oid) || ') '
        || md5(p.prosrc)
    FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
    WHERE n.nspname NOT IN ('pg_catalog', 'information_schema')
    UNION ALL SELECT 'trigger ' || tgrelid::regclass || ' ' || tgname FROM pg_trigger WHERE NOT tgisinternal
    UNION ALL SELECT 'schema ' || nspname FROM pg_namespace
    UNION ALL SELECT 'extension ' || extname || ' ' || extversion FROM pg_extension
    UNION ALL
    SELECT 'setting ' || coalesce(array_to_string(setconfig, ';'), '') FROM pg_db_role_setting
    WHERE setdatabase = (SELECT oid FROM pg_database WHERE datname = current_database())
    UNION ALL
    SELECT 'sequence ' || schemaname || '.' || sequencename || ' ' || coalesce(last_value, 0)
    FROM pg_sequences
    UNION ALL SELECT 'version ' || version_num FROM alembic_version
) AS schema_items(item)
"""


def _end_other_sessions(connection: Any, database: str | None) -> None:
    """End every session on PostgreSQL database ``database`` but ``connection``'s own."""
    connection.execute(
        text(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = :name AND pid <> pg_backend_pid()"
        ),
        {"name": database},
    )


def _public_tables(connection: Any) -> list[str]:
    return list(
        connection.execute(
            text("SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename")
        ).scalars()
    )


def _empty_fingerprint(url: str) -> str | None:
    """The schema fingerprint of the PostgreSQL database at ``url`` when no table of it but
    ``alembic_version`` holds a row (its copies can be emptied for reuse), else None."""
    engine = create_engine(url, poolclass=NullPool)
    try:
        with engine.connect() as connection:
            tables = _public_tables(connection)
            if "alembic_version" not in tables:
                return None
            for table in tables:
                if (
                    table != "alembic_version"
                    and connection.execute(text(f'SELECT EXISTS (SELECT FROM "{table}")')).scalar()
                ):
                    return None
            return str(connection.execute(text(_SCHEMA_FINGERPRINT)).scalar())
    finally:
        engine.dispose()


def _emptied(url: str, fingerprint: str) -> bool:
    """Empty the PostgreSQL copy at ``url`` as its template left it (no rows, identities and
    sequences from their start): whether it now has the template's ``fingerprint``. The tables the
    template does not have (each run's own ``run_rows`` partition) are dropped; anything else that
    differs leaves the copy to be dropped."""
    engine = create_engine(url, poolclass=NullPool, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as connection:
            _end_other_sessions(connection, make_url(url).database)
            for table in _public_tables(connection):
                if table.startswith("run_rows_p"):
                    connection.execute(text(f'DROP TABLE "{table}"'))
            # DELETE, not TRUNCATE: a test leaves a few rows, and TRUNCATE makes every table's
            # files anew (~300 ms of the server's CPU for the ~60 tables); the foreign keys' and
            # the tables' own triggers are off for this session, so the order does not matter
            connection.execute(text("SET session_replication_role = replica"))
            for table in _public_tables(connection):
                if table != "alembic_version":
                    connection.execute(text(f'DELETE FROM "{table}"'))
            for schema, sequence in connection.execute(
                text("SELECT schemaname, sequencename FROM pg_sequences WHERE last_value IS NOT NULL")
            ):
                connection.execute(text(f'ALTER SEQUENCE "{schema}"."{sequence}" RESTART'))
            return bool(connection.execute(text(_SCHEMA_FINGERPRINT)).scalar() == fingerprint)
    except Exception:  # a copy in any other state is dropped instead
        return False
    finally:
        engine.dispose()


@pytest.fixture(scope="session")
def templates(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Templates]:
    """The session's template databases (see :class:`Templates`)."""
    found = Templates(tmp_path_factory.mktemp("templates"), os.environ.get(PG_ENV))
    try:
        yield found
    finally:
        found.drop_all()


def _migrate(engine: Engine) -> None:
    upgrade(engine)


def migrated_copy(templates: Templates, backend: str, tmp_path: Path) -> str:
    """The URL of a new database migrated to head, copied from the session's template."""
    templates.build(backend, "migrated", _migrate)
    return templates.copy(backend, "migrated", tmp_path / "evalstore.db")


# the database systems a test runs on: SQLite, and PostgreSQL (marked ``postgres``)
BOTH_DATABASES = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


@pytest.fixture(params=BOTH_DATABASES)
def db_backend(request: pytest.FixtureRequest) -> str:
    """The database system a test runs on: SQLite, and PostgreSQL (marked ``postgres``)."""
    return str(request.param)


@pytest.fixture
def database_url(db_backend: str, request: pytest.FixtureRequest, templates: Templates, tmp_path: Path) -> str:
    """An empty database (no schema yet); when the test also uses ``engine``, the same database
    migrated to head (a copy of the session's migrated template)."""
    backend = db_backend
    if "engine" in request.fixturenames:
        url = migrated_copy(templates, backend, tmp_path)
        request.addfinalizer(lambda: templates.drop(url))
        return url
    if backend == "sqlite":
        return f"sqlite:///{tmp_path / 'evalstore.db'}"
    url = request.getfixturevalue("postgres_server_url")
    _reset_postgres(url)
    return url


@pytest.fixture
def engine(database_url: str) -> Iterator[Engine]:
    """A migrated, empty database (a copy of the session's migrated template: ``database_url``)."""
    engine = make_engine(database_url)
    yield engine
    engine.dispose()


@pytest.fixture
def sqlite_engine(templates: Templates, tmp_path: Path) -> Iterator[Engine]:
    """A migrated, empty SQLite database (a copy of the session's migrated template)."""
    engine = make_engine(migrated_copy(templates, "sqlite", tmp_path))
    yield engine
    engine.dispose()


class Cli:
    """The command line on a SQLite store of the test's own: ``cli("runs", "list")`` is the result
    of ``evalstore --database-url <store> runs list`` (typer's CliRunner: ``exit_code``,
    ``stdout``, ``stderr``); ``cli.url`` is the store's URL, ``cli.folder`` the test's folder."""

    def __init__(self, folder: Path, templates: Templates) -> None:
        from typer.testing import CliRunner

        self.folder = folder
        self.url = f"sqlite:///{folder / 'cli.db'}"
        self.runner = CliRunner()
        self._templates = templates

    def __call__(self, *args: str, **kwargs: Any) -> Any:
        from evalstore.cli import app

        return self.runner.invoke(app, ["--database-url", self.url, *args], **kwargs)

    def upgrade(self) -> Cli:
        """The store migrated to head, as ``db upgrade`` leaves it (a copy of the session's template)."""
        self._templates.build("sqlite", "migrated", _migrate)
        self._templates.copy("sqlite", "migrated", self.folder / "cli.db")
        return self


@pytest.fixture
def cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, templates: Templates) -> Cli:
    """The CLI on an empty store in the test's folder (``cli.upgrade()`` migrates it), with
    $EVALSTORE_HOME there and no MLflow server named, so MLflow (if on) logs into that folder."""
    monkeypatch.setenv("EVALSTORE_HOME", str(tmp_path))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    return Cli(tmp_path, templates)


@pytest.fixture(scope="session")
def _mlflow_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A local MLflow store with its schema made, once per session (MLflow's own migrations take
    5-25 s here)."""
    from mlflow import MlflowClient

    path = tmp_path_factory.mktemp("mlflow-template") / "mlflow.db"
    MlflowClient(f"sqlite:///{path}").search_experiments()  # creates the store and migrates it
    return path


@pytest.fixture
def mlflow_store(tmp_path: Path, _mlflow_template: Path) -> str:
    """The URI of a local MLflow store at ``tmp_path/mlflow.db`` whose schema is made already (a
    copy of the session's); tests of how a store is created use none."""
    shutil.copyfile(_mlflow_template, tmp_path / "mlflow.db")
    return f"sqlite:///{tmp_path / 'mlflow.db'}"


@pytest.fixture
def write(tmp_path: Path):  # type: ignore[no-untyped-def]
    """write(name, text_or_bytes) -> Path of a file in the test's temp folder."""

    def _write(name: str, content: str | bytes) -> Path:
        path = tmp_path / name
        path.write_bytes(content.encode() if isinstance(content, str) else content)
        return path

    return _write


@pytest.fixture(scope="session")
def spark():  # type: ignore[no-untyped-def]
    """One local[2] Spark session for the test session, on the machine's JDK; without pyspark or
    Java the tests that use it skip, except under CI (CI=true), where they must run."""
    must_run = os.environ.get("CI") == "true"
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        if must_run:
            pytest.fail("pyspark is missing under CI: it is in the test extra")
        pytest.skip("pyspark is not installed (pip install 'evalstore[spark]')")
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        if must_run:
            pytest.fail("no Java under CI: Spark needs a JDK 17")
        pytest.skip("no Java on this machine: Spark needs a JDK 17")
    session = (
        SparkSession.builder.master("local[2]")
        .appName("evalstore-tests")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.memory", "2g")
        # a short-lived JVM: the client compiler only and one GC thread (the tests' Spark jobs are
        # small; C2's compiling and parallel GC cost more CPU than they save: 84 -> 64 CPU-seconds)
        .config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    session.stop()
    if gateway is not None:  # stop() leaves the JVM running: end it, so no process outlives the tests
        gateway.shutdown()
        gateway.proc.stdin.close()  # the JVM exits when its launcher's stdin closes
        gateway.proc.wait(timeout=60)
        SparkContext._gateway = SparkContext._jvm = None


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A filesystem of 8 MiB that a test can fill (a tmpfs: mounting one needs root)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    disk = tmp_path / "disk"
    disk.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(disk)], check=True)
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=True)


def fill_disk(disk: Path) -> Path:
    """Write to ``disk`` until it is full; the filler file."""
    filler = disk / "filler"
    descriptor = os.open(filler, os.O_WRONLY | os.O_CREAT)
    try:
        for size in (1 << 16, 512, 1):
            try:
                while os.write(descriptor, b"\0" * size):
                    pass
            except OSError:
                pass
    finally:
        os.close(descriptor)
    return filler
