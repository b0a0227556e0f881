"""An organiser's judges page: add a judge (a local OpenAI-compatible stub), probe it and run it on a
pool of their task from the browser's forms; the work goes on a background job and the page shows
its progress, then the report with the cost so far (tokens, time, money) and the failed documents
with their reason. The key's variable is restricted and the key never shown; another organiser
sees none of it."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from evalstore.db.models import Pool, PoolEntry
from evalstore.db.session import read_only
from evalstore.services import access, organising
from evalstore.services.judges import registry
from tests.http.conftest import PASSWORD, SAMPLE, World, as_principal, client_for
from tests.http.test_console_setup import TOPICS
from tests.http.test_pages import csrf_of, sign_in
from tests.judges.fake_llm import Script, serve


@pytest.fixture
def endpoint() -> Iterator[tuple[str, Script]]:
    script = Script(garbled={"garbled-passage"})
    with serve(script) as url:
        yield url, script


@pytest.fixture
def owner(world: World) -> Iterator[TestClient]:
    access.set_password(world.engine, "owner", PASSWORD)
    with client_for(world.engine) as client:
        assert sign_in(client, "owner").status_code == 303
        yield client


def _pool_with_texts(world: World, owner: TestClient) -> list[str]:
    """Pool 'open-pool' of task open (topic 301), its topics and documents uploaded on the console;
    one document's text is one the stub cannot grade. The pooled documents, in order."""
    organising.build_task_pool(
        world.engine, as_principal(world.engine, "owner"), "open", name="open-pool", depth=3, topics=["301"]
    )
    with read_only(world.engine) as session:
        pool_id = session.scalar(select(Pool.id).where(Pool.name == "open:open-pool"))
        pooled = sorted(session.scalars(select(PoolEntry.doc).where(PoolEntry.pool_id == pool_id)))
    judged = {line.split()[2] for line in (SAMPLE / "qrels.test").read_text().splitlines() if line.startswith("301 ")}
    docs = sorted(set(pooled) | judged)
    texts = "".join(
        json.dumps({"doc_id": d, "text": "garbled-passage" if d == pooled[0] else f"organized crime report {d}"}) + "\n"
        for d in docs
    )
    page = owner.get("/tasks/open/manage")
    attached = owner.post(
        "/tasks/open/pools/open%3Aopen-pool/texts",  # a large upload: its CSRF token, the first field, read first
        data={"csrf": csrf_of(page.text)},
        files={"topics_file": ("topics.txt", TOPICS.encode()), "documents_file": ("docs.jsonl", texts.encode())},
        follow_redirects=False,
    )
    assert attached.status_code == 303, attached.text
    return pooled


def _wait(owner: TestClient, url: str, done: str) -> str:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        page = owner.get(url)
        if done in page.text:
            return page.text
        assert 'http-equiv="refresh"' in page.text  # working: the page reloads itself
        time.sleep(0.2)
    raise AssertionError(f"not done in 60 s: {page.text}")


def test_an_organiser_adds_probes_runs_and_reads_a_judge(
    world: World, owner: TestClient, endpoint: tuple[str, Script]
) -> None:
    url, script = endpoint
    pooled = _pool_with_texts(world, owner)
    page = owner.get("/judges")
    assert page.status_code == 200 and "No judges of yours yet." in page.text
    added = owner.post(
        "/judges",
        data={
            "csrf": csrf_of(page.text),
            "name": "stub",
            "endpoint": url,
            "model": "fake-model",
            "api_key_env": "EVALSTORE_JUDGE_KEY_STUB",
            "scale": "0-3",
            "temperature": "0",
            "max_concurrency": "2",
            "price_in": "1.5",
            "price_out": "6",
        },
        follow_redirects=False,
    )
    assert added.status_code == 303 and added.headers["location"] == "/judges/stub?added=1"
    shown = owner.get("/judges/stub?added=1")
    assert "Judge stub added." in shown.text and "key from <code>EVALSTORE_JUDGE_KEY_STUB</code>" in shown.text
    assert "Not probed yet." in shown.text and 'value="open:open-pool"' not in shown.text  # options, by name
    assert "<option>open:open-pool</option>" in shown.text

    # the key's variable is not set on this server: the run stops with the reason, nothing sent
    started = owner.post(
        "/judges/stub/run", data={"csrf": csrf_of(shown.text), "pool": "open:open-pool"}, follow_redirects=False
    )
    assert started.status_code == 303 and started.headers["location"] == "/judges/stub#progress"
    stopped = _wait(owner, "/judges/stub", "stopped:")
    assert "Judge &#39;stub&#39; reads its API key from $EVALSTORE_JUDGE_KEY_STUB, which is not set" in stopped
    assert not script.requests

    with pytest.MonkeyPatch.context() as env:
        env.setenv("EVALSTORE_JUDGE_KEY_STUB", "sk-secret-value")
        probed = owner.post(
            "/judges/stub/probe",
            data={"csrf": csrf_of(shown.text), "pool": "open:open-pool", "limit": "2"},
            follow_redirects=False,
        )
        assert probed.status_code == 303
        report = _wait(owner, "/judges/stub", 'id="probe-done"')
        assert "The probe on pool open:open-pool is done: 2 documents" in report
        assert "query words" in report and "quoted score" in report
        owner.post("/judges/stub/run", data={"csrf": csrf_of(shown.text), "pool": "open:open-pool"})
        report = _wait(owner, "/judges/stub", 'id="run-done"')
    assert "sk-secret-value" not in report  # the key is sent to the endpoint, never shown
    assert script.headers and script.headers[-1].get("authorization") == "Bearer sk-secret-value"
    ledger = registry.show_judge(world.engine, "stub").costs
    assert ledger["labels"] == len(pooled) and ledger["unrateable"] == 1
    assert (
        f"The run on pool open:open-pool is done: {len(pooled)} documents judged ({len(pooled) - 1} rated, 1 unrateable)"
        in report
    )
    assert f"<dd>{ledger['input_tokens']} input, {ledger['output_tokens']} output</dd>" in report
    assert f"${ledger['cost_usd']:.4f}" in report and ledger["cost_usd"] == pytest.approx(
        (ledger["input_tokens"] * 1.5 + ledger["output_tokens"] * 6) / 1e6
    )
    assert f"<td>301</td><td>{pooled[0]}</td>" in report  # the failed document, with its reason
    listing = owner.get("/judges")
    assert '<a href="/judges/stub">stub</a>' in listing.text


