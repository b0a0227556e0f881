"""The pages in a real browser (Playwright driving Debian's Chromium): an organiser signs in, opens
a leaderboard, sorts it, opens a run, compares two runs; an assessor judges ten documents of a
pool with the keyboard only, undoes one, and the judgments show in `judgments agreement`.

Each page is saved as a screenshot in ``EVALSTORE_SCREENSHOTS`` (default: build/screenshots).
Chromium comes from the system (``apt-get install chromium-headless-shell``, or ``chromium``;
scripts/test installs the first under CI): Playwright's own browser download is not reachable from
our machines.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine
from typer.testing import CliRunner

from evalstore.cli import app as cli_app
from evalstore.services import access, collections, judging, pools, store, tasks
from evalstore.services.orchestration import work_on
from evalstore.web.app import create_app
from evalstore.web.settings import ServerSettings
from tests.browser.axe import axe_violations
from tests.http.conftest import SAMPLE, run_text, serving

# Chromium's headless shell where it is installed (Debian's chromium-headless-shell, the build
# Playwright itself runs headless): the same Blink, without the full browser's UI, its WebUI
# renderers and its profile's services, which the full browser's headless mode starts too; the
# browser tests take about half the CPU with it (docs/benchmarks.md, "The test suite"). The full
# browser stays the fallback.
CHROMIUM = shutil.which("chromium-headless-shell") or shutil.which("chromium") or shutil.which("chromium-browser")
SCREENSHOTS = Path(
    os.environ.get("EVALSTORE_SCREENSHOTS", Path(__file__).resolve().parents[2] / "build" / "screenshots")
)
PASSWORD = "a long demo password"

if CHROMIUM is None and os.environ.get("CI") == "true":
    pytest.fail(
        "CI must run the browser tests: scripts/test installs Debian's chromium-headless-shell when CI=true",
        pytrace=False,
    )
# every browser test module's mark
NEEDS_CHROMIUM = pytest.mark.skipif(
    CHROMIUM is None, reason="no Chromium here (apt-get install chromium-headless-shell)"
)
pytestmark = NEEDS_CHROMIUM


@pytest.fixture
def site(sqlite_engine: Engine, tmp_path: Path) -> Iterator[str]:
    """A task with three evaluated runs of three teams, and a pool of topic 301 with statements and
    documents, assigned to assessor judy; served by uvicorn on a free port."""
    engine = sqlite_engine
    store.import_qrels(engine, SAMPLE / "qrels.test", name="sample")
    access.add_user(engine, "olga", role="organiser", password=PASSWORD)
    access.add_user(engine, "judy", role="assessor", password=PASSWORD)
    organiser = access.authenticate(engine, access.create_token(engine, "olga").token)
    tasks.create_task(
        engine, "sample-task", qrels_name="sample", owner="olga", measures=["AP", "nDCG@10", "P@10", "RR"]
    )
    for shift, team in ((0, "alpha"), (2, "beta"), (5, "gamma")):
        path = tmp_path / f"{team}.txt"
        path.write_text(run_text(("301", "302", "303"), tag=team, shift=shift))
        tasks.submit_run(engine, organiser, "sample-task", path, name=f"{team}-run", team=team)
    work_on(engine, [j["id"] for j in tasks.queue(engine, organiser)], mlflow=False)
    pools.build_pool(engine, name="judging", run_names=["alpha-run", "beta-run", "gamma-run"], depth=10, topics=["301"])
    topics = tmp_path / "topics.jsonl"
    topics.write_text(
        '{"topic": "301", "title": "international organized crime", "description": "Identify '
        'organizations that participate in international criminal activity."}\n'
    )
    collections.import_topics(engine, topics, name="sample-topics")
    entries = judging.pool_entries(engine, _admin(engine), "judging", topic="301")
    documents = tmp_path / "docs.jsonl"
    documents.write_text(
        "".join(
            f'{{"doc_id": "{e["doc"]}", "title": "Report {i}", "text": "An international crime ring was broken up. '
            f'Police say organized groups moved goods across borders (document {i})."}}\n'
            for i, e in enumerate(entries[:-1])
        )
    )  # the last one has no text: shown as such
    collections.import_documents(engine, documents, collection="sample-docs")
    judging.configure_pool(engine, "judging", topic_set="sample-topics", collection="sample-docs")
    judging.assign_assessor(engine, "judging", "judy")
    sheet = tmp_path / "kim.tsv"  # a second assessor's sheet, for agreement
    sheet.write_text("topic\tdoc\trelevance\n" + "".join(f"301\t{e['doc']}\t{i % 3}\n" for i, e in enumerate(entries)))
    pools.import_judgments(engine, sheet, pool_name="judging", assessor="kim")
    settings = ServerSettings(
        database_url=engine.url.render_as_string(hide_password=False), secure_cookies=False, writes_per_minute=1000
    )
    with serving(create_app(settings)) as url:
        yield url


def _admin(engine: Engine) -> access.Principal:
    access.add_user(engine, "root", role="admin")
    return access.authenticate(engine, access.create_token(engine, "root").token)


@pytest.fixture
def browser_page(chromium: object) -> Iterator[object]:
    """A page in a context of its own of the module's Chromium (tests/browser/conftest.py)."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    context = chromium.new_context(viewport={"width": 1280, "height": 900})  # type: ignore[attr-defined]
    try:
        yield context.new_page()
    finally:
        context.close()


