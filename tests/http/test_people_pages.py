"""People in the browser: an admin's invites (single-use, expiring, revocable, kept hashed), joining
through one, password-reset links, teams of several members sharing runs and tokens, and the
profile's token shown once after a redirect."""

from __future__ import annotations

import json
import re
import threading
import time
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select, text
from typer.testing import CliRunner

from evalstore.cli import app
from evalstore.db.models import AccountLink
from evalstore.db.session import read_only
from evalstore.errors import InvalidParameterError, NotFoundError
from evalstore.services import access, people, tasks
from tests.http.conftest import PASSWORD, World, as_principal, client_for
from tests.http.test_pages import csrf_of, give_password, sign_in

NEW_PASSWORD = "a new long secret"
USED = "This invite link has been used already; each link works once. Ask the server&#39;s admin for a new one."
NOT_VALID = (
    "This invite link is not valid: check that it was copied whole, or ask the server&#39;s admin for a new one."
)


def admin_client(world: World) -> TestClient:
    give_password(world, "admin")
    client = client_for(world.engine)
    assert sign_in(client, "admin").status_code == 303
    return client


def shown_link(page: str) -> str:
    found = re.search(r'<code class="token" id="shown-link">http://testserver(/(?:join|reset)/[^<]+)</code>', page)
    assert found is not None, "the page shows no new link"
    return found.group(1)


def invite(client: TestClient, role: str, team: str = "") -> str:
    """An invite made on the people page: the link's path, as the page shows it once."""
    page = client.get("/people")
    made = client.post(
        "/people/invites", data={"role": role, "team": team, "csrf": csrf_of(page.text)}, follow_redirects=False
    )
    assert made.status_code == 303 and made.headers["location"] == "/people"
    return shown_link(client.get("/people").text)


def form_token(page: str) -> str:
    found = re.search(r'name="form_token" value="([^"]+)"', page)
    assert found is not None
    return found.group(1)


def join(client: TestClient, path: str, name: str, password: str = NEW_PASSWORD, again: str | None = None) -> Any:
    page = client.get(path)
    assert page.status_code == 200, page.text
    data = {"name": name, "password": password, "again": password if again is None else again}
    return client.post(path, data={**data, "form_token": form_token(page.text)}, follow_redirects=False)


def test_an_admin_invites_and_the_invitee_joins_signed_in(world: World) -> None:
    with admin_client(world) as admin:
        path = invite(admin, "participant", "red")
        assert path.startswith("/join/inv_")
        again = admin.get("/people")  # a reload shows the link no more, and makes none
        assert "shown-link" not in again.text
        assert len(people.list_links(world.engine)) == 1
        assert (
            '<td class="name" data-label="For"><span>participant, team red <small class="muted">made by admin</small>'
            "</span></td>"
        ) in again.text
    with client_for(world.engine) as invitee:
        page = invitee.get(path)
        assert page.status_code == 200
        assert "You were invited to this server as <strong>participant</strong> of team" in page.text
        joined = join(invitee, path, "red2")
        assert joined.status_code == 303 and joined.headers["location"] == "/profile"
        profile = invitee.get("/profile")
        assert profile.status_code == 200 and "red2 <small>participant, team red</small>" in profile.text
    with client_for(world.engine) as second:
        refused = second.get(path)
        assert refused.status_code == 404 and USED in refused.text
        posted = second.post(path, data={"name": "red3", "password": NEW_PASSWORD, "again": NEW_PASSWORD})
        assert posted.status_code == 403  # no form token: nothing is read
    [link] = people.list_links(world.engine)
    assert (link.state, link.used_by, link.created_by) == ("used", "red2", "admin")
    [user] = [u for u in access.list_users(world.engine) if u.name == "red2"]
    assert (user.role, user.team) == ("participant", "red")


def test_a_link_is_stored_as_a_hash_only(world: World) -> None:
    issued = people.create_invite(world.engine, role="assessor")
    secret = issued.code.split("_", 2)[2]
    with world.engine.connect() as connection:
        rows = connection.execute(text("SELECT * FROM account_links")).all()
    assert rows and not any(secret in str(value) for row in rows for value in row)


