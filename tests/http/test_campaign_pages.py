"""The campaign's pages where a new user stumbled: the compare page on the task's official measure;
times that say their zone; upload forms that carry their CSRF token in the body, never the address;
a GET on a POST-only address answered in words with 405 and ``Allow``."""

from __future__ import annotations

from fastapi.testclient import TestClient

from evalstore.services import tasks
from tests.http.conftest import World


def _official(world: World, task: str, measure: str) -> None:
    tasks.update_task(
        world.engine,
        task,
        opens=None,
        closes=None,
        max_runs_per_team=None,
        measures=["AP", "nDCG@10", "P@10"],
        description=None,
        official_measure=measure,
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
