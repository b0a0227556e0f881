"""The campaign's pages where a new user stumbled: the compare page on the task's official measure;
times that say their zone; upload forms that carry their CSRF token in the body, never the address;
a GET on a POST-only address answered in words with 405 and ``Allow``."""

from __future__ import annotations

import re

from fastapi.testclient import TestClient

from evalstore.services import tasks
from tests.http.conftest import World


def _official(world: World, task: str, measure: str) -> None:
    tasks.update_task(
        world.engine,
        task,
        tasks.TaskSettings(
            opens=None,
            closes=None,
            max_runs_per_team=None,
            measures=["AP", "nDCG@10", "P@10"],
            description=None,
            official_measure=measure,
        ),
    )


def test_the_compare_page_is_on_the_tasks_official_measure(world: World, client: TestClient) -> None:
    _official(world, "open", "nDCG@10")
    world.submit("open", "red-two")
    owner = world.headers("owner")
    empty = client.get("/tasks/open/compare", headers=owner)
    assert empty.status_code == 200
    assert '<input id="measure" name="measure" value="nDCG@10" size="10">' in empty.text
    compared = client.get("/tasks/open/compare?run=red-open&run=red-two", headers=owner)
    assert compared.status_code == 200
    assert '<input id="measure" name="measure" value="nDCG@10" size="10">' in compared.text
    assert "<figcaption>Per-topic nDCG@10 of red-open minus red-two</figcaption>" in compared.text
    asked = client.get("/tasks/open/compare?run=red-open&run=red-two&measure=P@10", headers=owner)
    assert "<figcaption>Per-topic P@10 of red-open minus red-two</figcaption>" in asked.text  # the reader's choice wins


def test_every_time_on_a_page_says_its_zone(world: World, client: TestClient) -> None:
    """The pages write times in UTC and say so; the script (static/times.js) then shows the
    reader's own zone, and names it."""
    owner = world.headers("owner")
    for path in ("/tasks/open/submit", "/runs/red-open", "/collections/sample/runs/red-open", "/queue?state=done"):
        page = client.get(path, headers=owner)
        assert page.status_code == 200, path
        times = re.findall(r"<time datetime=\"[^\"]+\">([^<]*)</time>", page.text)
        assert times and all(re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC", t) for t in times), (path, times)
    script = client.get("/static/times.js").text
    assert 'timeZoneName: "short"' in script


def test_a_get_on_a_post_only_address_is_told_in_words(world: World, client: TestClient) -> None:
    page = client.get("/runs/red-open/withdraw", headers=world.headers("red"))
    assert page.status_code == 405
    assert page.headers["allow"] == "POST"
    assert page.headers["content-type"].startswith("text/html")
    assert "<h1>Not a page to open</h1>" in page.text
    assert (
        '<p class="error" role="alert">This address is where a form is sent (POST), not a page to open. Go back to '
        "the page with the form and use its button, or start again from the tasks.</p>"
    ) in page.text
    anonymous = client.get("/logout")  # no session needed to be told
    assert anonymous.status_code == 405 and "Not a page to open" in anonymous.text
    api = client.get("/api/v1/tasks/open/release", headers=world.headers("owner"))
    assert (api.status_code, api.json(), api.headers["allow"]) == (
        405,
        {"error": "This address does not take GET."},
        "POST",
    )
