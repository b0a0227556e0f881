"""Every route x every caller: the exact status. A route the app serves but this table lacks fails
the test, so no route ships without its row."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient

from evalstore.services import access, answers, tasks
from tests.conftest import shared_path
from tests.http.conftest import PASSWORD, World, client_for, run_text, wrong_statuses

Request = tuple[str, str, dict[str, Any]]
_counter = itertools.count()


def fresh(caller: str) -> str:
    """A name no other cell uses (cells that create things)."""
    return f"{caller}-{next(_counter)}"


def submit_body(caller: str) -> dict[str, Any]:
    name = fresh(caller)
    data = {"name": name}
    if caller in ("admin", "owner", "organiser"):
        data["team"] = "green"
    return {"files": {"file": (f"{name}.txt", run_text(tag=name).encode())}, "data": data}


def red_run_to_withdraw(world: World, caller: str) -> str:
    name = fresh("withdraw")
    world.submit("open", name, evaluate=False)
    return name


def answer_task(world: World, caller: str) -> str:
    """A task over a nugget bank (owner: "owner"), made once per world."""
    if "rag" not in [t.name for t in tasks.list_tasks(world.engine)]:
        answers.import_nuggets(world.engine, shared_path("rag24", "nuggets.example.jsonl"), name="rag24")
        tasks.create_task(world.engine, "rag", nuggets_name="rag24", owner="owner", hidden=True)
    return "rag"


def alice_token_id(world: World, caller: str) -> int:
    return access.create_token(world.engine, "red").id


def throwaway_user(world: World, caller: str) -> str:
    name = fresh("user")
    access.add_user(world.engine, name, role="viewer")
    return name


# route -> (request for a caller, expected status per caller in CALLERS order)
# anon revoked expired admin owner organiser red blue assessor viewer
ROUTES: dict[str, tuple[Callable[[World, str], Request], str]] = {
    "GET /api/v1/openapi.json": (
        lambda w, c: ("GET", "/api/v1/openapi.json", {}),
        "200 200 200 200 200 200 200 200 200 200",
    ),
    "GET /api/v1/docs": (lambda w, c: ("GET", "/api/v1/docs", {}), "200 200 200 200 200 200 200 200 200 200"),
    "GET /api/v1/redoc": (lambda w, c: ("GET", "/api/v1/redoc", {}), "200 200 200 200 200 200 200 200 200 200"),
    "GET /api/v1/health": (lambda w, c: ("GET", "/api/v1/health", {}), "200 200 200 200 200 200 200 200 200 200"),
    "GET /api/v1/health/live": (
        lambda w, c: ("GET", "/api/v1/health/live", {}),
        "200 200 200 200 200 200 200 200 200 200",
    ),
    "GET /api/v1/health/ready": (
        lambda w, c: ("GET", "/api/v1/health/ready", {}),
        "200 200 200 200 200 200 200 200 200 200",
    ),
    "POST /api/v1/sessions": (
        lambda w, c: ("POST", "/api/v1/sessions", {"json": {"name": "viewer", "password": PASSWORD}}),
        "201 201 201 201 201 201 201 201 201 201",
    ),
    "DELETE /api/v1/sessions/current": (
        lambda w, c: ("DELETE", "/api/v1/sessions/current", {}),
        "401 401 401 403 403 403 403 403 403 403",
    ),
    "GET /api/v1/me": (lambda w, c: ("GET", "/api/v1/me", {}), "401 401 401 200 200 200 200 200 200 200"),
    "POST /api/v1/tokens": (
        lambda w, c: ("POST", "/api/v1/tokens", {"json": {}}),
        "401 401 401 201 201 201 201 201 201 201",
    ),
    "GET /api/v1/tokens": (lambda w, c: ("GET", "/api/v1/tokens", {}), "401 401 401 200 200 200 200 200 200 200"),
    "DELETE /api/v1/tokens/{token_id}": (
        lambda w, c: ("DELETE", f"/api/v1/tokens/{alice_token_id(w, c)}", {}),
        "401 401 401 204 404 404 204 404 404 404",
    ),
    "GET /api/v1/users": (lambda w, c: ("GET", "/api/v1/users", {}), "401 401 401 200 403 403 403 403 403 403"),
    "POST /api/v1/users": (
        lambda w, c: ("POST", "/api/v1/users", {"json": {"name": fresh(c), "role": "viewer"}}),
        "401 401 401 201 403 403 403 403 403 403",
    ),
    "POST /api/v1/users/{name}/disable": (
        lambda w, c: ("POST", f"/api/v1/users/{throwaway_user(w, c)}/disable", {}),
        "401 401 401 200 403 403 403 403 403 403",
    ),
    "GET /api/v1/audit": (lambda w, c: ("GET", "/api/v1/audit", {}), "401 401 401 200 403 403 403 403 403 403"),
    "GET /api/v1/tasks": (lambda w, c: ("GET", "/api/v1/tasks", {}), "200 401 401 200 200 200 200 200 200 200"),
    "POST /api/v1/tasks": (
        lambda w, c: (
            "POST",
            "/api/v1/tasks",
            {"json": {"name": fresh(c), "qrels": "sample", **({"owner": "owner"} if c == "admin" else {})}},
        ),
        "401 401 401 201 201 403 403 403 403 403",
    ),
    "GET /api/v1/tasks/{task}": (
        lambda w, c: ("GET", "/api/v1/tasks/secret", {}),
        "200 401 401 200 200 200 200 200 200 200",
    ),
    "PATCH /api/v1/tasks/{task}": (
        lambda w, c: ("PATCH", "/api/v1/tasks/to-release", {"json": {"daily_cap": 5}}),
        "401 401 401 200 200 403 403 403 403 403",
    ),
    "POST /api/v1/tasks/{task}/release": (
        lambda w, c: ("POST", "/api/v1/tasks/to-release/release", {}),
        "401 401 401 200 200 403 403 403 403 403",
    ),
    "GET /api/v1/tasks/{task}/leaderboard": (
        lambda w, c: ("GET", "/api/v1/tasks/open/leaderboard", {}),
        "200 401 401 200 200 200 200 200 200 200",
    ),
    "GET /api/v1/tasks/{task}/runs": (
        lambda w, c: ("GET", "/api/v1/tasks/open/runs", {}),
        "401 401 401 200 200 200 200 200 403 403",
    ),
    "POST /api/v1/tasks/{task}/runs": (
        lambda w, c: ("POST", "/api/v1/tasks/open/runs", submit_body(c)),
        "401 401 401 201 201 403 201 201 403 403",
    ),
    "POST /api/v1/tasks/{task}/evaluate": (
        lambda w, c: ("POST", f"/api/v1/tasks/{answer_task(w, c)}/evaluate", {}),
        "401 401 401 200 200 403 403 403 403 403",
    ),
    "POST /api/v1/runs": (
        lambda w, c: ("POST", "/api/v1/runs", submit_body(c)),
        "401 401 401 201 403 403 403 403 403 403",
    ),
    "GET /api/v1/runs/{name}": (
        lambda w, c: ("GET", "/api/v1/runs/red-open", {}),
        "401 401 401 200 200 403 200 403 403 403",
    ),
    "GET /api/v1/runs/{name}/results": (
        lambda w, c: ("GET", "/api/v1/runs/red-open/results?per_query=true", {}),
        "401 401 401 200 200 403 200 403 403 403",
    ),
    "DELETE /api/v1/runs/{name}": (
        lambda w, c: ("DELETE", f"/api/v1/runs/{red_run_to_withdraw(w, c)}", {}),
        "401 401 401 204 204 403 204 403 403 403",
    ),  # another team's run (organiser: another's task): the name is taken, as POST says alike
    "GET /api/v1/jobs": (lambda w, c: ("GET", "/api/v1/jobs", {}), "401 401 401 200 200 200 403 403 403 403"),
    "GET /api/v1/jobs/{job_id}": (
        lambda w, c: ("GET", f"/api/v1/jobs/{w.jobs['open']}", {}),
        "401 401 401 200 200 404 200 404 403 403",
    ),
    "GET /api/v1/qrels/{name}/export": (
        lambda w, c: ("GET", "/api/v1/qrels/sample/export", {}),
        "401 401 401 200 200 404 403 403 403 403",
    ),
    "GET /api/v1/pools": (lambda w, c: ("GET", "/api/v1/pools", {}), "401 401 401 200 403 403 403 403 200 403"),
    "GET /api/v1/pools/{name}/entries": (
        lambda w, c: ("GET", "/api/v1/pools/pool/entries", {}),
        "401 401 401 200 403 403 403 403 200 403",
    ),
    "POST /api/v1/pools/{name}/judgments": (
        lambda w, c: (
            "POST",
            "/api/v1/pools/pool/judgments",
            {"json": [{"topic": "301", "doc": first_pooled(w), "relevance": 1}]},
        ),
        "401 401 401 200 403 403 403 403 200 403",
    ),
    "POST /api/v1/pools/{name}/assessors": (
        lambda w, c: ("POST", "/api/v1/pools/pool/assessors", {"json": {"user": "assessor"}}),
        "401 401 401 204 204 404 403 403 403 403",
    ),  # pools: their tasks' organiser
}


def first_pooled(world: World) -> str:
    from evalstore.services import judging
    from tests.http.conftest import as_principal

    return str(judging.pool_entries(world.engine, as_principal(world.engine, "admin"), "pool", topic="301")[0]["doc"])


def served_routes(client: TestClient) -> set[str]:
    """Every route: the API's, as its OpenAPI document lists them (no route of ours is left out of
    it), and the pages that document it."""
    paths = client.get("/api/v1/openapi.json").json()["paths"]
    return {f"{method.upper()} {path}" for path, methods in paths.items() for method in methods} | {
        "GET /api/v1/openapi.json",
        "GET /api/v1/docs",
        "GET /api/v1/redoc",
    }


def test_every_route_has_a_row(client: TestClient) -> None:
    assert served_routes(client) == set(ROUTES)


def test_every_route_answers_every_caller_with_the_exact_status(world: World) -> None:
    wrong = wrong_statuses(world, ROUTES)
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("caller", ["revoked", "expired"])
def test_a_revoked_or_expired_token_gets_one_message(world: World, client: TestClient, caller: str) -> None:
    response = client.get("/api/v1/me", headers=world.headers(caller))
    assert response.status_code == 401
    assert response.headers["WWW-Authenticate"] == "Bearer"
    assert response.json() == {
        "error": "The token is not valid: it is wrong, expired or revoked.",
        "remedy": "Sign in and make a new one on your profile page, or ask an admin for one.",
    }


def test_a_wrong_secret_for_a_real_token_id_is_refused(world: World, client: TestClient) -> None:
    prefix, token_id, _ = world.tokens["admin"].split("_", 2)
    response = client.get("/api/v1/me", headers={"Authorization": f"Bearer {prefix}_{token_id}_{'x' * 43}"})
    assert response.status_code == 401


def test_no_token_where_one_is_needed_says_how_to_send_one(client: TestClient) -> None:
    response = client.get("/api/v1/me")
    assert response.json() == {
        "error": "This needs a token: send 'Authorization: Bearer TOKEN'.",
        "remedy": "Sign in, and make a token on your profile page.",
    }


def test_a_role_without_the_right_is_told_who_has_it(world: World, client: TestClient) -> None:
    response = client.get("/api/v1/users", headers=world.headers("viewer"))
    assert response.status_code == 403
    assert response.json() == {"error": "Your role (viewer) may not do this; it is for: admin."}


def test_a_disabled_user_is_refused_at_once(world: World, client: TestClient) -> None:
    assert client.get("/api/v1/me", headers=world.headers("blue")).status_code == 200
    access.disable_user(world.engine, "blue")
    assert client.get("/api/v1/me", headers=world.headers("blue")).status_code == 401


def test_leaderboards_can_be_closed_to_anonymous_callers(world: World) -> None:
    with client_for(world.engine, public_leaderboards=False) as client:
        assert client.get("/api/v1/tasks/open/leaderboard").status_code == 401
        assert client.get("/api/v1/tasks").status_code == 401
        assert client.get("/api/v1/tasks/open/leaderboard", headers=world.headers("viewer")).status_code == 200


def test_tokens_and_passwords_are_stored_as_argon2_hashes(world: World) -> None:
    from sqlalchemy import text

    with world.engine.connect() as connection:
        hashes = connection.execute(text("SELECT secret_hash FROM api_tokens")).scalars().all()
        passwords = (
            connection.execute(text("SELECT password_hash FROM users WHERE password_hash IS NOT NULL")).scalars().all()
        )
    secrets = [token.split("_", 2)[2] for token in world.tokens.values()]
    assert len(passwords) == 2 and all(h.startswith("$argon2id$") for h in [*hashes, *passwords])
    assert not any(secret in h for secret in secrets for h in hashes)
    assert not any(PASSWORD in p for p in passwords)
