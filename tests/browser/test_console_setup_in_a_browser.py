"""An organiser sets a campaign up in a real browser (Playwright driving Debian's Chromium), on
desktop and on a 390 px phone, with no terminal: creates a hidden task over the Cranfield qrels
with a private split, ticked measures, a Markdown description and a topics file; builds a pool of
the submitted runs and attaches Cranfield's topics and documents to it (uploaded files); adds an
LLM judge (a local OpenAI-compatible stub), probes it, runs it on the pool and reads its report
with its cost; schedules the release (asked first) and sees it on the console. The new pages pass
axe's serious and critical rules and never scroll sideways."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
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
from tests.browser.test_participant_in_a_browser import CONFIRM
from tests.conftest import shared_path
from tests.http.conftest import serving
from tests.judges.fake_llm import Script, serve

__all__ = ["browser_page"]  # the fixture, shared with the other browser tests

RUNS = ("bm25s-stem", "tfidf-cosine")


@pytest.fixture
def cranfield_site(sqlite_engine: Engine) -> Iterator[tuple[str, Engine, Path, str]]:
    """The Cranfield qrels, handed to organiser olga by an admin's first task over them; and a
    judge's endpoint (the stub)."""
    cranfield = shared_path("cranfield")
    engine = sqlite_engine
    store.import_qrels(engine, cranfield / "qrels.txt", name="cranfield")
    access.add_user(engine, "olga", role="organiser", password=PASSWORD)
    for team in ("alpha", "beta"):
        access.add_user(engine, team, role="participant", team=team)
    tasks.create_task(engine, "cranfield-practice", qrels_name="cranfield", owner="olga")
    url = engine.url.render_as_string(hide_password=False)
    settings = ServerSettings(database_url=url, secure_cookies=False, writes_per_minute=1000)
    with serving(create_app(settings)) as site, serve(Script()) as endpoint:
        yield site, engine, cranfield, endpoint


def _submit_runs(engine: Engine, cranfield: Path) -> None:
    """Two teams' runs on the new task, evaluated (what participants do on their own pages)."""
    for team, run in zip(("alpha", "beta"), RUNS, strict=True):
        participant = access.authenticate(engine, access.create_token(engine, team).token)
        submitted = tasks.submit_run(engine, participant, "cran", cranfield / "runs" / f"run.{run}.txt", name=run)
        work_on(engine, [submitted.job.evaluation_id], mlflow=False)


