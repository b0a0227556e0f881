"""Withdraw, Release, Cancel and token revocation cannot be undone, so each form's first post
shows what will happen and changes nothing; only the confirmation page's post (``confirm=yes``)
acts. The page works without script: a form that posts again, and a link back."""

from __future__ import annotations

import re

import pytest
from fastapi.testclient import TestClient

from evalstore.services import access, jobs, tasks
from tests.http.conftest import PASSWORD, World, as_principal, client_for
from tests.http.test_pages import csrf_of, sign_in


@pytest.fixture
def owner(world: World) -> TestClient:
    access.set_password(world.engine, "owner", PASSWORD)
    with client_for(world.engine) as client:
        assert sign_in(client, "owner").status_code == 303
        yield client


@pytest.fixture
def red(world: World) -> TestClient:
    with client_for(world.engine) as client:
        assert sign_in(client, "red").status_code == 303
        yield client


def _items(page: str) -> list[str]:
    found = re.search(r'<ul class="consequences">(.*?)</ul>', page, re.S)
    assert found is not None, "the page asks nothing"
    return [item.replace("&#39;", "'") for item in re.findall(r"<li>(.*?)</li>", found.group(1), re.S)]


def _confirm_form(page: str, action: str) -> str:
    form = re.search(rf'<form method="post" action="{re.escape(action)}" class="toolbar">(.*?)</form>', page, re.S)
    assert form is not None, f"no form posting to {action}"
    assert '<input type="hidden" name="confirm" value="yes">' in form.group(1)
    return form.group(1)


def test_withdrawing_a_run_asks_first(world: World, red: TestClient) -> None:
    world.submit("open", "red-second")  # evaluated: it keeps its quota slot
    page = red.get("/tasks/open/submit")
    asked = red.post("/runs/red-second/withdraw", data={"csrf": csrf_of(page.text), "task": "open"})
    assert asked.status_code == 200
    assert '<h1 class="confirm-heading">Withdraw run red-second?</h1>' in asked.text
    assert _items(asked.text) == [
        "Run red-second of team red is deleted from task open, with its evaluation and scores. This cannot be undone.",
        "It keeps its place in team red's quota: it was evaluated and its scores could be read.",
    ]
    form = _confirm_form(asked.text, "/runs/red-second/withdraw")
    assert '<input type="hidden" name="task" value="open">' in form
    assert '<a href="/tasks/open/submit">No, go back</a>' in form
    assert "red-second" in [r["run"] for r in tasks.task_runs(world.engine, as_principal(world.engine, "red"), "open")]

    done = red.post(
        "/runs/red-second/withdraw",
        data={"csrf": csrf_of(asked.text), "task": "open", "confirm": "yes"},
        follow_redirects=False,
    )
    assert done.status_code == 303 and done.headers["location"] == "/tasks/open/submit"
    assert "red-second" not in [
        r["run"] for r in tasks.task_runs(world.engine, as_principal(world.engine, "red"), "open")
    ]


def test_another_teams_run_is_not_asked_about(world: World, red: TestClient) -> None:
    world.submit("open", "blue-run", team_user="blue", evaluate=False)
    csrf = csrf_of(red.get("/profile").text)
    for confirm in ("", "yes"):
        refused = red.post("/runs/blue-run/withdraw", data={"csrf": csrf, "task": "open", "confirm": confirm})
        assert refused.status_code == 403
        assert "The run name &#39;blue-run&#39; belongs to another team&#39;s run" in refused.text
    assert "blue-run" in [r["run"] for r in tasks.task_runs(world.engine, as_principal(world.engine, "blue"), "open")]


