"""A split task over HTTP: before its release a participant gets no number of a private topic from
any route (the leaderboard page and API, the downloads, a run's page and results, the per-topic
chart, a comparison); its organiser gets both rankings; after the release everyone does."""

from __future__ import annotations

import csv
import io
import json
import re

import pytest
from fastapi.testclient import TestClient

from evalstore.services import tasks
from evalstore.services.kinds import ranking
from tests.http.conftest import World, run_text

TOPICS = ("301", "302", "303")


@pytest.fixture
def split(world: World) -> tuple[str, list[str]]:
    """Task 'split' (organiser: owner) with one private topic; red's run retrieves for every topic,
    red's second run for the public ones, blue's for the private one only: the private topic's
    private ranking differs from the public one."""
    task = tasks.create_task(
        world.engine, "split", qrels_name="sample", owner="owner", private_fraction=1 / 3, split_seed=11
    )
    (private,) = task.private_topics
    public = [t for t in TOPICS if t != private]
    world.submit("split", "red-all", text=run_text(TOPICS, tag="red-all", shift=1))
    world.submit("split", "red-public", text=run_text(tuple(public), tag="red-public", shift=2))
    world.submit("split", "blue-private", team_user="blue", text=run_text((private,), tag="blue-private"))
    return private, public


def _says_private_topic(text: str, private: str) -> list[str]:
    """Where a response names the private topic as a topic (a JSON key or value, a table cell, a
    chart's hint, a comparison's heading)."""
    marks = (f'"{private}"', f">{private}<", f"topic {private}", f"Topic {private}")
    return [mark for mark in marks if mark in text]


def test_a_participant_gets_no_private_topic_number_from_any_route(
    world: World, client: TestClient, split: tuple[str, list[str]]
) -> None:
    private, public = split
    red = world.headers("red")
    stored = ranking.results(world.engine, qrels_name="sample", run_name="red-all", measures=["AP"]).frame["AP"]
    all_topics_mean = f"{stored.mean():.4f}"
    public_mean = f"{stored[public].mean():.4f}"
    routes = [
        "/api/v1/tasks/split/leaderboard",
        "/api/v1/tasks/split/leaderboard?measure=AP&measure=P@10",
        "/api/v1/runs/red-all/results?per_query=true",
        "/api/v1/runs/red-all/results?per_query=true&measure=AP",
        "/tasks/split",
        "/tasks/split?measure=AP",
        "/runs/red-all",
        "/runs/red-all?measure=P@10",
        "/tasks/split/compare?run=red-all&run=red-public&measure=AP",
        *(f"/tasks/split/leaderboard.{fmt}" for fmt in ("csv", "json", "md", "tex")),
    ]
    for route in routes:
        response = client.get(route, headers=red)
        assert response.status_code == 200, (route, response.text[:300])
        assert not _says_private_topic(response.text, private), route
        assert all_topics_mean not in response.text, route  # the mean over every topic counts the private one
        assert "private rank" not in response.text.lower(), route
    board = client.get("/api/v1/tasks/split/leaderboard", headers=red).json()
    assert {r["run"]: r["topics"] for r in board["rows"]} == {"red-all": 2, "red-public": 2, "blue-private": 2}
    assert all("private" not in r and "swap" not in r for r in board["rows"])
    results = client.get("/api/v1/runs/red-all/results?per_query=true", headers=red).json()
    assert results["per_query"] is None and f"{results['aggregates']['AP']:.4f}" == public_mean
    assert results["per_query_withheld"] == (
        "The task keeps some topics private until the organisers release it: until then its runs' scores are "
        "aggregates over the public topics, and no topic is named."
    )
    assert public_mean in client.get("/runs/red-all", headers=red).text
    rows = list(csv.reader(io.StringIO(client.get("/tasks/split/leaderboard.csv", headers=red).text)))
    assert rows[0][rows[0].index("topics")] == "topics" and {r[rows[0].index("topics")] for r in rows[1:]} == {"2"}
    page = client.get("/tasks/split", headers=red).text
    assert "Ranked on the public topics only: 1 of the task's topics is kept private" in page


