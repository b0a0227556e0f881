"""Shared fixtures: a fresh, migrated database per test, on SQLite and (marked) PostgreSQL."""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.engine import make_url

from evalstore.db.engine import make_engine, upgrade

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data"
TREC_EVAL_TEST = SHARED / "trec_eval_test"
PG_ENV = "EVALSTORE_TEST_DATABASE_URL"


VENDORED = Path(__file__).resolve().parent / "data"  # trec_eval's own test files, with the NIST notice


def shared_path(*parts: str) -> Path:
    """A file under ../shared/data, or skip the test with the reason. trec_eval's test files are
    vendored in tests/data (NOTICE.md there) and read from there, so they run on every machine."""
    vendored = VENDORED.joinpath(*parts)
    if vendored.exists():
        return vendored
    path = SHARED.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"shared data not found: {path}")
    return path


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get(PG_ENV):
        return
    if os.environ.get("CI") == "true":
        raise pytest.UsageError(f"CI=true but {PG_ENV} is not set: the postgres tests must run in CI")
    skip = pytest.mark.skip(reason=f"set {PG_ENV}=postgresql+psycopg://... to run the PostgreSQL tests")
    for item in items:
        if "postgres" in item.keywords:
            item.add_marker(skip)


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


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """An empty database (no schema yet)."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'evalstore.db'}"
    url = request.getfixturevalue("postgres_server_url")
    _reset_postgres(url)
    return url


@pytest.fixture
def engine(database_url: str) -> Iterator[Engine]:
    """A migrated, empty database."""
    engine = make_engine(database_url)
    upgrade(engine)
    yield engine
    engine.dispose()


@pytest.fixture
def sqlite_engine(tmp_path: Path) -> Iterator[Engine]:
    engine = make_engine(f"sqlite:///{tmp_path / 'evalstore.db'}")
    upgrade(engine)
    yield engine
    engine.dispose()


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
    session = (SparkSession.builder.master("local[2]").appName("evalstore-tests")
               .config("spark.sql.shuffle.partitions", "4").config("spark.ui.enabled", "false")
               .config("spark.driver.memory", "2g").getOrCreate())
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
