"""A run whose topics mostly miss the task's qrels: sharing none, it is refused (it would score 0
on every topic); missing more than half, it is stored with a warning, over the API and in the
browser. Both thresholds are the server's settings."""

from __future__ import annotations

import re

import pytest
from fastapi.testclient import TestClient

from evalstore.services import tasks
from tests.http.conftest import World, as_principal, client_for, run_text
from tests.http.test_pages import csrf_of, sign_in

# the sample qrels judge topics 301-303
KNOWN = run_text(tag="x")


def _unknown(topics: range) -> str:
    return "".join(f"{t} Q0 doc-{t} 1 1.0 x\n" for t in topics)


def _post(client: TestClient, world: World, name: str, text: str) -> object:
    return client.post(
        "/api/v1/tasks/open/runs",
        headers=world.headers("red"),
        data={"name": name},
        files={"file": ("run.txt", text.encode())},
    )


def _stored(world: World) -> list[str]:
    return [r["run"] for r in tasks.task_runs(world.engine, as_principal(world.engine, "red"), "open")]


def test_a_run_sharing_no_topic_is_refused_and_nothing_stored(world: World, client: TestClient) -> None:
    refused = _post(client, world, "elsewhere", _unknown(range(901, 905)))
    assert refused.status_code == 422
    assert refused.json()["error"] == (
        "Run 'elsewhere' shares no topic with the qrels 'sample': none of its 4 topics ('901', '902', '903', ...) "
        "is judged there, so it would score 0 on every topic. It was most likely made for another collection."
    )
    assert "elsewhere" not in _stored(world)


def test_a_run_mostly_missing_is_stored_with_a_warning(world: World, client: TestClient) -> None:
    stored = _post(client, world, "mostly-elsewhere", KNOWN + _unknown(range(901, 905)))
    assert stored.status_code == 201
    assert stored.json()["warnings"] == [
        "4 of the 7 topics of run 'mostly-elsewhere' (57%) are not in the qrels 'sample' ('901', '902', '903', ...): "
        "they are not scored, and the run's mean is over the qrels' topics."
    ]
    half = _post(client, world, "half-elsewhere", run_text(("301", "302"), tag="x") + _unknown(range(901, 903)))
    assert half.status_code == 201 and half.json()["warnings"] == []  # 50% is not above the default 0.5


def test_the_server_settings_move_both_thresholds(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVALSTORE_REFUSE_NO_SHARED_TOPIC", "off")
    monkeypatch.setenv("EVALSTORE_MISSING_TOPICS_WARN", "0.25")
    with client_for(world.engine) as client:
        scored = _post(client, world, "elsewhere", _unknown(range(901, 903)))
        assert scored.status_code == 201
        assert scored.json()["warnings"] == [
            "2 of the 2 topics of run 'elsewhere' (100%) are not in the qrels 'sample' ('901', '902'): "
            "they are not scored, and the run's mean is over the qrels' topics."
        ]
        quarter = _post(client, world, "a-quarter", KNOWN + _unknown(range(901, 902)))
        assert quarter.status_code == 201 and quarter.json()["warnings"] == []  # 25%: not above
        more = _post(client, world, "two-fifths", run_text(tag="x") + _unknown(range(901, 903)))
        assert more.status_code == 201 and len(more.json()["warnings"]) == 1  # 40%


def test_the_browser_says_the_warning_after_the_upload_and_refuses_a_run_sharing_none(world: World) -> None:
    with client_for(world.engine) as client:
        assert sign_in(client, "red").status_code == 303
        page = client.get("/tasks/open/submit")

        def upload(name: str, text: str, csrf: str) -> object:
            return client.post(
                "/tasks/open/submit",
                data={"name": name, "run_type": "automatic", "csrf": csrf},
                files={"file": ("mine.txt", text.encode(), "text/plain")},
                follow_redirects=False,
            )

        refused = upload("elsewhere", _unknown(range(901, 903)), csrf_of(page.text))
        assert refused.status_code == 422
        assert "Run &#39;elsewhere&#39; shares no topic with the qrels &#39;sample&#39;" in refused.text
        assert 'value="elsewhere"' in refused.text  # the form is kept
        stored = upload("mostly-elsewhere", KNOWN + _unknown(range(901, 905)), csrf_of(refused.text))
        assert stored.status_code == 303
        assert stored.headers["location"] == "/tasks/open/submit?submitted=mostly-elsewhere"
        after = client.get(stored.headers["location"])
        said = re.search(r'<p class="notice warning" role="status" id="submitted-warning">(.*?)</p>', after.text)
        assert said is not None
        assert said.group(1) == (
            "Run mostly-elsewhere was stored, with a warning: 4 of the 7 topics of run &#39;mostly-elsewhere&#39; "
            "(57%) are not in the qrels &#39;sample&#39; (&#39;901&#39;, &#39;902&#39;, &#39;903&#39;, ...): "
            "they are not scored, and the run&#39;s mean is over the qrels&#39; topics."
        )
        # another team's run named in the address: nothing said about it
        world.submit("open", "blue-run", team_user="blue", text=KNOWN + _unknown(range(901, 905)), evaluate=False)
        assert "submitted-warning" not in client.get("/tasks/open/submit?submitted=blue-run").text