def test_a_wrong_unknown_or_mangled_link_gets_one_message_and_backs_off(world: World) -> None:
    issued = people.create_invite(world.engine, role="viewer")
    prefix, link_id, secret = issued.code.split("_", 2)
    wrong = [f"/join/{prefix}_{link_id}_{'x' * len(secret)}", "/join/inv_99999_abc", "/join/nonsense", "/join/inv_1_"]
    with client_for(world.engine) as client:
        for path in wrong:
            page = client.get(path)
            assert page.status_code == 404 and NOT_VALID in page.text, path
        assert client.get(f"/join/{'x' * 101}").status_code == 422  # longer than any link
        client.get(wrong[0])  # the fifth failure from this address
        slowed = client.get(issued.path)
        assert slowed.status_code == 429
        assert "Too many failed sign-ins for this account from your address; try again in 2 s." in slowed.text
    with client_for(world.engine, address="10.0.0.9") as elsewhere:  # another address is not slowed
        assert elsewhere.get(issued.path).status_code == 200


def test_an_expired_or_revoked_invite_is_refused_with_its_reason(world: World) -> None:
    expired = people.create_invite(world.engine, role="viewer", days=1e-9)
    time.sleep(0.01)
    with admin_client(world) as admin:
        path = invite(admin, "organiser")
        link_id = int(path.split("_")[1])
        page = admin.get("/people")
        asked = admin.post(f"/people/links/{link_id}/revoke", data={"csrf": csrf_of(page.text)})
        assert asked.status_code == 200 and f"Revoke invite {link_id} (organiser)?" in asked.text
        assert people.open_link(world.engine, path.split("/")[-1], "invite").role == "organiser"  # asked: not revoked
        done = admin.post(
            f"/people/links/{link_id}/revoke",
            data={"csrf": csrf_of(page.text), "confirm": "yes"},
            follow_redirects=False,
        )
        assert done.status_code == 303
    with client_for(world.engine) as client:
        gone = client.get(expired.path)
        assert gone.status_code == 404
        assert "This invite link has expired; each link works once. Ask the server&#39;s admin" in gone.text
        revoked = client.get(path)
        assert revoked.status_code == 404 and "This invite link was revoked; each link works once." in revoked.text


def test_a_refused_join_keeps_the_invite_open_and_stores_nothing(world: World) -> None:
    issued = people.create_invite(world.engine, role="participant", team="red")
    with client_for(world.engine) as client:
        taken = join(client, issued.path, "blue")
        assert taken.status_code == 409 and "The user name &#39;blue&#39; is taken; choose another." in taken.text
        assert 'value="blue"' in taken.text  # the form again, the name kept
        differ = join(client, issued.path, "newbie", again="something else")
        assert differ.status_code == 422 and "The two passwords differ; type the same password twice." in differ.text
        short = join(client, issued.path, "newbie", password="short")
        assert short.status_code == 422 and "A password needs at least 8 characters." in short.text
        bad_name = join(client, issued.path, "<b>x</b>")
        assert bad_name.status_code == 422
        assert "A user name is 1 to 64 letters, digits, &#39;.&#39;, &#39;_&#39;, &#39;@&#39; or &#39;-&#39;" in (
            bad_name.text
        )
        assert "<b>x</b>" not in bad_name.text
        assert {u.name for u in access.list_users(world.engine)} == {
            "admin", "owner", "organiser", "red", "blue", "assessor", "viewer"
        }  # fmt: skip
        assert join(client, issued.path, "newbie").status_code == 303


def test_an_invite_needs_a_known_role_and_a_participant_a_team(world: World) -> None:
    with admin_client(world) as admin:
        page = admin.get("/people")
        no_team = admin.post("/people/invites", data={"role": "participant", "team": " ", "csrf": csrf_of(page.text)})
        assert no_team.status_code == 422
        assert "A participant belongs to a team: give the invite a team." in no_team.text
        no_role = admin.post("/people/invites", data={"role": "king", "csrf": csrf_of(page.text)})
        assert no_role.status_code == 422
        assert "Unknown role &#39;king&#39;; choose one of admin, organiser, participant, assessor, viewer." in (
            no_role.text
        )
        assert admin.post("/people/invites", data={"role": "viewer"}).status_code == 403  # no CSRF token
    assert people.list_links(world.engine) == []


