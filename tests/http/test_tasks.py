"""Tasks over HTTP: hidden scores never leak, bad uploads store nothing, the submission rules (window,
quota, teams, rate) hold, browser sessions need their CSRF token, assessors judge their pools."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text

from evalstore.services import access, pools, tasks
from evalstore.services.kinds import ranking
from evalstore.web.app import create_app
from evalstore.web.settings import ServerSettings
from tests.http.conftest import PASSWORD, World, as_principal, client_for, run_text, serving

HIDDEN = "hidden until the organisers release the task"


def counts(world: World) -> dict[str, int]:
    with world.engine.connect() as connection:
        return {
            table: connection.execute(text(f"SELECT count(*) FROM {table}")).scalar_one()
            for table in ("runs", "submissions", "evaluations", "run_rows", "run_topics")
        }


def upload(
    client: TestClient,
    world: World,
    caller: str,
    filename: str,
    content: bytes,
    *,
    task: str = "open",
    name: str | None = None,
    **data: Any,
) -> httpx.Response:
    return client.post(
        f"/api/v1/tasks/{task}/runs",
        headers=world.headers(caller),
        files={"file": (filename, content)},
        data={"name": name or filename.split(".")[0], **data},
    )


# --- hidden qrels never leak --------------------------------------------------------------------


def secret_values(world: World) -> list[str]:
    """The hidden task's numbers as JSON would print them: every aggregate and per-topic value."""
    stored = ranking.results(world.engine, qrels_name="sample", run_name="red-secret")
    values = [*stored.aggregates.values(), *stored.frame.select_dtypes("number").to_numpy().ravel()]
    return sorted({json.dumps(float(v)) for v in values if v == v and v not in (0.0, 1.0)}, key=len, reverse=True)


SECRET_READS = [
    "/api/v1/tasks/secret/leaderboard",
    "/api/v1/tasks/secret/leaderboard?measure=AP",
    "/api/v1/tasks/secret/runs",
    "/api/v1/runs/red-secret",
    "/api/v1/runs/red-secret/results",
    "/api/v1/runs/red-secret/results?per_query=true&measure=AP",
    "/api/v1/tasks/secret",
    "/api/v1/qrels/sample/export",
    "/api/v1/tasks",
    "/api/v1/jobs",
    "/api/v1/audit",
]


@pytest.mark.parametrize("caller", ["anon", "viewer", "red", "blue", "organiser", "assessor"])
def test_no_route_shows_a_hidden_tasks_scores_before_release(world: World, client: TestClient, caller: str) -> None:
    values = secret_values(world)
    reads = [*SECRET_READS, f"/api/v1/jobs/{world.jobs['secret']}"]
    for path in reads:
        body = client.get(path, headers=world.headers(caller)).text
        leaked = [v for v in values if v in body]
        assert not leaked, f"{path} as {caller} shows {leaked[:3]}"
        assert "CR93E" not in body, f"{path} as {caller} shows the qrels' documents"


def test_the_team_sees_its_run_evaluated_and_its_scores_hidden_then_released(world: World, client: TestClient) -> None:
    results = client.get("/api/v1/runs/red-secret/results?per_query=true", headers=world.headers("red"))
    assert results.json() == {"run": "red-secret", "task": "secret", "team": "red", "state": "done", "scores": HIDDEN}
    board = client.get("/api/v1/tasks/secret/leaderboard", headers=world.headers("red")).json()
    assert board == {"task": "secret", "scores": HIDDEN, "rows": [], "notes": []}
    owner_view = client.get("/api/v1/tasks/secret/leaderboard", headers=world.headers("owner")).json()
    assert [row["run"] for row in owner_view["rows"]] == ["red-secret"]

    assert client.post("/api/v1/tasks/secret/release", headers=world.headers("owner")).status_code == 200
    released = client.get("/api/v1/runs/red-secret/results?per_query=true", headers=world.headers("red")).json()
    stored = ranking.results(world.engine, qrels_name="sample", run_name="red-secret")
    assert released["aggregates"]["AP"] == stored.aggregates["AP"]
    assert released["per_query"]["302"]["P@10"] == stored.frame.loc["302", "P@10"]
    public = client.get("/api/v1/tasks/secret/leaderboard").json()
    assert public["rows"][0]["scores"]["AP"]["mean"] == pytest.approx(stored.aggregates["AP"], abs=1e-12)


