"""A request's time budget: past EVALSTORE_REQUEST_SECONDS the client gets 503 naming it, at
the budget, not when the work ends (on a real socket: the test client waits for the application
to finish before it hands over any response). The work is held until the client has its answer,
so the answer cannot have waited for it, however slow the machine."""

from __future__ import annotations

import threading
import time
from typing import Any

import httpx
import pytest
import uvicorn

from evalstore.services import tasks
from evalstore.web.app import create_app
from evalstore.web.settings import ServerSettings
from tests.http.conftest import World


def test_a_request_past_its_time_budget_is_503(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    real = tasks.list_tasks

    answered = threading.Event()  # the client has its response: the held work may go on
    finished = threading.Event()

    def slow(*args: Any, **kwargs: Any) -> Any:
        answered.wait(timeout=60)
        try:
            return real(*args, **kwargs)
        finally:
            finished.set()

    monkeypatch.setattr(tasks, "list_tasks", slow)
    url = world.engine.url.render_as_string(hide_password=False)
    app = create_app(ServerSettings(database_url=url, request_seconds=0.3, secure_cookies=False))
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    base = f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}"
    try:
        started = time.perf_counter()
        response = httpx.get(f"{base}/api/v1/tasks", headers=world.headers("red"), timeout=10)
        waited = time.perf_counter() - started
        work_was_over = finished.is_set()
        fast = httpx.get(f"{base}/api/v1/me", headers=world.headers("red"), timeout=10)
    finally:
        # the abandoned work ends before the server does, so its database connection goes back to
        # the pool the server closes (else it is collected, open, during some later test)
        answered.set()
        finished.wait(timeout=30)
        server.should_exit = True
        thread.join(timeout=10)
    assert response.status_code == 503
    assert response.json() == {
        "error": "The request took longer than this server's limit of 0.3 s "
        "(EVALSTORE_REQUEST_SECONDS); ask for less, or ask an admin."
    }
    assert response.headers["retry-after"] == "60"
    assert not work_was_over  # answered while the work was still held, not when it ended
    assert waited < 4.0, waited  # at the budget (0.3 s; more on a loaded machine)
    assert fast.status_code == 200
