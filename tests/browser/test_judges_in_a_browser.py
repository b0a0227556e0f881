"""Judges in a real browser (Playwright driving Debian's Chromium): an organiser opens the compare
report from their console, compares the human qrels with a judge-made version and reads it, on
desktop and on a 390 px phone, without sideways scrolling; an assessor judges with a judge's
suggestion shown; a reader shows a hybrid board's prediction-powered intervals. The pages pass
axe's serious and critical rules."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine

from evalstore.services import access, judging, tasks
from evalstore.services.judges import registry, running, suggestions, versions
from evalstore.services.orchestration import work_on
from evalstore.web.app import create_app
from evalstore.web.settings import ServerSettings
from tests.browser.axe import axe_violations
from tests.browser.test_organiser_in_a_browser import _no_sideways_scroll
from tests.browser.test_pages_in_a_browser import PASSWORD, browser_page, shot, sign_in
from tests.http.conftest import serving
from tests.judges.conftest import build_world
from tests.judges.fake_llm import Script, serve
from tests.judges.test_ppi_board_page import build_hybrid

__all__ = ["browser_page"]  # the fixture, shared with the other browser tests


@pytest.fixture
def judged_site(sqlite_engine: Engine, tmp_path: Path) -> Iterator[str]:
    """The judges' world (tests/judges/conftest.py) labelled by a fake judge; task 'task' of
    organiser olga moved to the judge's version human@v1; pool 'p' shows the judge's suggestions
    to assessor ann."""
    engine = build_world(sqlite_engine, tmp_path)
    access.add_user(engine, "olga", role="organiser", password=PASSWORD)
    access.add_user(engine, "ann", role="assessor", password=PASSWORD)
    judging.assign_assessor(engine, "p", "ann")
    with serve(Script()) as endpoint:
        registry.add_judge(engine, "fake", endpoint=endpoint, model="fake-model")
        running.run_judge(engine, "fake", pool_name="p")
    tasks.create_task(engine, "task", qrels_name="human", owner="olga", measures=["AP"])
    attached = tasks.attach_runs(engine, "task", ["good", "fair", "poor"])
    work_on(engine, [a.job for a in attached], mlflow=False)
    versions.build_version(engine, "human", pool_name="p", source="judge:fake")
    suggestions.set_suggestions(engine, "p", "fake")
    url = engine.url.render_as_string(hide_password=False)
    with serving(create_app(ServerSettings(database_url=url, secure_cookies=False, writes_per_minute=1000))) as site:
        yield site


@pytest.mark.parametrize("width", [1280, 390])
def test_an_organiser_compares_human_and_judge_labels(judged_site: str, browser_page: object, width: int) -> None:
    page = browser_page
    page.set_viewport_size({"width": width, "height": 900})  # type: ignore[attr-defined]
    sign_in(page, judged_site, "olga", "/tasks/task/manage")
    page.click("text=judgments compared")  # type: ignore[attr-defined]
    page.wait_for_url(f"{judged_site}/tasks/task/judgments")  # type: ignore[attr-defined]
    page.select_option("#first", "human")  # type: ignore[attr-defined]
    page.select_option("#second", "human@v1")  # type: ignore[attr-defined]
    page.click("form[aria-label='what to compare'] button")  # type: ignore[attr-defined]
    page.wait_for_load_state()  # type: ignore[attr-defined]
    main = page.inner_text("main")  # type: ignore[attr-defined]
    assert "human@v1 against human: 7 documents judged in both" in main
    assert "Kendall's tau" in main and "Significance preserved" in main
    assert "Queue these evaluations" in main  # the task's runs are not yet evaluated on human@v1 (no worker)
    shot(page, f"judgments-compared-{width}")
    _no_sideways_scroll(page, width)
    assert not axe_violations(page), axe_violations(page)


def test_an_assessor_sees_the_judges_suggestion(judged_site: str, browser_page: object) -> None:
    page = browser_page
    sign_in(page, judged_site, "ann", "/judge/p/1")
    suggestion = page.inner_text("#suggestion")  # type: ignore[attr-defined]
    assert "Suggestion from judge fake" in suggestion and "query words found" in suggestion
    shot(page, "judge-suggestion")
    assert not axe_violations(page), axe_violations(page)
    with page.expect_navigation():  # type: ignore[attr-defined]
        page.keyboard.press("2")  # type: ignore[attr-defined]
    assert "1 / 3 judged" in page.inner_text("#progress")  # type: ignore[attr-defined]
    assert page.locator("#suggestion").count() == 1  # type: ignore[attr-defined]  # the next document's


@pytest.fixture
def hybrid_site(sqlite_engine: Engine, tmp_path: Path) -> Iterator[str]:
    """Task 'task' of organiser olga on the hybrid version human@v1 (judge 'fake', people on
    topics 1 and 2), as tests/judges/test_ppi_board_page.py builds it; viewer vic."""
    engine = build_world(sqlite_engine, tmp_path)
    access.add_user(engine, "olga", role="organiser", password=PASSWORD)
    access.add_user(engine, "vic", role="viewer", password=PASSWORD)
    with serve(Script()) as endpoint:
        build_hybrid(engine, tmp_path, endpoint, owner="olga")
    url = engine.url.render_as_string(hide_password=False)
    with serving(create_app(ServerSettings(database_url=url, secure_cookies=False, writes_per_minute=1000))) as site:
        yield site


@pytest.mark.parametrize("width", [1280, 390])
def test_a_reader_shows_a_hybrid_boards_prediction_powered_intervals(
    hybrid_site: str, browser_page: object, width: int
) -> None:
    page = browser_page
    page.set_viewport_size({"width": width, "height": 900})  # type: ignore[attr-defined]
    sign_in(page, hybrid_site, "vic", "/tasks/task")
    page.click("text=Show them on AP")  # type: ignore[attr-defined]
    page.wait_for_selector("#ppi-board")  # type: ignore[attr-defined]
    section = page.inner_text("#ppi")  # type: ignore[attr-defined]
    assert "corrected by people's labels on 2 topics they judged completely" in section
    assert "1 topic people judged in part is left out of the correction" in section
    assert page.locator("#ppi-board tbody tr").count() == 3  # type: ignore[attr-defined]
    page.locator("#ppi").scroll_into_view_if_needed()  # type: ignore[attr-defined]
    shot(page, f"ppi-board-{width}")
    _no_sideways_scroll(page, width)
    assert not axe_violations(page), axe_violations(page)