def test_a_reset_link_sets_a_new_password_once_and_ends_the_old_sessions(world: World) -> None:
    with client_for(world.engine) as red:
        assert sign_in(red, "red").status_code == 303
        assert red.get("/profile").status_code == 200
        with admin_client(world) as admin:
            page = admin.get("/people")
            made = admin.post("/people/users/red/reset-link", data={"csrf": csrf_of(page.text)}, follow_redirects=False)
            assert made.status_code == 303
            path = shown_link(admin.get("/people").text)
            assert path.startswith("/reset/pwr_")
            missing = admin.post("/people/users/nobody/reset-link", data={"csrf": csrf_of(page.text)})
            assert missing.status_code == 404
        with client_for(world.engine) as browser:
            form = browser.get(path)
            assert form.status_code == 200 and "A new password for red" in form.text
            done = browser.post(
                path,
                data={"password": NEW_PASSWORD, "again": NEW_PASSWORD, "form_token": form_token(form.text)},
                follow_redirects=False,
            )
            assert done.status_code == 303 and done.headers["location"] == "/profile"
            assert browser.get("/profile").status_code == 200
            again = browser.get(path)
            assert again.status_code == 404
            assert "This password-reset link has been used already; each link works once." in again.text
        ended = red.get("/profile", follow_redirects=False)  # the session before the reset ended
        assert ended.status_code == 303 and ended.headers["location"].startswith("/login")
    with client_for(world.engine) as later:
        assert sign_in(later, "red", PASSWORD).status_code == 401
        assert sign_in(later, "red", NEW_PASSWORD).status_code == 303


def test_a_new_reset_link_replaces_the_open_one(world: World) -> None:
    first = people.create_reset_link(world.engine, "viewer")
    second = people.create_reset_link(world.engine, "viewer")
    with pytest.raises(people.LinkGone, match="was revoked"):
        people.open_link(world.engine, first.code, "reset")
    assert people.open_link(world.engine, second.code, "reset").user == "viewer"
    with pytest.raises(NotFoundError, match="This invite link is not valid"):
        people.open_link(world.engine, second.code, "invite")  # a reset code is no invite


def test_teammates_share_runs_and_quota_and_an_admin_moves_members(world: World) -> None:
    with admin_client(world) as admin:
        page = admin.get("/people")
        assert '<td class="name">red</td><td>red <small class="muted">(participant)</small></td>' in page.text
        moved = admin.post("/people/users/blue/team", data={"team": "red", "csrf": csrf_of(page.text)})
        assert moved.status_code == 200
        assert '<td class="name">red</td><td>blue <small class="muted">(participant)</small>, red <small' in moved.text
        emptied = admin.post("/people/users/blue/team", data={"team": "", "csrf": csrf_of(page.text)})
        assert emptied.status_code == 422
        assert "&#39;blue&#39; is a participant: a participant belongs to a team." in emptied.text
    [red_team] = [t for t in people.list_teams(world.engine) if t.name == "red"]
    assert [m.name for m in red_team.members] == ["blue", "red"]
    blue = as_principal(world.engine, "blue")
    red = as_principal(world.engine, "red")
    assert [r["run"] for r in tasks.task_runs(world.engine, blue, "open")] == ["red-open"]
    assert tasks.quota_used(world.engine, blue, "open") == tasks.quota_used(world.engine, red, "open") == 1


def test_a_participant_manages_the_teams_tokens_and_a_reload_makes_no_second_one(world: World) -> None:
    people.set_team(world.engine, "blue", "red")
    give_password(world, "blue")
    with client_for(world.engine) as client:
        assert sign_in(client, "red").status_code == 303
        before = len(access.list_tokens(world.engine, "red"))
        page = client.get("/profile")
        made = client.post(
            "/profile/tokens", data={"expires_days": "7", "csrf": csrf_of(page.text)}, follow_redirects=False
        )
        assert made.status_code == 303 and made.headers["location"] == "/profile"
        shown = client.get("/profile")
        token = re.search(r'<code class="token">(es_[^<]+)</code>', shown.text)
        assert token is not None and access.authenticate(world.engine, token.group(1)).name == "red"
        reloaded = client.get("/profile")
        assert 'class="token"' not in reloaded.text
        assert len(access.list_tokens(world.engine, "red")) == before + 1
    token_id = int(token.group(1).split("_")[1])
    with client_for(world.engine) as teammate:
        assert sign_in(teammate, "blue").status_code == 303
        page = teammate.get("/profile")
        assert "Your team's other tokens" in page.text and f"Revoke token {token_id} of red" in page.text
        asked = teammate.post(f"/profile/tokens/{token_id}/revoke", data={"csrf": csrf_of(page.text)})
        assert asked.status_code == 200 and f"Revoke token {token_id} (of red, team red)?" in asked.text
        done = teammate.post(
            f"/profile/tokens/{token_id}/revoke",
            data={"csrf": csrf_of(page.text), "confirm": "yes"},
            follow_redirects=False,
        )
        assert done.status_code == 303
    assert access.list_tokens(world.engine, "red")[-1].revoked_at is not None
    viewer_token = access.create_token(world.engine, "viewer")
    with pytest.raises(NotFoundError):  # another role's token is nobody's team's
        access.revoke_token(world.engine, viewer_token.id, by=as_principal(world.engine, "red"))


