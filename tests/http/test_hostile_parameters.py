"""No 500 from what a client puts in a URL: every route's path and query parameters are swept with
hostile values (huge, negative and float ids, NUL, long strings, unicode, broken UTF-8), on both
databases; and the cases the hardening issue found, each with its exact answer."""

from __future__ import annotations

import gzip
import io
import time
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from fastapi.testclient import TestClient

from evalstore.services import access, pools, store, tasks
from tests.http.conftest import PASSWORD, World, client_for, run_text
from tests.http.test_hostile_get_writes import _routes
from tests.http.test_pages import csrf_of, sign_in

pytestmark = pytest.mark.both_databases

# what a number's place gets, and what a name's (each also gets the other's NUL)
NUMBERS = ("1e20", "99999999999999999999999", "-9223372036854775809", "-1", "1.5", "nan", "%00")
TEXTS = ("%00", "a%00b", "x" * 1000, "%C3%A9%E2%9C%93", "%ED%A0%80", "%FF", "1e20")
# a valid value of each path parameter (the one swept takes the hostile values), by route prefix
VALID = {
    "task": "open",
    "run": "red-open",
    "pool": "pool",
    "topic": "301",
    "fmt": "csv",
    "qrels": "sample",
    "bank": "bank",
    "code": "inv_1_not-the-secret",
    "nugget": "1",
    "judge": "j",
    "link_id": "1",
}
NAMES = {"/api/v1/users/": "viewer", "/api/v1/runs/": "red-open", "/api/v1/qrels/": "sample", "/api/v1/pools/": "pool"}


def _valid(world: World, path: str, parameter: str) -> str:
    if parameter == "name":
        return next(value for prefix, value in NAMES.items() if path.startswith(prefix))
    if parameter in ("job_id", "job"):
        return str(world.jobs["open"])
    if parameter == "token_id":
        return "1"
    return VALID[parameter]


def _requests(world: World, routes: list[Any]) -> list[tuple[str, str]]:
    out = []
    for route in routes:
        methods = sorted((getattr(route, "methods", None) or set()) - {"HEAD"})
        if not methods or route.path.startswith(("/api/v1/openapi", "/api/v1/docs", "/docs/")):
            continue
        parameters = list(route.param_convertors)
        queries = [q.name for q in route.dependant.query_params]
        numeric = {
            (f"?{p.name}" if p in route.dependant.query_params else p.name)
            for p in [*route.dependant.path_params, *route.dependant.query_params]
            if any(kind in str(p.field_info.annotation) for kind in ("int", "float"))
        }
        for method in methods:
            for swept in [*parameters, *(f"?{q}" for q in queries)]:
                for value in NUMBERS if swept in numeric else TEXTS:
                    path = route.path
                    for parameter in parameters:
                        shown = value if parameter == swept else _valid(world, route.path, parameter)
                        path = path.replace(f"{{{parameter}}}", shown)
                    if swept.startswith("?"):
                        path += f"{swept}={value}"
                    out.append((method, path))
    return out


def test_no_parameter_makes_a_500(world: World) -> None:
    with client_for(world.engine, raise_errors=False, writes_per_minute=100_000) as client:
        requests = _requests(world, _routes(client.app.routes))  # type: ignore[attr-defined]
        assert len(requests) > 500
        failed = {}
        for caller in ("admin",):  # who reaches every handler's code
            for method, path in requests:
                response = client.request(method, path, headers=world.headers(caller), follow_redirects=False)
                if response.status_code >= 500:
                    failed[(caller, method, path[:120])] = response.text[:200]
    assert failed == {}, "\n".join(f"{k}" for k in failed)


def _organiser(world: World) -> TestClient:
    access.set_password(world.engine, "owner", PASSWORD)
    client = client_for(world.engine, raise_errors=False)
    assert sign_in(client, "owner").status_code == 303
    return client


