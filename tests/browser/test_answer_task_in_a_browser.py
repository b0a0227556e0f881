"""A hidden task that takes generated answers, in Chromium at 1280 and 390 px, from upload to
release: a participant uploads a bad answer file (its `file:line` error inline, the form kept),
then the TREC 2024 RAG gpt-4o baseline, and sees it awaiting assessment and the scores hidden; the
organisers' assessment is imported and evaluated; the organiser releases the task in the console;
the participant reads the leaderboard with the nugget measures. axe finds no serious violation;
no page scrolls sideways on a phone."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine

from evalstore.services import access, answers, tasks
from evalstore.services.orchestration import work_on
from evalstore.web.app import create_app
from evalstore.web.settings import ServerSettings
from tests.browser.axe import axe_violations
from tests.browser.test_organiser_in_a_browser import _no_sideways_scroll
from tests.browser.test_pages_in_a_browser import PASSWORD, browser_page, shot, sign_in
from tests.conftest import shared_path
from tests.http.conftest import serving

__all__ = ["browser_page"]  # the fixture, shared with the other browser tests
CONFIRM = "main form:has(input[name=confirm]) button[type=submit]"


@pytest.fixture
def rag_task(sqlite_engine: Engine) -> Iterator[tuple[str, Engine]]:
    """Hidden task 'rag' over the TREC 2024 RAG example bank, organised by olga; pat of team uni-a."""
    engine = sqlite_engine
    answers.import_nuggets(engine, shared_path("rag24", "nuggets.example.jsonl"), name="rag24")
    access.add_user(engine, "olga", role="organiser", password=PASSWORD)
    access.add_user(engine, "pat", role="participant", team="uni-a", password=PASSWORD)
    tasks.create_task(
        engine, "rag", nuggets_name="rag24", owner="olga", hidden=True, max_runs_per_team=2, official_measure="W"
    )
    settings = ServerSettings(
        database_url=engine.url.render_as_string(hide_password=False), secure_cookies=False, writes_per_minute=1000
    )
    with serving(create_app(settings)) as url:
        yield url, engine


@pytest.mark.parametrize("width", [1280, 390])
def test_a_hidden_answer_task_from_upload_to_release(
    rag_task: tuple[str, Engine], browser_page: object, tmp_path: Path, width: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tasks.boards, "BOARD_FRESHNESS", 0.0)  # the release shows on the next page
    site, engine = rag_task
    page = browser_page
    page.set_viewport_size({"width": width, "height": 900})  # type: ignore[attr-defined]
    sign_in(page, site, "pat", "/tasks/rag/submit")
    meta = page.inner_text("dl.meta")  # type: ignore[attr-defined]
    assert "generated answers, scored on nugget bank rag24" in meta and "0 of 2 runs used by team uni-a" in meta

    bad = tmp_path / "answers.jsonl"
    bad.write_text('{"run_id": "x", "topic_id": "t1", "references": ["s1"], "answer": [{"text": "A."}]}\n')
    page.set_input_files("#file", str(bad))  # type: ignore[attr-defined]
    page.fill("#name", "uni-a-gpt")  # type: ignore[attr-defined]
    page.click("form.card button[type=submit]")  # type: ignore[attr-defined]
    error = page.inner_text("#submit-error")  # type: ignore[attr-defined]
    assert (
        error
        == "answers.jsonl:1: sentence 1 has no 'citations': give the indexes of the references it cites ([] for none)"
    )
    assert page.input_value("#name") == "uni-a-gpt"  # type: ignore[attr-defined]  # the form is kept
    shot(page, f"answers-submit-error-{width}")
    assert axe_violations(page) == []  # type: ignore[arg-type]

    good = shared_path("rag24", "answers", "baseline_rag24.test_gpt-4o_top20.jsonl")
    page.set_input_files("#file", str(good))  # type: ignore[attr-defined]
    page.click("form.card button[type=submit]")  # type: ignore[attr-defined]
    page.wait_for_url(f"{site}/tasks/rag/submit?submitted=uni-a-gpt")  # type: ignore[attr-defined]
    row = page.inner_text("main table tbody tr")  # type: ignore[attr-defined]
    assert "uni-a-gpt" in row and "awaiting assessment" in row
    assert "1 of 2 runs used by team uni-a" in page.inner_text("dl.meta")  # type: ignore[attr-defined]
    shot(page, f"answers-submitted-{width}")
    _no_sideways_scroll(page, width)
    second = shared_path("rag24", "answers", "baseline_rag24.test_command-r-plus_top20.jsonl")
    page.set_input_files("#file", str(second))  # type: ignore[attr-defined]
    page.fill("#name", "uni-a-cmdr")  # type: ignore[attr-defined]
    page.click("form.card button[type=submit]")  # type: ignore[attr-defined]
    page.wait_for_url(f"{site}/tasks/rag/submit?submitted=uni-a-cmdr")  # type: ignore[attr-defined]

    # the organisers assess (NIST's assignments, matched to the upload by its text) and evaluate
    answers.import_nuggets(engine, shared_path("rag24", "nugget_assignment.example.jsonl"), name="rag24")
    queued = tasks.evaluate_answers(engine, "rag")
    work_on(engine, [ref.evaluation_id for _, ref in queued.jobs], mlflow=False)
    page.goto(f"{site}/tasks/rag")  # type: ignore[attr-defined]
    assert page.inner_text("main [role=status]") == "Scores are hidden until the organisers release the task."  # type: ignore[attr-defined]
    assert "0.4737" not in page.inner_text("main")  # type: ignore[attr-defined]
    shot(page, f"answers-hidden-{width}")
    assert axe_violations(page) == []  # type: ignore[arg-type]

    page.context.clear_cookies()  # type: ignore[attr-defined]
    sign_in(page, site, "olga", "/tasks/rag/manage")
    page.click("main button:has-text('Release')")  # type: ignore[attr-defined]
    page.click(CONFIRM)  # type: ignore[attr-defined]
    page.wait_for_url(f"{site}/tasks/rag/manage")  # type: ignore[attr-defined]
    assert tasks.show_task(engine, "rag").released_at is not None

    page.context.clear_cookies()  # type: ignore[attr-defined]
    sign_in(page, site, "pat", "/tasks/rag")
    header = page.locator("table.board thead th").all_inner_texts()  # type: ignore[attr-defined]
    assert [h.strip(" ▼") for h in header] == [
        "#",
        "Run",
        "Team",
        "Type",
        "W",
        "V_strict",
        "A_strict",
        "V",
        "A",
        "Tier (W)",  # one topic assessed: no tiers (Tukey's HSD needs two)
        "Topics",
    ]
    cells = page.locator("table.board tbody tr:has-text('uni-a-gpt') td").all_inner_texts()  # type: ignore[attr-defined]
    assert cells[1] == "uni-a-gpt" and cells[4].startswith("0.4737")  # docs/guide/answers.md's worked example
    assert "Answers scored on nugget bank rag24" in page.inner_text("main")  # type: ignore[attr-defined]
    shot(page, f"answers-released-{width}")
    assert axe_violations(page) == []  # type: ignore[arg-type]
    _no_sideways_scroll(page, width)

    # the run's page: its topic's W against the median of the task's two runs
    page.goto(f"{site}/runs/uni-a-gpt")  # type: ignore[attr-defined]
    assert "uni-a-gpt: per-topic W minus the median of the task's 2 runs" in page.inner_text("main")  # type: ignore[attr-defined]
    assert page.locator("main svg").count() >= 1  # type: ignore[attr-defined]
    per_topic = page.locator("main table:has(th:has-text('Topic')) tbody tr").all_inner_texts()  # type: ignore[attr-defined]
    assert len(per_topic) == 1 and per_topic[0].split()[:2] == ["2024-105741", "0.4737"]
    shot(page, f"answers-run-{width}")
    assert axe_violations(page) == []  # type: ignore[arg-type]
    _no_sideways_scroll(page, width)

    # compared with the team's other run, from the run page's link
    page.click("main a:has-text('Compare with another run')")  # type: ignore[attr-defined]
    for run in ("uni-a-gpt", "uni-a-cmdr"):
        page.check(f"#runs input[value='{run}']")  # type: ignore[attr-defined]
    page.click("main form.toolbar button[type=submit]")  # type: ignore[attr-defined]
    page.wait_for_selector("main h2:has-text('Tests')")  # type: ignore[attr-defined]
    main = page.inner_text("main")  # type: ignore[attr-defined]
    assert "t test, holm-corrected over the 1 pairs, alpha 0.05; 1 topics" in main
    assert "Only 1 topics: with fewer than 10, intervals and p-values mean little." in main
    differences = page.locator("main table:has(th:has-text('Topic')) tbody tr").all_inner_texts()  # type: ignore[attr-defined]
    assert [d.split() for d in differences] == [["2024-105741", "-0.0526"]]  # 0.4737 - 0.5263
    assert page.input_value("#measure") == "W"  # type: ignore[attr-defined]
    shot(page, f"answers-compare-{width}")
    assert axe_violations(page) == []  # type: ignore[arg-type]
    _no_sideways_scroll(page, width)