def test_releasing_asks_first_and_names_the_private_topics(world: World, owner: TestClient) -> None:
    tasks.create_task(
        world.engine, "split", qrels_name="sample", owner="owner", hidden=True, private_fraction=1 / 3, split_seed=11
    )
    page = owner.get("/tasks/split/manage")
    asked = owner.post("/tasks/split/release", data={"csrf": csrf_of(page.text)})
    assert asked.status_code == 200
    assert "Release the scores of split?" in asked.text
    assert _items(asked.text) == [
        "Everyone who may see task split sees its scores from then on.",
        "The final ranking on its 1 private topics is shown to every participant.",
        "This cannot be undone: a released task cannot be hidden again.",
    ]
    assert '<a href="/tasks/split/manage">No, go back</a>' in _confirm_form(asked.text, "/tasks/split/release")
    assert tasks.show_task(world.engine, "split").released_at is None

    done = owner.post(
        "/tasks/split/release", data={"csrf": csrf_of(asked.text), "confirm": "yes"}, follow_redirects=False
    )
    assert done.status_code == 303 and done.headers["location"] == "/tasks/split/manage"
    assert tasks.show_task(world.engine, "split").released_at is not None


def test_cancelling_an_evaluation_asks_first(world: World, owner: TestClient) -> None:
    queued = world.submit("open", "blue-waiting", team_user="blue", evaluate=False)
    page = owner.get("/tasks/open/manage")
    asked = owner.post(f"/tasks/open/jobs/{queued}/cancel", data={"csrf": csrf_of(page.text)})
    assert asked.status_code == 200
    assert "Cancel the evaluation of blue-waiting?" in asked.text
    assert _items(asked.text) == [
        "The queued evaluation of run blue-waiting (team blue) stops and is not scored.",
        "Team blue's place in the quota is free again; you can retry the evaluation later.",
    ]
    _confirm_form(asked.text, f"/tasks/open/jobs/{queued}/cancel")
    assert jobs.show_job(world.engine, queued).state == "queued"

    done = owner.post(
        f"/tasks/open/jobs/{queued}/cancel",
        data={"csrf": csrf_of(asked.text), "confirm": "yes"},
        follow_redirects=False,
    )
    assert done.status_code == 303 and done.headers["location"] == "/tasks/open/manage#submissions"
    assert jobs.show_job(world.engine, queued).state == "cancelled"
    # a finished job is refused before anything is asked
    again = owner.post(f"/tasks/open/jobs/{queued}/cancel", data={"csrf": csrf_of(asked.text)})
    assert again.status_code == 409
    assert f"Job {queued} is already cancelled; only queued or running jobs can be cancelled." in again.text


def test_revoking_a_token_asks_first(world: World, red: TestClient) -> None:
    made = access.create_token(world.engine, "red", expires_days=1)
    page = red.get("/profile")
    asked = red.post(f"/profile/tokens/{made.id}/revoke", data={"csrf": csrf_of(page.text)})
    assert asked.status_code == 200
    assert f"Revoke token {made.id}?" in asked.text
    assert _items(asked.text) == [
        f"Token {made.id} stops working at once: every script that uses it is refused from then on. "
        "This cannot be undone; you can create a new token afterwards."
    ]
    assert '<a href="/profile">No, go back</a>' in _confirm_form(asked.text, f"/profile/tokens/{made.id}/revoke")
    assert access.authenticate(world.engine, made.token).name == "red"  # still works

    done = red.post(
        f"/profile/tokens/{made.id}/revoke",
        data={"csrf": csrf_of(asked.text), "confirm": "yes"},
        follow_redirects=False,
    )
    assert done.status_code == 303 and done.headers["location"] == "/profile"
    assert made.id in [t.id for t in access.list_tokens(world.engine, "red") if t.revoked_at]
    missing = red.post("/profile/tokens/999999/revoke", data={"csrf": csrf_of(asked.text)})
    assert missing.status_code == 404 and "No token 999999 of yours; your profile lists your tokens." in missing.text


def test_a_get_never_acts(world: World, owner: TestClient) -> None:
    assert owner.get("/tasks/to-release/release").status_code == 405
    assert tasks.show_task(world.engine, "to-release").released_at is None