def shot(page: object, name: str) -> None:
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)  # type: ignore[attr-defined]


def sign_in(page: object, site: str, user: str, next_page: str) -> None:
    page.goto(f"{site}/login?next={next_page}")  # type: ignore[attr-defined]
    page.fill("#name", user)  # type: ignore[attr-defined]
    page.fill("#password", PASSWORD)  # type: ignore[attr-defined]
    page.click("button[type=submit]")  # type: ignore[attr-defined]
    page.wait_for_url(f"{site}{next_page}")  # type: ignore[attr-defined]


def test_an_organiser_reads_the_leaderboard_a_run_and_a_comparison(site: str, browser_page: object) -> None:
    page = browser_page
    sign_in(page, site, "olga", "/tasks/sample-task")
    runs = page.locator("table.board tbody tr td:nth-child(2)").all_inner_texts()  # type: ignore[attr-defined]
    assert sorted(runs) == ["alpha-run", "beta-run", "gamma-run"]
    assert page.locator("td.tier").count() == 3  # type: ignore[attr-defined]
    shot(page, "leaderboard")
    page.click("th >> text=P@10")  # type: ignore[attr-defined]
    page.wait_for_url(re.compile(r"sort=P%4010"))  # type: ignore[attr-defined]
    means = [float(v) for v in page.locator("table.board tbody tr td:nth-child(7) .mean").all_inner_texts()]  # type: ignore[attr-defined]
    assert means == sorted(means, reverse=True)
    page.click("table.board >> text=beta-run")  # type: ignore[attr-defined]
    page.wait_for_url(f"{site}/runs/beta-run")  # type: ignore[attr-defined]
    assert page.locator("figure.chart svg rect").count() == 3  # type: ignore[attr-defined]
    shot(page, "run")
    page.goto(f"{site}/tasks/sample-task")  # type: ignore[attr-defined]
    for box in page.locator("#compare-runs input[type=checkbox]").all():  # type: ignore[attr-defined]
        box.set_checked(box.get_attribute("value") in ("alpha-run", "gamma-run"))
    page.click("button:has-text('Compare')")  # type: ignore[attr-defined]
    page.wait_for_url(re.compile(r"/tasks/sample-task/compare\?"))  # type: ignore[attr-defined]
    assert page.locator("h2 >> text=Tests").count() == 1  # type: ignore[attr-defined]
    assert page.locator("section.disagreement").count() >= 1  # type: ignore[attr-defined]
    shot(page, "compare")
    page.goto(f"{site}/queue?state=done")  # type: ignore[attr-defined]
    assert page.locator("td .state-done").count() == 3  # type: ignore[attr-defined]
    shot(page, "queue")
    page.click("text=Sign out")  # type: ignore[attr-defined]
    page.wait_for_url(f"{site}/")  # type: ignore[attr-defined]
    page.goto(f"{site}/queue")  # type: ignore[attr-defined]
    assert "/login" in page.url  # type: ignore[attr-defined]


