"""The pages' Jinja2 environment (autoescaped: every run name, description and document text is
escaped where it is written) and the helpers templates use."""

from __future__ import annotations

import math
import re
from datetime import datetime
from pathlib import Path
from typing import Any

import nh3
from fastapi import Request
from fastapi.templating import Jinja2Templates
from markdown_it import MarkdownIt
from markupsafe import Markup, escape

from evalstore.metrics.trec_names import reader_name
from evalstore.times import as_utc, utc_text

HERE = Path(__file__).resolve().parent
templates = Jinja2Templates(directory=HERE / "templates")


def compile_templates() -> None:
    """Compile every page's template now (once per process; the environment keeps them): otherwise
    the first request for each kind of page after a restart compiles its template and base.html
    (the leaderboard's: ~70 ms of CPU, a fifth of its first request)."""
    for name in templates.env.list_templates(extensions=["html"]):
        templates.env.get_template(name)


# words a topic title shares with every document, not worth a highlight
_STOPWORDS = frozenset(
    "the and for are was were with what which who whom how why when where does did has have "
    "had not from that this those these into about can you your its any all".split()
)
_WORD = re.compile(r"[^\W_]+", re.UNICODE)


def query_terms(*texts: str | None) -> list[str]:
    terms = {w.lower() for text in texts if text for w in _WORD.findall(text)}
    return sorted(t for t in terms if len(t) >= 3 and t not in _STOPWORDS)


def highlight(text: str | None, terms: list[str]) -> Markup:
    """``text`` escaped, with each word that starts with a query term in <mark> (a prefix, so
    'attacks' lights up for 'attack': assessors scan for the topic's words, not exact forms)."""
    if not text:
        return Markup("")
    if not terms:
        return escape(text)
    pattern = re.compile(
        r"\b(?:" + "|".join(re.escape(t) for t in sorted(terms, key=len, reverse=True)) + r")\w*", re.IGNORECASE
    )
    out, last = [], 0
    for match in pattern.finditer(text):
        out.append(escape(text[last : match.start()]))
        out.append(Markup("<mark>{}</mark>").format(match.group(0)))
        last = match.end()
    out.append(escape(text[last:]))
    return Markup("").join(out)


def number(value: Any, digits: int = 4) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def moment(value: Any, empty: str = "–") -> Markup:
    """A stored time as ``<time>``: UTC in the text ("2026-12-01 12:00 UTC"), which the pages'
    script (static/times.js) rewrites in the reader's time zone."""
    if value is None or value == "":
        return Markup(escape(empty))
    try:
        when = datetime.fromisoformat(str(value))
    except ValueError:
        return escape(str(value))
    return Markup('<time datetime="{}">{}</time>').format(as_utc(when).isoformat(timespec="seconds"), utc_text(when))


def p_value(value: float) -> str:
    return "< 0.0001" if value < 1e-4 else f"{value:.4f}"


def bar_chart(
    labels: list[str],
    values: list[float],
    *,
    y_label: str,
    title: str,
    hints: list[str] | None = None,
    width: int = 960,
    height: int = 300,
) -> dict[str, Any]:
    """The geometry of a bar chart of signed values (differences), for templates/_bars.html:
    bars up for positive, down for negative, a zero line, y ticks, labelled axes."""
    left, right, top, bottom = 64, 12, 24, 48
    extent = max((abs(v) for v in values), default=0.0)
    step = 0.05 if extent <= 0.2 else 0.1 if extent <= 0.5 else 0.25
    limit = max(step, math.ceil(extent / step) * step)
    plot_w, plot_h = width - left - right, height - top - bottom
    zero = top + plot_h / 2

    def y(v: float) -> float:
        return zero - v / limit * (plot_h / 2)

    slot = plot_w / max(len(values), 1)
    bars = [
        {
            "x": left + i * slot + slot * 0.1,
            "w": max(slot * 0.8, 0.5),
            "y": min(y(v), zero),
            "h": max(abs(y(v) - zero), 0.5),
            "positive": v >= 0,
            "label": labels[i],
            "hint": (hints[i] if hints else f"{labels[i]}: {v:+.4f}"),
        }
        for i, v in enumerate(values)
    ]
    ticks = []
    count = round(limit / step)
    for k in range(-count, count + 1):
        value = k * step
        ticks.append({"y": y(value), "label": f"{value:+.2f}" if value else "0"})
    every = max(1, math.ceil(len(labels) / 25))  # at most ~25 topic labels fit under the axis
    x_labels = [{"x": left + i * slot + slot / 2, "label": labels[i]} for i in range(0, len(labels), every)]
    return {
        "width": width,
        "height": height,
        "left": left,
        "right": width - right,
        "top": top,
        "bottom": height - bottom,
        "zero": zero,
        "bars": bars,
        "ticks": ticks,
        "x_labels": x_labels,
        "y_label": y_label,
        "title": title,
        "mid_y": top + plot_h / 2,
    }


# CommonMark with tables and strike-through, a line break kept as one; raw HTML is off (written as
# text), and markdown-it's link check refuses javascript:, vbscript:, file: and data: links
_MARKDOWN = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False, "breaks": True}).enable(
    ["table", "strikethrough"]
)
# what a task's description may hold once rendered: text formatting, lists, tables, code, links
_ALLOWED_TAGS = frozenset(
    "p br hr h1 h2 h3 h4 h5 h6 strong em del s code pre blockquote ul ol li a table thead tbody tr th td".split()
)
# no style attribute: the pages' Content-Security-Policy allows no inline style (a table's column
# alignment is dropped)
_ALLOWED_ATTRIBUTES = {"a": {"href", "title"}, "ol": {"start"}}


def markdown(text: str | None) -> Markup:
    """An organiser's Markdown as safe HTML: rendered with raw HTML off, then cleaned by nh3
    (ammonia) to an allow-list of tags and attributes, links http(s) and mailto only, each with
    rel="noopener noreferrer nofollow". No script, style, event handler or image reaches the page."""
    if not text:
        return Markup("")
    html = _MARKDOWN.render(text)
    cleaned = nh3.clean(
        html,
        tags=set(_ALLOWED_TAGS),
        attributes={tag: set(names) for tag, names in _ALLOWED_ATTRIBUTES.items()},
        url_schemes={"http", "https", "mailto"},
        link_rel="noopener noreferrer nofollow",
    )
    return Markup(cleaned)  # noqa: S704 (cleaned by nh3 to the allow-list above)


def csrf_field(request: Request) -> Markup:
    token = getattr(request.state, "csrf", None) or ""
    return Markup('<input type="hidden" name="csrf" value="{}">').format(token)


templates.env.filters["number"] = number
templates.env.filters["p_value"] = p_value
templates.env.filters["moment"] = moment
templates.env.filters["reader_name"] = reader_name
templates.env.filters["markdown"] = markdown
templates.env.globals["csrf_field"] = csrf_field
templates.env.globals["highlight"] = highlight
