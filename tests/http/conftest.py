"""A service with one user of each role, two tasks (one public, one hidden) each holding an
evaluated run of team red, a pool assigned to an assessor, and a client for every caller."""

from __future__ import annotations

import threading
import time
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from fastapi.testclient import TestClient
from sqlalchemy import Engine

from evalstore.db.engine import make_engine, upgrade
from evalstore.services import access, answers, assessing, judging, pools, store, tasks
from evalstore.services.access import Principal
from evalstore.services.orchestration import work_on
from evalstore.web.app import create_app
from evalstore.web.settings import ServerSettings
from tests.conftest import BOTH_DATABASES, Templates
from tests.factories import SAMPLE

PASSWORD = "correct horse battery"

# who calls: no credentials, a revoked and an expired token, then one user of each role (two
# organisers: the open and hidden tasks' owner, and another; two participants of other teams)
CALLERS = ("anon", "revoked", "expired", "admin", "owner", "organiser", "red", "blue", "assessor", "viewer")
USERS = {
    "admin": ("admin", None),
    "owner": ("organiser", None),
    "organiser": ("organiser", None),
    "red": ("participant", "red"),
    "blue": ("participant", "blue"),
    "assessor": ("assessor", None),
    "viewer": ("viewer", None),
}


def run_text(topics: tuple[str, ...] = ("301", "302", "303"), *, tag: str = "r", shift: int = 0) -> str:
    """A small valid run: the sample run's documents, scores shifted so runs differ."""
    lines = []
    for line in (SAMPLE / "results.test").read_text().splitlines():
        topic, _, doc, rank, score, _ = line.split()
        if topic in topics:
            lines.append(
                f"{topic} Q0 {doc} {rank} {float(score) + shift * (zlib.crc32(doc.encode()) % 7) / 100:.6f} {tag}"
            )
    return "\n".join(lines) + "\n"


def as_principal(engine: Engine, user: str) -> Principal:
    token = access.create_token(engine, user, expires_days=1)
    return access.authenticate(engine, token.token)


@dataclass
class World:
    engine: Engine
    tmp: Path
    tokens: dict[str, str] = field(default_factory=dict)
    jobs: dict[str, int] = field(default_factory=dict)

    def headers(self, caller: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens[caller]}"} if caller in self.tokens else {}

    def submit(
        self, task: str, name: str, *, team_user: str = "red", text: str | None = None, evaluate: bool = True
    ) -> int:
        """Submit a run for a participant's team through the service (not HTTP) and evaluate it."""
        path = self.tmp / f"{name}.txt"
        path.write_text(text or run_text(tag=name))
        submitted = tasks.submit_run(self.engine, as_principal(self.engine, team_user), task, path, name=name)
        if evaluate:
            work_on(self.engine, [submitted.job.evaluation_id], mlflow=False)
        return submitted.job.evaluation_id


def build_world(engine: Engine, tmp: Path) -> World:
    world = World(engine, tmp)
    store.import_qrels(engine, SAMPLE / "qrels.test", name="sample")
    for name, (role, team) in USERS.items():
        # passwords (argon2 at full cost, ~60 ms each) only where sign-in tests use them
        access.add_user(engine, name, role=role, team=team, password=PASSWORD if name in ("red", "viewer") else None)
        world.tokens[name] = access.create_token(engine, name, expires_days=1).token
    revoked = access.create_token(engine, "admin")
    access.revoke_token(engine, revoked.id)
    world.tokens["revoked"] = revoked.token
    expired = access.create_token(engine, "admin", expires_days=1e-9)  # a few microseconds
    world.tokens["expired"] = expired.token
    time.sleep(0.01)
    tasks.create_task(engine, "open", qrels_name="sample", owner="owner")
    tasks.create_task(engine, "secret", qrels_name="sample", hidden=True, owner="owner")
    tasks.create_task(engine, "to-release", qrels_name="sample", hidden=True, owner="owner")
    world.jobs["open"] = world.submit("open", "red-open")
    world.jobs["secret"] = world.submit("secret", "red-secret")
    pools.build_pool(engine, name="pool", run_names=["red-open"], depth=5)
    judging.assign_assessor(engine, "pool", "assessor")
    bank = tmp / "bank.jsonl"
    bank.write_text(
        '{"qid": "301", "query": "international organized crime", "nuggets": '
        '[{"text": "Crime crosses borders", "importance": "vital"}, {"text": "Police cooperate", "importance": "okay"}]}\n'
    )
    answers.import_nuggets(engine, bank, name="bank")
    assessing.configure_bank(engine, "bank", organiser="owner")
    assessing.assign_bank_assessor(engine, "bank", "assessor")
    return world


@pytest.fixture(autouse=True)
def fresh_boards(monkeypatch: pytest.MonkeyPatch) -> None:
    """Leaderboards read the task's state on every request here (a server may answer from one up
    to a second old: tasks.boards.BOARD_FRESHNESS), so a test sees what it has just done."""
    monkeypatch.setattr(tasks.boards, "BOARD_FRESHNESS", 0.0)


def _world_template(templates: Templates, backend: str) -> tuple[dict[str, str], dict[str, int]]:
    """The world built once per session on ``backend``, in the template database ``"world"``:
    its tokens and jobs (the database itself is copied per test)."""

    def build(engine: Engine) -> tuple[dict[str, str], dict[str, int]]:
        folder = templates.folder / f"world-{backend}"  # the submitted runs' files
        folder.mkdir(exist_ok=True)
        built = build_world(engine, folder)
        return built.tokens, built.jobs

    templates.build(backend, "migrated", upgrade)
    _, (tokens, jobs) = templates.build(backend, "world", build, based_on="migrated")
    return tokens, jobs


