"""A released task with a public/private topic split, in Chromium at 1280 and 390 px: a participant
reads the final standings (the final ranking on the private topics first, the public rank beside
it, the swaps marked);
before the release the same participant saw the public ranking only. axe finds no serious
violation; the page does not scroll sideways on a phone."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine

from evalstore.services import access, store, tasks
from evalstore.services.orchestration import work_on
from evalstore.web.app import create_app
from evalstore.web.settings import ServerSettings
from tests.browser.axe import axe_violations
from tests.browser.test_organiser_in_a_browser import _no_sideways_scroll
from tests.browser.test_pages_in_a_browser import PASSWORD, browser_page, shot, sign_in
from tests.http.conftest import SAMPLE, run_text, serving

__all__ = ["browser_page"]  # the fixture, shared with the other browser tests

TOPICS = ("301", "302", "303")


@pytest.fixture
def split_task(sqlite_engine: Engine, tmp_path: Path) -> Iterator[tuple[str, Engine]]:
    """Task 'split-task' with one of its three topics private and four teams' runs: beta retrieves
    for the public topics only and gamma for the private one only, so the rankings differ."""
    engine = sqlite_engine
    store.import_qrels(engine, SAMPLE / "qrels.test", name="sample")
    access.add_user(engine, "olga", role="organiser", password=PASSWORD)
    task = tasks.create_task(
        engine,
        "split-task",
        qrels_name="sample",
        owner="olga",
        measures=["AP", "nDCG@10", "P@10"],
        official_measure="AP",
        private_fraction=1 / 3,
        split_seed=2026,
    )
    public = tuple(t for t in TOPICS if t not in task.private_topics)
    runs = {"alpha": (TOPICS, 0), "beta": (public, 2), "gamma": (task.private_topics, 1), "delta": (TOPICS, 5)}
    for team, (topics, shift) in runs.items():
        access.add_user(engine, team, role="participant", team=team, password=PASSWORD if team == "alpha" else None)
        path = tmp_path / f"{team}.txt"
        path.write_text(run_text(topics, tag=team, shift=shift))
        participant = access.authenticate(engine, access.create_token(engine, team).token)
        job = tasks.submit_run(engine, participant, "split-task", path, name=f"{team}-run").job.evaluation_id
        work_on(engine, [job], mlflow=False)
    settings = ServerSettings(
        database_url=engine.url.render_as_string(hide_password=False), secure_cookies=False, writes_per_minute=1000
    )
    with serving(create_app(settings)) as url:
        yield url, engine


def test_a_participant_reads_the_final_standings_with_the_swaps(
    split_task: tuple[str, Engine], browser_page: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tasks.boards, "BOARD_FRESHNESS", 0.0)  # the release shows on the next page, not a second later
    site, engine = split_task
    page = browser_page
    sign_in(page, site, "alpha", "/tasks/split-task")
    main = page.inner_text("main")  # type: ignore[attr-defined]
    assert "Ranked on the public topics only" in main and "Private #" not in main

    tasks.release_task(engine, "split-task")
    page.reload()  # type: ignore[attr-defined]
    assert "Final standings" in page.inner_text("#split-note")  # type: ignore[attr-defined]
    header = page.locator("table.board thead th")  # type: ignore[attr-defined]
    assert header.nth(0).inner_text().startswith("Final #") and header.nth(1).inner_text() == "Public #"
    assert "Swap" in page.inner_text("table.board thead")  # type: ignore[attr-defined]
    first = page.locator("table.board tbody tr").first  # type: ignore[attr-defined]
    assert first.locator("td").first.inner_text() == "1"  # rows in the final order
    swapped = page.locator("table.board tr.swapped")  # type: ignore[attr-defined]
    assert swapped.count() >= 2  # a swap moves at least two runs
    assert any("gamma-run" in swapped.nth(i).inner_text() for i in range(swapped.count()))
    assert "▲" in page.inner_text("table.board")  # type: ignore[attr-defined]
    shot(page, "split-released")
    assert not axe_violations(page)
    # on a phone the page does not scroll sideways, and the final standings are in view
    page.set_viewport_size({"width": 390, "height": 844})  # type: ignore[attr-defined]
    # the final ranking too: the released ranking is not behind "Show every column"
    shot(page, "split-released-phone")
    for column in ("Final #", "Public #", "Run", "Final AP", "Swap"):
        box = page.locator("table.board th", has_text=column).first.bounding_box()  # type: ignore[attr-defined]
        assert box is not None and box["x"] + box["width"] <= 390, (column, box)
    page.check("#all-columns")  # type: ignore[attr-defined]  # the public scores and tiers, scrolling in the table
    assert page.locator("table.board th", has_text="Tier").first.is_visible()  # type: ignore[attr-defined]
    _no_sideways_scroll(page, 390)
    shot(page, "split-released-phone-every-column")


def test_an_organiser_sets_times_in_their_own_time_zone(split_task: tuple[str, Engine], browser_page: object) -> None:
    """A browser in Berlin: the form shows and takes local time, the server stores UTC, and the
    task's pages show the time in Berlin's time (UTC in the page's text without the script)."""
    site, engine = split_task
    context = browser_page.context.browser.new_context(timezone_id="Europe/Berlin")  # type: ignore[attr-defined]
    page = context.new_page()
    try:
        sign_in(page, site, "olga", "/tasks/split-task/manage")
        assert page.inner_text("[data-zone-of=closes]") == "(Europe/Berlin)"
        shot(page, "console-split")
        page.fill("#closes", "2027-01-31T18:00")
        page.fill("#official_measure", "nDCG@10")
        page.click("text=Save settings")
        assert page.inner_text("[role=status] >> nth=0") == "Settings saved."
        shown = tasks.show_task(engine, "split-task").as_dict()
        assert shown["closes_at"] == "2027-01-31T17:00:00+00:00"  # 18:00 in Berlin (CET, UTC+1)
        assert shown["official_measure"] == "nDCG@10"
        assert page.input_value("#closes") == "2027-01-31T18:00"  # shown in Berlin's time again
        page.goto(f"{site}/tasks/split-task")
        closes = page.locator("time[datetime='2027-01-31T17:00:00+00:00']")
        assert "18:00" in closes.inner_text() or "6:00" in closes.inner_text()
        assert closes.inner_text().endswith("GMT+1")  # the zone said, as with every time shown
        assert closes.get_attribute("title") == "2027-01-31 17:00 UTC"
        assert "official measure nDCG@10" in page.inner_text("main")
        assert not axe_violations(page)
    finally:
        context.close()
