"""The pages: every page route x every caller with the exact status (a page the app serves but
this table lacks fails the test), escaping of user text, CSRF on forms, hidden scores, sign-in,
and judging through the forms."""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Callable
from typing import Any

import pytest
from argon2 import PasswordHasher
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient
from sqlalchemy import select, update
from starlette.routing import Mount

from evalstore.config import password_cost
from evalstore.db.models import PoolJudgment, User
from evalstore.db.session import read_only
from evalstore.services import collections, judging, people, pools, store, tasks
from tests.http.conftest import PASSWORD, World, as_principal, run_text, wrong_statuses

pytestmark = pytest.mark.both_databases

Request = tuple[str, str, dict[str, Any]]
_NAMES = itertools.count()


def first_pooled(world: World) -> str:
    return str(judging.pool_entries(world.engine, as_principal(world.engine, "admin"), "pool", topic="301")[0]["doc"])


def fresh_name(caller: str) -> str:
    return f"{caller}-{next(_NAMES)}"


def judge_form(world: World, caller: str) -> Request:
    return "POST", "/judge/pool/301", {"data": {"doc": first_pooled(world), "grade": "1", "shown_at": "0"}}


# route -> (request for a caller, expected status per caller in CALLERS order)
# anon revoked expired admin owner organiser red blue assessor viewer
PAGES: dict[str, tuple[Callable[[World, str], Request], str]] = {
    "GET /": (lambda w, c: ("GET", "/", {}), "200 401 401 200 200 200 200 200 200 200"),
    "GET /login": (lambda w, c: ("GET", "/login", {}), "200 200 200 200 200 200 200 200 200 200"),
    "POST /login": (
        lambda w, c: ("POST", "/login", {"data": {"name": "viewer", "password": PASSWORD}}),
        "403 403 403 403 403 403 403 403 403 403",
    ),  # no sign-in form token
    "POST /logout": (lambda w, c: ("POST", "/logout", {}), "303 401 401 303 303 303 303 303 303 303"),
    "GET /tasks/{task}": (lambda w, c: ("GET", "/tasks/open", {}), "200 401 401 200 200 200 200 200 200 200"),
    "GET /tasks/{task}/leaderboard.{fmt}": (
        lambda w, c: ("GET", "/tasks/open/leaderboard.csv", {}),
        "200 401 401 200 200 200 200 200 200 200",
    ),
    "GET /runs/{run}": (
        lambda w, c: ("GET", "/runs/red-open", {}),
        "303 401 401 200 200 403 200 403 403 403",
    ),  # another team's run: its name is taken, as a submission under it is told (test_hostile_names)
    "GET /tasks/{task}/compare": (
        lambda w, c: ("GET", "/tasks/open/compare?run=red-open", {}),
        "303 401 401 200 200 200 200 200 403 403",
    ),
    "GET /queue": (lambda w, c: ("GET", "/queue", {}), "303 401 401 200 200 200 403 403 403 403"),
    "GET /judge": (lambda w, c: ("GET", "/judge", {}), "303 401 401 200 403 403 403 403 200 403"),
    "GET /judge/{pool}": (lambda w, c: ("GET", "/judge/pool", {}), "303 401 401 200 403 403 403 403 200 403"),
    "GET /judge/{pool}/{topic}": (
        lambda w, c: ("GET", "/judge/pool/301", {}),
        "303 401 401 200 403 403 403 403 200 403",
    ),
    "POST /judge/{pool}/{topic}": (judge_form, "303 401 401 303 403 403 403 403 303 403"),
    "POST /judge/{pool}/{topic}/undo": (
        lambda w, c: ("POST", "/judge/pool/301/undo", {}),
        "303 401 401 303 403 403 403 403 303 403",
    ),
    # an assessor's own judgments of a topic, each revisable (tests/http/test_judging_pages.py)
    "GET /judge/{pool}/{topic}/judgments": (
        lambda w, c: ("GET", "/judge/pool/301/judgments", {}),
        "303 401 401 200 403 403 403 403 200 403",
    ),
    "POST /judge/{pool}/{topic}/judgments": (
        lambda w, c: ("POST", "/judge/pool/301/judgments", {"data": {"doc": "never-judged", "grade": "1"}}),
        "303 401 401 404 403 403 403 403 404 403",
    ),  # not their judgment
    "GET /pools/{pool}/review": (
        lambda w, c: ("GET", "/pools/pool/review", {}),
        "303 401 401 200 200 404 403 403 403 403",
    ),  # another organiser: not theirs
    # the state of queued and running jobs, for live.js (tests/http/test_live_state.py)
    "GET /jobs/live": (lambda w, c: ("GET", "/jobs/live?job=1", {}), "303 401 401 200 200 200 200 200 403 403"),
    "GET /static": (lambda w, c: ("GET", "/static/style.css", {}), "200 200 200 200 200 200 200 200 200 200"),
    "GET /static/swagger-ui": (
        lambda w, c: ("GET", "/static/swagger-ui/swagger-ui.css", {}),
        "200 200 200 200 200 200 200 200 200 200",
    ),  # the API page's Swagger UI files
    # a participant's pages (tests/http/test_participant_pages.py follows their flows)
    "GET /tasks/{task}/submit": (
        lambda w, c: ("GET", "/tasks/open/submit", {}),
        "303 401 401 200 200 200 200 200 403 403",
    ),
    "POST /tasks/{task}/submit": (
        lambda w, c: ("POST", "/tasks/open/submit", {"data": {"name": "x"}}),
        "303 401 401 422 422 422 422 422 403 403",
    ),  # no file: the form again
    "POST /runs/{run}/withdraw": (
        lambda w, c: ("POST", "/runs/nope/withdraw", {}),
        "303 401 401 404 404 404 404 404 403 403",
    ),
    "GET /profile": (lambda w, c: ("GET", "/profile", {}), "303 401 401 200 200 200 200 200 200 200"),
    "POST /profile/tokens": (
        lambda w, c: ("POST", "/profile/tokens", {"data": {"expires_days": "0"}}),
        "303 401 401 400 400 400 400 400 400 400",
    ),  # 0 days: the form again
    "POST /profile/tokens/{token_id}/revoke": (
        lambda w, c: ("POST", "/profile/tokens/999999/revoke", {}),
        "303 401 401 404 404 404 404 404 404 404",
    ),
    "POST /profile/password": (
        lambda w, c: ("POST", "/profile/password", {"data": {"current": "x"}}),
        "303 401 401 400 400 400 400 400 400 400",
    ),
    # people (tests/http/test_people_pages.py follows their flows): the admin's page and forms;
    # an invite's and a reset link's page are anyone's who holds the link
    "GET /people": (lambda w, c: ("GET", "/people", {}), "303 401 401 200 403 403 403 403 403 403"),
    "POST /people/invites": (
        lambda w, c: ("POST", "/people/invites", {"data": {"role": "king"}}),
        "303 401 401 422 403 403 403 403 403 403",
    ),  # no such role: the form again
    "POST /people/users/{name}/reset-link": (
        lambda w, c: ("POST", "/people/users/nobody/reset-link", {}),
        "303 401 401 404 403 403 403 403 403 403",
    ),
    "POST /people/users/{name}/team": (
        lambda w, c: ("POST", "/people/users/red/team", {"data": {"team": ""}}),
        "303 401 401 422 403 403 403 403 403 403",
    ),  # a participant keeps a team: the page again
    "POST /people/links/{link_id}/revoke": (
        lambda w, c: ("POST", "/people/links/999999/revoke", {}),
        "303 401 401 404 403 403 403 403 403 403",
    ),
    "POST /people/requests/{name}/approve": (
        lambda w, c: ("POST", "/people/requests/nobody/approve", {"data": {"role": "viewer"}}),
        "303 401 401 404 403 403 403 403 403 403",
    ),  # nobody of that name asks
    "POST /people/requests/{name}/reject": (
        lambda w, c: ("POST", "/people/requests/nobody/reject", {}),
        "303 401 401 404 403 403 403 403 403 403",
    ),
    # open sign-up is off by default: no page (tests/http/test_people_pages.py turns it on)
    "GET /sign-up": (lambda w, c: ("GET", "/sign-up", {}), "404 404 404 404 404 404 404 404 404 404"),
    "POST /sign-up": (
        lambda w, c: ("POST", "/sign-up", {"data": {"name": fresh_name(c)}}),
        "404 404 404 404 404 404 404 404 404 404",
    ),
    "GET /join/{code}": (
        lambda w, c: ("GET", people.create_invite(w.engine, role="viewer").path, {}),
        "200 200 200 200 200 200 200 200 200 200",
    ),
    "POST /join/{code}": (
        lambda w, c: ("POST", people.create_invite(w.engine, role="viewer").path, {"data": {"name": fresh_name(c)}}),
        "403 403 403 403 403 403 403 403 403 403",
    ),  # no form token (the link's own page gives one)
    "GET /reset/{code}": (
        lambda w, c: ("GET", people.create_reset_link(w.engine, "viewer").path, {}),
        "200 200 200 200 200 200 200 200 200 200",
    ),
    "POST /reset/{code}": (
        lambda w, c: ("POST", people.create_reset_link(w.engine, "viewer").path, {}),
        "403 403 403 403 403 403 403 403 403 403",
    ),
    # the organiser's console (tests/http/test_organiser_pages.py follows its flows): the task's
    # owner and admins; another organiser is refused on every one
    "GET /tasks/{task}/manage": (
        lambda w, c: ("GET", "/tasks/open/manage", {}),
        "303 401 401 200 200 403 403 403 403 403",
    ),
    "POST /tasks/{task}/settings": (
        lambda w, c: ("POST", "/tasks/open/settings", {"data": {"max_runs_per_team": "two"}}),
        "303 401 401 422 422 403 403 403 403 403",
    ),  # the form again
    "POST /tasks/{task}/release": (
        lambda w, c: ("POST", "/tasks/to-release/release", {}),
        "303 401 401 200 200 403 403 403 403 403",
    ),  # not confirmed: the question, nothing released
    "GET /tasks/{task}/qrels": (
        lambda w, c: ("GET", "/tasks/open/qrels", {}),
        "303 401 401 200 200 403 403 403 403 403",
    ),
    "POST /tasks/{task}/jobs/{job}/retry": (
        lambda w, c: ("POST", f"/tasks/open/jobs/{w.jobs['open']}/retry", {}),
        "303 401 401 409 409 403 403 403 403 403",
    ),  # done: not retried
    "POST /tasks/{task}/jobs/{job}/cancel": (
        lambda w, c: ("POST", f"/tasks/open/jobs/{w.jobs['open']}/cancel", {}),
        "303 401 401 409 409 403 403 403 403 403",
    ),  # done: not cancelled
    "POST /tasks/{task}/pools": (
        lambda w, c: ("POST", "/tasks/open/pools", {"data": {"pool": "p", "depth": "x"}}),
        "303 401 401 422 422 403 403 403 403 403",
    ),  # the form again
    "POST /tasks/{task}/pools/{pool}/assessors": (
        lambda w, c: ("POST", "/tasks/open/pools/pool/assessors", {"data": {"user": "assessor"}}),
        "303 401 401 404 404 403 403 403 403 403",
    ),  # not the task's pool
    # setting a campaign up from the console (tests/http/test_console_setup.py follows the flows)
    "GET /new-task": (lambda w, c: ("GET", "/new-task", {}), "303 401 401 200 200 200 403 403 403 403"),
    "POST /new-task": (
        lambda w, c: ("POST", "/new-task", {"data": {"name": "x"}}),
        "303 401 401 422 422 422 403 403 403 403",
    ),  # no qrels chosen: the form again
    "GET /tasks/{task}/topics": (
        lambda w, c: ("GET", "/tasks/open/topics", {}),
        "303 401 401 404 404 404 404 404 404 404",
    ),  # no topics file attached
    "POST /tasks/{task}/topics": (
        lambda w, c: ("POST", "/tasks/open/topics", {}),
        "303 401 401 422 422 403 403 403 403 403",
    ),  # no file: the console again
    "POST /tasks/{task}/release/schedule": (
        lambda w, c: ("POST", "/tasks/to-release/release/schedule", {"data": {"release_at": "2099-01-01T00:00"}}),
        "303 401 401 200 200 403 403 403 403 403",
    ),  # not confirmed: the question, nothing scheduled
    "POST /tasks/{task}/release/cancel": (
        lambda w, c: ("POST", "/tasks/to-release/release/cancel", {}),
        "303 401 401 409 409 403 403 403 403 403",
    ),  # nothing scheduled
    "POST /tasks/{task}/pools/{pool}/texts": (
        lambda w, c: ("POST", "/tasks/open/pools/pool/texts", {"data": {"topic_set": "x"}}),
        "303 401 401 404 404 403 403 403 403 403",
    ),  # not the task's pool
    # an organiser's judges (tests/http/test_judges_console.py follows the flows)
    "GET /judges": (lambda w, c: ("GET", "/judges", {}), "303 401 401 200 200 200 403 403 403 403"),
    "POST /judges": (
        lambda w, c: ("POST", "/judges", {"data": {"name": "j", "endpoint": "ftp://x", "model": "m"}}),
        "303 401 401 422 422 422 403 403 403 403",
    ),  # not an http(s) endpoint: the form again
    "GET /judges/{judge}": (lambda w, c: ("GET", "/judges/nope", {}), "303 401 401 404 404 404 403 403 403 403"),
    "POST /judges/{judge}/run": (
        lambda w, c: ("POST", "/judges/nope/run", {"data": {"pool": "pool"}}),
        "303 401 401 404 404 404 403 403 403 403",
    ),
    "POST /judges/{judge}/probe": (
        lambda w, c: ("POST", "/judges/nope/probe", {"data": {"pool": "pool"}}),
        "303 401 401 404 404 404 403 403 403 403",
    ),
    "POST /judges/{judge}/probe/cancel": (
        lambda w, c: ("POST", "/judges/nope/probe/cancel", {}),
        "303 401 401 404 404 404 403 403 403 403",
    ),
    # a lab's collections (tests/http/test_collections.py): admins, and the organiser of the
    # qrels' tasks; another organiser is told there is none
    "GET /collections": (lambda w, c: ("GET", "/collections", {}), "303 401 401 200 200 200 403 403 403 403"),
    "GET /collections/{qrels}": (
        lambda w, c: ("GET", "/collections/sample", {}),
        "303 401 401 200 200 404 403 403 403 403",
    ),
    "GET /collections/{qrels}/leaderboard.{fmt}": (
        lambda w, c: ("GET", "/collections/sample/leaderboard.md", {}),
        "303 401 401 200 200 404 403 403 403 403",
    ),
    "GET /collections/{qrels}/runs/{run}": (
        lambda w, c: ("GET", "/collections/sample/runs/red-secret", {}),
        "303 401 401 200 200 404 403 403 403 403",
    ),
    "GET /collections/{qrels}/compare": (
        lambda w, c: ("GET", "/collections/sample/compare?run=red-open&run=red-secret", {}),
        "303 401 401 200 200 404 403 403 403 403",
    ),
    "GET /tasks/{task}/health": (
        lambda w, c: ("GET", "/tasks/open/health", {}),
        "303 401 401 200 200 403 403 403 403 403",
    ),  # one run: the page says so
    # judgments compare for the task's organiser (tests/judges/test_judges_pages.py follows it)
    "GET /tasks/{task}/judgments": (
        lambda w, c: ("GET", "/tasks/open/judgments?first=sample&second=sample", {}),
        "303 401 401 200 200 403 403 403 403 403",
    ),
    "POST /tasks/{task}/judgments/evaluate": (
        lambda w, c: ("POST", "/tasks/open/judgments/evaluate", {"data": {"qrels": "sample"}}),
        "303 401 401 303 303 403 403 403 403 403",
    ),  # nothing missing: nothing queued
    # answers assessed in the browser (tests/http/test_assessing_pages.py): the bank's assessors
    # (and admins) on the assessing pages, its organiser (and admins) on the bank's page; another
    # organiser is told there is no such bank
    "GET /assess": (lambda w, c: ("GET", "/assess", {}), "303 401 401 200 403 403 403 403 200 403"),
    "GET /assess/{bank}": (lambda w, c: ("GET", "/assess/bank", {}), "303 401 401 200 403 403 403 403 200 403"),
    "GET /assess/{bank}/{topic}": (
        lambda w, c: ("GET", "/assess/bank/301", {}),
        "303 401 401 200 403 403 403 403 200 403",
    ),
    "POST /assess/{bank}/{topic}": (
        lambda w, c: ("POST", "/assess/bank/301", {"data": {"answer": "none", "label_1": "support"}}),
        "303 401 401 404 403 403 403 403 404 403",
    ),  # no such answer
    "GET /assess/{bank}/{topic}/support": (
        lambda w, c: ("GET", "/assess/bank/301/support", {}),
        "303 401 401 200 403 403 403 403 200 403",
    ),
    "POST /assess/{bank}/{topic}/support": (
        lambda w, c: ("POST", "/assess/bank/301/support", {"data": {"answer": "none", "support_0": "2"}}),
        "303 401 401 404 403 403 403 403 404 403",
    ),  # no such answer
    "GET /banks": (lambda w, c: ("GET", "/banks", {}), "303 401 401 200 200 200 403 403 403 403"),
    "GET /banks/{bank}": (lambda w, c: ("GET", "/banks/bank", {}), "303 401 401 200 200 404 403 403 403 403"),
    "POST /banks/{bank}/nuggets": (
        lambda w, c: ("POST", "/banks/bank/nuggets", {"data": {"topic": "301", "text": " ", "importance": "okay"}}),
        "303 401 401 422 422 404 403 403 403 403",
    ),  # no text: refused
    "POST /banks/{bank}/nuggets/{nugget}": (
        lambda w, c: ("POST", "/banks/bank/nuggets/999999", {"data": {"action": "accept"}}),
        "303 401 401 404 404 404 403 403 403 403",
    ),  # no such nugget
    "POST /banks/{bank}/merge": (
        lambda w, c: ("POST", "/banks/bank/merge", {"data": {"text": "x", "importance": "okay"}}),
        "303 401 401 422 422 404 403 403 403 403",
    ),  # nothing picked
    "POST /banks/{bank}/accept": (
        lambda w, c: ("POST", "/banks/bank/accept", {}),
        "303 401 401 422 422 404 403 403 403 403",
    ),  # not a draft
}


