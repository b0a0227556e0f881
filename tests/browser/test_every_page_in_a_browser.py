"""Every kind of page in a real browser (Playwright driving Debian's Chromium): a lab's collection
with its runs and comparison; the leaderboard, run and compare pages on a 390 px phone (rank, run,
the tiered measure and the tier in view, nothing scrolls sideways); and axe-core on every page
each role can open, one signed-in browser context per role."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine

from evalstore.db.engine import make_engine
from evalstore.services import access, collections, health, judging, orchestration, pools, store, tasks
from evalstore.services.orchestration import work_on
from evalstore.web.app import create_app
from evalstore.web.settings import ServerSettings
from tests.browser.axe import axe_violations
from tests.browser.test_pages_in_a_browser import PASSWORD, browser_page, shot, sign_in
from tests.browser.test_participant_in_a_browser import WIDER_THAN_THE_SCREEN
from tests.conftest import Templates, migrated_copy
from tests.http.conftest import SAMPLE, run_text, serving

__all__ = ["browser_page"]  # the fixture, shared with the other browser tests

# one xdist worker builds the module's site (``lab``) and browser for all of its tests
pytestmark = pytest.mark.xdist_group("every_page")

LONG_RUN = "gamma-bm25-rm3-expansion-tuned-on-robust04-title-and-description"
USERS = {"root": "admin", "olga": "organiser", "pat": "participant", "judy": "assessor", "vera": "viewer"}


@pytest.fixture(scope="module")
def lab(templates: Templates, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The site below, built once for this module's tests (they only read it)."""
    folder = tmp_path_factory.mktemp("lab")
    engine = make_engine(migrated_copy(templates, "sqlite", folder))
    try:
        yield from _lab(engine, folder)
    finally:
        engine.dispose()


def _lab(engine: Engine, tmp_path: Path) -> Iterator[str]:
    """A task of organiser olga with three evaluated runs (one with a long name) and a queued one, a lab run
    evaluated on the same qrels outside the task, and a pool of the task's runs on topic 301 with
    documents, judged by judy and by kim (so the review page has disagreements); one user of each
    role, each with a password. Served by uvicorn on a free port."""
    store.import_qrels(engine, SAMPLE / "qrels.test", name="sample")
    for name, role in USERS.items():
        access.add_user(engine, name, role=role, team="alpha" if role == "participant" else None, password=PASSWORD)
    organiser = access.authenticate(engine, access.create_token(engine, "olga").token)
    tasks.create_task(
        engine,
        "sample-task",
        qrels_name="sample",
        owner="olga",
        measures=["AP", "nDCG@10", "P@10", "RR"],
    )
    for shift, team, name in ((0, "alpha", "alpha-run"), (2, "beta", "beta-run"), (5, "gamma", LONG_RUN)):
        path = tmp_path / f"{team}.txt"
        path.write_text(run_text(("301", "302", "303"), tag=team, shift=shift))
        tasks.submit_run(engine, organiser, "sample-task", path, name=name, team=team)
    work_on(engine, [j["id"] for j in tasks.queue(engine, organiser)], mlflow=False)
    health.refresh_reports(engine)  # as a worker does once its queue is empty: the health page reads it
    queued = tmp_path / "delta.txt"  # one run still queued: its Cancel and Withdraw buttons show
    queued.write_text(run_text(("301", "302", "303"), tag="delta", shift=1))
    tasks.submit_run(engine, organiser, "sample-task", queued, name="delta-queued", team="delta")
    lab_run = tmp_path / "lab.txt"
    lab_run.write_text(run_text(("301", "302", "303"), tag="lab", shift=3))
    store.register_run(engine, lab_run, name="lab-bm25", system="bm25", description="BM25 with k1 0.9, b 0.4")
    orchestration.evaluate_runs(engine, qrels_name="sample", run_names=["lab-bm25"], measures=["AP", "nDCG@10"])
    pools.build_pool(
        engine, name="judging", run_names=["alpha-run", "beta-run"], depth=10, topics=["301"], task="sample-task"
    )
    topics = tmp_path / "topics.jsonl"
    topics.write_text('{"topic": "301", "title": "international organized crime"}\n')
    collections.import_topics(engine, topics, name="sample-topics")
    admin = access.authenticate(engine, access.create_token(engine, "root").token)
    entries = judging.pool_entries(engine, admin, "sample-task:judging", topic="301")
    documents = tmp_path / "docs.jsonl"
    documents.write_text(
        "".join(
            f'{{"doc_id": "{e["doc"]}", "text": "An international crime ring ({i})."}}\n' for i, e in enumerate(entries)
        )
    )
    collections.import_documents(engine, documents, collection="sample-docs")
    judging.configure_pool(engine, "sample-task:judging", topic_set="sample-topics", collection="sample-docs")
    judging.assign_assessor(engine, "sample-task:judging", "judy")
    judy = access.authenticate(engine, access.create_token(engine, "judy").token)
    for i, entry in enumerate(entries[:4]):
        judging.judge_document(engine, judy, "sample-task:judging", "301", entry["doc"], i % 2)
    sheet = tmp_path / "kim.tsv"
    sheet.write_text("topic\tdoc\trelevance\n" + "".join(f"301\t{e['doc']}\t{i % 3}\n" for i, e in enumerate(entries)))
    pools.import_judgments(engine, sheet, pool_name="sample-task:judging", assessor="kim")
    settings = ServerSettings(
        database_url=engine.url.render_as_string(hide_password=False), secure_cookies=False, writes_per_minute=1000
    )
    with serving(create_app(settings)) as url:
        yield url