def test_a_failed_jobs_error_is_hidden_from_the_team_until_release(world: World, client: TestClient) -> None:
    job = world.jobs["secret"]
    with world.engine.begin() as connection:
        connection.execute(
            text(
                "UPDATE evaluations SET state = 'failed', error = 'topic 302 has 7 relevant', "
                "mlflow_run_id = 'abc' WHERE id = :id"
            ),
            {"id": job},
        )
    team_view = client.get(f"/api/v1/jobs/{job}", headers=world.headers("red")).json()
    assert team_view["state"] == "failed"
    assert team_view["error"] == HIDDEN
    assert "mlflow_run_id" not in team_view
    owner_view = client.get(f"/api/v1/jobs/{job}", headers=world.headers("owner")).json()
    assert (owner_view["error"], owner_view["mlflow_run_id"]) == ("topic 302 has 7 relevant", "abc")


def test_the_leaderboard_gives_the_numbers_of_evalstore_leaderboard(world: World, client: TestClient) -> None:
    world.submit("open", "blue-open", team_user="blue", text=run_text(tag="b", shift=3))
    api = client.get("/api/v1/tasks/open/leaderboard?measure=AP&measure=P@10").json()
    cli = ranking.leaderboard(
        world.engine, qrels_name="sample", measures=["AP", "P@10"], runs={"red-open", "blue-open"}
    )
    assert [r["run"] for r in api["rows"]] == [r.run for r in cli.rows]
    assert [r["team"] for r in api["rows"]] == [{"red-open": "red", "blue-open": "blue"}[r.run] for r in cli.rows]
    for row, expected in zip(api["rows"], cli.rows, strict=True):
        assert {m: tuple(v.values()) for m, v in row["scores"].items()} == expected.values


def test_a_server_answers_from_a_task_state_at_most_a_second_old(
    world: World, client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tasks.boards, "BOARD_FRESHNESS", 60.0)
    assert len(client.get("/api/v1/tasks/open/leaderboard").json()["rows"]) == 1
    world.submit("open", "blue-late", team_user="blue", text=run_text(tag="b", shift=2))
    assert len(client.get("/api/v1/tasks/open/leaderboard").json()["rows"]) == 1  # within the window
    monkeypatch.setattr(tasks.boards, "BOARD_FRESHNESS", 0.0)
    assert len(client.get("/api/v1/tasks/open/leaderboard").json()["rows"]) == 2


# --- bad uploads store nothing ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("filename", "content", "message"),
    [
        (
            "bad.txt",
            b"301 Q0 a 1 1.0 x\n301 Q0 b 2 0.5\n",
            "bad.txt:2: expected 6 columns (qid Q0 docno rank score tag), found 5",
        ),
        (
            "dup.txt",
            b"301 Q0 a 1 1.0 x\n301 Q0 a 2 0.5 x\n",
            "dup.txt:2: docno 'a' appears twice in topic '301' (first at line 1); trec_eval refuses duplicate documents, "
            "so remove one of them",
        ),
        (
            "latin.txt",
            "301 Q0 d\xe9 1 1.0 x\n".encode("latin-1"),
            "latin.txt:1: bytes that are not UTF-8 at column 9; convert the file to UTF-8 (e.g. iconv -f latin1 -t utf-8)",
        ),
        (
            "empty.txt",
            b"",
            "empty.txt: the file has no run lines; expected lines of the form 'qid Q0 docno rank score tag'",
        ),
        ("score.txt", b"301 Q0 a 1 high x\n", "score.txt:1: score 'high' is not a number"),
    ],
)
def test_a_bad_upload_is_refused_with_file_line_and_stores_nothing(
    world: World, client: TestClient, filename: str, content: bytes, message: str
) -> None:
    before = counts(world)
    response = upload(client, world, "red", filename, content)
    assert response.status_code == 422
    assert response.json() == {"error": message, "errors": [message]}
    assert counts(world) == before


def test_an_upload_over_the_limit_is_refused_with_413(world: World) -> None:
    with client_for(world.engine, max_upload_bytes=2**20) as client:
        before = counts(world)
        response = upload(client, world, "red", "big.txt", run_text().encode() * 30)
        assert response.status_code == 413
        assert response.json() == {
            "error": "The upload is larger than this server's limit of 1 MiB; compress it (.gz) or split it."
        }
        assert counts(world) == before