def test_the_sign_in_page_sends_a_visitor_to_the_admin_not_a_terminal(world: World, client: TestClient) -> None:
    page = client.get("/login")
    assert "Ask the server's admin for an invite link, or for a link to choose a new password." in page.text
    assert not re.search(r"\bevalstore [a-z]|(?<![\w-])--[a-z]", page.text)  # no command to type


def test_names_and_teams_are_bounded(world: World) -> None:
    with pytest.raises(InvalidParameterError, match="A team's name is 1 to 100"):
        people.create_invite(world.engine, role="participant", team="x" * 101)
    with pytest.raises(InvalidParameterError, match="A password has at most 1024 characters."):
        people.accept_invite(
            world.engine, people.create_invite(world.engine, role="viewer").code, name="v2", password="p" * 1025
        )
    with read_only(world.engine) as session:
        assert [k.used_at for k in session.scalars(select(AccountLink))] == [None]


def test_the_same_from_a_terminal(world: World) -> None:
    url = world.engine.url.render_as_string(hide_password=False)

    def cli(*args: str) -> Any:
        return CliRunner().invoke(app, ["--database-url", url, "users", *args])

    made = cli("invite", "--role", "participant", "--team", "uni-a", "--url", "https://evals.example.org/")
    assert made.exit_code == 0, made.stderr
    assert re.fullmatch(r"https://evals\.example\.org/join/inv_1_[\w-]{43}\n", made.stdout)
    assert made.stderr.startswith("invite 1 for a participant of team 'uni-a', until ")
    assert made.stderr.endswith(" UTC (shown this once)\n")
    no_team = cli("invite", "--role", "participant")
    assert (no_team.exit_code, no_team.stderr) == (
        1,
        "Error: A participant belongs to a team: give the invite a team.\n",
    )
    reset = cli("reset-link", "red")
    assert reset.exit_code == 0 and reset.stdout.startswith("http://127.0.0.1:8000/reset/pwr_2_")
    listed = json.loads(cli("links", "--format", "json").stdout)
    assert [(k["id"], k["kind"], k["team"], k["user"], k["state"]) for k in listed] == [
        (2, "reset", None, "red", "open"),
        (1, "invite", "uni-a", None, "open"),
    ]
    assert made.stdout.strip().rsplit("_", 1)[-1] not in json.dumps(listed)
    assert cli("revoke-link", "1").exit_code == 0
    with pytest.raises(people.LinkGone, match="was revoked"):
        people.open_link(world.engine, made.stdout.strip().rsplit("/", 1)[1], "invite")
    moved = cli("set-team", "blue", "red")
    assert (moved.exit_code, moved.stderr) == (0, "'blue' is now in team 'red'\n")


