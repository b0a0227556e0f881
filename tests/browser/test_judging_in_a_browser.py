"""An assessor judges a long document by keyboard only, in Chromium, on a desktop and on a 390 px
phone: the text scrolls with j/k/Space/Page Down without a click, a 3,700 px URL wraps, the grade
buttons stay in view, a number key grades, a judgment is revised from the list of one's own (its
note kept), and an undo shows the document again with its note. axe-core finds no serious or
critical violation on the judging pages."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import Engine

from evalstore.services import access, collections, judging
from tests.browser.axe import axe_violations
from tests.browser.test_pages_in_a_browser import NEEDS_CHROMIUM, browser_page, shot, sign_in, site  # noqa: F401 (browser_page and site are fixtures)

pytestmark = NEEDS_CHROMIUM

# ~3,700 px, and no hyphen or other place a browser breaks a line at unless told to break words
LONG_URL = "https://archive.example.org/reports?id=" + "Internationalcrimering2024" * 17 + "&page=1"


def long_documents(engine: Engine, tmp_path: Path) -> list[str]:
    """Every document of the pool's topic 301 made long (60 paragraphs, one with a long URL)."""
    root = access.authenticate(engine, access.create_token(engine, "root").token)  # the site's admin
    docs = [str(e["doc"]) for e in judging.pool_entries(engine, root, "judging", topic="301")]
    paragraph = (
        "Police in three countries say an international crime ring moved stolen goods across borders "
        "for a decade; organized groups laundered the proceeds through shell companies. "
    )
    lines = []
    for i, doc in enumerate(docs):
        body = "\\n\\n".join(
            [f"Paragraph {p} of report {i}. " + paragraph * 2 for p in range(60)][:30]
            + [f"Source: {LONG_URL}"]
            + [f"Paragraph {p} of report {i}. " + paragraph * 2 for p in range(30, 60)]
        )
        lines.append(f'{{"doc_id": "{doc}", "title": "Long report {i}", "text": "{body}"}}\n')
    path = tmp_path / "long.jsonl"
    path.write_text("".join(lines))
    collections.import_documents(engine, path, collection="long-docs")
    judging.configure_pool(engine, "judging", collection="long-docs")
    return docs


def scroll_top(page: object) -> float:
    return float(page.evaluate("document.getElementById('doc-text').scrollTop"))  # type: ignore[attr-defined]


def in_view(page: object, selector: str) -> bool:
    return bool(
        page.evaluate(  # type: ignore[attr-defined]
            "s => { const r = document.querySelector(s).getBoundingClientRect();"
            " return r.top >= 0 && r.bottom <= window.innerHeight && r.height > 0; }",
            selector,
        )
    )