@pytest.mark.parametrize("width", [1280, 390])
def test_an_organiser_sets_a_campaign_up_without_a_terminal(
    cranfield_site: tuple[str, Engine, Path, str], browser_page: object, width: int
) -> None:
    site, engine, cranfield, endpoint = cranfield_site
    page = browser_page
    page.set_viewport_size({"width": width, "height": 900})  # type: ignore[attr-defined]
    sign_in(page, site, "olga", "/")
    page.click("text=Create a task")  # type: ignore[attr-defined]
    page.wait_for_url(f"{site}/new-task")  # type: ignore[attr-defined]

    # a measure relevance qrels cannot compute is refused with the reason, the form kept
    page.fill("#name", "cran")  # type: ignore[attr-defined]
    page.select_option("#qrels", "cranfield")  # type: ignore[attr-defined]
    page.fill("#private_fraction", "0.5")  # type: ignore[attr-defined]
    page.fill("#split_seed", "7")  # type: ignore[attr-defined]
    page.fill("#more_measures", "alpha_nDCG@10")  # type: ignore[attr-defined]
    page.fill("#official_measure", "nDCG@10")  # type: ignore[attr-defined]
    page.fill("#max_runs_per_team", "3")  # type: ignore[attr-defined]
    page.fill(  # type: ignore[attr-defined]
        "#description", "## Cranfield\n\nRank the **abstracts** for each query. <script>alert(1)</script>"
    )
    page.set_input_files("#topics_file", str(cranfield / "topics.tsv"))  # type: ignore[attr-defined]
    page.click("text=Create the task")  # type: ignore[attr-defined]
    assert page.inner_text("#task-error") == (  # type: ignore[attr-defined]
        "alpha_nDCG@10 is computed from subtopic judgments, and qrels 'cranfield' hold relevance judgments: "
        "a task over them cannot compute it."
    )
    assert page.input_value("#split_seed") == "7"  # type: ignore[attr-defined]
    shot(page, f"new-task-refused-{width}")
    assert not axe_violations(page)
    _no_sideways_scroll(page, width)

    page.fill("#more_measures", "P@5")  # type: ignore[attr-defined]
    page.set_input_files("#topics_file", str(cranfield / "topics.tsv"))  # type: ignore[attr-defined]
    page.click("text=Create the task")  # type: ignore[attr-defined]
    page.wait_for_url(f"{site}/tasks/cran/manage?created=1")  # type: ignore[attr-defined]
    assert "Task cran created: its scores are hidden until you release them." in page.inner_text("main")  # type: ignore[attr-defined]
    shown = tasks.show_task(engine, "cran")
    assert shown.hidden and shown.split_seed == 7 and shown.measures == ["AP", "nDCG@10", "P@5"]
    assert shown.topics == "cran-topics" and shown.private_topics
    shot(page, f"new-task-created-{width}")
    assert not axe_violations(page)

    # participants submit; the organiser builds a pool of their runs and attaches Cranfield's texts
    _submit_runs(engine, cranfield)
    page.reload()  # type: ignore[attr-defined]
    page.fill("#pool", "cran-pool")  # type: ignore[attr-defined]
    page.fill("#depth", "5")  # type: ignore[attr-defined]
    page.fill("#topics", "1, 2, 3")  # type: ignore[attr-defined]
    page.click("text=Build the pool")  # type: ignore[attr-defined]
    page.wait_for_url(f"{site}/tasks/cran/manage#pools")  # type: ignore[attr-defined]
    page.set_input_files("#topics_file-1", str(cranfield / "topics.tsv"))  # type: ignore[attr-defined]
    page.set_input_files("#documents_file-1", str(cranfield / "docs.jsonl"))  # type: ignore[attr-defined]
    page.click("text=Attach to cran:cran-pool")  # type: ignore[attr-defined]
    page.wait_for_url(f"{site}/tasks/cran/manage?saved=texts#pools")  # type: ignore[attr-defined]
    texts = page.locator("form", has_text="Attach to cran:cran-pool").inner_text()  # type: ignore[attr-defined]
    assert "topics cran:cran-pool-topics" in texts and "documents cran:cran-pool-documents" in texts
    shot(page, f"console-texts-{width}")
    _no_sideways_scroll(page, width)

    # a judge: added, probed and run on the pool (background jobs: the page shows the progress)
    page.click("main >> text=judges")  # type: ignore[attr-defined]
    page.wait_for_url(f"{site}/judges")  # type: ignore[attr-defined]
    page.fill("#name", "stub")  # type: ignore[attr-defined]
    page.fill("#endpoint", endpoint)  # type: ignore[attr-defined]
    page.fill("#model", "fake-model")  # type: ignore[attr-defined]
    page.fill("#price_in", "0.5")  # type: ignore[attr-defined]
    page.fill("#price_out", "2")  # type: ignore[attr-defined]
    page.click("text=Add the judge")  # type: ignore[attr-defined]
    page.wait_for_url(f"{site}/judges/stub?added=1")  # type: ignore[attr-defined]
    page.fill("#limit", "3")  # type: ignore[attr-defined]
    page.click("text=Probe the judge")  # type: ignore[attr-defined]
    page.wait_for_load_state()  # type: ignore[attr-defined]
    shot(page, f"judge-probing-{width}")
    page.wait_for_selector("#probe-done, section[aria-labelledby=progress] .error", timeout=60_000)  # type: ignore[attr-defined]
    assert page.locator("#probe-done").count() == 1, page.inner_text("main")  # type: ignore[attr-defined]
    assert "quoted score" in page.inner_text("#probes + div, section[aria-labelledby=probes]")  # type: ignore[attr-defined]
    page.click("text=Run the judge")  # type: ignore[attr-defined]
    page.wait_for_selector("#run-done", timeout=60_000)  # type: ignore[attr-defined]
    report = page.inner_text("main")  # type: ignore[attr-defined]
    assert "The run on pool cran:cran-pool is done" in report and "Money" in report and "$0.0" in report
    shot(page, f"judge-report-{width}")
    assert not axe_violations(page)
    _no_sideways_scroll(page, width)
    page.goto(f"{site}/judges")  # type: ignore[attr-defined]
    shot(page, f"judges-{width}")
    assert not axe_violations(page)
    page.goto(f"{site}/tasks/cran/manage")  # type: ignore[attr-defined]

    # a release at a set time: asked first, then shown on the console, cancellable
    when = (datetime.now(UTC) + timedelta(days=3)).replace(hour=12, minute=0, second=0, microsecond=0)
    page.fill("#release_at", when.strftime("%Y-%m-%dT%H:%M"))  # type: ignore[attr-defined]
    page.click("button:has-text('Schedule the release')")  # type: ignore[attr-defined]
    assert page.inner_text("h1") == "Release the scores of cran at a set time?"  # type: ignore[attr-defined]
    shot(page, f"release-scheduled-asked-{width}")
    page.click(CONFIRM)  # type: ignore[attr-defined]
    page.wait_for_url(f"{site}/tasks/cran/manage#release-h")  # type: ignore[attr-defined]
    assert "Release scheduled for" in page.inner_text("#scheduled")  # type: ignore[attr-defined]
    assert tasks.show_task(engine, "cran").release_at is not None
    shot(page, f"release-scheduled-{width}")
    assert not axe_violations(page)
    _no_sideways_scroll(page, width)

    # a participant reads the description (Markdown, no script) and downloads the topics file
    page.goto(f"{site}/tasks/cran")  # type: ignore[attr-defined]
    assert page.inner_text(".description h2") == "Cranfield"  # type: ignore[attr-defined]
    assert "<script>" in page.inner_text(".description")  # type: ignore[attr-defined]  # shown as text, never run
    with page.expect_download() as download_info:  # type: ignore[attr-defined]
        page.click("text=topics file")  # type: ignore[attr-defined]
    assert download_info.value.suggested_filename == "cran-topics.jsonl"
