"""A task's description is an organiser's Markdown rendered for every participant: formatting
and http(s) links come through; raw HTML, scripts, event handlers, styles, images and other link
schemes never do (markdown-it-py with HTML off, then nh3's allow-list)."""

from __future__ import annotations

import re

import pytest

from evalstore.web.templating import markdown

ALLOWED = {"p", "br", "h1", "h2", "strong", "em", "ul", "ol", "li", "a", "table", "thead", "tbody", "tr", "th", "td"}


def test_formatting_lists_tables_and_links_are_rendered() -> None:
    html = str(markdown("# Track\n\n- **one**\n- *two*\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n[g](https://x.org/g)"))
    assert "<h1>Track</h1>" in html and "<li><strong>one</strong></li>" in html and "<em>two</em>" in html
    assert "<table>" in html and "<td>1</td>" in html
    assert '<a href="https://x.org/g" rel="noopener noreferrer nofollow">g</a>' in html


@pytest.mark.parametrize(
    "text",
    [
        "<script>alert(1)</script>",
        '<a href="https://x" onclick="alert(1)">x</a>',
        "<img src=x onerror=alert(1)>",
        "![i](https://x.org/i.png)",
        "[x](javascript:alert(1))",
        "[x](JaVaScRiPt:alert(1))",
        "[x](data:text/html;base64,PHNjcmlwdD4=)",
        "[x](vbscript:msgbox)",
        '<div style="position:fixed">x</div>',
        "<iframe src=https://x></iframe>",
        "<svg onload=alert(1)>",
    ],
)
def test_no_markup_of_the_organisers_own_reaches_the_page(text: str) -> None:
    html = str(markdown(text))
    tags = re.findall(r"<([a-z0-9]+)([^>]*)>", html)
    assert {name for name, _ in tags} <= ALLOWED, html
    for _, attributes in tags:
        assert not re.search(r"\b(on\w+|style|src)\s*=", attributes), html
        for href in re.findall(r'href="([^"]*)"', attributes):
            assert href.startswith(("http://", "https://", "mailto:")), html


def test_nothing_for_no_description() -> None:
    assert str(markdown(None)) == "" and str(markdown("")) == ""