def test_huge_ids_and_a_nul_are_4xx_with_their_reason(world: World) -> None:
    admin = world.headers("admin")
    with client_for(world.engine, raise_errors=False) as client:
        for method, path, parameter in (
            ("GET", "/api/v1/jobs/99999999999999999999", "job_id"),
            ("DELETE", "/api/v1/tokens/99999999999999999999", "token_id"),
        ):
            response = client.request(method, path, headers=admin)
            assert response.status_code == 422, path
            assert response.json()["error"] == (
                f"The request is not valid: path.{parameter}: Input should be less than or equal to 2147483647"
            )
        assert client.get("/api/v1/jobs/1e20", headers=admin).status_code == 422
        nul = client.get("/api/v1/tasks/%00", headers=admin)
        assert nul.status_code == 404
        assert nul.json() == {"error": "Nothing is named with a NUL character (%00); check the address."}
        page = client.get("/tasks/%00", headers=admin)
        assert (
            page.status_code == 404 and "Nothing is named with a NUL character (%00); check the address." in page.text
        )
        query = client.get("/tasks/open?measure=%00", headers=admin)
        assert query.status_code == 422
        assert "The query holds a NUL character (%00): no parameter&#39;s value has one." in query.text


def test_a_negative_seed_and_a_huge_quota_on_the_console_are_422(world: World) -> None:
    world.submit("open", "red-two", text=run_text(tag="two", shift=2))  # the report needs two runs
    with _organiser(world) as owner:
        health = owner.get("/tasks/open/health?seed=-1")
        assert health.status_code == 422
        assert "The request is not valid: query.seed: Input should be greater than or equal to 0" in health.text
        page = owner.get("/tasks/open/manage")
        huge = owner.post(
            "/tasks/open/settings", data={"csrf": csrf_of(page.text), "max_runs_per_team": "99999999999999999999"}
        )
        assert huge.status_code == 422
        assert (
            "The quota per team is at most 1,000,000 runs (leave it empty for no limit); "
            "got 99,999,999,999,999,999,999." in huge.text
        )
        digits = owner.post("/tasks/open/settings", data={"csrf": csrf_of(page.text), "daily_cap": "\u00b2"})
        assert digits.status_code == 422
        assert "The runs per team per day is a whole number of runs (empty: the server&#39;s limit); got" in digits.text
    with client_for(world.engine, raise_errors=False) as client:
        patched = client.patch("/api/v1/tasks/open", json={"daily_cap": 2**40}, headers=world.headers("owner"))
        assert patched.status_code == 422
        assert patched.json()["error"] == (
            "The daily cap is at most 1,000,000 runs (leave it empty for no limit); got 1,099,511,627,776."
        )
    assert tasks.show_task(world.engine, "open").max_runs_per_team is None


def test_a_pool_of_100k_listed_topics_is_built_in_seconds_and_more_are_refused(world: World) -> None:
    topics = " ".join(str(300 + i) for i in range(100_000))
    with _organiser(world) as owner:
        page = owner.get("/tasks/open/manage")
        started = time.monotonic()
        # a form this large has its CSRF token as its first field, as the page's form does: the rest of
        # its body is read only once the session is known (web/sign_in_first.py)
        action = "/tasks/open/pools"
        built = owner.post(
            action,
            data={"csrf": csrf_of(page.text), "pool": "wide", "depth": "5", "topics": topics},
            follow_redirects=False,
        )
        took = time.monotonic() - started
        assert built.status_code == 303, built.text[-500:]
        assert took < 20  # over 120 s before: SQLite's reader rebuilt its parameters once per parameter
        assert pools.show_pool(world.engine, "open:wide").topics == 3  # named after its task
        more = owner.post(
            action,
            data={"csrf": csrf_of(page.text), "pool": "wider", "depth": "5", "topics": topics + " 1 2"},
        )
        assert more.status_code == 422
        assert (
            "A pool is built over at most 100,000 listed topics; 100,002 were listed. Leave the topics empty to "
            "pool every topic of the task&#39;s runs." in more.text
        )


