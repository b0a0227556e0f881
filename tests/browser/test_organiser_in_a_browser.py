"""An organiser in a real browser (Playwright driving Debian's Chromium), on desktop and on a
390 px phone: opens their task's console from its leaderboard, edits its settings (a bad quota's
message inline, the form kept), releases it, exports its qrels, retries a failed run and cancels a
queued one, builds a pool from the task's runs, assigns an assessor to it, and reads the task's
collection-health report; the console never scrolls sideways."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine

from evalstore.services import access, health, jobs, store, tasks
from evalstore.services.orchestration import work_on
from evalstore.web.app import create_app
from evalstore.web.settings import ServerSettings
from tests.browser.test_pages_in_a_browser import PASSWORD, browser_page, shot, sign_in
from tests.browser.test_participant_in_a_browser import CONFIRM, WIDER_THAN_THE_SCREEN
from tests.http.conftest import SAMPLE, run_text, serving

__all__ = ["browser_page"]  # the fixture, shared with the other browser tests


@pytest.fixture
def campaign(sqlite_engine: Engine, tmp_path: Path) -> Iterator[str]:
    """A hidden task of organiser olga with two evaluated runs, a failed one and a queued one;
    served without a worker (so the queued run stays queued while the test looks)."""
    engine = sqlite_engine
    store.import_qrels(engine, SAMPLE / "qrels.test", name="sample")
    access.add_user(engine, "olga", role="organiser", password=PASSWORD)
    access.add_user(engine, "judy", role="assessor")
    for team in ("alpha", "beta", "gamma", "delta"):
        access.add_user(engine, team, role="participant", team=team)
    tasks.create_task(engine, "campaign", qrels_name="sample", owner="olga", hidden=True)
    for shift, team in enumerate(("alpha", "beta", "gamma", "delta")):
        path = tmp_path / f"{team}.txt"
        path.write_text(run_text(tag=team, shift=shift))
        participant = access.authenticate(engine, access.create_token(engine, team).token)
        job = tasks.submit_run(engine, participant, "campaign", path, name=f"{team}-run").job.evaluation_id
        if team in ("alpha", "beta"):
            work_on(engine, [job], mlflow=False)
        elif team == "gamma":
            claimed = jobs.claim(engine, "test-worker", only=[job])
            assert claimed is not None
            jobs.fail(engine, claimed, "worker ran out of memory while reading the run", retryable=False)
    health.refresh_reports(engine)  # as a worker does once its queue is empty: the health page reads it
    url = engine.url.render_as_string(hide_password=False)
    settings = ServerSettings(database_url=url, secure_cookies=False, writes_per_minute=1000)
    with serving(create_app(settings)) as url:
        yield url


def _no_sideways_scroll(page: object, width: int) -> None:
    overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")  # type: ignore[attr-defined]
    wide = page.evaluate(WIDER_THAN_THE_SCREEN)  # type: ignore[attr-defined]
    assert overflow <= 0, f"the page scrolls sideways by {overflow} px at {width} px: {wide}"


@pytest.mark.parametrize("width", [1280, 390])
def test_an_organiser_runs_the_campaign_from_the_console(
    campaign: str, browser_page: object, tmp_path: Path, width: int
) -> None:
    page = browser_page
    site = campaign
    page.set_viewport_size({"width": width, "height": 900})  # type: ignore[attr-defined]
    sign_in(page, site, "olga", "/tasks/campaign")
    page.click("text=Organiser's console")  # type: ignore[attr-defined]
    page.wait_for_url(f"{site}/tasks/campaign/manage")  # type: ignore[attr-defined]
    assert "worker ran out of memory while reading the run" in page.inner_text("main")  # type: ignore[attr-defined]
    shot(page, f"console-{width}")
    _no_sideways_scroll(page, width)

    # settings: a bad quota comes back inline with every field as typed
    page.fill("#closes", "2027-01-31T18:00")  # type: ignore[attr-defined]
    page.fill("#max_runs_per_team", "three")  # type: ignore[attr-defined]
    page.fill("#measures", "AP, nDCG@10")  # type: ignore[attr-defined]
    page.fill("#description", "Rank the Cranfield abstracts for each query.")  # type: ignore[attr-defined]
    page.click("text=Save settings")  # type: ignore[attr-defined]
    error = page.inner_text("#settings-error")  # type: ignore[attr-defined]
    assert error == "The quota per team is a whole number of runs (empty: no limit); got 'three'."
    assert page.input_value("#measures") == "AP, nDCG@10"  # type: ignore[attr-defined]
    assert page.input_value("#description") == "Rank the Cranfield abstracts for each query."  # type: ignore[attr-defined]
    shot(page, f"console-settings-error-{width}")
    page.fill("#max_runs_per_team", "3")  # type: ignore[attr-defined]
    page.click("text=Save settings")  # type: ignore[attr-defined]
    assert page.inner_text("[role=status] >> nth=0") == "Settings saved."  # type: ignore[attr-defined]
    assert page.input_value("#closes") == "2027-01-31T18:00"  # type: ignore[attr-defined]

    # release the scores: asked first, then confirmed
    page.click("button:has-text('Release the scores')")  # type: ignore[attr-defined]
    page.wait_for_url(f"{site}/tasks/campaign/release")  # type: ignore[attr-defined]
    assert page.inner_text("h1") == "Release the scores of campaign?"  # type: ignore[attr-defined]
    assert "This cannot be undone" in page.inner_text("main")  # type: ignore[attr-defined]
    shot(page, f"console-release-asked-{width}")
    page.click(CONFIRM)  # type: ignore[attr-defined]
    page.wait_for_url(f"{site}/tasks/campaign/manage")  # type: ignore[attr-defined]
    assert "Released" in page.inner_text("main")  # type: ignore[attr-defined]

    # export the qrels: a download
    with page.expect_download() as download_info:  # type: ignore[attr-defined]
        page.click("text=export qrels")  # type: ignore[attr-defined]
    download = download_info.value
    assert download.suggested_filename == "campaign.qrels"
    saved = tmp_path / "campaign.qrels"
    download.save_as(saved)
    assert len(saved.read_text().splitlines()) == len((SAMPLE / "qrels.test").read_text().splitlines())

    # retry the failed run, cancel the queued one
    page.click("button[aria-label='Retry gamma-run']")  # type: ignore[attr-defined]
    page.wait_for_url(f"{site}/tasks/campaign/manage#submissions")  # type: ignore[attr-defined]
    row = page.locator("tr", has_text="gamma-run")  # type: ignore[attr-defined]
    assert "queued" in row.inner_text()
    page.click("button[aria-label='Cancel delta-run']")  # type: ignore[attr-defined]
    assert page.inner_text("h1") == "Cancel the evaluation of delta-run?"  # type: ignore[attr-defined]
    page.click(CONFIRM)  # type: ignore[attr-defined]
    page.wait_for_url(f"{site}/tasks/campaign/manage#submissions")  # type: ignore[attr-defined]
    assert "cancelled" in page.locator("tr", has_text="delta-run").inner_text()  # type: ignore[attr-defined]

    # build a pool of the task's runs and assign judy to it
    page.fill("#pool", "campaign-301")  # type: ignore[attr-defined]
    page.fill("#depth", "10")  # type: ignore[attr-defined]
    page.fill("#topics", "301")  # type: ignore[attr-defined]
    page.click("text=Build the pool")  # type: ignore[attr-defined]
    page.wait_for_url(f"{site}/tasks/campaign/manage#pools")  # type: ignore[attr-defined]
    pool_row = page.locator("tr", has_text="campaign-301")  # type: ignore[attr-defined]
    assert "none yet" in pool_row.inner_text()
    pool_row.locator("select").select_option("judy")
    pool_row.locator("text=Assign").click()
    page.wait_for_load_state()  # type: ignore[attr-defined]
    assert "judy" in page.locator("tr", has_text="campaign-301").locator("td >> nth=-2").inner_text()  # type: ignore[attr-defined]
    shot(page, f"console-done-{width}")
    _no_sideways_scroll(page, width)

    # the collection-health report
    page.click("text=collection health")  # type: ignore[attr-defined]
    page.wait_for_url(f"{site}/tasks/campaign/health")  # type: ignore[attr-defined]
    assert "Discriminative power" in page.inner_text("main")  # type: ignore[attr-defined]
    shot(page, f"console-health-{width}")
    _no_sideways_scroll(page, width)
