"""The argon2 cost of passwords: RFC 9106's second choice unless ``EVALSTORE_PASSWORD_COST`` says
otherwise (the tests run at the cheapest, tests/conftest.py); each hash keeps its own cost, so a
change of setting locks nobody out, and a server with a bad setting does not start."""

from __future__ import annotations

import pytest
from sqlalchemy import Engine, text

from evalstore.config import PASSWORD_COST_ENV, password_cost
from evalstore.errors import AuthenticationError, InvalidParameterError
from evalstore.services import access
from evalstore.web.settings import ServerSettings

PASSWORD = "correct horse battery"


def _hashes(engine: Engine) -> dict[str, str]:
    with engine.connect() as connection:
        return {name: digest for name, digest in connection.execute(text("SELECT name, password_hash FROM users"))}


def test_passwords_take_the_set_cost_and_rfc_9106s_without_it(
    sqlite_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(PASSWORD_COST_ENV, "1,8,1")
    access.add_user(sqlite_engine, "cheap", role="viewer", password=PASSWORD)
    monkeypatch.delenv(PASSWORD_COST_ENV)
    assert password_cost() == (3, 65536, 4)
    access.add_user(sqlite_engine, "dear", role="viewer", password=PASSWORD)
    hashes = _hashes(sqlite_engine)
    assert hashes["cheap"].startswith("$argon2id$v=19$m=8,t=1,p=1$")
    assert hashes["dear"].startswith("$argon2id$v=19$m=65536,t=3,p=4$")
    # each checked at the cost it records, whatever the setting is now
    for setting in (None, "2,16,1"):
        if setting:
            monkeypatch.setenv(PASSWORD_COST_ENV, setting)
        for name in ("cheap", "dear"):
            assert access.sign_in(sqlite_engine, name, PASSWORD).token
            with pytest.raises(AuthenticationError):
                access.sign_in(sqlite_engine, name, PASSWORD + "!")
    access.set_password(sqlite_engine, "dear", PASSWORD)  # set again: at the cost set now
    assert _hashes(sqlite_engine)["dear"].startswith("$argon2id$v=19$m=16,t=2,p=1$")


def test_a_sign_in_makes_a_hash_of_another_cost_again_at_the_cost_set_now(
    sqlite_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After a change of setting, a user whose hash is older would sign in at the old cost while an
    unknown name costs the new one: a timing difference. The first sign-in closes it."""
    monkeypatch.setenv(PASSWORD_COST_ENV, "1,8,1")
    access.add_user(sqlite_engine, "old", role="viewer", password=PASSWORD)
    monkeypatch.setenv(PASSWORD_COST_ENV, "2,16,1")
    with pytest.raises(AuthenticationError):
        access.sign_in(sqlite_engine, "old", PASSWORD + "!")
    assert _hashes(sqlite_engine)["old"].startswith("$argon2id$v=19$m=8,t=1,p=1$")  # not on a wrong password
    assert access.sign_in(sqlite_engine, "old", PASSWORD).token
    rehashed = _hashes(sqlite_engine)["old"]
    assert rehashed.startswith("$argon2id$v=19$m=16,t=2,p=1$")
    assert access.sign_in(sqlite_engine, "old", PASSWORD).token  # the new hash holds the same password
    assert _hashes(sqlite_engine)["old"] == rehashed  # and is not made again at the same cost


ACCEPTS = "TIME,MEMORY_KIB,LANES (e.g. 3,65536,4; TIME 1-100, LANES 1-64, MEMORY_KIB from 8 x LANES to 4194304)"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (
            "3,65536",
            f"EVALSTORE_PASSWORD_COST='3,65536' is not {ACCEPTS}; unset it for the default (3,65536,4).",
        ),
        (
            "3,64M,4",
            f"EVALSTORE_PASSWORD_COST='3,64M,4' is not {ACCEPTS}; unset it for the default (3,65536,4).",
        ),
        (
            "0,65536,4",
            f"EVALSTORE_PASSWORD_COST='0,65536,4' is not {ACCEPTS}; unset it for the default (3,65536,4).",
        ),
        (
            "3,16,4",
            f"EVALSTORE_PASSWORD_COST='3,16,4' is not {ACCEPTS}; unset it for the default (3,65536,4).",
        ),
    ],
)
def test_a_bad_cost_is_refused_and_stops_the_server_at_start(
    value: str, message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(PASSWORD_COST_ENV, value)
    with pytest.raises(InvalidParameterError) as refused:
        ServerSettings.from_env()
    assert str(refused.value) == message