def test_a_judge_form_refuses_what_the_server_must_not_do(world: World, owner: TestClient) -> None:
    page = owner.get("/judges")
    base = {"csrf": csrf_of(page.text), "name": "j", "endpoint": "http://127.0.0.1:9/v1", "model": "m"}
    secret = owner.post("/judges", data={**base, "api_key_env": "EVALSTORE_DATABASE_URL"})
    assert secret.status_code == 422
    assert (
        "The key&#39;s variable is one whose name begins with EVALSTORE_JUDGE_KEY_ (the server&#39;s operator sets "
        "it); &#39;EVALSTORE_DATABASE_URL&#39; does not."
    ) in secret.text
    assert 'value="EVALSTORE_DATABASE_URL"' in secret.text  # the form kept
    keyed = owner.post("/judges", data={**base, "endpoint": "http://user:pw@127.0.0.1:9/v1"})
    assert keyed.status_code == 422 and "The endpoint&#39;s URL carries" in keyed.text
    assert "pw@" not in keyed.text and 'id="endpoint" name="endpoint" value=""' in keyed.text  # not written back
    ftp = owner.post("/judges", data={**base, "endpoint": "ftp://x"})
    assert (
        ftp.status_code == 422
        and (
            "The endpoint is the http(s) URL of an OpenAI-compatible API, e.g. http://127.0.0.1:8000/v1; "
            "not &#39;ftp://x&#39;."
        )
        in ftp.text
    )
    # past the form's own checks, the registry's: said in the form's words, not the command line's
    unnamed = owner.post("/judges", data={**base, "api_key_env": "EVALSTORE_JUDGE_KEY_A-B"})
    assert unnamed.status_code == 422 and "--api-key-env" not in unnamed.text
    assert (
        "&#39;EVALSTORE_JUDGE_KEY_A-B&#39; is not a variable&#39;s name. Give the variable&#39;s name as Key&#39;s "
        "variable."
    ) in unnamed.text
    scale = owner.post("/judges", data={**base, "scale": "3-1"})
    assert "The grades are LOW-HIGH, 0-9 with LOW below HIGH (e.g. 0-3); not &#39;3-1&#39;." in scale.text
    ok = owner.post("/judges", data=base, follow_redirects=False)
    assert ok.status_code == 303
    twice = owner.post("/judges", data=base)
    assert twice.status_code == 409 and "A judge named &#39;j&#39; exists already; choose another name." in twice.text
    # a pool without texts cannot be judged: said on the page, nothing started
    organising.build_task_pool(world.engine, as_principal(world.engine, "owner"), "open", name="bare", depth=2)
    refused = owner.post("/judges/j/run", data={"csrf": csrf_of(page.text), "pool": "open:bare"})
    assert refused.status_code == 422
    assert (
        "Pool &#39;open:bare&#39; has no topics or documents attached for the judge to read; attach them on task "
        "open&#39;s console first."
    ) in refused.text
    assert owner.post("/judges/j/run", data={"csrf": csrf_of(page.text), "pool": "pool"}).status_code == 404
    broke = owner.post("/judges/j/run", data={"csrf": csrf_of(page.text), "pool": "open:bare", "max_cost": "0"})
    assert broke.status_code == 422 and "The budget is above 0 dollars (below a million); not 0." in broke.text


