"""Credentials before the body: a request that says it carries more than the small limit before
sign-in is answered from its headers when its credentials are missing or wrong, on a real socket,
while the client has sent 1 KiB of the 200 MiB it announced (before: the server read and spooled
the body first, so the answer came only after the whole upload). The answers are today's, word
for word; valid credentials still upload as before."""

from __future__ import annotations

import http.client
import json
import socket
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest

from evalstore.services import access, tasks
from evalstore.web.app import create_app
from evalstore.web.auth import csrf_token
from evalstore.web.settings import ServerSettings
from tests.http.conftest import PASSWORD, World, client_for, run_text, serving

ANNOUNCED = 200 * 2**20
NEEDS_A_TOKEN = {
    "error": "This needs a token: send 'Authorization: Bearer TOKEN'.",
    "remedy": "Sign in, and make a token on your profile page.",
}
CSRF_REFUSAL = "This form&#39;s CSRF token is missing or wrong; reload the page and try again."


@pytest.fixture
def base(world: World) -> Iterator[str]:
    url = world.engine.url.render_as_string(hide_password=False)
    settings = ServerSettings(database_url=url, secure_cookies=False, writes_per_minute=1000)
    with serving(create_app(settings)) as served:
        yield served


def _partial_post(
    base: str, path: str, headers: dict[str, str], *, chunked: bool = False
) -> tuple[int, dict[str, str], str]:
    """POST announcing 200 MiB (or chunked), send 1 KiB of it, and read the answer: a server that
    waits for the rest times out here (5 s)."""
    where = urlsplit(base)
    lines = [f"POST {path} HTTP/1.1", f"Host: {where.netloc}", "Content-Type: multipart/form-data; boundary=x"]
    lines.append("Transfer-Encoding: chunked" if chunked else f"Content-Length: {ANNOUNCED}")
    lines += [f"{name}: {value}" for name, value in headers.items()]
    body = b"--x\r\n" + b"a" * 1019
    if chunked:
        body = f"{len(body):x}\r\n".encode() + body + b"\r\n"
    with socket.create_connection((where.hostname, where.port), timeout=5) as sock:
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + body)
        response = http.client.HTTPResponse(sock)
        response.begin()
        return response.status, dict(response.getheaders()), response.read().decode()


def _session(world: World, user: str = "red") -> str:
    return access.sign_in(world.engine, user, PASSWORD).token


def test_an_upload_without_a_token_is_refused_unread(world: World, base: str) -> None:
    status, _, body = _partial_post(base, "/api/v1/tasks/open/runs", {})
    assert status == 401
    assert json.loads(body) == NEEDS_A_TOKEN


def test_a_chunked_upload_without_a_token_is_refused_unread(world: World, base: str) -> None:
    status, _, body = _partial_post(base, "/api/v1/tasks/open/runs", {}, chunked=True)
    assert status == 401
    assert json.loads(body) == NEEDS_A_TOKEN


def test_an_upload_with_a_revoked_token_gets_the_tokens_refusal_unread(world: World, base: str) -> None:
    with client_for(world.engine) as client:  # today's answer, to a small body
        small = client.post("/api/v1/tasks/open/runs", headers=world.headers("revoked"), data={"name": "x"})
    assert small.status_code == 401
    status, _, body = _partial_post(base, "/api/v1/tasks/open/runs", world.headers("revoked"))
    assert status == 401
    assert json.loads(body) == small.json()


def test_a_page_upload_without_a_session_is_sent_to_sign_in_unread(world: World, base: str) -> None:
    status, headers, _ = _partial_post(base, "/tasks/open/submit", {})
    assert status == 303
    assert headers["location"] == "/login?next=%2Ftasks%2Fopen%2Fsubmit"


def test_a_page_upload_without_its_csrf_token_is_refused_unread(world: World, base: str) -> None:
    cookie = f"evalstore_session={_session(world)}"
    status, _, body = _partial_post(base, "/tasks/open/submit", {"Cookie": cookie})
    assert status == 403
    assert CSRF_REFUSAL in body


