"""Answers assessed in a real browser (Playwright driving Debian's Chromium), on desktop and on a
390 px phone: an LLM judge (the stub of tests/judges/fake_llm.py) drafts a topic's nuggets; the
bank's organiser reviews them on the bank's page (edits one, rejects one, accepts the rest, then
the bank); the judge assigns the reviewed nuggets; an assessor labels each answer by keyboard
alone (S, P, N, Enter) and grades the cited sentences (2, 1, 0); ``nuggets compare`` then reports
the person's agreement with the judge, equal to the agreement worked out here from the stored
labels. Every page passes axe's serious and critical rules and never scrolls sideways."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from sklearn.metrics import cohen_kappa_score
from sqlalchemy import Engine, select
from typer.testing import CliRunner

from evalstore.cli import app as cli
from evalstore.db.models import AnswerRun, CitationSupport, Nugget, NuggetAssignment
from evalstore.db.session import read_only
from evalstore.services import access, answers, assessing, collections
from evalstore.services.judges import nugget_assignment, nugget_drafts, registry
from evalstore.web.app import create_app
from evalstore.web.settings import ServerSettings
from tests.browser.axe import axe_violations
from tests.browser.test_organiser_in_a_browser import _no_sideways_scroll
from tests.browser.test_pages_in_a_browser import PASSWORD, browser_page, shot, sign_in
from tests.http.conftest import serving
from tests.judges.fake_llm import Script, serve

__all__ = ["browser_page"]  # the fixture, shared with the other browser tests

# the stub drafts each sentence of the answers: vital when two answers hold it, okay otherwise
ANSWERS = {
    "a": ["Rotor blades make noise", "Blade tips approach the speed of sound"],
    "b": ["Rotor blades make noise", "Engines roar loudly"],
    "c": ["Rotor blades make noise", "Exhaust gases are hot"],
}
ORDINAL = {"not_support": 0, "partial_support": 1, "support": 2}


@pytest.fixture
def answers_site(sqlite_engine: Engine, tmp_path: Path) -> Iterator[tuple[str, Engine, str]]:
    engine = sqlite_engine
    for run, sentences in ANSWERS.items():
        record = {
            "run_id": run,
            "topic_id": "t1",
            "topic": "why are helicopters loud",
            "references": [f"{run}-s0", f"{run}-s1"],
            "answer": [{"text": f"{s}.", "citations": [i]} for i, s in enumerate(sentences)],
        }
        (tmp_path / f"{run}.jsonl").write_text(json.dumps(record) + "\n")
        answers.register_answers(engine, tmp_path / f"{run}.jsonl")
    (tmp_path / "segments.jsonl").write_text(
        "".join(
            json.dumps({"doc_id": f"{run}-s{i}", "title": f"Source {run}{i}", "text": f"{s}, the source says."}) + "\n"
            for run, sentences in ANSWERS.items()
            for i, s in enumerate(sentences)
        )
    )
    collections.import_documents(engine, tmp_path / "segments.jsonl", collection="segments")
    access.add_user(engine, "olga", role="organiser", password=PASSWORD)
    access.add_user(engine, "ann", role="assessor", password=PASSWORD)
    with serve(Script()) as endpoint:
        registry.add_judge(engine, "stub", endpoint=endpoint, model="stub-model")
        nugget_drafts.create_bank(engine, "helicopters", judge_name="stub", topics=["t1"], runs=list(ANSWERS))
        assessing.configure_bank(engine, "helicopters", organiser="olga", collection="segments")
        assessing.assign_bank_assessor(engine, "helicopters", "ann")
        url = engine.url.render_as_string(hide_password=False)
        with serving(
            create_app(ServerSettings(database_url=url, secure_cookies=False, writes_per_minute=1000))
        ) as site:
            yield site, engine, url


def _nugget_row(page: object, text: str) -> object:
    return page.locator("li.nugget", has=page.locator(f'input.nugget-text[value="{text}"]'))  # type: ignore[attr-defined]


@pytest.mark.parametrize("width", [1280, 390])
def test_a_draft_is_reviewed_then_answers_are_assessed_by_keyboard(
    answers_site: tuple[str, Engine, str], browser_page: object, width: int
) -> None:
    site, engine, url = answers_site
    page = browser_page
    page.set_viewport_size({"width": width, "height": 900})  # type: ignore[attr-defined]
    suffix = "" if width > 720 else "-phone"

    # the organiser reviews the judge's draft
    sign_in(page, site, "olga", "/banks/helicopters")
    assert "A draft by judge:stub" in page.inner_text("#review")  # type: ignore[attr-defined]
    assert page.inner_text("#unreviewed") == "4"  # type: ignore[attr-defined]
    shot(page, f"bank-draft{suffix}")
    _no_sideways_scroll(page, width)
    assert not axe_violations(page), axe_violations(page)
    row = _nugget_row(page, "Engines roar loudly")
    row.locator("input.nugget-text").fill("Engines are loud")  # type: ignore[attr-defined]
    with page.expect_navigation():  # type: ignore[attr-defined]
        row.locator("button[value=save]").click()  # type: ignore[attr-defined]
    assert "Nugget saved." in page.inner_text("#done")  # type: ignore[attr-defined]
    with page.expect_navigation():  # type: ignore[attr-defined]
        _nugget_row(page, "Exhaust gases are hot").locator("button[value=reject]").click()  # type: ignore[attr-defined]
    while page.locator("li.nugget.unreviewed button[value=accept]").count():  # type: ignore[attr-defined]
        with page.expect_navigation():  # type: ignore[attr-defined]
            page.locator("li.nugget.unreviewed button[value=accept]").first.click()  # type: ignore[attr-defined]
    assert page.inner_text("#unreviewed") == "0"  # type: ignore[attr-defined]
    with page.expect_navigation():  # type: ignore[attr-defined]
        page.click("#accept-bank")  # type: ignore[attr-defined]
    main = page.inner_text("main")  # type: ignore[attr-defined]
    assert "Bank accepted: it is scored on from now on." in main
    assert "drafted by judge:stub · edited by olga · reviewed by olga" in main
    shot(page, f"bank-reviewed{suffix}")
    page.goto(f"{site}/banks")  # type: ignore[attr-defined]
    assert "drafted by judge:stub, accepted" in page.inner_text("main")  # type: ignore[attr-defined]
    _no_sideways_scroll(page, width)
    assert not axe_violations(page), axe_violations(page)

    # the judge assigns the reviewed nuggets to every answer
    assigned = nugget_assignment.assign_nuggets(engine, "helicopters", judge_name="stub")
    assert not assigned.failed

    # the assessor labels each answer by keyboard: support when the answer says it, else no support
    page.context.clear_cookies()  # type: ignore[attr-defined]
    sign_in(page, site, "ann", "/assess")
    page.click("text=helicopters")  # type: ignore[attr-defined]
    page.wait_for_url(f"{site}/assess/helicopters")  # type: ignore[attr-defined]
    assert "0 / 3 answers" in page.inner_text("main")  # type: ignore[attr-defined]
    _no_sideways_scroll(page, width)
    assert not axe_violations(page), axe_violations(page)
    page.click("a[href='/assess/helicopters/t1']")  # type: ignore[attr-defined]
    page.wait_for_url(f"{site}/assess/helicopters/t1")  # type: ignore[attr-defined]
    for number in range(1, len(ANSWERS) + 1):
        assert f"Answer {number} of 3" in page.inner_text("main")  # type: ignore[attr-defined]
        answer = page.inner_text("#answer")  # type: ignore[attr-defined]
        legends = page.locator("fieldset.item legend").all_inner_texts()  # type: ignore[attr-defined]
        for legend in legends:
            text = re.sub(r"^\d+\. ", "", legend).rsplit(" ", 1)[0]
            page.keyboard.press("s" if text in answer else "n")  # type: ignore[attr-defined]
        if number == 1:
            shot(page, f"assess-nuggets{suffix}")
            _no_sideways_scroll(page, width)
            assert not axe_violations(page), axe_violations(page)
        with page.expect_navigation():  # type: ignore[attr-defined]
            page.keyboard.press("Enter")  # type: ignore[attr-defined]
    assert "You have assessed all 3 answers of this topic." in page.inner_text("main")  # type: ignore[attr-defined]

    # and grades the first answer's cited sentences against their sources
    page.goto(f"{site}/assess/helicopters/t1/support")  # type: ignore[attr-defined]
    assert "Blade tips approach the speed of sound, the source says." in page.inner_text("main")  # type: ignore[attr-defined]
    page.keyboard.press("2")  # type: ignore[attr-defined]
    page.keyboard.press("1")  # type: ignore[attr-defined]
    shot(page, f"assess-support{suffix}")
    _no_sideways_scroll(page, width)
    assert not axe_violations(page), axe_violations(page)
    with page.expect_navigation():  # type: ignore[attr-defined]
        page.keyboard.press("Enter")  # type: ignore[attr-defined]

    with read_only(engine) as session:
        labels = session.execute(
            select(
                AnswerRun.name, Nugget.text, NuggetAssignment.assessor, NuggetAssignment.label, NuggetAssignment.seconds
            )
            .join(AnswerRun, AnswerRun.id == NuggetAssignment.answer_run_id)
            .join(Nugget, Nugget.id == NuggetAssignment.nugget_id)
        ).all()
        support = session.execute(
            select(CitationSupport.sentence, CitationSupport.label, CitationSupport.assessor).order_by(
                CitationSupport.sentence
            )
        ).all()
    ann = {(run, text): label for run, text, who, label, _ in labels if who == "human:ann"}
    judge = {(run, text): label for run, text, who, label, _ in labels if who == "judge:stub"}
    assert len(ann) == len(judge) == 3 * 3  # three answers, three nuggets left after the review
    assert ann["a", "Rotor blades make noise"] == "support" and ann["b", "Blade tips approach the speed of sound"] == (
        "not_support"
    )
    assert all(seconds is not None and seconds >= 0 for *_, who, _, seconds in labels if who == "human:ann")
    assert [tuple(s) for s in support] == [(0, 2, "human:ann"), (1, 1, "human:ann")]

    compared = CliRunner().invoke(
        cli,
        [
            "--database-url",
            url,
            "nuggets",
            "compare",
            "helicopters",
            "--assignments",
            "human:ann",
            "--assignments",
            "judge:stub",
            "--format",
            "json",
        ],
    )
    assert compared.exit_code == 0, compared.stderr
    report = json.loads(compared.stdout)
    keys = sorted(ann)
    first = [ORDINAL[ann[k]] for k in keys]
    second = [ORDINAL[judge[k]] for k in keys]
    assert report["pairs"]["both"] == 9
    assert report["labels"]["observed"] == pytest.approx(sum(a == b for a, b in zip(first, second, strict=True)) / 9)
    assert report["labels"]["kappa"] == pytest.approx(cohen_kappa_score(first, second))