def test_before_the_release_a_participant_gets_aggregates_only_no_topic_named(
    world: World, client: TestClient, split: tuple[str, list[str]]
) -> None:
    """Naming the public topics names the private ones (the rest of the qrels' topics, which the
    participants have): no per-topic row, no topic id, in pages, API, downloads and charts."""
    red = world.headers("red")
    routes = [
        "/api/v1/tasks/split/leaderboard",
        "/api/v1/runs/red-all/results?per_query=true",
        "/api/v1/runs/red-public/results?per_query=true&measure=AP",
        "/tasks/split",
        "/runs/red-all",
        "/runs/red-all?measure=P@10",
        "/tasks/split/compare?run=red-all&run=red-public&measure=AP",
        "/tasks/split/compare?run=red-all&run=red-public&measure=P@10&test=wilcoxon",
        *(f"/tasks/split/leaderboard.{fmt}" for fmt in ("csv", "json", "md", "tex")),
    ]
    for route in routes:
        response = client.get(route, headers=red)
        assert response.status_code == 200, (route, response.text[:300])
        for topic in TOPICS:
            assert not _says_private_topic(response.text, topic), (route, topic)
            assert f"<td>{topic}" not in response.text and f"{topic}:" not in response.text, (route, topic)
        assert "<svg" not in response.text and "Per topic" not in response.text, route
    run_page = client.get("/runs/red-all", headers=red).text
    assert "Over the task's public topics only, as aggregates: which topics they are" in run_page
    compare = client.get("/tasks/split/compare?run=red-all&run=red-public&measure=AP", headers=red).text
    assert "<caption>t test, holm-corrected over the 1 pairs, alpha 0.05; 2 topics</caption>" in compare
    assert "Where they disagree most" not in compare and "Per-topic differences" not in compare

    # the organiser sees every topic; after the release, so does everyone
    owner = client.get("/runs/red-all", headers=world.headers("owner")).text
    assert all(f"<td>{topic}" in owner for topic in TOPICS)
    assert client.post("/api/v1/tasks/split/release", headers=world.headers("owner")).status_code == 200
    results = client.get("/api/v1/runs/red-all/results?per_query=true", headers=red).json()
    assert sorted(results["per_query"]) == list(TOPICS) and "per_query_withheld" not in results
    released = client.get("/tasks/split/compare?run=red-all&run=red-public&measure=AP", headers=red).text
    assert "Per-topic differences" in released and "<svg" in released


def test_the_organiser_sees_both_rankings_and_everyone_does_after_the_release(
    world: World, client: TestClient, split: tuple[str, list[str]]
) -> None:
    private, _ = split
    board = client.get("/api/v1/tasks/split/leaderboard", headers=world.headers("owner")).json()
    ranks = {r["run"]: (r["rank"], r["private"]["rank"], r["swap"]) for r in board["rows"]}
    assert ranks["blue-private"][0] == 3 and ranks["blue-private"][2] > 0  # blue rises on the private topic
    assert ranks["red-public"][1] == 3 and ranks["red-public"][2] < 0  # red-public, which has none of it, falls
    owner_page = client.get("/runs/red-all", headers=world.headers("owner")).text
    assert f'<td>{private} <small class="muted">private</small></td>' in owner_page  # every topic, the private marked
    owner_download = json.loads(client.get("/tasks/split/leaderboard.json", headers=world.headers("owner")).text)
    assert owner_download["split"]["private_shown"] and all("swap" in r for r in owner_download["rows"])
    assert client.post("/api/v1/tasks/split/release", headers=world.headers("owner")).status_code == 200

    red = world.headers("red")
    board = client.get("/api/v1/tasks/split/leaderboard", headers=red).json()
    assert board["split"]["final"] and {r["run"]: r["swap"] for r in board["rows"]} == {
        run: swap for run, (_, _, swap) in ranks.items()
    }
    results = client.get("/api/v1/runs/red-all/results?per_query=true", headers=red).json()
    assert private in results["per_query"]
    page = client.get("/tasks/split", headers=red).text
    assert "Final standings" in page and "Final #" in page and 'class="swapped"' in page
    download = json.loads(client.get("/tasks/split/leaderboard.json", headers=red).text)
    assert {r["run"]: r["private"]["rank"] for r in download["rows"]}["red-public"] == 3
    assert "private rank" in client.get("/tasks/split/leaderboard.csv", headers=red).text.splitlines()[0]


