"""Tokens and limits under attack: bounded token lifetimes over the API, write limits per user
(not per token), minting limited, malformed tokens are 401s, long sign-in fields bounded, proxy headers believed only from configured proxies."""

from __future__ import annotations

import httpx
import pytest
from fastapi.testclient import TestClient

from evalstore.cli.serve import proxy_options
from evalstore.services import access
from tests.http.conftest import World, client_for


@pytest.mark.parametrize("days", [None, 1e308, "inf", "NaN", 366, 0])
def test_api_tokens_expire_within_the_servers_maximum(world: World, client: TestClient, days: object) -> None:
    response = client.post("/api/v1/tokens", json={"expires_days": days}, headers=world.headers("red"))
    assert response.status_code == 422, response.text
    if days == 366:
        assert response.json() == {
            "error": "expires_days is at most 365 on this server; got 366.",
            "remedy": "A token that never expires is made by an admin.",
        }
    assert client.post("/api/v1/tokens", json={"expires_days": 365}, headers=world.headers("red")).status_code == 201


def test_the_write_limit_is_the_users_whatever_token_they_use(world: World) -> None:
    tokens = [access.create_token(world.engine, "red", expires_days=1).token for _ in range(4)]
    with client_for(world.engine, writes_per_minute=3) as client:
        statuses = [
            client.delete("/api/v1/runs/nope", headers={"Authorization": f"Bearer {t}"}).status_code for t in tokens
        ]
    assert statuses == [404, 404, 404, 429]  # a fourth token is not a fresh allowance


def test_minting_tokens_is_limited(world: World) -> None:
    with client_for(world.engine, tokens_per_hour=2, writes_per_minute=100) as client:
        statuses = [client.post("/api/v1/tokens", json={}, headers=world.headers("blue")).status_code for _ in range(3)]
        refused = client.post("/api/v1/tokens", json={}, headers=world.headers("blue"))
    assert statuses == [201, 201, 429]
    assert refused.json()["error"].startswith("Too many new tokens: at most 2 an hour; try again in ")


@pytest.mark.parametrize(
    "token", ["es_99999999999999999999999_x", "es_\u0661\u0662_x", "es_\u00b2_x", "es_2147483648_x", "es__x", "es_1_"]
)
def test_a_malformed_token_is_401(world: World, client: TestClient, token: str) -> None:
    response = client.get("/api/v1/me", headers={"Authorization": f"Bearer {token}".encode()})
    assert response.status_code == 401
    assert response.json()["error"].startswith("The token is not valid")


def test_long_sign_in_fields_are_refused_before_the_database(world: World, client: TestClient) -> None:
    # a body past 64 KiB without credentials is not even read (web/sign_in_first.py): refused as empty
    response = client.post("/api/v1/sessions", json={"name": "x" * 2_000_000, "password": "p"})
    assert response.status_code == 422
    response = client.post("/api/v1/sessions", json={"name": "x" * 201, "password": "p"})
    assert response.status_code == 422
    assert "name: String should have at most 200 characters" in response.json()["error"]
    response = client.post("/api/v1/sessions", json={"name": "red", "password": "p" * 1025})
    assert response.status_code == 422 and "at most 1024 characters" in response.json()["error"]
    assert access.audit_log(world.engine, actions=["sessions.refused"]) == []
    with pytest.raises(Exception, match="A user name has at most 200 characters and a password at most 1024."):
        access.sign_in(world.engine, "x" * 201, "p")


def test_proxy_headers_are_believed_only_from_configured_proxies(world: World) -> None:
    assert proxy_options("") == {"proxy_headers": False, "forwarded_allow_ips": None}
    assert proxy_options(" 10.0.0.1 ") == {"proxy_headers": True, "forwarded_allow_ips": "10.0.0.1"}


def test_rotating_x_forwarded_for_does_not_escape_the_address_limit(world: World) -> None:
    """On a real socket from 127.0.0.1 (which uvicorn believes by default), served as
    'evalstore serve' serves: the sign-in limit counts the peer, whatever header it sends."""
    import threading
    import time

    import uvicorn

    from evalstore.web.app import create_app
    from evalstore.web.settings import ServerSettings

    url = world.engine.url.render_as_string(hide_password=False)
    app = create_app(ServerSettings(database_url=url, writes_per_minute=3, secure_cookies=False))
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", **proxy_options("")))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        statuses = [
            httpx.post(
                f"http://127.0.0.1:{port}/api/v1/sessions",
                json={"name": f"nobody{i}", "password": "x"},
                headers={"X-Forwarded-For": f"203.0.113.{i}"},
            ).status_code
            for i in range(4)
        ]
    finally:
        server.should_exit = True
        thread.join(timeout=10)
    assert statuses == [401, 401, 401, 429]
