"""The HTTP service while its database fails: JSON 503 with Retry-After for the API, the site's
error page with 503 for pages, liveness (`/api/v1/health`, `/health/live`) still 200 and
readiness (`/health/ready`) 503 until the database answers again. PostgreSQL is cut off by a TCP
proxy this test controls; SQLite's write lock is held by another connection."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.engine import make_url

from evalstore._version import __version__
from evalstore.web.app import create_app
from evalstore.web.settings import ServerSettings
from tests.conftest import Templates, migrated_copy
from tests.proxy import TcpProxy

NOT_ANSWERING = {"error": "The database is not answering; try again in a few seconds."}


@pytest.fixture
def proxied(templates: Templates, tmp_path: Path) -> Iterator[tuple[TcpProxy, str]]:
    url = migrated_copy(templates, "postgres", tmp_path)
    parsed = make_url(url)
    proxy = TcpProxy((parsed.host or "127.0.0.1", parsed.port or 5432))
    yield proxy, parsed.set(host="127.0.0.1", port=proxy.port).render_as_string(hide_password=False)
    proxy.close()
    templates.drop(url)


def _client(url: str) -> TestClient:
    return TestClient(create_app(ServerSettings(database_url=url, secure_cookies=False)), raise_server_exceptions=False)


@pytest.mark.postgres
def test_an_outage_answers_503_with_retry_after_and_readiness_follows_it(proxied: tuple[TcpProxy, str]) -> None:
    proxy, url = proxied
    with _client(url) as client:
        ready = client.get("/api/v1/health/ready")
        assert ready.status_code == 200 and ready.json()["status"] == "ready"
        assert client.get("/api/v1/tasks").status_code == 200
        proxy.cut()

        for path in ("/api/v1/health", "/api/v1/health/live"):  # the process answers: alive
            live = client.get(path)
            assert (live.status_code, live.json()) == (200, {"status": "ok", "version": __version__})
        ready = client.get("/api/v1/health/ready")
        assert (ready.status_code, ready.headers["retry-after"]) == (503, "5")
        assert ready.json() == {"status": "not ready", **NOT_ANSWERING}
        listed = client.get("/api/v1/tasks")
        assert (listed.status_code, listed.headers["retry-after"], listed.json()) == (503, "5", NOT_ANSWERING)
        page = client.get("/")
        assert (page.status_code, page.headers["retry-after"]) == (503, "5")
        assert page.headers["content-type"].startswith("text/html")
        assert NOT_ANSWERING["error"] in page.text

        proxy.restore()
        assert client.get("/api/v1/health/ready").status_code == 200
        assert client.get("/api/v1/tasks").status_code == 200
        assert client.get("/").status_code == 200


@pytest.mark.postgres
def test_readiness_answers_in_its_deadline_when_the_database_goes_silent(proxied: tuple[TcpProxy, str]) -> None:
    proxy, url = proxied
    with _client(url) as client:
        assert client.get("/api/v1/health/ready").status_code == 200
        proxy.stalled = True  # new connections are taken and never answered
        proxy.drop()
        started = time.monotonic()
        ready = client.get("/api/v1/health/ready")
        assert time.monotonic() - started < 4
        assert (ready.status_code, ready.json()) == (503, {"status": "not ready", **NOT_ANSWERING})
        again = client.get("/api/v1/health/ready")  # the first query is still out: no second one
        assert again.status_code == 503
        proxy.stalled = False
        proxy.drop()  # the stalled connection attempt fails, and the next check connects anew
        deadline = time.monotonic() + 10
        while client.get("/api/v1/health/ready").status_code != 200:
            assert time.monotonic() < deadline
            time.sleep(0.1)


def test_a_held_sqlite_write_lock_answers_503_busy(
    templates: Templates, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EVALSTORE_SQLITE_BUSY_SECONDS", "0.2")
    url = migrated_copy(templates, "sqlite", tmp_path)
    with _client(url) as client:
        holder = sqlite3.connect(str(make_url(url).database), isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")
        try:
            made = client.post("/api/v1/sessions", json={"name": "nobody", "password": "wrong horse"})
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        assert (made.status_code, made.headers["retry-after"]) == (503, "5")
        assert made.json() == {"error": "The database is busy with another writer; try again in a few seconds."}
        assert client.get("/api/v1/health/ready").status_code == 200  # readers never wait for writers