def test_a_chunked_upload_is_cut_off_at_the_limit(world: World) -> None:
    """No Content-Length to refuse up front: the server stops reading once its limit (256 MiB by
    default; 1 MiB here: the same cut, without sending 256 MiB through a socket) is passed."""
    limit = 2**20
    before = counts(world)

    def body() -> Any:
        yield b'--b\r\nContent-Disposition: form-data; name="file"; filename="x.txt"\r\n\r\n'
        chunk = b"301 Q0 doc 1 1.0 x\n" * 5_000
        for _ in range(limit // len(chunk) + 2):
            yield chunk

    url = world.engine.url.render_as_string(hide_password=False)
    settings = ServerSettings(database_url=url, writes_per_minute=1000, max_upload_bytes=limit)
    with serving(create_app(settings)) as base:
        response = httpx.post(
            f"{base}/api/v1/tasks/open/runs",
            content=body(),
            timeout=60,
            headers={**world.headers("red"), "Content-Type": "multipart/form-data; boundary=b"},
        )
    assert response.status_code == 413
    assert counts(world) == before


def test_a_run_name_taken_is_a_conflict(world: World, client: TestClient) -> None:
    response = upload(client, world, "red", "red-open.txt", run_text(tag="x").encode(), name="red-open")
    assert response.status_code == 409
    assert response.json() == {"error": "A run named 'red-open' exists already; submit it under another name."}
    # another team's name: refused as reading that run is (test_hostile_names)
    response = upload(client, world, "blue", "red-open.txt", run_text(tag="x").encode(), name="red-open")
    assert response.status_code == 403


def test_a_participant_submits_for_their_own_team_only(world: World, client: TestClient) -> None:
    response = upload(client, world, "red", "r.txt", run_text(tag="r").encode(), team="blue")
    assert response.status_code == 403
    assert response.json() == {"error": "You submit for your own team (red), not for 'blue'."}


def test_a_submission_records_the_trec_form_and_its_job(world: World, client: TestClient) -> None:
    response = upload(
        client,
        world,
        "red",
        "input.manual1.gz",
        run_text(tag="m").encode(),
        name="manual1",
        run_type="manual",
        description="BM25 + my own reading",
        judging_precedence="2",
    )
    assert response.status_code == 201, response.text
    body = response.json()
    assert response.headers["Location"] == f"/api/v1/jobs/{body['job']['id']}"
    run = client.get("/api/v1/runs/manual1", headers=world.headers("red")).json()
    assert {k: run[k] for k in ("team", "run_type", "judging_precedence", "description", "state", "task")} == {
        "team": "red",
        "run_type": "manual",
        "judging_precedence": 2,
        "description": "BM25 + my own reading",
        "state": "queued",
        "task": "open",
    }
    job = client.get(body["job"]["url"], headers=world.headers("red")).json()
    assert (job["state"], job["queue_position"]) == ("queued", 1)
    entry = access.audit_log(world.engine, actions=["runs.submit"])[0]
    assert (entry.user, entry.target, entry.detail["team"]) == ("red", "manual1", "red")


def test_a_submission_says_where_its_time_went_and_nothing_else(world: World, client: TestClient) -> None:
    response = upload(client, world, "red", "timed.txt", run_text(tag="timed").encode(), name="timed")
    assert response.status_code == 201, response.text
    parts = [entry.split(";") for entry in response.headers["Server-Timing"].split(", ")]
    assert [name for name, _ in parts] == ["receive", "slot", "parse", "stage", "judged", "turn", "write", "total"]
    durations = {name: float(duration.removeprefix("dur=")) for name, duration in parts}
    assert all(duration >= 0 for duration in durations.values())
    assert durations["total"] >= durations["parse"] + durations["write"]
    refused = upload(client, world, "red", "timed.txt", b"301 Q0 d1 one 1.0 x\n", name="refused")
    assert refused.status_code == 422
    assert "Server-Timing" not in refused.headers


# --- window and quota ---------------------------------------------------------------------------


def test_submissions_outside_the_window_are_refused_with_the_time(world: World, client: TestClient) -> None:
    now = datetime.now(UTC)
    tasks.create_task(world.engine, "later", qrels_name="sample", owner="owner", opens=now + timedelta(days=1))
    tasks.create_task(world.engine, "over", qrels_name="sample", owner="owner", closes=now - timedelta(seconds=1))
    opens = upload(client, world, "red", "a.txt", run_text(tag="a").encode(), task="later")
    assert opens.status_code == 403
    assert re.fullmatch(
        r"Task 'later' opens for submissions at \S+\+00:00; it is now \S+\+00:00\.", opens.json()["error"]
    )
    closed = upload(client, world, "red", "b.txt", run_text(tag="b").encode(), task="over")
    assert closed.status_code == 403
    assert re.fullmatch(r"Task 'over' closed for submissions at \S+; it is now \S+\.", closed.json()["error"])


def test_the_quota_counts_runs_evaluated_or_waiting_not_failed_ones(world: World, client: TestClient) -> None:
    tasks.create_task(world.engine, "one-each", qrels_name="sample", owner="owner", max_runs_per_team=1)
    first = upload(client, world, "red", "q1.txt", run_text(tag="q1").encode(), task="one-each")
    assert first.status_code == 201
    before = counts(world)
    second = upload(client, world, "red", "q2.txt", run_text(tag="q2").encode(), task="one-each")
    assert second.status_code == 409
    assert second.json() == {
        "error": "Team 'red' has used its 1 runs for task 'one-each' (evaluated runs count, and withdrawn "
        "ones whose scores the team could read; failed, cancelled and other withdrawn ones do not)."
    }
    assert counts(world) == before
    assert upload(client, world, "blue", "q3.txt", run_text(tag="q3").encode(), task="one-each").status_code == 201
    with world.engine.begin() as connection:
        connection.execute(
            text("UPDATE evaluations SET state = 'failed' WHERE id = :id"), {"id": first.json()["job"]["id"]}
        )
    assert upload(client, world, "red", "q2.txt", run_text(tag="q2").encode(), task="one-each").status_code == 201


def test_withdrawing_a_run_frees_its_slot_and_deletes_it(world: World, client: TestClient) -> None:
    tasks.create_task(world.engine, "one", qrels_name="sample", owner="owner", max_runs_per_team=1)
    assert upload(client, world, "red", "w1.txt", run_text(tag="w1").encode(), task="one").status_code == 201
    assert client.delete("/api/v1/runs/w1", headers=world.headers("blue")).status_code == 403  # not theirs
    assert client.delete("/api/v1/runs/w1", headers=world.headers("red")).status_code == 204
    assert client.get("/api/v1/runs/w1", headers=world.headers("red")).status_code == 404
    assert upload(client, world, "red", "w2.txt", run_text(tag="w2").encode(), task="one").status_code == 201


def test_writes_are_rate_limited_per_token(world: World) -> None:
    with client_for(world.engine, writes_per_minute=2) as client:
        for _ in range(2):
            assert client.post("/api/v1/tokens", json={}, headers=world.headers("viewer")).status_code == 201
        refused = client.post("/api/v1/tokens", json={}, headers=world.headers("viewer"))
        assert refused.status_code == 429
        # the next write is allowed 30 s after the first one: less the seconds a loaded machine took
        wait = int(refused.headers["Retry-After"])
        assert 20 <= wait <= 30
        assert refused.json() == {"error": f"Too many writes: at most 2 a minute; try again in {wait} s."}
        assert client.post("/api/v1/tokens", json={}, headers=world.headers("red")).status_code == 201


# --- browser sessions ---------------------------------------------------------------------------


def test_a_session_cookie_is_httponly_secure_and_strict(world: World) -> None:
    with client_for(world.engine, secure_cookies=True) as client:
        response = client.post("/api/v1/sessions", json={"name": "red", "password": PASSWORD})
    cookie = response.headers["set-cookie"]
    assert response.status_code == 201
    assert "HttpOnly" in cookie and "Secure" in cookie and "SameSite=strict" in cookie


def test_a_session_changes_nothing_without_its_csrf_token(world: World, client: TestClient) -> None:
    signed = client.post("/api/v1/sessions", json={"name": "red", "password": PASSWORD}).json()
    assert client.get("/api/v1/me").json() == {"name": "red", "role": "participant", "team": "red", "via": "session"}
    forged = client.post("/api/v1/tokens", json={})
    assert forged.status_code == 403
    assert forged.json() == {
        "error": "This form's CSRF token is missing or wrong; reload the page (send X-CSRF-Token)."
    }
    assert client.post("/api/v1/tokens", json={}, headers={"X-CSRF-Token": "0" * 64}).status_code == 403
    assert client.post("/api/v1/tokens", json={}, headers={"X-CSRF-Token": signed["csrf_token"]}).status_code == 201
    cookie = client.cookies.get("evalstore_session")
    assert client.delete("/api/v1/sessions/current", headers={"X-CSRF-Token": signed["csrf_token"]}).status_code == 204
    client.cookies.set("evalstore_session", cookie)
    assert client.get("/api/v1/me").status_code == 401


@pytest.mark.parametrize(("name", "password"), [("red", "wrong password"), ("nobody", PASSWORD), ("red", "")])
def test_a_wrong_sign_in_says_the_same_whatever_was_wrong(
    world: World, client: TestClient, name: str, password: str
) -> None:
    response = client.post("/api/v1/sessions", json={"name": name, "password": password})
    assert response.status_code == 401
    assert response.json() == {"error": "Wrong user name or password."}
    assert access.audit_log(world.engine, actions=["sessions.refused"])[0].target == name


def test_a_session_token_is_not_a_bearer_token(world: World, client: TestClient) -> None:
    client.post("/api/v1/sessions", json={"name": "red", "password": PASSWORD})
    cookie = client.cookies.get("evalstore_session")
    client.cookies.clear()
    assert client.get("/api/v1/me", headers={"Authorization": f"Bearer {cookie}"}).status_code == 401


# --- judging ------------------------------------------------------------------------------------


def test_an_assessors_judgments_make_qrels(world: World, client: TestClient) -> None:
    entries = client.get("/api/v1/pools/pool/entries?topic=301", headers=world.headers("assessor")).json()
    assert entries and all(e["relevance"] is None for e in entries)
    judgments = [{"topic": e["topic"], "doc": e["doc"], "relevance": i % 2} for i, e in enumerate(entries)]
    response = client.post("/api/v1/pools/pool/judgments", json=judgments, headers=world.headers("assessor"))
    assert response.json() == {"recorded": len(entries)}
    again = client.get("/api/v1/pools/pool/entries?topic=301", headers=world.headers("assessor")).json()
    assert [e["relevance"] for e in again] == [i % 2 for i in range(len(entries))]
    pools.pool_qrels(world.engine, "pool", qrels_name="judged-301")
    qrels = tasks.export_qrels(world.engine, as_principal(world.engine, "admin"), "judged-301")[1].to_pylist()
    judged = {(row["topic"], row["doc"]): row["relevance"] for row in qrels if row["relevance"] >= 0}
    assert judged == {(j["topic"], j["doc"]): j["relevance"] for j in judgments}


def test_a_judgment_of_a_document_outside_the_pool_records_nothing(world: World, client: TestClient) -> None:
    entry = client.get("/api/v1/pools/pool/entries", headers=world.headers("assessor")).json()[0]
    response = client.post(
        "/api/v1/pools/pool/judgments",
        headers=world.headers("assessor"),
        json=[
            {"topic": entry["topic"], "doc": entry["doc"], "relevance": 1},
            {"topic": "301", "doc": "NOPE", "relevance": 1},
        ],
    )
    assert response.status_code == 422
    assert response.json() == {"error": "Document 'NOPE' of topic '301' is not in pool 'pool'; nothing was recorded."}
    assert client.get("/api/v1/pools/pool/entries", headers=world.headers("assessor")).json()[0]["relevance"] is None


def test_an_assessor_sees_only_assigned_pools(world: World, client: TestClient) -> None:
    pools.build_pool(world.engine, name="other-pool", run_names=["red-open"], depth=3)
    names = [p["name"] for p in client.get("/api/v1/pools", headers=world.headers("assessor")).json()]
    assert names == ["pool"]
    assert client.get("/api/v1/pools/other-pool/entries", headers=world.headers("assessor")).json() == {
        "error": "No pool named 'other-pool' assigned to you."
    }
