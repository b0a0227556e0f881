"""Sign-in under attack: failures back off per account *and client address* (an attacker
elsewhere cannot lock the owner out, as five failures from anywhere did), with an account-wide
ceiling past which an address gets one guess; the profile's current-password check backs off the
same way; argon2 runs in a few slots, and a sign-in beyond them is refused at once with
Retry-After instead of queueing (16 anonymous clients made public pages 20-30 times slower)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from evalstore.web.app import create_app
from evalstore.web.auth import Server
from evalstore.web.limits import SignInBackoff
from evalstore.web.settings import ServerSettings
from tests.http.conftest import PASSWORD, World
from tests.http.test_pages import csrf_of, sign_in

BACKING_OFF = "Too many failed sign-ins for this account from your address; try again in 2 s."
BUSY = "The server is checking too many passwords at once; try again in 1 s."


@contextmanager
def one_app(world: World) -> Iterator[FastAPI]:
    """One server (one back-off, one set of password slots) for clients at several addresses."""
    url = world.engine.url.render_as_string(hide_password=False)
    app = create_app(ServerSettings(database_url=url, secure_cookies=False, writes_per_minute=1000))
    with TestClient(app):  # its lifespan: the app's engine is closed after the block
        yield app


def at(app: FastAPI, address: str) -> TestClient:
    return TestClient(app, client=(address, 50000))


def test_failures_from_one_address_do_not_lock_the_owner_out(world: World) -> None:
    with one_app(world) as app:
        attacker, owner = at(app, "203.0.113.9"), at(app, "198.51.100.7")
        statuses = []
        for i in range(7):
            response = attacker.post("/api/v1/sessions", json={"name": "red", "password": f"guess {i}"})
            statuses.append(response.status_code)
        assert statuses == [401, 401, 401, 401, 401, 429, 429]
        assert response.json() == {"error": BACKING_OFF} and response.headers["retry-after"] == "2"
        # the right password, from the attacker's address, waits too ...
        assert attacker.post("/api/v1/sessions", json={"name": "red", "password": PASSWORD}).status_code == 429
        # ... but from the owner's it gets in, over the API and on the sign-in page
        assert owner.post("/api/v1/sessions", json={"name": "red", "password": PASSWORD}).status_code == 201
        assert sign_in(owner, "red").status_code == 303
        page = sign_in(attacker, "red")
        assert page.status_code == 429 and BACKING_OFF in page.text and page.headers["retry-after"] == "2"


def test_the_accounts_ceiling_gives_each_further_address_one_guess(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [1000.0]
    monkeypatch.setattr("evalstore.web.limits.time.monotonic", lambda: now[0])
    backoff = SignInBackoff(free=3, longest=10.0, ceiling=4)
    for address in ("a", "b", "c", "d"):  # one failure each: under the ceiling, each has two more
        backoff.check("olga", address)
        backoff.failed("olga", address)
    with pytest.raises(Exception, match="try again in 2 s"):
        backoff.check("olga", "a")  # past the ceiling: an address that failed once waits
    backoff.check("olga", "e")  # a new address gets its one guess
    backoff.failed("olga", "e")
    with pytest.raises(
        Exception, match="^Too many failed sign-ins for this account from your address; try again in 2 s.$"
    ):
        backoff.check("olga", "e")  # past the ceiling: one guess an address
    backoff.check("olga", "owner")  # an address that has not failed gets in
    backoff.check("ann", "e")  # another account is not held back
    now[0] += 11  # the account's failures are forgotten after `longest` without one
    backoff.check("olga", "e")


def test_the_backoff_doubles_is_cleared_by_a_success_and_its_memory_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [1000.0]
    monkeypatch.setattr("evalstore.web.limits.time.monotonic", lambda: now[0])
    backoff = SignInBackoff(free=2, longest=10.0, size=2)
    waits = []
    for _ in range(6):
        backoff.failed("a", "x")
        try:
            backoff.check("a", "x")
            waits.append(0)
        except Exception as refused:
            waits.append(refused.retry_after)  # type: ignore[attr-defined]
    assert waits == [0, 2, 4, 8, 10, 10]
    now[0] += 10
    backoff.check("a", "x")
    backoff.succeeded("a", "x")
    backoff.failed("a", "x")
    backoff.check("a", "x")  # counted afresh after the success
    backoff.failed("b", "x"), backoff.failed("c", "x"), backoff.failed("d", "x")
    assert len(backoff._pairs) == 2 and len(backoff._accounts) == 2  # bounded memory


def test_the_profiles_current_password_check_backs_off(world: World) -> None:
    with one_app(world) as app:
        client = at(app, "203.0.113.9")
        assert sign_in(client, "red").status_code == 303
        csrf = csrf_of(client.get("/profile").text)

        def change(current: str) -> object:
            form = {"current": current, "new": "another secret", "again": "another secret", "csrf": csrf}
            return client.post("/profile/password", data=form, follow_redirects=False)

        wrong = [change(f"guess {i}") for i in range(6)]
        assert [r.status_code for r in wrong] == [400, 400, 400, 400, 400, 429]  # type: ignore[attr-defined]
        assert "The current password is wrong; nothing was changed." in wrong[0].text  # type: ignore[attr-defined]
        assert BACKING_OFF in wrong[-1].text and wrong[-1].headers["retry-after"] == "2"  # type: ignore[attr-defined]
        assert change(PASSWORD).status_code == 429  # type: ignore[attr-defined]
        # the sign-in page shares the back-off: the same guesses cannot go on there
        assert sign_in(client, "red").status_code == 429


def test_a_sign_in_beyond_the_password_slots_is_refused_at_once(world: World) -> None:
    with one_app(world) as app:
        shared = app.state.server
        assert isinstance(shared, Server)
        slots = shared.context.password_slots
        taken = 0
        while slots.acquire(blocking=False):  # every slot busy, as under a flood of sign-ins
            taken += 1
        assert taken == 2  # the default: EVALSTORE_PASSWORD_CHECKS
        client = at(app, "198.51.100.7")
        started = time.monotonic()
        refused = client.post("/api/v1/sessions", json={"name": "red", "password": PASSWORD})
        page = sign_in(client, "red")
        took = time.monotonic() - started
        for _ in range(taken):
            slots.release()
        assert refused.status_code == 503 and refused.json() == {"error": BUSY}
        assert refused.headers["retry-after"] == "1"
        assert page.status_code == 503 and BUSY in page.text and page.headers["retry-after"] == "1"
        # refused after a short wait: had they queued for a slot, they would have waited for the slots
        # this test holds until after them (the bound leaves room for a loaded machine)
        assert took < 10.0
        # a refusal for being busy is no failure: the back-off has not counted it
        assert shared.sign_ins._pairs == {}
        assert client.post("/api/v1/sessions", json={"name": "red", "password": PASSWORD}).status_code == 201


def test_the_number_of_password_slots_is_a_setting(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVALSTORE_PASSWORD_CHECKS", "0")
    with pytest.raises(
        Exception,
        match=r"^EVALSTORE_PASSWORD_CHECKS='0' is not a whole number from 1 to 64; unset it for the default \(2\)\.$",
    ):
        ServerSettings.from_env()
    monkeypatch.setenv("EVALSTORE_PASSWORD_CHECKS", "1")
    with one_app(world) as app:
        slots = app.state.server.context.password_slots
        assert slots.acquire(blocking=False) and not slots.acquire(blocking=False)
        slots.release()