def page_routes(client: TestClient) -> set[str]:
    """Every route that is not the API's: the pages and the static files (an included router's
    routes are read from the router itself)."""
    found = set()
    stack = list(client.app.routes)  # type: ignore[attr-defined]
    while stack:
        route = stack.pop()
        if hasattr(route, "original_router"):  # FastAPI's wrapper of an included router
            stack.extend(route.original_router.routes)
        elif isinstance(route, Mount):
            found.add(f"GET {route.path}")
        elif isinstance(route, APIRoute) and not route.path.startswith("/api/"):
            found |= {f"{method} {route.path}" for method in route.methods}
    return found


def test_every_page_has_a_row(client: TestClient) -> None:
    assert page_routes(client) == set(PAGES)


def test_every_page_answers_every_caller_with_the_exact_status(world: World) -> None:
    wrong = wrong_statuses(world, PAGES)
    assert not wrong, "\n".join(wrong)


def sign_in(client: TestClient, name: str, password: str = PASSWORD, next_page: str = "/") -> Any:
    form = client.get("/login")
    token = re.search(r'name="login_token" value="([^"]+)"', form.text)
    assert token is not None
    return client.post(
        "/login",
        data={"name": name, "password": password, "login_token": token.group(1), "next": next_page},
        follow_redirects=False,
    )


