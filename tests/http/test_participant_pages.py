"""A participant in the browser: submit a run to a task (a bad file's error inline, the form kept),
follow the team's runs (state, queue position, quota), withdraw one; everyone's profile page:
their own tokens and their password."""

from __future__ import annotations

import re

from fastapi.testclient import TestClient

from evalstore.services import access, tasks
from tests.http.conftest import PASSWORD, World, as_principal, client_for, run_text
from tests.http.test_pages import csrf_of, sign_in


def _submit(client: TestClient, task: str, name: str, content: str, *, csrf: str, description: str = "") -> object:
    return client.post(
        f"/tasks/{task}/submit",
        data={"name": name, "run_type": "manual", "description": description, "csrf": csrf},
        files={"file": ("mine.txt", content.encode(), "text/plain")},
        follow_redirects=False,
    )


def test_a_participant_submits_follows_and_withdraws_runs_in_the_browser(world: World) -> None:
    tasks.create_task(world.engine, "capped", qrels_name="sample", owner="owner", max_runs_per_team=2)
    with client_for(world.engine) as client:
        assert sign_in(client, "red").status_code == 303
        page = client.get("/tasks/capped/submit")
        assert page.status_code == 200 and "No runs submitted yet." in page.text
        assert "0 of 2 runs used by team red" in page.text

        bad = _submit(
            client,
            "capped",
            "red-bad",
            "301 Q0 a 1 1.0 x\n301 Q0 b 2 0.5\n",
            csrf=csrf_of(page.text),
            description="my first try",
        )
        assert bad.status_code == 422
        assert "mine.txt:2: expected 6 columns (qid Q0 docno rank score tag), found 5" in bad.text
        assert 'value="red-bad"' in bad.text and ">my first try</textarea>" in bad.text  # the form is kept
        assert "<option selected>manual</option>" in bad.text
        assert tasks.task_runs(world.engine, as_principal(world.engine, "red"), "capped") == []  # nothing stored

        good = _submit(client, "capped", "red-good", run_text(tag="good"), csrf=csrf_of(bad.text))
        assert good.status_code == 303 and good.headers["location"] == "/tasks/capped/submit?submitted=red-good"
        page = client.get("/tasks/capped/submit")
        assert "1 of 2 runs used by team red" in page.text
        row = re.search(r'<a href="/runs/red-good">red-good</a>.*?</tr>', page.text, re.S)
        assert row is not None and "queued" in row.group(0)
        assert re.search(r'<td class="num"[^>]*>\d+</td>', row.group(0))  # its place in the queue

        withdrawn = client.post(
            "/runs/red-good/withdraw",
            data={"csrf": csrf_of(page.text), "task": "capped", "confirm": "yes"},
            follow_redirects=False,
        )
        assert withdrawn.status_code == 303 and withdrawn.headers["location"] == "/tasks/capped/submit"
        assert "red-good" not in client.get("/tasks/capped/submit").text


def test_a_participant_sees_only_their_teams_runs(world: World) -> None:
    world.submit("open", "blue-run", team_user="blue", evaluate=False)
    with client_for(world.engine) as client:
        page = client.get("/tasks/open/submit", headers=world.headers("red"))
        assert "red-open" in page.text and "blue-run" not in page.text
        organiser = client.get("/tasks/open/submit", headers=world.headers("owner"))
        assert "red-open" in organiser.text and "blue-run" in organiser.text  # the task's organiser: every team


def test_the_leaderboard_links_to_the_submission_page(world: World) -> None:
    with client_for(world.engine) as client:
        assert (
            'href="/tasks/open/submit">Your runs and submitting</a>'
            in client.get("/tasks/open", headers=world.headers("red")).text
        )
        assert "/tasks/open/submit" not in client.get("/tasks/open", headers=world.headers("viewer")).text


def test_the_profile_makes_and_revokes_own_tokens_and_changes_the_password(world: World) -> None:
    with client_for(world.engine) as client:
        assert sign_in(client, "red").status_code == 303
        page = client.get("/profile")
        assert page.status_code == 200 and "red" in page.text
        made = client.post("/profile/tokens", data={"expires_days": "7", "csrf": csrf_of(page.text)})
        assert made.status_code == 200
        token = re.search(r'<code class="token">(es_[^<]+)</code>', made.text)
        assert token is not None
        assert access.authenticate(world.engine, token.group(1)).name == "red"  # it works for the API
        token_id = int(token.group(1).split("_")[1])
        too_long = client.post("/profile/tokens", data={"expires_days": "1e308", "csrf": csrf_of(made.text)})
        assert too_long.status_code == 400 and "A token lives from 1 to 365 days; got 1e308." in too_long.text
        revoked = client.post(
            f"/profile/tokens/{token_id}/revoke",
            data={"csrf": csrf_of(made.text), "confirm": "yes"},
            follow_redirects=False,
        )
        assert revoked.status_code == 303
        blue_token = access.create_token(world.engine, "blue", expires_days=1)
        for confirm in ("", "yes"):  # neither asked about nor revoked
            others = client.post(
                f"/profile/tokens/{blue_token.id}/revoke", data={"csrf": csrf_of(made.text), "confirm": confirm}
            )
            assert others.status_code == 404  # not theirs to revoke
        assert access.authenticate(world.engine, blue_token.token).name == "blue"

        page = client.get("/profile")
        wrong = client.post(
            "/profile/password",
            data={"current": "not it", "new": "another secret", "again": "another secret", "csrf": csrf_of(page.text)},
        )
        assert wrong.status_code == 400 and "The current password is wrong; nothing was changed." in wrong.text
        differ = client.post(
            "/profile/password",
            data={"current": PASSWORD, "new": "another secret", "again": "other secret", "csrf": csrf_of(page.text)},
        )
        assert differ.status_code == 400 and "The two new passwords differ; nothing was changed." in differ.text
        changed = client.post(
            "/profile/password",
            data={"current": PASSWORD, "new": "another secret", "again": "another secret", "csrf": csrf_of(page.text)},
            follow_redirects=False,
        )
        assert changed.status_code == 303 and changed.headers["location"] == "/login?next=/profile"
        assert client.get("/profile", follow_redirects=False).status_code == 303  # the session ended
        assert sign_in(client, "red", "another secret").status_code == 303


def test_an_error_page_keeps_the_signed_in_header(world: World) -> None:
    with client_for(world.engine) as client:
        assert sign_in(client, "red").status_code == 303
        missing = client.get("/tasks/no-such-task")
        assert missing.status_code == 404
        assert 'href="/profile">red' in missing.text and ">Sign in</a>" not in missing.text