def test_an_assessor_judges_ten_documents_with_the_keyboard(
    site: str, browser_page: object, sqlite_engine: Engine
) -> None:
    page = browser_page
    sign_in(page, site, "judy", "/judge")
    page.click("text=judging")  # type: ignore[attr-defined]
    page.click("td >> text=301")  # type: ignore[attr-defined]
    page.wait_for_url(f"{site}/judge/judging/301")  # type: ignore[attr-defined]
    assert page.locator("mark").count() > 0  # type: ignore[attr-defined]  # the topic's words lit in the text
    shot(page, "judge")
    seen = []
    for i in range(10):
        seen.append(page.inner_text("#doc-id"))  # type: ignore[attr-defined]
        with page.expect_navigation():  # type: ignore[attr-defined]
            page.keyboard.press(str(i % 4))  # type: ignore[attr-defined]
    assert len(set(seen)) == 10
    assert page.inner_text("#progress").startswith("10 / ")  # type: ignore[attr-defined]
    with page.expect_navigation():  # type: ignore[attr-defined]
        page.keyboard.press("u")  # type: ignore[attr-defined]
    assert page.inner_text("#doc-id") == seen[-1]  # type: ignore[attr-defined]  # the undone one, again
    assert page.inner_text("#progress").startswith("9 / ")  # type: ignore[attr-defined]
    page.set_viewport_size({"width": 390, "height": 844})  # type: ignore[attr-defined]
    shot(page, "judge-phone")
    url = sqlite_engine.url.render_as_string(hide_password=False)
    result = CliRunner().invoke(
        cli_app, ["--database-url", url, "judgments", "agreement", "--pool", "judging", "--format", "json"]
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["assessors"] == ["judy", "kim"]
    assert report["pairs"][0]["items"] == 9  # the ten judged, one undone


def test_the_api_documentation_shows_its_operations_offline(site: str, browser_page: object) -> None:
    """Swagger UI from the service's own files: every request elsewhere is refused, and the page
    still lists the API's operations."""
    page = browser_page
    elsewhere: list[str] = []

    def only_this_site(route: object) -> None:
        url = route.request.url  # type: ignore[attr-defined]
        if url.startswith(site):
            route.continue_()  # type: ignore[attr-defined]
        else:
            elsewhere.append(url)
            route.abort()  # type: ignore[attr-defined]

    page.route("**/*", only_this_site)  # type: ignore[attr-defined]
    page.goto(f"{site}/api/v1/docs")  # type: ignore[attr-defined]
    page.wait_for_selector(".opblock-summary-path")  # type: ignore[attr-defined]
    paths = page.locator(".opblock-summary-path").all_inner_texts()  # type: ignore[attr-defined]
    assert "/api/v1/tasks/{task}/leaderboard" in [p.replace("\u200b", "") for p in paths]
    assert elsewhere == []
    shot(page, "api-docs")


def test_the_api_reference_shows_its_operations_offline(site: str, browser_page: object) -> None:
    """ReDoc's page loads nothing from any other site (every other address is refused here) and
    still lists the API's operations, its search included (a worker made from a blob)."""
    page = browser_page
    elsewhere: list[str] = []

    def only_this_site(route: object) -> None:
        url = route.request.url  # type: ignore[attr-defined]
        if url.startswith(site) or url.startswith("blob:"):
            route.continue_()  # type: ignore[attr-defined]
        else:
            elsewhere.append(url)
            route.abort()  # type: ignore[attr-defined]

    refused: list[str] = []
    page.on("console", lambda m: refused.append(m.text) if "Content Security Policy" in m.text else None)  # type: ignore[attr-defined]
    page.route("**/*", only_this_site)  # type: ignore[attr-defined]
    page.goto(f"{site}/api/v1/redoc")  # type: ignore[attr-defined]
    page.wait_for_selector("h2 >> text=/leaderboard/i")  # type: ignore[attr-defined]
    assert "/api/v1/tasks/{task}/leaderboard" in page.inner_text("body")  # type: ignore[attr-defined]
    page.fill("input[placeholder='Search...']", "leaderboard")  # type: ignore[attr-defined]
    page.wait_for_selector("[role=search] >> text=/leaderboard/i")  # type: ignore[attr-defined]
    assert elsewhere == []
    # the one address ReDoc names on its own, its credit's logo, is refused by the page's policy
    assert all("logo-mini.svg" in message for message in refused), refused
    assert not axe_violations(page), axe_violations(page)
    shot(page, "api-reference")
