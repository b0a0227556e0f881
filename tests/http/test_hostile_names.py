"""The run-name oracle of issue 36. Run names are unique across teams, so a submission under
another team's run name must be refused, which tells that the name is taken. Reading that run
answers the same (403, the same message), over the API and in the browser, so neither answer
tells what the other does not; a name no run holds is a 404 to read and free to submit under."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient
from markupsafe import escape

from evalstore.services import access, store
from tests.http.conftest import PASSWORD, World, client_for, run_text
from tests.http.test_pages import csrf_of, sign_in

pytestmark = pytest.mark.both_databases


def taken(name: str) -> str:
    return (
        f"The run name '{name}' belongs to another team's run (or one you may not see): it can be "
        "neither read nor submitted under."
    )


def _post(client: TestClient, world: World, caller: str, name: str, **data: str) -> Any:
    return client.post(
        "/api/v1/tasks/open/runs",
        headers=world.headers(caller),
        data={"name": name, **data},
        files={"file": ("run.txt", run_text(tag="probe", shift=3).encode())},
    )


def test_get_and_post_of_another_teams_run_name_answer_alike(world: World, client: TestClient) -> None:
    blue = world.headers("blue")
    answers = {
        "POST": _post(client, world, "blue", "red-open"),
        "POST (hidden task's run)": _post(client, world, "blue", "red-secret"),
        "GET": client.get("/api/v1/runs/red-open", headers=blue),
        "GET results": client.get("/api/v1/runs/red-open/results", headers=blue),
        "GET (hidden task's run)": client.get("/api/v1/runs/red-secret", headers=blue),
        "DELETE": client.delete("/api/v1/runs/red-open", headers=blue),
    }
    wrong = {
        route: (r.status_code, r.text)
        for route, r in answers.items()
        if (r.status_code, r.json()) != (403, {"error": taken("red-secret" if "hidden" in route else "red-open")})
    }
    assert wrong == {}


def test_another_organisers_run_and_a_run_outside_tasks_are_taken_alike(world: World, client: TestClient) -> None:
    path = world.tmp / "loose.txt"
    path.write_text(run_text(tag="loose"))
    store.register_run(world.engine, path, name="loose")  # an admin's, in no task
    for caller, name in (("organiser", "red-open"), ("blue", "loose")):
        read = client.get(f"/api/v1/runs/{name}", headers=world.headers(caller))
        assert (read.status_code, read.json()) == (403, {"error": taken(name)}), caller
    submitted = _post(client, world, "blue", "loose")
    assert (submitted.status_code, submitted.json()) == (403, {"error": taken("loose")})
    # an admin sees every run: a name taken is a plain conflict to them
    admin = _post(client, world, "admin", "loose", team="blue")
    assert admin.status_code == 409 and "exists already" in admin.json()["error"]


def test_a_free_name_reads_as_not_found_and_can_be_submitted(world: World, client: TestClient) -> None:
    missing = client.get("/api/v1/runs/blue-new", headers=world.headers("blue"))
    assert (missing.status_code, missing.json()) == (404, {"error": "No run named 'blue-new'."})
    assert _post(client, world, "blue", "blue-new").status_code == 201
    assert client.get("/api/v1/runs/blue-new", headers=world.headers("blue")).status_code == 200
    # the team's own taken name is the conflict it always was
    again = _post(client, world, "blue", "blue-new")
    assert (again.status_code, again.json()) == (
        409,
        {"error": "A run named 'blue-new' exists already; submit it under another name."},
    )


def test_the_browser_form_and_page_answer_alike(world: World) -> None:
    world.submit("open", "blue-run", team_user="blue", evaluate=False)
    with client_for(world.engine) as client:
        assert sign_in(client, "red").status_code == 303
        page = client.get("/runs/blue-run")
        form = client.get("/tasks/open/submit")
        submitted = client.post(
            "/tasks/open/submit",
            data={"name": "blue-run", "run_type": "automatic", "description": "", "csrf": csrf_of(form.text)},
            files={"file": ("mine.txt", run_text(tag="mine").encode(), "text/plain")},
            follow_redirects=False,
        )
        missing = client.get("/runs/nobody")
    message = str(escape(taken("blue-run")))
    assert page.status_code == submitted.status_code == 403
    assert message in page.text and message in submitted.text
    assert missing.status_code == 404 and str(escape("No run named 'nobody'.")) in missing.text


def test_task_and_pool_names_are_printable_and_slash_free(world: World, client: TestClient) -> None:
    task = client.post("/api/v1/tasks", headers=world.headers("owner"), json={"name": "a/b", "qrels": "sample"})
    assert (task.status_code, task.json()) == (
        422,
        {"error": "A task's name is 1-200 printable characters without '/'; got 'a/b'."},
    )
    access.set_password(world.engine, "owner", PASSWORD)
    with client_for(world.engine) as owner:
        assert sign_in(owner, "owner").status_code == 303
        page = owner.get("/tasks/open/manage")
        pool = owner.post(
            "/tasks/open/pools", data={"csrf": csrf_of(page.text), "pool": "p/q", "depth": "5", "topics": ""}
        )
    assert pool.status_code == 422
    assert str(escape("A pool's name is 1-200 printable characters without '/'; got 'p/q'.")) in pool.text