def test_a_run_that_stops_says_what_to_do_in_the_pages_words(world: World, owner: TestClient) -> None:
    _pool_with_texts(world, owner)
    page = owner.get("/judges")
    data = {"csrf": csrf_of(page.text), "name": "free", "endpoint": "http://127.0.0.1:9/v1", "model": "m"}
    assert owner.post("/judges", data=data, follow_redirects=False).status_code == 303
    shown = owner.get("/judges/free")
    started = owner.post(
        "/judges/free/run",
        data={"csrf": csrf_of(shown.text), "pool": "open:open-pool", "max_cost": "1"},
        follow_redirects=False,
    )
    assert started.status_code == 303
    stopped = _wait(owner, "/judges/free", "stopped:")
    assert (
        "Judge &#39;free&#39; declares no prices, so a budget cannot be kept. Run it without a budget, or add a "
        "judge with its prices per million input and output tokens."
    ) in stopped
    assert "--max-cost" not in stopped and "evalstore judges" not in stopped


def test_an_organiser_cancels_a_running_probe(world: World, owner: TestClient) -> None:
    """The probe stops after the document it is on, and stores nothing; the button is a form
    (POST, CSRF), for the judge's organiser only."""
    script = Script(delays=[0.3] * 200)  # every request slow: the probe is still at work when cancelled
    _pool_with_texts(world, owner)
    with serve(script) as url:
        page = owner.get("/judges")
        owner.post("/judges", data={"csrf": csrf_of(page.text), "name": "slow", "endpoint": url, "model": "m"})
        shown = owner.get("/judges/slow")
        csrf = csrf_of(shown.text)
        idle = owner.post("/judges/slow/probe/cancel", data={"csrf": csrf})
        assert idle.status_code == 409
        assert "Judge &#39;slow&#39; has no probe running; there is nothing to cancel." in idle.text
        started = owner.post(
            "/judges/slow/probe", data={"csrf": csrf, "pool": "open:open-pool", "limit": "3"}, follow_redirects=False
        )
        assert started.status_code == 303
        working = owner.get("/judges/slow")
        assert '<button type="submit" class="secondary" id="cancel-probe">Cancel the probe</button>' in working.text
        # the page reloads itself each second for its first five looks, then every three seconds
        reloads = {
            "": "1; url=/judges/slow?working=1",
            "?working=4": "1; url=/judges/slow?working=5",
            "?working=5": "3; url=/judges/slow?working=5",
            "?working=1e400": "1; url=/judges/slow?working=1",
            "?working=%C2%B2": "1; url=/judges/slow?working=1",
        }
        for query, reload in reloads.items():
            assert f'<meta http-equiv="refresh" content="{reload}">' in owner.get(f"/judges/slow{query}").text
        assert owner.post("/judges/slow/probe/cancel", data={}).status_code == 403  # no CSRF token

        access.set_password(world.engine, "organiser", PASSWORD)
        with client_for(world.engine) as other:  # another organiser: not theirs to cancel
            assert sign_in(other, "organiser").status_code == 303
            listing = other.get("/judges")
            refused = other.post("/judges/slow/probe/cancel", data={"csrf": csrf_of(listing.text)})
            assert refused.status_code == 404 and "No judge named &#39;slow&#39; of yours." in refused.text

        cancelled = owner.post("/judges/slow/probe/cancel", data={"csrf": csrf}, follow_redirects=False)
        assert cancelled.status_code == 303 and cancelled.headers["location"] == "/judges/slow#progress"
        asked = len(script.requests)
        stopped = _wait(owner, "/judges/slow", 'id="probe-stopped"')
    assert "The probe on pool open:open-pool was cancelled by owner after " in stopped
    assert "nothing of it was stored. Probe again when you like." in stopped
    assert "Not probed yet." in stopped and 'id="cancel-probe"' not in stopped
    assert len(script.requests) <= asked + 4  # the document it was on, no further (a plain ask and 3 attacks)
    assert registry.show_judge(world.engine, "slow").probes == []


def test_another_organiser_sees_no_judge_of_others(world: World, owner: TestClient) -> None:
    page = owner.get("/judges")
    owner.post(
        "/judges",
        data={"csrf": csrf_of(page.text), "name": "mine", "endpoint": "http://127.0.0.1:9/v1", "model": "m"},
    )
    access.set_password(world.engine, "organiser", PASSWORD)
    with client_for(world.engine) as other:
        assert sign_in(other, "organiser").status_code == 303
        listing = other.get("/judges")
        assert listing.status_code == 200 and "mine" not in listing.text
        assert other.get("/judges/mine").status_code == 404
        for action in ("run", "probe"):
            refused = other.post(f"/judges/mine/{action}", data={"csrf": csrf_of(listing.text), "pool": "pool"})
            assert refused.status_code == 404 and "No judge named &#39;mine&#39; of yours." in refused.text