@contextmanager
def copied_world(
    templates: Templates,
    backend: str,
    tmp_path: Path,
    more: tuple[str, Callable[[World], None]] | None = None,
) -> Iterator[World]:
    """The world in a database of the test's own, copied from the session's template; with
    ``more`` (a name and what it adds to a world), from a template of the world with that added,
    itself built once per session on a copy of the world's."""
    tokens, jobs = _world_template(templates, backend)
    name = "world"
    if more is not None:
        name, add = more

        def build(engine: Engine) -> None:
            folder = templates.folder / f"{name}-{backend}"  # the files its runs were read from
            folder.mkdir(exist_ok=True)
            add(World(engine, folder, dict(tokens), dict(jobs)))

        templates.build(backend, name, build, based_on="world")
    url = templates.copy(backend, name, tmp_path / "evalstore.db")
    engine = make_engine(url)
    try:
        yield World(engine, tmp_path, dict(tokens), dict(jobs))
    finally:
        engine.dispose()
        templates.drop(url)


@pytest.fixture(params=["sqlite"])
def db_backend(request: pytest.FixtureRequest) -> str:
    """The service's tests run on SQLite; a module or test whose outcome depends on the database
    is marked ``both_databases`` and runs on PostgreSQL too (:func:`pytest_generate_tests`): the
    sweeps of every page and every parameter (queries only a page runs), the GET routes' writes,
    concurrent writers and claims, wide ids and long names, and what the worker stores for the
    pages. The rest checks routes, roles, words and flows: the same code over the same services,
    which tests/db runs on both databases."""
    return str(request.param)


@pytest.hookimpl(tryfirst=True)  # before pytest reads the parametrize marks
def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A test marked ``both_databases`` that takes a database gets it parametrized, as a mark (the
    fixture's own SQLite alone then gives way, as to any test's parametrize mark)."""
    if "db_backend" in metafunc.fixturenames and metafunc.definition.get_closest_marker("both_databases"):
        metafunc.definition.add_marker(pytest.mark.parametrize("db_backend", BOTH_DATABASES, indirect=True))


@pytest.fixture
def world(db_backend: str, templates: Templates, tmp_path: Path) -> Iterator[World]:
    """The world, in a database of the test's own: a copy of the one built once per session
    (building it took 2-3 s a test), so tests may change whatever they like."""
    with copied_world(templates, db_backend, tmp_path) as copied:
        yield copied


FIVE_RUN_TOPICS = ("301", "302", "303")


def four_runs_submitted(world: World) -> None:
    """Four more runs of the open task (run-0 to run-3, on three topics), each evaluated by its job
    (which stores its pairs): with red-open, the open task's five runs."""
    for index, shift in enumerate((2, 4, 6, 9)):
        world.submit("open", f"run-{index}", text=run_text(FIVE_RUN_TOPICS, tag=f"run-{index}", shift=shift))


@pytest.fixture
def five_runs(db_backend: str, templates: Templates, tmp_path: Path) -> Iterator[World]:
    """The world with the open task's five runs, as their jobs left it, and no idle refresh yet: a
    copy of a template built once per test process (submitting and evaluating the runs was most
    of each such test's time)."""
    with copied_world(templates, db_backend, tmp_path, ("world-five-runs", four_runs_submitted)) as world:
        yield world


@pytest.fixture
def five_runs_client(five_runs: World) -> Iterator[TestClient]:
    with client_for(five_runs.engine) as test_client:
        yield test_client


def wrong_statuses(world: World, table: dict[str, tuple[Any, str]]) -> list[str]:
    """Each route of ``table`` (route -> (request for a caller, expected statuses in CALLERS
    order)) asked by every caller: the cells whose status differs from the table's."""
    wrong = []
    with client_for(world.engine, writes_per_minute=10_000) as client:
        for route, (request_for, statuses) in table.items():
            for caller, expected in zip(CALLERS, statuses.split(), strict=True):
                method, path, kwargs = request_for(world, caller)
                client.cookies.clear()
                response = client.request(method, path, headers=world.headers(caller), follow_redirects=False, **kwargs)
                if response.status_code != int(expected):
                    wrong.append(
                        f"{route} as {caller}: {response.status_code} (expected {expected}) {response.text[:200]}"
                    )
    return wrong


def client_for(
    engine: Engine, *, address: str = "testclient", raise_errors: bool = True, **settings: Any
) -> TestClient:
    """A client of a new app on ``engine`` with ``settings``; its requests come from ``address``;
    without ``raise_errors`` an unhandled error is the 500 a client would get."""
    url = engine.url.render_as_string(hide_password=False)
    return TestClient(
        create_app(ServerSettings(database_url=url, **{"secure_cookies": False, **settings})),
        client=(address, 50000),
        raise_server_exceptions=raise_errors,
    )


@pytest.fixture
def client(world: World) -> Iterator[TestClient]:
    with client_for(world.engine) as test_client:
        yield test_client


@dataclass
class LiveServer:
    url: str


@contextmanager
def serving(app: Any) -> Iterator[str]:
    """``app`` served by uvicorn on a thread, on a free port of 127.0.0.1, for the block: its base
    URL (the live server below and the browser tests' sites)."""
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline, "the test server did not start"
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@pytest.fixture
def live_server(world: World) -> Iterator[LiveServer]:
    """The service on a real socket (uvicorn in a thread), for concurrent clients."""
    url = world.engine.url.render_as_string(hide_password=False)
    with serving(create_app(ServerSettings(database_url=url, writes_per_minute=1000))) as base:
        yield LiveServer(base)