def test_one_invite_posted_twice_at_once_makes_one_account(world: World) -> None:
    issued = people.create_invite(world.engine, role="viewer")
    start = threading.Barrier(2)
    outcomes: dict[str, str] = {}

    def accept(name: str) -> None:
        start.wait()
        try:
            people.accept_invite(world.engine, issued.code, name=name, password=NEW_PASSWORD)
            outcomes[name] = "joined"
        except people.LinkGone as gone:
            outcomes[name] = gone.state

    threads = [threading.Thread(target=accept, args=(name,)) for name in ("twin-a", "twin-b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert sorted(outcomes.values()) == ["joined", "used"]
    names = {u.name for u in access.list_users(world.engine)}
    assert len(names & {"twin-a", "twin-b"}) == 1  # the refused one stored nothing


def test_open_sign_up_waits_for_an_admins_approval(world: World) -> None:
    with client_for(world.engine) as closed:
        refused = closed.get("/sign-up")
        assert refused.status_code == 404
        assert "This server has no sign-up: ask the server&#39;s admin for an invite link." in refused.text
        assert 'href="/sign-up"' not in closed.get("/login").text
    with client_for(world.engine, open_sign_up=True) as visitor:
        assert 'href="/sign-up"' in visitor.get("/login").text
        page = visitor.get("/sign-up")
        data = {"name": "newbie", "team": "uni-b", "password": NEW_PASSWORD, "again": NEW_PASSWORD}
        assert visitor.post("/sign-up", data=data).status_code == 403  # no form token
        asked = visitor.post("/sign-up", data={**data, "form_token": form_token(page.text)}, follow_redirects=False)
        assert asked.status_code == 303 and asked.headers["location"] == "/sign-up?asked=newbie"
        assert "Your request for the account newbie is with the server" in visitor.get(asked.headers["location"]).text
        page = visitor.get("/sign-up")  # each page has its form token
        again = visitor.post("/sign-up", data={**data, "form_token": form_token(page.text)})
        assert again.status_code == 409 and "The user name &#39;newbie&#39; is taken; choose another." in again.text
        assert sign_in(visitor, "newbie", NEW_PASSWORD).status_code == 401  # not yet approved
    assert [(r.name, r.team) for r in people.list_requests(world.engine)] == [("newbie", "uni-b")]
    with admin_client(world) as admin:
        page = admin.get("/people")
        assert "Asking for an account" in page.text and 'aria-label="Approve newbie"' in page.text
        no_team = admin.post(
            "/people/requests/newbie/approve", data={"role": "participant", "team": "", "csrf": csrf_of(page.text)}
        )
        assert no_team.status_code == 422 and "A participant belongs to a team: give them a team." in no_team.text
        approved = admin.post(
            "/people/requests/newbie/approve",
            data={"role": "participant", "team": "uni-b", "csrf": csrf_of(page.text)},
            follow_redirects=False,
        )
        assert approved.status_code == 303
    with client_for(world.engine) as newbie:
        assert sign_in(newbie, "newbie", NEW_PASSWORD).status_code == 303
        assert "newbie <small>participant, team uni-b</small>" in newbie.get("/profile").text
    assert people.list_requests(world.engine) == []


def test_an_admin_turns_a_request_down_after_confirming(world: World) -> None:
    people.request_account(world.engine, name="spammer", password=NEW_PASSWORD)
    with admin_client(world) as admin:
        page = admin.get("/people")
        asked = admin.post("/people/requests/spammer/reject", data={"csrf": csrf_of(page.text)})
        assert asked.status_code == 200 and "Turn down spammer&#39;s request?" in asked.text
        assert [r.name for r in people.list_requests(world.engine)] == ["spammer"]
        done = admin.post(
            "/people/requests/spammer/reject",
            data={"csrf": csrf_of(page.text), "confirm": "yes"},
            follow_redirects=False,
        )
        assert done.status_code == 303
    assert people.list_requests(world.engine) == []
    assert "spammer" not in {u.name for u in access.list_users(world.engine)}


def test_sign_up_is_bounded_per_address(world: World) -> None:
    with client_for(world.engine, open_sign_up=True, tokens_per_hour=1) as visitor:
        for name, status in (("first", 303), ("second", 429)):
            page = visitor.get("/sign-up")
            data = {"name": name, "password": NEW_PASSWORD, "again": NEW_PASSWORD, "form_token": form_token(page.text)}
            answer = visitor.post("/sign-up", data=data, follow_redirects=False)
            assert answer.status_code == status
        assert "Too many accounts asked for: at most 1 an hour; try again in 3600 s." in answer.text
    assert [r.name for r in people.list_requests(world.engine)] == ["first"]


def test_a_shown_once_cookie_of_another_session_shows_nothing(world: World) -> None:
    with client_for(world.engine) as first, client_for(world.engine) as second:
        for client in (first, second):
            assert sign_in(client, "red").status_code == 303
        page = first.get("/profile")
        made = first.post(
            "/profile/tokens", data={"expires_days": "7", "csrf": csrf_of(page.text)}, follow_redirects=False
        )
        sealed = made.cookies.get("evalstore_shown")
        assert sealed and "es_" not in sealed  # the secret is not in the cookie as it is
        second.cookies.set("evalstore_shown", sealed, path="/profile")
        other = second.get("/profile")  # another session's cookie: nothing shown, nothing broken
        assert other.status_code == 200 and 'class="token"' not in other.text
        second.cookies.set("evalstore_shown", "not base64 at all!", path="/profile")
        assert 'class="token"' not in second.get("/profile").text
        assert 'class="token"' in first.get("/profile").text