@pytest.mark.parametrize(("width", "height", "device"), [(1280, 900, "desktop"), (390, 844, "phone")])
def test_an_assessor_judges_a_long_document_by_keyboard_and_revises_a_judgment(
    site: str,
    browser_page: object,
    sqlite_engine: Engine,
    tmp_path: Path,  # noqa: F811 (fixtures)
    width: int,
    height: int,
    device: str,
) -> None:
    page = browser_page
    docs = long_documents(sqlite_engine, tmp_path)
    page.set_viewport_size({"width": width, "height": height})  # type: ignore[attr-defined]
    sign_in(page, site, "judy", "/judge/judging/301")
    assert not axe_violations(page), axe_violations(page)
    assert page.evaluate("document.activeElement.id") == "doc-text"  # type: ignore[attr-defined]  # no click
    assert page.evaluate("document.documentElement.scrollWidth") <= width  # type: ignore[attr-defined]  # URL wraps
    assert page.evaluate(  # type: ignore[attr-defined]  # ... inside the text too: no sideways scroll there
        "(() => { const t = document.getElementById('doc-text'); return t.scrollWidth <= t.clientWidth; })()"
    )
    assert in_view(page, '#judge-form button[data-key="0"]') and in_view(page, '#judge-form button[data-key="s"]')
    # the document starts on the first screen: its first lines above the grade buttons
    text_top = page.evaluate("document.getElementById('doc-text').getBoundingClientRect().top")  # type: ignore[attr-defined]
    grades_top = page.evaluate("document.getElementById('judge-form').getBoundingClientRect().top")  # type: ignore[attr-defined]
    assert text_top + 60 <= min(grades_top, height), (text_top, grades_top)
    shot(page, f"judge-long-{device}")

    for key in ("j", "j", "j"):
        page.keyboard.press(key)  # type: ignore[attr-defined]
    after_j = scroll_top(page)
    assert after_j > 100
    page.keyboard.press("k")  # type: ignore[attr-defined]
    assert scroll_top(page) < after_j
    before = scroll_top(page)
    page.keyboard.press(" ")  # type: ignore[attr-defined]
    assert scroll_top(page) > before + 150  # a page of the text, not the window
    page.keyboard.press("PageDown")  # type: ignore[attr-defined]
    page.keyboard.press("PageDown")  # type: ignore[attr-defined]
    assert in_view(page, '#judge-form button[data-key="0"]')  # still there, deep in the document
    page.evaluate("window.scrollTo(0, document.body.scrollHeight)")  # type: ignore[attr-defined]
    assert in_view(page, '#judge-form button[data-key="3"]')
    shot(page, f"judge-long-scrolled-{device}")
    url = page.locator("#doc-text p", has_text="Source: https://")  # type: ignore[attr-defined]
    url.scroll_into_view_if_needed()
    box, text_box = url.bounding_box(), page.locator("#doc-text").bounding_box()  # type: ignore[attr-defined]
    assert box["width"] <= text_box["width"] and box["height"] > 60  # the URL wrapped onto several lines
    assert page.evaluate("document.activeElement.id") == "doc-text"  # type: ignore[attr-defined]
    shot(page, f"judge-long-url-{device}")

    # grade three documents with number keys, the first with a note
    page.keyboard.press("n")  # type: ignore[attr-defined]
    page.keyboard.type("mentions the ring by name")  # type: ignore[attr-defined]
    page.keyboard.press("Escape")  # type: ignore[attr-defined]
    for key in ("2", "0", "1"):
        with page.expect_navigation():  # type: ignore[attr-defined]
            page.keyboard.press(key)  # type: ignore[attr-defined]
    assert page.inner_text("#doc-id") == docs[3]  # type: ignore[attr-defined]
    assert page.evaluate("document.activeElement.id") == "doc-text"  # type: ignore[attr-defined]

    # the list of one's judgments: revise the first one's grade, its note kept
    with page.expect_navigation():  # type: ignore[attr-defined]
        page.keyboard.press("l")  # type: ignore[attr-defined]
    assert page.url == f"{site}/judge/judging/301/judgments"  # type: ignore[attr-defined]
    assert not axe_violations(page), axe_violations(page)
    assert page.input_value("#note-1") == "mentions the ring by name"  # type: ignore[attr-defined]
    page.focus("#grade-1")  # type: ignore[attr-defined]
    page.select_option("#grade-1", "3")  # type: ignore[attr-defined]
    page.focus(f"button[aria-label='Save {docs[0]}']")  # type: ignore[attr-defined]
    with page.expect_navigation():  # type: ignore[attr-defined]
        page.keyboard.press("Enter")  # type: ignore[attr-defined]
    assert page.input_value("#grade-1") == "3"  # type: ignore[attr-defined]
    assert page.input_value("#note-1") == "mentions the ring by name"  # type: ignore[attr-defined]
    assert page.evaluate("document.documentElement.scrollWidth") <= width  # type: ignore[attr-defined]
    shot(page, f"judgments-{device}")

    # judge one more with a note, undo it: shown again with its note
    page.goto(f"{site}/judge/judging/301")  # type: ignore[attr-defined]
    page.keyboard.press("n")  # type: ignore[attr-defined]
    page.keyboard.type("unsure: only the URL is on topic")  # type: ignore[attr-defined]
    page.keyboard.press("Escape")  # type: ignore[attr-defined]
    with page.expect_navigation():  # type: ignore[attr-defined]
        page.keyboard.press("1")  # type: ignore[attr-defined]
    with page.expect_navigation():  # type: ignore[attr-defined]
        page.keyboard.press("u")  # type: ignore[attr-defined]
    assert page.inner_text("#doc-id") == docs[3]  # type: ignore[attr-defined]
    assert page.input_value("#note") == "unsure: only the URL is on topic"  # type: ignore[attr-defined]
    assert not axe_violations(page), axe_violations(page)
    shot(page, f"judge-undone-{device}")
    judy = access.authenticate(sqlite_engine, access.create_token(sqlite_engine, "judy").token)
    _, _, mine = judging.my_judgments(sqlite_engine, judy, "judging", "301")
    assert [(j.doc, j.relevance, j.note) for j in mine] == [
        (docs[0], 3, "mentions the ring by name"),
        (docs[1], 0, None),
        (docs[2], 1, None),
    ]


def test_with_double_judging_the_assessor_is_told_their_role_and_its_change(
    site: str, browser_page: object, sqlite_engine: Engine
) -> None:  # noqa: F811 (fixtures)
    """Kim's imported sheet judged topic 301 first: with a double share, Judy is its second, blind
    assessor; her pool list and judging screen say so, and a change from what she was told
    (here, the screen she had open said the topic was open) is announced."""
    page = browser_page
    judging.configure_pool(sqlite_engine, "judging", double_share=0.3, seed=5)
    sign_in(page, site, "judy", "/judge")
    assert not axe_violations(page), axe_violations(page)
    page.click("text=judging")  # type: ignore[attr-defined]
    page.wait_for_url(f"{site}/judge/judging")  # type: ignore[attr-defined]
    assert not axe_violations(page), axe_violations(page)
    assert page.inner_text("table tbody tr td:nth-child(3)") == "second assessor (blind sample)"  # type: ignore[attr-defined]
    shot(page, "judge-pool-double")
    page.goto(f"{site}/judge/judging/301?was=open")  # type: ignore[attr-defined]
    notice = " ".join(page.inner_text("#role-changed").split())  # type: ignore[attr-defined]
    assert notice.startswith(
        "Your role on this topic changed: you were told you are the first assessor, unless "
        "another assessor judges this topic first; you are now the second assessor (blind sample)."
    )
    assert page.inner_text("#role").startswith("You are a second assessor on this topic")  # type: ignore[attr-defined]
    assert not axe_violations(page), axe_violations(page)
    shot(page, "judge-role-changed")


def test_the_axe_check_finds_what_the_judging_screen_had(browser_page: object) -> None:  # noqa: F811 (a fixture)
    """The check can fail: a scroll region that a keyboard cannot reach (the judging screen's text
    before it was focusable) and an image without a text are reported, a moderate finding is not."""
    page = browser_page
    page.set_content(
        '<!doctype html><html lang="en"><head><title>t</title></head><body><main>'  # type: ignore[attr-defined]
        '<div style="height:60px;overflow-y:auto">' + "<p>a line of text</p>" * 20 + "</div>"
        '<img src="data:image/gif;base64,R0lGODlhAQABAAAAACw=">'
        "</main><main>a second main landmark (moderate)</main></body></html>"
    )
    found = axe_violations(page)
    assert [line.split(" ")[0] for line in found] == ["image-alt", "scrollable-region-focusable"], found
    assert found[1].startswith("scrollable-region-focusable (serious): Scrollable region must have keyboard access")