def test_a_page_upload_with_a_wrong_first_field_token_is_refused_unread(world: World, base: str) -> None:
    """The first field is read ahead, and no further: a wrong token there is refused while the
    client has sent 1 KiB of the 200 MiB it announced."""
    cookie = f"evalstore_session={_session(world)}"
    where = urlsplit(base)
    first = b'--x\r\nContent-Disposition: form-data; name="csrf"\r\n\r\n' + b"0" * 64 + b"\r\n--x\r\n"
    head = (
        f"POST /tasks/open/submit HTTP/1.1\r\nHost: {where.netloc}\r\nCookie: {cookie}\r\n"
        f"Content-Type: multipart/form-data; boundary=x\r\nContent-Length: {ANNOUNCED}\r\n\r\n"
    )
    with socket.create_connection((where.hostname, where.port), timeout=5) as sock:
        sock.sendall(head.encode() + first + b"a" * (1024 - len(first)))
        response = http.client.HTTPResponse(sock)
        response.begin()
        assert response.status == 403
        assert CSRF_REFUSAL in response.read().decode()


def test_a_large_form_before_sign_in_is_not_read(world: World, base: str) -> None:
    status, _, body = _partial_post(base, "/login", {})
    assert status == 403
    assert "This sign-in form has expired or was not sent by this site; reload it and try again." in body


def _large_run() -> bytes:
    """A valid run over 64 KiB (the limit before sign-in): the sample run, its lines padded with
    trailing blanks trec_eval ignores."""
    text = "".join(line.ljust(200) + "\n" for line in run_text(tag="big").splitlines())
    assert len(text) > 64 * 2**10
    return text.encode()


def test_valid_credentials_still_upload_more_than_the_limit_before_sign_in(world: World) -> None:
    session = _session(world)
    with client_for(world.engine) as client:
        by_token = client.post(
            "/api/v1/tasks/open/runs",
            headers=world.headers("red"),
            data={"name": "big-by-token"},
            files={"file": ("run.txt", _large_run())},
        )
        assert by_token.status_code == 201, by_token.text
        client.cookies.set("evalstore_session", session)
        csrf = csrf_token(session)
        by_form = client.post(  # as the page's form sends it: the token its first field
            "/tasks/open/submit",
            data={"csrf": csrf, "name": "big-by-form", "run_type": "automatic"},
            files={"file": ("run2.txt", _large_run().replace(b" big", b" bg2"))},
            follow_redirects=False,
        )
        assert by_form.status_code == 303, by_form.text
        by_header = client.post(  # a script's way
            "/tasks/open/submit",
            headers={"X-CSRF-Token": csrf},
            data={"name": "big-by-header", "run_type": "automatic", "csrf": csrf},
            files={"file": ("run4.txt", _large_run().replace(b" big", b" bg4"))},
            follow_redirects=False,
        )
        assert by_header.status_code == 303, by_header.text
        for refused in (
            # the token, but not first: the body after the first field is not read before sign-in
            {"url": "/tasks/open/submit", "data": {"name": "big-late", "run_type": "automatic", "csrf": csrf}},
            # the token in the address only: never read there (logs and Referer headers would carry it)
            {"url": f"/tasks/open/submit?csrf={csrf}", "data": {"name": "big-by-query", "run_type": "automatic"}},
            # another session's token first
            {"url": "/tasks/open/submit", "data": {"csrf": "0" * 64, "name": "big-wrong", "run_type": "automatic"}},
        ):
            unsent = client.post(**refused, files={"file": ("run3.txt", _large_run())}, follow_redirects=False)
            assert unsent.status_code == 403, refused
            assert CSRF_REFUSAL in unsent.text
    names = {
        r["run"]
        for r in tasks.task_runs(world.engine, access.authenticate(world.engine, session, purpose="session"), "open")
    }
    assert {"big-by-form", "big-by-header"} <= names and not names & {"big-late", "big-by-query", "big-wrong"}