def test_an_admin_reads_a_labs_collection(lab: str, browser_page: object) -> None:
    page = browser_page
    sign_in(page, lab, "root", "/")
    page.click("nav >> text=Collections")  # type: ignore[attr-defined]
    page.wait_for_url(f"{lab}/collections")  # type: ignore[attr-defined]
    page.click("td >> text=sample")  # type: ignore[attr-defined]
    page.wait_for_url(f"{lab}/collections/sample")  # type: ignore[attr-defined]
    runs = page.locator("table.board tbody tr td:nth-child(2)").all_inner_texts()  # type: ignore[attr-defined]
    assert sorted(runs) == sorted(["alpha-run", "beta-run", LONG_RUN, "lab-bm25"])
    assert page.locator("td.tier").count() == 4  # type: ignore[attr-defined]
    shot(page, "collection")
    page.click("table.board >> text=lab-bm25")  # type: ignore[attr-defined]
    page.wait_for_url(f"{lab}/collections/sample/runs/lab-bm25")  # type: ignore[attr-defined]
    assert "BM25 with k1 0.9, b 0.4" in page.inner_text("dl.meta")  # type: ignore[attr-defined]
    assert page.locator("figure.chart svg rect").count() == 3  # type: ignore[attr-defined]
    shot(page, "collection-run")
    page.click("text=Compare with another run")  # type: ignore[attr-defined]
    for run in ("lab-bm25", "alpha-run"):
        page.check(f"#runs input[value='{run}']")  # type: ignore[attr-defined]
    page.click("form.toolbar button:has-text('Compare')")  # type: ignore[attr-defined]
    page.wait_for_load_state()  # type: ignore[attr-defined]
    assert page.locator("h2 >> text=Tests").count() == 1  # type: ignore[attr-defined]
    shot(page, "collection-compare")


# the first row's rank, run, tiered measure and tier: right edges within the screen, each shown
FOUR_CELLS = """() => {
  const row = document.querySelector('table.board tbody tr');
  const cells = [row.cells[0], row.cells[1], row.querySelector('td.num:not(.more)'), row.querySelector('td.tier')];
  return cells.map(c => { const r = c.getBoundingClientRect(); return [r.left, r.right, r.width]; });
}"""


def _fits(page: object, path: str) -> None:
    width = page.evaluate("document.documentElement.scrollWidth")  # type: ignore[attr-defined]
    wide = page.evaluate(WIDER_THAN_THE_SCREEN)  # type: ignore[attr-defined]
    assert width <= 390, f"{path} is {width} px wide at 390 px: {wide}"


def test_the_boards_runs_and_comparisons_fit_a_phone(lab: str, browser_page: object) -> None:
    page = browser_page
    page.set_viewport_size({"width": 390, "height": 844})  # type: ignore[attr-defined]
    sign_in(page, lab, "olga", "/tasks/sample-task")
    for path, name in (("/tasks/sample-task", "leaderboard-phone"), ("/collections/sample", "collection-phone")):
        page.goto(f"{lab}{path}")  # type: ignore[attr-defined]
        _fits(page, path)
        for left, right, width in page.evaluate(FOUR_CELLS):  # type: ignore[attr-defined]
            assert width > 0 and left >= 0 and right <= 390, (path, left, right)
        shot(page, name)
        page.click("label[for=all-columns]")  # type: ignore[attr-defined]  # the rest, scrolling in its box
        assert page.locator("th >> text=Team").is_visible()  # type: ignore[attr-defined]
        assert page.locator("th >> text=Judged@10").count() == 0  # type: ignore[attr-defined]  # none computed: no dashes
        _fits(page, f"{path} with every column")
        shot(page, f"{name}-every-column")
    for path, name in (
        (f"/runs/{LONG_RUN}", "run-phone"),
        (f"/tasks/sample-task/compare?run={LONG_RUN}&run=alpha-run", "compare-phone"),
        ("/collections/sample/runs/lab-bm25", None),
        (f"/collections/sample/compare?run=lab-bm25&run={LONG_RUN}", None),
    ):
        page.goto(f"{lab}{path}")  # type: ignore[attr-defined]
        assert page.locator("h1").count() == 1  # type: ignore[attr-defined]
        _fits(page, path)
        if name:
            shot(page, name)