def test_after_the_release_the_final_ranking_leads_the_board(
    world: World, client: TestClient, split: tuple[str, list[str]]
) -> None:
    """Before the release the organiser's board is in public order with the private rank at its
    end; after it, everyone's is in final (private) order, "Final #" first and "Public #" beside it."""
    owner = world.headers("owner")
    board = client.get("/api/v1/tasks/split/leaderboard", headers=owner).json()
    public_order = [r["run"] for r in board["rows"]]
    final_order = [r["run"] for r in sorted(board["rows"], key=lambda r: r["private"]["rank"])]
    assert public_order != final_order  # the fixture's rankings differ

    def shown(headers: dict[str, str], query: str = "") -> tuple[list[str], list[str]]:
        page = client.get(f"/tasks/split{query}", headers=headers)
        assert page.status_code == 200
        table = page.text.split('<table class="board">')[1].split("</table>")[0]
        heads = re.findall(r'<th scope="col"[^>]*>(?:<a [^>]*>)?([^<]+)', table)
        runs = re.findall(r'<td class="run"><a href="/runs/[^"]*">([^<]+)</a>', table)
        return [h.strip() for h in heads], runs

    heads, runs = shown(owner)
    assert heads[0] == "#" and "Private #" in heads and runs == public_order
    assert client.post("/api/v1/tasks/split/release", headers=owner).status_code == 200

    heads, runs = shown(world.headers("red"))
    assert heads[:3] == ["Final # ▲", "Public #", "Run"] and "Private #" not in heads
    assert runs == [r for r in final_order if r in runs] and len(runs) == 2  # red opens its own runs only
    heads, runs = shown(owner)
    assert runs == final_order
    assert shown(owner, "?sort=AP")[1] == public_order  # the public ranking, a click away
    refused = client.get("/tasks/split?sort=private", headers=owner)
    assert refused.status_code == 422
    assert (
        "Sort by one of the measures shown (AP, nDCG@10, P@10, RR), final (the ranking on the private topics), run or "
        "team; not &#39;private&#39;."
    ) in refused.text


def test_an_organiser_creates_a_split_task_over_the_api(world: World, client: TestClient) -> None:
    body = {"name": "api-split", "qrels": "sample", "private_topics": 0.5, "split_seed": 3, "official_measure": "P_10"}
    created = client.post("/api/v1/tasks", json=body, headers=world.headers("owner"))
    assert created.status_code == 201, created.text
    shown = created.json()
    assert (shown["private_topics"], shown["split_seed"], shown["official_measure"]) == (2, 3, "P@10")
    assert not any(topic in created.text for topic in TOPICS)  # how many topics are private, never which
    refused = client.post(
        "/api/v1/tasks", json={**body, "name": "x", "private_topics": 1.5}, headers=world.headers("owner")
    )
    assert refused.status_code == 422


def test_a_run_pages_medians_from_the_stored_values_are_the_computed_ones_for_every_reader(
    world: World, split: tuple[str, list[str]]
) -> None:
    """A run's page on a measure the worker stored no medians for (P@20, off the board; AP once
    its stored medians are set aside) makes them from the runs' stored values over the topics its
    reader may see: the score matrix's picture, to the bit, before and after the release."""
    from evalstore.services import reports
    from evalstore.services.reports import runs as reports_runs
    from tests.http.conftest import as_principal

    def picture(page: reports.RunPage) -> tuple[object, ...]:
        return page.measure, page.topics, page.values, page.medians, page.task_runs, page.public_only

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("computed through the score matrix")

    seen = 0
    for released in (False, True):
        if released:
            tasks.release_task(world.engine, "split")
        for reader in ("owner", "red", "blue"):
            principal = as_principal(world.engine, reader)
            for run in ("red-all", "red-public", "blue-private"):
                if reader != "owner" and not run.startswith(reader):
                    continue  # another team's run page is not a participant's
                for measure in ("AP", "P@20"):
                    with pytest.MonkeyPatch.context() as patch:
                        patch.setattr(reports_runs, "stored_picture", lambda *a, **k: None)
                        patch.setattr(reports_runs, "median_peers", refuse)
                        from_values = reports.run_page(world.engine, principal, run, measure)
                    with pytest.MonkeyPatch.context() as patch:
                        patch.setattr(reports_runs, "stored_picture", lambda *a, **k: None)
                        patch.setattr(reports_runs, "values_picture", lambda *a, **k: None)
                        computed = reports.run_page(world.engine, principal, run, measure)
                    assert picture(from_values) == picture(computed), (released, reader, run, measure)
                    seen += bool(computed.topics)
    assert seen >= 12  # pictures drawn, not only a split task's aggregates before its release