def csrf_of(page: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', page)
    assert found is not None, "the page has no form with a CSRF token"
    return found.group(1)


def test_signing_in_sets_a_session_and_goes_back_to_the_page(world: World, client: TestClient) -> None:
    response = sign_in(client, "red", next_page="/runs/red-open")
    assert response.status_code == 303 and response.headers["location"] == "/runs/red-open"
    page = client.get("/runs/red-open")
    assert page.status_code == 200 and "red-open" in page.text


def test_a_wrong_password_is_told_on_the_form(world: World, client: TestClient) -> None:
    response = sign_in(client, "red", "not it")
    assert response.status_code == 401
    assert "Wrong user name or password." in response.text


def test_sign_in_never_sends_the_browser_to_another_site(world: World, client: TestClient) -> None:
    for target in ("//evil.example/", "https://evil.example/", "/\\evil.example"):
        assert sign_in(client, "red", next_page=target).headers["location"] == "/"


def test_a_page_that_needs_a_user_sends_the_browser_to_sign_in_and_back(client: TestClient) -> None:
    response = client.get("/judge/pool/301", follow_redirects=False)
    assert response.status_code == 303 and response.headers["location"] == "/login?next=%2Fjudge%2Fpool%2F301"


def test_an_error_page_says_what_is_wrong(world: World, client: TestClient) -> None:
    response = client.get("/runs/red-open", headers=world.headers("blue"))
    assert response.status_code == 403
    assert "The run name &#39;red-open&#39; belongs to another team&#39;s run" in response.text


def test_a_hidden_task_shows_no_number_before_its_release(world: World, client: TestClient) -> None:
    for page in (
        client.get("/tasks/secret", headers=world.headers("red")),
        client.get("/runs/red-secret", headers=world.headers("red")),
    ):
        assert page.status_code == 200
        assert "hidden until the organisers release the task" in page.text
        assert not re.search(r"0\.\d{4}", page.text), "a score of the hidden task is on the page"
    assert client.get("/tasks/secret/leaderboard.csv", headers=world.headers("red")).status_code == 403
    assert (
        client.get("/tasks/secret/compare?run=red-secret", headers=world.headers("red")).status_code == 200
    )  # one run: nothing compared
    owner = client.get("/tasks/secret", headers=world.headers("owner"))
    assert re.search(r"0\.\d{4}", owner.text), "the organiser sees the scores"


SCRIPT = "<script>alert(1)</script>"


def test_user_text_is_escaped_on_every_page(world: World, client: TestClient, tmp_path: Any) -> None:
    path = tmp_path / "evil.txt"
    path.write_text(run_text(tag="evil", shift=2))
    tasks.submit_run(
        world.engine, as_principal(world.engine, "red"), "open", path, name="evil-run", description=f"desc {SCRIPT}"
    )
    from evalstore.services.orchestration import work_on

    work_on(
        world.engine, [j["id"] for j in tasks.queue(world.engine, as_principal(world.engine, "admin"))], mlflow=False
    )
    topics = tmp_path / "topics.jsonl"
    topics.write_text(json.dumps({"topic": "301", "title": f"title {SCRIPT}", "description": f"d {SCRIPT}"}) + "\n")
    collections.import_topics(world.engine, topics, name="evil-topics")
    docs = tmp_path / "docs.jsonl"
    docs.write_text(
        "".join(
            json.dumps({"doc_id": e["doc"], "title": f"t {SCRIPT}", "text": f"text {SCRIPT}"}) + "\n"
            for e in judging.pool_entries(world.engine, as_principal(world.engine, "admin"), "pool")
        )
    )
    collections.import_documents(world.engine, docs, collection="evil-docs")
    judging.configure_pool(world.engine, "pool", topic_set="evil-topics", collection="evil-docs")
    admin = world.headers("admin")
    pages = [
        client.get("/runs/evil-run", headers=admin),
        client.get("/tasks/open", headers=admin),
        client.get("/tasks/open/compare?run=evil-run&run=red-open", headers=admin),
        client.get("/judge/pool", headers=admin),
        client.get("/judge/pool/301", headers=admin),
        client.get("/tasks/open/compare?run=evil-run&run=red-open&collection=evil-docs", headers=admin),
    ]
    for page in pages:
        assert page.status_code == 200, page.text[:300]
        assert "<script>alert" not in page.text
    assert "desc &lt;script&gt;alert(1)&lt;/script&gt;" in pages[0].text
    assert "title &lt;script&gt;alert(1)&lt;/script&gt;" in pages[4].text
    assert "text &lt;<mark>script</mark>&gt;<mark>alert</mark>(1)" in pages[4].text  # the title's words lit
    assert "<strong>t &lt;script&gt;alert(1)&lt;/script&gt;</strong>" in pages[5].text  # titles beside the rankings


def test_a_form_posted_through_a_session_needs_its_csrf_token(world: World, client: TestClient) -> None:
    give_password(world, "assessor")
    assert sign_in(client, "assessor").status_code == 303
    screen = client.get("/judge/pool/301")
    doc = re.search(r'name="doc" value="([^"]+)"', screen.text)
    assert doc is not None
    refused = client.post(
        "/judge/pool/301", data={"doc": doc.group(1), "grade": "2", "shown_at": "0"}, follow_redirects=False
    )
    assert refused.status_code == 403
    assert "CSRF token is missing or wrong" in refused.text
    assert judged(world) == []
    accepted = client.post(
        "/judge/pool/301",
        data={"doc": doc.group(1), "grade": "2", "shown_at": "0", "csrf": csrf_of(screen.text)},
        follow_redirects=False,
    )
    assert accepted.status_code == 303
    assert judged(world) == [(doc.group(1), 2)]


_HASHER = PasswordHasher(*password_cost())  # the tests' cost (tests/conftest.py), as the server's would be


def give_password(world: World, user: str) -> None:
    """The world's users have tokens; this one signs in with a password too."""
    with world.engine.begin() as connection:
        connection.execute(update(User).where(User.name == user).values(password_hash=_HASHER.hash(PASSWORD)))


def judged(world: World, assessor: str = "assessor") -> list[tuple[str, int]]:
    with read_only(world.engine) as session:
        return [
            (d, r)
            for d, r in session.execute(
                select(PoolJudgment.doc, PoolJudgment.relevance)
                .where(PoolJudgment.assessor == assessor)
                .order_by(PoolJudgment.created_at)
            )
        ]


def test_judging_through_the_forms_records_grade_skip_note_time_and_undo(world: World, client: TestClient) -> None:
    headers = world.headers("assessor")
    docs = [
        e["doc"] for e in judging.pool_entries(world.engine, as_principal(world.engine, "admin"), "pool", topic="301")
    ]

    def shown() -> str:
        found = re.search(r'name="doc" value="([^"]+)"', client.get("/judge/pool/301", headers=headers).text)
        assert found is not None
        return found.group(1)

    assert shown() == docs[0]
    client.post(
        "/judge/pool/301",
        headers=headers,
        data={"doc": docs[0], "grade": "3", "shown_at": "0", "note": "clearly on topic"},
    )
    assert shown() == docs[1]
    client.post("/judge/pool/301", headers=headers, data={"doc": docs[1], "grade": "skip", "shown_at": "0"})
    client.post("/judge/pool/301", headers=headers, data={"doc": docs[2], "grade": "0", "shown_at": "0"})
    assert judged(world) == [(docs[0], 3), (docs[1], judging.SKIPPED), (docs[2], 0)]
    client.post("/judge/pool/301/undo", headers=headers)
    assert shown() == docs[2]
    assert judged(world) == [(docs[0], 3), (docs[1], judging.SKIPPED)]
    with read_only(world.engine) as session:
        note, seconds = session.execute(
            select(PoolJudgment.note, PoolJudgment.seconds).where(PoolJudgment.doc == docs[0])
        ).one()
    assert note == "clearly on topic"
    assert seconds == judging.LONGEST_JUDGMENT_SECONDS  # shown_at 0: long ago, capped
    wrong = client.post("/judge/pool/301", headers=headers, data={"doc": docs[2], "grade": "7", "shown_at": "0"})
    assert wrong.status_code == 422
    assert "Grade 7 is not on pool &#39;pool&#39;s scale (0 Not relevant, 1 Related" in wrong.text


def test_a_skipped_document_is_no_label_in_agreement_or_qrels(world: World) -> None:
    admin = as_principal(world.engine, "admin")
    doc = first_pooled(world)
    judging.judge_document(world.engine, admin, "pool", "301", doc, None)
    judging.judge_document(world.engine, as_principal(world.engine, "assessor"), "pool", "301", doc, 2)
    with pytest.raises(Exception, match="fewer than two assessors"):
        pools.pool_agreement(world.engine, "pool")
    pools.pool_qrels(world.engine, "pool", qrels_name="from-pool")
    with read_only(world.engine) as session:
        from evalstore.db import repositories as repo

        table = repo.qrels_table(session, repo.get_qrels(session, "from-pool")).to_pandas()
    assert table.set_index("doc").loc[doc, "relevance"] == 2


def test_the_leaderboard_sorts_downloads_and_marks_tiers(world: World, client: TestClient, tmp_path: Any) -> None:
    for shift in (1, 3):
        world.submit("open", f"red-{shift}", text=run_text(tag=f"r{shift}", shift=shift))
    page = client.get("/tasks/open?sort=run")
    assert page.status_code == 200
    runs = re.findall(r"<td class=\"run\">(red-[^<]+)</td>", page.text)
    assert runs == sorted(runs) and len(runs) == 3
    assert "Runs sharing a letter are not significantly different on AP" in page.text
    csv_text = client.get("/tasks/open/leaderboard.csv?measure=AP&measure=P@10").text
    header = "rank,run,team,type,AP,AP CI low,AP CI high,P@10,P@10 CI low,P@10 CI high,topics,tier,judged@10"
    assert csv_text.splitlines()[0] == header  # each mean with its interval's bounds, and the topics it is over
    assert len(csv_text.splitlines()) == 4
    row = csv_text.splitlines()[1].split(",")
    assert float(row[5]) <= float(row[4]) <= float(row[6]) and row[10] == "3"
    board = client.get("/tasks/open/leaderboard.json?measure=AP").json()
    assert board["rows"][0]["topics"] == 3 and set(board["rows"][0]["scores"]["AP"]) == {"mean", "ci_low", "ci_high"}
    tex = client.get("/tasks/open/leaderboard.tex").text
    assert tex.startswith(r"\begin{tabular}") and r"red\_open" not in tex and r"red-open" in tex
    assert client.get("/tasks/open?sort=nope").status_code == 422


def test_an_organiser_can_bring_stored_runs_into_a_task(world: World, tmp_path: Any) -> None:
    path = tmp_path / "old.txt"
    path.write_text(run_text(tag="old", shift=1))
    store.register_run(world.engine, path, name="old-run", system="legacy")
    attached = tasks.attach_runs(world.engine, "open", ["old-run"], by=as_principal(world.engine, "owner"))
    assert attached[0].team == "legacy"
    with pytest.raises(Exception, match="is a submission already"):
        tasks.attach_runs(world.engine, "open", ["old-run"])
    with pytest.raises(Exception, match="managed by its organiser"):
        tasks.attach_runs(world.engine, "open", ["red-open"], by=as_principal(world.engine, "organiser"))


def test_a_second_assessor_judges_the_seeded_share_blind(world: World) -> None:
    settings = judging.configure_pool(world.engine, "pool", double_share=0.4, seed=7)
    assert (settings["double_share"], settings["double_seed"]) == (0.4, 7)
    first, second = as_principal(world.engine, "assessor"), as_principal(world.engine, "admin")
    docs = [e["doc"] for e in judging.pool_entries(world.engine, second, "pool", topic="301")]
    screen = judging.judging_screen(world.engine, first, "pool", "301")
    assert (screen.documents, screen.role) == (len(docs), judging.ROLE_OPEN)  # nobody has judged it yet
    judging.judge_document(world.engine, first, "pool", "301", screen.doc or "", 1)
    sample = judging.double_sample(7, 0.4, "301", docs)
    assert len(sample) == round(0.4 * len(docs)) and sample == judging.double_sample(
        7, 0.4, "301", list(reversed(docs))
    )
    seen = []
    while (screen := judging.judging_screen(world.engine, second, "pool", "301")).doc is not None:
        assert screen.role == "second assessor (blind sample)" and screen.documents == len(sample)
        seen.append(screen.doc)
        judging.judge_document(world.engine, second, "pool", "301", screen.doc, 0)
    assert set(seen) == sample
    _, progress = judging.topic_progress(world.engine, second, "pool")
    assert {(p.topic, p.documents, p.judged) for p in progress if p.topic == "301"} == {
        ("301", len(sample), len(sample))
    }


def test_the_tiers_cache_keeps_only_the_newest_boards(
    world: World, client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    world.submit("open", "red-2", text=run_text(tag="r2", shift=2))
    tiers = client.app.state.server.context.tiers  # type: ignore[attr-defined]
    monkeypatch.setattr(tiers, "size", 1)
    for sort in ("AP", "P@10", "RR"):
        assert client.get(f"/tasks/open?sort={sort}").status_code == 200
    assert len(tiers) == 1  # three boards asked for, one kept
