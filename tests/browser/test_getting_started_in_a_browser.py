"""Each role's first steps in the browser, as the getting-started pages show them: a participant
(the leaderboard, their runs and the upload form, a run's page), an organiser (the console, the
submissions with a queued run, the queue), an assessor (their pools, a topic, the judging screen)
and a researcher (the collections, a collection's board, a comparison). Each step is a screenshot;
``EVALSTORE_DOCS_SCREENSHOTS=docs/screenshots`` writes them where the docs read them (otherwise
build/screenshots/getting-started), so the pictures in the docs are this test's."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.browser.axe import axe_violations
from tests.browser.test_every_page_in_a_browser import LONG_RUN, lab
from tests.browser.test_pages_in_a_browser import SCREENSHOTS, browser_page, sign_in

__all__ = ["browser_page", "lab"]  # the fixtures, shared with the other browser tests

pytestmark = pytest.mark.xdist_group("every_page")  # the same worker as the site it reads

FOLDER = Path(os.environ.get("EVALSTORE_DOCS_SCREENSHOTS") or SCREENSHOTS / "getting-started")


def step(page: object, name: str, *, whole: bool = False) -> None:
    """The page as a reader first sees it (``whole``: all of it), as ``start-NAME.png``."""
    FOLDER.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(FOLDER / f"start-{name}.png"), full_page=whole)  # type: ignore[attr-defined]


def test_a_participants_first_steps(lab: str, browser_page: object) -> None:
    page = browser_page
    page.set_viewport_size({"width": 1100, "height": 720})  # type: ignore[attr-defined]
    sign_in(page, lab, "pat", "/")
    page.click("text=sample-task")  # type: ignore[attr-defined]
    page.wait_for_url(f"{lab}/tasks/sample-task")  # type: ignore[attr-defined]
    assert page.locator("table.board tbody tr").count() == 3  # type: ignore[attr-defined]
    step(page, "participant-leaderboard")
    page.click("text=Your runs and submitting")  # type: ignore[attr-defined]
    page.wait_for_url(f"{lab}/tasks/sample-task/submit")  # type: ignore[attr-defined]
    assert "alpha-run" in page.inner_text("table")  # type: ignore[attr-defined]
    step(page, "participant-runs", whole=True)
    page.set_viewport_size({"width": 390, "height": 844})  # type: ignore[attr-defined]
    page.click("text=alpha-run")  # type: ignore[attr-defined]
    page.wait_for_url(f"{lab}/runs/alpha-run")  # type: ignore[attr-defined]
    step(page, "participant-run-phone")


def test_an_organisers_first_steps(lab: str, browser_page: object) -> None:
    page = browser_page
    page.set_viewport_size({"width": 1100, "height": 720})  # type: ignore[attr-defined]
    sign_in(page, lab, "olga", "/tasks/sample-task")
    assert "Being evaluated" in page.inner_text("main")  # type: ignore[attr-defined]  # the queued run
    page.click("text=Organiser's console")  # type: ignore[attr-defined]
    page.wait_for_url(f"{lab}/tasks/sample-task/manage")  # type: ignore[attr-defined]
    step(page, "organiser-console")
    page.evaluate("document.getElementById('submissions').scrollIntoView()")  # type: ignore[attr-defined]
    assert page.locator("button", has_text="Cancel").count() == 1  # type: ignore[attr-defined]
    step(page, "organiser-submissions")
    page.click("nav >> text=Queue")  # type: ignore[attr-defined]
    page.wait_for_url(f"{lab}/queue")  # type: ignore[attr-defined]
    assert "delta-queued" in page.inner_text("main")  # type: ignore[attr-defined]
    step(page, "organiser-queue")


def test_an_assessors_first_steps(lab: str, browser_page: object) -> None:
    page = browser_page
    page.set_viewport_size({"width": 1100, "height": 720})  # type: ignore[attr-defined]
    sign_in(page, lab, "judy", "/")
    page.click("nav >> text=Judge")  # type: ignore[attr-defined]
    page.wait_for_url(f"{lab}/judge")  # type: ignore[attr-defined]
    page.click("main >> text=judging")  # type: ignore[attr-defined]
    page.wait_for_url(f"{lab}/judge/sample-task%3Ajudging")  # type: ignore[attr-defined]
    step(page, "assessor-topics")
    page.click("main >> text=301")  # type: ignore[attr-defined]
    page.wait_for_url(f"{lab}/judge/sample-task%3Ajudging/301")  # type: ignore[attr-defined]
    assert page.locator("#doc-text").count() == 1  # type: ignore[attr-defined]
    step(page, "assessor-judging")


def test_a_researchers_first_steps(lab: str, browser_page: object) -> None:
    page = browser_page
    page.set_viewport_size({"width": 1100, "height": 720})  # type: ignore[attr-defined]
    sign_in(page, lab, "root", "/collections")
    step(page, "researcher-collections")
    page.click("td >> text=sample")  # type: ignore[attr-defined]
    page.wait_for_url(f"{lab}/collections/sample")  # type: ignore[attr-defined]
    step(page, "researcher-board")
    page.click("summary >> text=Measures")  # type: ignore[attr-defined]
    page.fill("#measure-filter", "ndcg")  # type: ignore[attr-defined]  # typing filters the checkboxes
    shown = page.locator(".measure-picker li:visible").all_inner_texts()  # type: ignore[attr-defined]
    assert [t.strip() for t in shown] == ["nDCG@10"]
    assert not axe_violations(page)  # type: ignore[arg-type]
    step(page, "researcher-measures")
    page.fill("#measure-filter", "")  # type: ignore[attr-defined]
    assert page.locator(".measure-picker li:visible").count() == 4  # type: ignore[attr-defined]
    page.goto(f"{lab}/collections/sample/compare?run=lab-bm25&run={LONG_RUN}")  # type: ignore[attr-defined]
    assert page.locator("h2 >> text=Tests").count() == 1  # type: ignore[attr-defined]
    step(page, "researcher-compare")
