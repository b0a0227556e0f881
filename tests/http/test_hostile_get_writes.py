"""GET never writes: every GET route the app serves, asked by every role, leaves every row of
the database as it was, and every answer says ``Cache-Control: private, no-store``. The compare page computes only from what the task's evaluations stored
(it used to evaluate and store any measure named in its query string, 6-7 s each)."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
from sqlalchemy import Engine, MetaData, select

from evalstore.db.models import Evaluation
from evalstore.db.session import read_only
from tests.http.conftest import World, client_for, run_text

pytestmark = pytest.mark.both_databases

# a value for each path parameter of the app's GET routes (a route with one this lacks fails the test)
PATH_VALUES = {
    "task": "open",
    "name": "red-open",
    "run": "red-open",
    "pool": "pool",
    "topic": "301",
    "fmt": "csv",
    "token_id": "1",
    "job_id": None,
    "qrels": "sample",
    "bank": "bank",
    "code": "inv_1_not-the-secret",  # an invite or reset link: a wrong one, told so
    "judge": "nope",
}
QUERIES = {
    "/tasks/{task}/compare": "?run=red-open&run=red-two&measure=RR(rel=2)",
    "/tasks/{task}": "?measure=AP(rel=2)",
    "/api/v1/tasks/{task}/leaderboard": "?measure=AP(rel=2)",
    "/api/v1/runs/{name}/results": "?measure=AP(rel=2)&per_query=true",
    "/pools/{pool}/review": "?measure=RR(rel=2)",
    "/runs/{run}": "?measure=RR(rel=2)",
    "/collections/{qrels}/compare": "?run=red-open&run=red-two&measure=RR(rel=2)",
    "/collections/{qrels}": "?measure=AP(rel=2)",
    "/collections/{qrels}/runs/{run}": "?measure=RR(rel=2)",
}


def snapshot(engine: Engine) -> dict[str, str]:
    """Each table's rows, as a digest (rows sorted here: PostgreSQL cannot order by a JSON column)."""
    tables = MetaData()
    tables.reflect(engine)
    out = {}
    with engine.connect() as connection:
        for name, table in sorted(tables.tables.items()):
            rows = sorted(repr(tuple(row)) for row in connection.execute(select(table)))
            out[name] = hashlib.sha256("\n".join(rows).encode()).hexdigest()
    return out


def _routes(routes: list[Any]) -> list[Any]:
    """The app's routes, those of included routers too (FastAPI >= 0.16x keeps them behind an
    _IncludedRouter holding the original router)."""
    out = []
    for route in routes:
        included = getattr(route, "original_router", None)
        out.extend(_routes(included.routes) if included is not None else [route])
    return out


def get_paths(world: World) -> list[str]:
    with client_for(world.engine) as client:  # its lifespan disposes of the app's engine
        routes = _routes(client.app.routes)  # type: ignore[attr-defined]
    paths = []
    for route in routes:
        if "GET" not in (getattr(route, "methods", None) or set()):  # Mount (static files), websockets
            continue
        path = route.path
        for parameter in route.param_convertors:
            assert parameter in PATH_VALUES, f"GET {path}: no test value for {{{parameter}}}"
            value = PATH_VALUES[parameter] or str(world.jobs["open"])
            path = path.replace(f"{{{parameter}}}", value)
        paths.append(path + QUERIES.get(route.path, ""))
    return paths


def test_no_get_route_changes_a_row(world: World) -> None:
    world.submit("open", "red-two", text=run_text(tag="two", shift=2))
    paths = get_paths(world)
    assert len(paths) >= 20 and any("/compare?" in p for p in paths)
    before = snapshot(world.engine)
    statuses, cached = {}, {}
    with client_for(world.engine, writes_per_minute=10_000) as client:
        for caller in ("anon", "admin", "owner", "organiser", "red", "blue", "assessor", "viewer"):
            for path in paths:
                response = client.get(path, headers=world.headers(caller), follow_redirects=False)
                statuses[(caller, path)] = response.status_code
                if response.headers.get("cache-control") != "private, no-store":
                    cached[(caller, path)] = response.headers.get("cache-control")
    assert not [k for k, status in statuses.items() if status >= 500], statuses
    # every answer, pages, downloads, errors and redirects alike, is the caller's alone to keep
    assert cached == {}
    changed = {name for name, digest in snapshot(world.engine).items() if before[name] != digest}
    assert changed == set()


def test_the_compare_page_does_not_evaluate_a_measure_the_task_did_not(world: World) -> None:
    world.submit("open", "red-two", text=run_text(tag="two", shift=2))
    with read_only(world.engine) as session:
        evaluations = len(session.scalars(select(Evaluation.id)).all())
    with client_for(world.engine) as client:
        page = client.get(
            "/tasks/open/compare?run=red-open&run=red-two&measure=RR(rel=2)", headers=world.headers("owner")
        )
        stored = client.get("/tasks/open/compare?run=red-open&run=red-two&measure=AP", headers=world.headers("owner"))
    assert page.status_code == 404
    assert (
        "Run &#39;red-open&#39; has no stored RR(rel=2) on &#39;sample&#39;; pick a measure its evaluation has."
        in page.text
    )
    assert stored.status_code == 200
    with read_only(world.engine) as session:
        assert len(session.scalars(select(Evaluation.id)).all()) == evaluations