def test_a_nul_in_a_json_body_or_a_form_is_422(world: World) -> None:
    with client_for(world.engine, raise_errors=False) as client:
        patched = client.patch("/api/v1/tasks/open", json={"description": "a\u0000b"}, headers=world.headers("owner"))
    assert patched.status_code == 422
    assert patched.json()["error"] == "The body holds a NUL character (\\u0000): no field's value has one."
    with _organiser(world) as owner:
        page = owner.get("/tasks/open/manage")
        form = owner.post("/tasks/open/settings", data={"csrf": csrf_of(page.text), "description": "a\u0000b"})
    assert form.status_code == 422 and "The form holds a NUL character: no field&#39;s value has one." in form.text
    assert tasks.show_task(world.engine, "open").description is None


def _parquet_run(*, dictionary: bool) -> bytes:
    docs = pa.array(["doc-a", "doc\x00b", "doc-c"])
    table = pa.table(
        {
            "topic": ["301"] * 3,
            "docno": docs.dictionary_encode() if dictionary else docs,
            "rank": [1, 2, 3],
            "score": [3.0, 2.0, 1.0],
        }
    )
    out = io.BytesIO()
    pq.write_table(table, out)
    return out.getvalue()


def test_a_nul_in_a_multipart_field_or_an_uploaded_run_is_422_and_stores_nothing(world: World) -> None:
    """An upload's text fields go where a form's do (PostgreSQL's text cannot hold a NUL: the
    description was a 500 there); a NUL in the file itself is the reader's, naming the line."""
    form_refusal = "The form holds a NUL character: no field's value has one."
    run = run_text(tag="nul").encode()
    with client_for(world.engine, raise_errors=False) as client:
        answers = [
            client.post(
                "/api/v1/tasks/open/runs",
                headers=world.headers(caller),
                data={"name": "nul-run", **fields},
                files={"file": ("run.txt", run)},
            )
            for caller, fields in (
                ("red", {"description": "a\x00b"}),
                ("owner", {"team": "red\x00"}),
                ("red", {"run_type": "automatic\x00"}),
            )
        ]
        answers.append(
            client.post(
                "/api/v1/runs",
                headers=world.headers("admin"),
                data={"name": "nul-run", "system": "bm25\x00"},
                files={"file": ("run.txt", run)},
            )
        )
        in_files = [
            client.post(
                "/api/v1/tasks/open/runs",
                headers=world.headers("red"),
                data={"name": "nul-run"},
                files={"file": (shown, content)},
            )
            for shown, content in (
                ("run.txt", b"301 Q0 doc-a 1 1.0 nul\n301 Q0 doc\x00x 2 0.5 nul\n"),
                ("run.txt.gz", gzip.compress(b"301 Q0 doc-a 1 1.0 nul\n301 Q0 doc-b 2 0.5 n\x00l\n")),
                ("run.parquet", _parquet_run(dictionary=False)),
                ("run.parquet", _parquet_run(dictionary=True)),
            )
        ]
    assert [(a.status_code, a.json()) for a in answers] == [(422, {"error": form_refusal})] * 4
    nul = "holds a NUL character (byte 0), which no docno, topic id, tag or label has"
    assert [(a.status_code, a.json()["error"]) for a in in_files] == [
        (422, f"run.txt:2: the line {nul}"),
        (422, f"run.txt.gz:2: the line {nul}"),
        (422, f"run.parquet: row 2: column 'docno' {nul}"),
        (422, f"run.parquet: row 2: column 'docno' {nul}"),
    ]
    access.set_password(world.engine, "red", PASSWORD)
    with client_for(world.engine, raise_errors=False) as client:
        assert sign_in(client, "red").status_code == 303
        page = client.get("/tasks/open/submit")
        submitted = client.post(
            "/tasks/open/submit",
            data={"csrf": csrf_of(page.text), "name": "nul-run", "description": "a\x00b"},
            files={"file": ("run.txt", run, "text/plain")},
        )
    assert (
        submitted.status_code == 422
        and "The form holds a NUL character: no field&#39;s value has one." in submitted.text
    )
    assert "nul-run" not in {r.name for r in store.list_runs(world.engine)}


