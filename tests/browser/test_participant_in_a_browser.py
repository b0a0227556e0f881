"""A participant in a real browser (Playwright driving Debian's Chromium), on desktop and on a
390 px phone: signs in, opens the task's submission page, uploads a bad file and reads its
`file:line` error inline with the form kept, uploads a good run and watches it go from queued to
done with only the service running (its in-process worker), then withdraws it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine

from evalstore.services import access, store, tasks
from evalstore.services.orchestration import work_on
from evalstore.services.worker import InProcessWorker, WorkerSettings
from evalstore.web.app import create_app
from evalstore.web.settings import ServerSettings
from tests.browser.axe import axe_violations
from tests.browser.test_pages_in_a_browser import PASSWORD, SCREENSHOTS, browser_page, shot, sign_in
from tests.http.conftest import SAMPLE, run_text, serving

__all__ = ["browser_page"]
CONFIRM = "main form:has(input[name=confirm]) button[type=submit]"  # a confirmation page's button
# the elements whose right edge passes the screen's, outermost first (for the failure message)
WIDER_THAN_THE_SCREEN = """() => [...document.querySelectorAll('body *')]
  .filter(e => e.getBoundingClientRect().right > window.innerWidth + 0.5)
  .slice(0, 5).map(e => `${e.tagName.toLowerCase()}.${e.className} ${Math.round(e.getBoundingClientRect().right)}`)"""  # the fixture, shared with the other browser tests


@pytest.fixture
def service(sqlite_engine: Engine) -> Iterator[str]:
    """The service as `evalstore serve` runs it on SQLite: the pages and an in-process worker."""
    engine = sqlite_engine
    store.import_qrels(engine, SAMPLE / "qrels.test", name="sample")
    access.add_user(engine, "olga", role="organiser")
    access.add_user(engine, "pat", role="participant", team="uni-a", password=PASSWORD)
    tasks.create_task(
        engine, "shared-task", qrels_name="sample", owner="olga", max_runs_per_team=3, measures=["AP", "nDCG@10"]
    )
    url = engine.url.render_as_string(hide_password=False)
    worker = InProcessWorker.start(url, WorkerSettings(poll_interval=0.2, index_runs=False))
    settings = ServerSettings(database_url=url, secure_cookies=False, writes_per_minute=1000)
    try:
        with serving(create_app(settings)) as url:
            yield url
    finally:
        worker.stop(timeout=30)


@pytest.mark.parametrize("width", [1280, 390])
def test_a_participant_submits_and_follows_a_run(
    service: str, browser_page: object, tmp_path: Path, width: int
) -> None:
    page = browser_page
    page.set_viewport_size({"width": width, "height": 900})  # type: ignore[attr-defined]
    sign_in(page, service, "pat", "/tasks/shared-task")
    page.click("text=Your runs and submitting")  # type: ignore[attr-defined]
    page.wait_for_url(f"{service}/tasks/shared-task/submit")  # type: ignore[attr-defined]
    assert "0 of 3 runs used by team uni-a" in page.inner_text("dl.meta")  # type: ignore[attr-defined]

    bad = tmp_path / "bad-run.txt"
    bad.write_text("301 Q0 a 1 1.0 x\n301 Q0 b 2 0.5\n")
    page.set_input_files("#file", str(bad))  # type: ignore[attr-defined]
    page.fill("#name", "pat-1")  # type: ignore[attr-defined]
    page.fill("#description", "BM25, default parameters")  # type: ignore[attr-defined]
    page.click("form.card button[type=submit]")  # type: ignore[attr-defined]
    error = page.inner_text("#submit-error")  # type: ignore[attr-defined]
    assert error == "bad-run.txt:2: expected 6 columns (qid Q0 docno rank score tag), found 5"
    assert page.input_value("#name") == "pat-1"  # type: ignore[attr-defined]  # the form is kept
    assert page.input_value("#description") == "BM25, default parameters"  # type: ignore[attr-defined]
    shot(page, f"submit-error-{width}")

    good = tmp_path / "good-run.txt"
    good.write_text(run_text(tag="pat"))
    page.set_input_files("#file", str(good))  # type: ignore[attr-defined]
    page.click("form.card button[type=submit]")  # type: ignore[attr-defined]
    page.wait_for_url(f"{service}/tasks/shared-task/submit?submitted=pat-1")  # type: ignore[attr-defined]
    # the page follows the run's evaluation by itself (live.js): no reload
    page.wait_for_selector("tr[data-live-name=pat-1][data-state=done]", timeout=60_000)  # type: ignore[attr-defined]
    assert "1 of 3 runs used by team uni-a" in page.inner_text("dl.meta")  # type: ignore[attr-defined]
    shot(page, f"submit-done-{width}")
    overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")  # type: ignore[attr-defined]
    wide = page.evaluate(WIDER_THAN_THE_SCREEN)  # type: ignore[attr-defined]
    assert overflow <= 0, f"the page scrolls sideways by {overflow} px at {width} px: {wide}"
    page.click("text=pat-1")  # type: ignore[attr-defined]
    page.wait_for_url(f"{service}/runs/pat-1")  # type: ignore[attr-defined]
    page.go_back()  # type: ignore[attr-defined]
    page.click("button[aria-label='Withdraw pat-1']")  # type: ignore[attr-defined]
    # asked first: nothing is withdrawn until the confirmation page's button
    page.wait_for_url(f"{service}/runs/pat-1/withdraw")  # type: ignore[attr-defined]
    assert page.inner_text("h1") == "Withdraw run pat-1?"  # type: ignore[attr-defined]
    assert (
        "It keeps its place in team uni-a's quota: it was evaluated and its scores could be read."
        in page.inner_text("main")
    )  # type: ignore[attr-defined]
    shot(page, f"withdraw-asked-{width}")
    assert axe_violations(page) == []  # type: ignore[arg-type]
    overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")  # type: ignore[attr-defined]
    assert overflow <= 0, f"the confirmation scrolls sideways by {overflow} px at {width} px"
    page.click("text=No, go back")  # type: ignore[attr-defined]
    page.wait_for_url(f"{service}/tasks/shared-task/submit")  # type: ignore[attr-defined]
    assert "pat-1" in page.inner_text("main")  # type: ignore[attr-defined]  # still there
    page.click("button[aria-label='Withdraw pat-1']")  # type: ignore[attr-defined]
    page.click(CONFIRM)  # type: ignore[attr-defined]
    page.wait_for_url(f"{service}/tasks/shared-task/submit")  # type: ignore[attr-defined]
    assert "No runs submitted yet." in page.inner_text("main")  # type: ignore[attr-defined]
    assert SCREENSHOTS.joinpath(f"submit-done-{width}.png").exists()


def test_queued_runs_turn_done_on_screen_without_a_reload(
    sqlite_engine: Engine, browser_page: object, tmp_path: Path
) -> None:
    """No worker until the pages are open: then the runs are evaluated, and the team's runs page
    and the leaderboard show it by themselves (the page is the same page: nothing reloaded it)."""
    engine = sqlite_engine
    store.import_qrels(engine, SAMPLE / "qrels.test", name="sample")
    access.add_user(engine, "olga", role="organiser")
    access.add_user(engine, "pat", role="participant", team="uni-a", password=PASSWORD)
    tasks.create_task(engine, "live-task", qrels_name="sample", owner="olga", measures=["AP", "nDCG@10"])
    pat = access.authenticate(engine, access.create_token(engine, "pat").token)
    jobs = []
    for i in (1, 2):
        path = tmp_path / f"run-{i}.txt"
        path.write_text(run_text(tag=f"pat{i}", shift=i))
        jobs.append(tasks.submit_run(engine, pat, "live-task", path, name=f"pat-live-{i}").job.evaluation_id)
    settings = ServerSettings(
        database_url=engine.url.render_as_string(hide_password=False), secure_cookies=False, writes_per_minute=1000
    )
    page = browser_page
    page.set_viewport_size({"width": 390, "height": 844})  # type: ignore[attr-defined]
    with serving(create_app(settings)) as site:
        sign_in(page, site, "pat", "/tasks/live-task/submit")
        first, second = "tr[data-live-name=pat-live-1]", "tr[data-live-name=pat-live-2]"
        assert page.inner_text(f"{first} [data-live=state]") == "queued"  # type: ignore[attr-defined]
        assert page.inner_text(f"{second} [data-live=position]") == "2"  # type: ignore[attr-defined]
        shot(page, "live-queued-390")
        page.evaluate("window.sameDocument = true")  # type: ignore[attr-defined]
        work_on(engine, [jobs[0]], mlflow=False)
        page.wait_for_selector(f"{first}[data-state=done]", timeout=30_000)  # type: ignore[attr-defined]
        assert page.inner_text(f"{first} [data-live=state]") == "done"  # type: ignore[attr-defined]
        page.wait_for_function(  # type: ignore[attr-defined]
            f"document.querySelector('{second} [data-live=position]').textContent === '1'", timeout=30_000
        )
        assert page.evaluate("window.sameDocument === true")  # type: ignore[attr-defined]
        assert page.inner_text("#live-note") == "pat-live-1: done"  # type: ignore[attr-defined]
        shot(page, "live-done-390")

        page.goto(f"{site}/tasks/live-task")  # type: ignore[attr-defined]
        pending = page.inner_text("section.pending")  # type: ignore[attr-defined]
        assert "Being evaluated" in pending and "pat-live-2: queued" in pending
        assert not page.is_visible("text=Show the board with the new scores")  # type: ignore[attr-defined]
        assert axe_violations(page) == []  # type: ignore[arg-type]
        page.evaluate("window.sameDocument = true")  # type: ignore[attr-defined]
        work_on(engine, [jobs[1]], mlflow=False)
        page.wait_for_selector("text=Show the board with the new scores", timeout=30_000)  # type: ignore[attr-defined]
        assert page.inner_text("section.pending [data-live=state]") == "done"  # type: ignore[attr-defined]
        assert page.evaluate("window.sameDocument === true")  # type: ignore[attr-defined]
        overflow = page.evaluate("document.scrollingElement.scrollWidth - window.innerWidth")  # type: ignore[attr-defined]
        assert overflow <= 0
        shot(page, "live-board-390")
        page.click("text=Show the board with the new scores")  # type: ignore[attr-defined]
        page.wait_for_selector("table.board")  # type: ignore[attr-defined]
        assert page.locator("table.board tbody tr").count() == 2  # type: ignore[attr-defined]
        assert page.locator("section.pending").count() == 0  # type: ignore[attr-defined]


@pytest.mark.parametrize("width", [1280, 390])
def test_an_error_page_keeps_the_layout_at_any_name_length(service: str, browser_page: object, width: int) -> None:
    """A name of 200 characters without a space (a run's, from a link) wraps inside the page."""
    page = browser_page
    page.set_viewport_size({"width": width, "height": 900})  # type: ignore[attr-defined]
    sign_in(page, service, "pat", "/tasks/shared-task")
    name = "x" * 200
    response = page.goto(f"{service}/runs/{name}")  # type: ignore[attr-defined]
    assert response.status == 404
    assert page.inner_text("p.error") == f"No run named '{name}'."  # type: ignore[attr-defined]
    shot(page, f"error-long-name-{width}")
    assert axe_violations(page) == []  # type: ignore[arg-type]
    overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")  # type: ignore[attr-defined]
    wide = page.evaluate(WIDER_THAN_THE_SCREEN)  # type: ignore[attr-defined]
    assert overflow <= 0, f"the error page scrolls sideways by {overflow} px at {width} px: {wide}"


def test_a_run_mostly_missing_from_the_qrels_is_stored_with_a_warning(
    service: str, browser_page: object, tmp_path: Path
) -> None:
    page = browser_page
    page.set_viewport_size({"width": 390, "height": 900})  # type: ignore[attr-defined]
    sign_in(page, service, "pat", "/tasks/shared-task/submit")
    mixed = tmp_path / "mixed.txt"
    mixed.write_text(run_text(tag="x") + "".join(f"{t} Q0 doc-{t} 1 1.0 x\n" for t in range(901, 905)))
    page.set_input_files("#file", str(mixed))  # type: ignore[attr-defined]
    page.fill("#name", "pat-mixed")  # type: ignore[attr-defined]
    page.click("form.card button[type=submit]")  # type: ignore[attr-defined]
    page.wait_for_url(f"{service}/tasks/shared-task/submit?submitted=pat-mixed")  # type: ignore[attr-defined]
    assert page.inner_text("#submitted-warning").startswith(  # type: ignore[attr-defined]
        "Run pat-mixed was stored, with a warning: 4 of the 7 topics of run 'pat-mixed' (57%) are not in the qrels"
    )
    shot(page, "submit-warning-390")
    overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")  # type: ignore[attr-defined]
    assert overflow <= 0, f"the page scrolls sideways by {overflow} px"