LONG_NAME = "x" * 200  # a name without a break, in an error page's message and heading
# every kind of page each role can open (and pages that are not there, one by a 200-character name)
PAGES = {
    None: ["/", "/login", "/tasks/sample-task", "/tasks/nothing-here", f"/tasks/{LONG_NAME}"],
    "root": [
        "/",
        "/tasks/sample-task",
        "/runs/alpha-run",
        "/tasks/sample-task/compare?run=alpha-run&run=beta-run",
        "/queue?state=done",
        "/tasks/sample-task/health",
        "/profile",
        "/people",
        "/tasks/sample-task/manage",
        "/tasks/sample-task/submit",
        "/judge",
        "/judge/sample-task:judging",
        "/judge/sample-task:judging/301",
        "/judge/sample-task:judging/301/judgments",
        "/pools/sample-task:judging/review",
        "/collections",
        "/collections/sample",
        "/collections/sample/runs/lab-bm25",
        "/collections/sample/compare?run=lab-bm25&run=alpha-run",
        "/runs/nothing-here",
    ],
    "olga": [
        "/new-task",
        "/judges",
        "/tasks/sample-task",
        "/tasks/sample-task/manage",
        "/tasks/sample-task/judgments?first=sample&second=sample",
        "/tasks/sample-task/submit",
        "/queue",
        "/pools/sample-task:judging/review",
        "/collections",
        "/collections/sample",
        "/collections/sample/compare",
        f"/tasks/{LONG_NAME}/manage",
    ],
    "pat": [
        "/",
        "/tasks/sample-task",
        "/tasks/sample-task/submit",
        "/runs/alpha-run",
        "/profile",
        "/queue",
        f"/runs/{LONG_NAME}",
        f"/tasks/{LONG_NAME}/submit",
    ],
    "judy": [
        "/judge",
        "/judge/sample-task:judging",
        "/judge/sample-task:judging/301",
        "/judge/sample-task:judging/301/judgments",
        "/profile",
    ],
    "vera": ["/", "/tasks/sample-task", "/profile"],
}


def test_no_page_has_a_serious_accessibility_violation(lab: str, browser_page: object) -> None:
    browser = browser_page.context.browser  # type: ignore[attr-defined]
    found = []
    for user, paths in PAGES.items():
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        page = context.new_page()
        try:
            if user is not None:
                sign_in(page, lab, user, "/profile")
            for path in paths:
                response = page.goto(f"{lab}{path}")
                assert response is not None and response.status < 500, (path, user)
                found += [f"{path} as {user or 'nobody'}: {v}" for v in axe_violations(page)]
        finally:
            context.close()
    assert not found, "\n".join(found)


# buttons (every action: Withdraw, Release, Cancel, Retry, Assign...) whose box is not wholly on a
# 390 px screen: reaching them would take a sideways scroll, of the page or of a table's box
ACTIONS_OFF_SCREEN = """() => [...document.querySelectorAll('main button, main [type=submit]')]
  .filter(b => b.offsetParent !== null)
  .filter(b => { const r = b.getBoundingClientRect(); return r.left < -0.5 || r.right > window.innerWidth + 0.5; })
  .map(b => `${b.textContent.trim() || b.value} (${Math.round(b.getBoundingClientRect().right)})`)"""


def test_every_page_fits_a_phone_with_its_actions_in_reach(lab: str, browser_page: object) -> None:
    """Every page each role opens, at 390 px: nothing scrolls sideways, and every button is on the
    screen (not in a table's box scrolled away)."""
    browser = browser_page.context.browser  # type: ignore[attr-defined]
    wide, unreachable = [], []
    for user, paths in PAGES.items():
        context = browser.new_context(viewport={"width": 390, "height": 844})
        page = context.new_page()
        try:
            if user is not None:
                sign_in(page, lab, user, "/profile")
            for path in paths:
                response = page.goto(f"{lab}{path}")
                assert response is not None and response.status < 500, (path, user)
                width = page.evaluate("document.scrollingElement.scrollWidth")
                if width > page.evaluate("window.innerWidth"):
                    wide.append(f"{path} as {user or 'nobody'}: {width} px: {page.evaluate(WIDER_THAN_THE_SCREEN)}")
                unreachable += [f"{path} as {user or 'nobody'}: {b}" for b in page.evaluate(ACTIONS_OFF_SCREEN)]
                if user is not None:
                    name = "-".join(filter(None, [user, *path.strip("/").split("?")[0].split("/")])) or user
                    shot(page, f"phone-{name[:60]}")
        finally:
            context.close()
    assert not wide, "\n".join(wide)
    assert not unreachable, "\n".join(unreachable)