def test_what_starlette_refuses_itself_is_the_apis_error_body_too(world: World) -> None:
    """An address no route has, a method a route does not take and a multipart body that cannot be
    parsed (a 5,000-character file name) answer ``{"error": message}`` as every API error does
    (they were FastAPI's ``{"detail": ...}``)."""
    with client_for(world.engine, raise_errors=False) as client:
        nowhere = client.get("/api/v1/nowhere", headers=world.headers("red"))
        wrong_method = client.put("/api/v1/jobs", headers=world.headers("owner"))
        broken = client.post(
            "/api/v1/tasks/open/runs",
            headers=world.headers("red"),
            data={"name": "long-file-name"},
            files={"file": ("a" * 5000 + ".txt", run_text(tag="x").encode())},
        )
    assert [(r.status_code, r.json()) for r in (nowhere, wrong_method, broken)] == [
        (404, {"error": "Nothing is at this address; the API's routes are listed at /api/v1/docs."}),
        (405, {"error": "This address does not take PUT."}),
        (400, {"error": "Invalid multipart data."}),
    ]
    assert wrong_method.headers["allow"] == "GET"


def test_a_json_body_nested_past_what_python_parses_is_never_a_500(world: World) -> None:
    """A body of 100,000 nested arrays around a NUL: a route that reads a body says it cannot parse
    it (400), one that reads none answers as without it (the NUL check's parse was a 500)."""
    deep = ("[" * 100_000 + '"\\u0000"' + "]" * 100_000).encode()
    sent = {**world.headers("admin"), "content-type": "application/json"}
    with client_for(world.engine, raise_errors=False) as client:
        answers = [
            (client.request(method, path, content=deep, headers=sent).status_code)
            for method, path in (
                ("PATCH", "/api/v1/tasks/open"),
                ("POST", "/api/v1/users/viewer/disable"),
                ("DELETE", "/api/v1/runs/red-open"),
            )
        ]
    assert answers == [400, 200, 409]


def test_a_body_sent_with_a_get_is_never_read(world: World) -> None:
    """No GET route reads a body, and one sent anyway is not parsed before sign-in (a multipart
    body would be spooled to disk, a JSON or form body held in memory): a NUL in it is not seen."""
    with client_for(world.engine, raise_errors=False) as client:
        answers = [
            client.request("GET", "/api/v1/health/live", content=body, headers={"content-type": kind}).status_code
            for kind, body in (
                ("application/json", b'{"a": "\\u0000"}'),
                ("application/x-www-form-urlencoded", b"a=%00"),
                (
                    "multipart/form-data; boundary=x",
                    b'--x\r\nContent-Disposition: form-data; name="a"\r\n\r\n\x00\r\n--x--\r\n',
                ),
            )
        ]
    assert answers == [200, 200, 200]


def test_judgments_sent_at_once_are_bounded(world: World) -> None:
    """40,000 judgments in one request were a 503 on PostgreSQL (past its 65,535 parameters, blamed
    on the database); 10,000 are checked against the pool, more are refused with the bound."""

    def send(n: int) -> Any:
        body = [{"topic": "301", "doc": f"d{i}", "relevance": 1} for i in range(n)]
        return client.post("/api/v1/pools/pool/judgments", json=body, headers=world.headers("assessor"))

    with client_for(world.engine, raise_errors=False) as client:
        most, more = send(10_000), send(10_001)
    assert (most.status_code, most.json()) == (
        422,
        {"error": "Document 'd0' of topic '301' is not in pool 'pool'; nothing was recorded."},
    )
    assert (more.status_code, more.json()) == (
        422,
        {"error": "At most 10,000 judgments are recorded at once; 10,001 were sent. Send them in parts."},
    )
