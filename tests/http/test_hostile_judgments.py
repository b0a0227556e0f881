"""No judgment of qrels a participant may not have reaches them: the compare page of their own two
runs showed each run's top documents with "rel N" or "unjudged" (20 judgments a page, a `measure=`
away from any other topics, past any quota). Their grades are the organisers' until the task is
released; a sweep of every GET route a participant can reach finds no judgment of a hidden or
unreleased task's qrels."""

from __future__ import annotations

import re
from typing import Any

import pytest

from evalstore.services import tasks
from tests.factories import SAMPLE
from tests.http.conftest import World, as_principal, client_for, run_text
from tests.http.test_hostile_get_writes import _routes

COMPARE = "/tasks/{task}/compare?run={first}&run={second}&measure=AP"
# how a page or an answer would carry a judgment: the compare page's grades and their classes, a
# JSON relevance, a qrels line
SCHEMA = ("/api/v1/openapi", "/api/v1/docs")  # the API's description names "relevance" as a field
GRADE_MARKS = ('class="grade"', "unjudged", 'class="rel"', 'class="nonrel"', '"relevance"', "rel 0", "rel 1")


def _qrels_lines() -> list[re.Pattern[str]]:
    lines = []
    for line in (SAMPLE / "qrels.test").read_text().splitlines()[:40]:
        topic, _, doc, grade = line.split()
        lines.append(re.compile(rf"{topic}\s+\S+\s+{re.escape(doc)}\s+{grade}\b"))
    return lines


def judgments_in(text: str, qrels_lines: list[re.Pattern[str]]) -> list[str]:
    found = [mark for mark in GRADE_MARKS if mark in text]
    found += [line.pattern for line in qrels_lines if line.search(text)]
    return found


@pytest.fixture
def two_runs(world: World) -> World:
    """Red's second run on the open task and on the hidden one, each evaluated."""
    world.submit("open", "red-two", text=run_text(tag="two", shift=2))
    world.submit("secret", "red-secret-two", text=run_text(tag="two", shift=3))
    return world


def test_a_participants_compare_page_shows_no_judgment_before_the_release(two_runs: World) -> None:
    world = two_runs
    path = COMPARE.format(task="open", first="red-open", second="red-two")
    with client_for(world.engine) as client:
        red = client.get(path, headers=world.headers("red"))
        owner = client.get(path, headers=world.headers("owner"))
        assert red.status_code == 200 and owner.status_code == 200
        assert "Where they disagree most" in red.text and "<li><code>" in red.text  # their own documents
        assert judgments_in(red.text, []) == []
        assert "The documents' judgments are shown when the organisers release the task." in red.text
        assert re.search(r'<span class="grade">(rel \d|unjudged)</span>', owner.text)  # the organiser's to see

        tasks.release_task(world.engine, "open", by=as_principal(world.engine, "owner"))
        released = client.get(path, headers=world.headers("red"))
        assert released.status_code == 200
        assert re.search(r'<span class="grade">(rel \d|unjudged)</span>', released.text)


def _paths(world: World, routes: list[Any]) -> list[str]:
    """Every GET route with the participant's own objects of the hidden and the open task."""
    values: dict[str, list[str]] = {
        "task": ["secret", "open"],
        "name": ["red-secret", "red-open"],
        "run": ["red-secret", "red-open"],
        "pool": ["pool"],
        "topic": ["301"],
        "fmt": ["csv", "json", "md", "tex"],
        "token_id": ["1"],
        "job_id": [str(world.jobs["secret"]), str(world.jobs["open"])],
        "qrels": ["sample"],
        "bank": ["bank"],
        "code": ["inv_1_not-the-secret"],  # an invite or reset link: a wrong one
        "judge": ["j"],
        "link_id": ["1"],
        "nugget": ["1"],
    }
    queries = {
        "/tasks/{task}/compare": [
            "?run=red-secret&run=red-secret-two&measure=AP",
            "?run=red-open&run=red-two&measure=AP",
            "?run=red-open&run=red-two&measure=P@10&collection=none",
        ],
        "/api/v1/runs/{name}/results": ["?per_query=true"],
        "/runs/{run}": ["", "?measure=P@10"],
        "/api/v1/pools/{name}/entries": ["?topic=301"],
    }
    paths = []
    for route in routes:
        if "GET" not in (getattr(route, "methods", None) or set()) or route.path.startswith(SCHEMA):
            continue
        filled = [route.path]
        for parameter in route.param_convertors:
            assert parameter in values, f"GET {route.path}: no test value for {{{parameter}}}"
            filled = [p.replace(f"{{{parameter}}}", v) for p in filled for v in values[parameter]]
        paths += [p + q for p in filled for q in queries.get(route.path, [""])]
    return paths


def test_no_route_a_participant_reaches_carries_a_judgment_of_hidden_or_unreleased_qrels(two_runs: World) -> None:
    world = two_runs
    qrels_lines = _qrels_lines()
    with client_for(world.engine, writes_per_minute=10_000) as client:
        paths = _paths(world, _routes(client.app.routes))  # type: ignore[attr-defined]
        assert len(paths) > 40 and any("compare?run=red-open" in p for p in paths)
        answered, leaks = 0, {}
        for path in paths:
            response = client.get(path, headers=world.headers("red"), follow_redirects=False)
            assert response.status_code < 500, (path, response.text[:300])
            answered += response.status_code == 200
            found = judgments_in(response.text, qrels_lines)
            if found:
                leaks[path] = found
    assert answered > 15
    assert leaks == {}
