"""The SVG figures every evaluation logs: well-formed XML, inert whatever the names in them,
placed where their values say."""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET

import pytest
from hypothesis import given
from hypothesis import strategies as st

from evalstore import svg_charts

SVG = "{http://www.w3.org/2000/svg}"
HOSTILE = '</text><script>alert(1)</script><a href="javascript:x">\x01&amp;'


def _parsed(document: str) -> ET.Element:
    root = ET.fromstring(document)
    assert root.tag == f"{SVG}svg"
    return root


def _elements(root: ET.Element) -> set[str]:
    return {element.tag.removeprefix(SVG) for element in root.iter()}


def test_names_from_users_are_text_in_the_figure_never_markup() -> None:
    values = [(0.9, HOSTILE), (0.5, "t2"), (0.1, "t3")]
    figures = [
        svg_charts.per_topic(values, 0.5, ylabel=HOSTILE, title=f"AP per topic: {HOSTILE} on q"),
        svg_charts.curves(
            [svg_charts.Line([0, 1], [1, 0], label=HOSTILE)], xlabel=HOSTILE, ylabel=HOSTILE, title=HOSTILE
        ),
    ]
    for document in figures:
        root = _parsed(document)  # the control character is replaced: the XML stays well-formed
        assert _elements(root) <= {"svg", "rect", "text", "line", "path", "polyline", "circle"}
        assert not any(key.endswith("href") for element in root.iter() for key in element.attrib)
        texts = [element.text for element in root.iter(f"{SVG}text")]
        assert HOSTILE.replace("\x01", "\ufffd") in texts
        assert "<script" not in document and "javascript:" not in document.replace("&quot;javascript:", "")


def test_the_per_topic_outline_steps_through_each_value_and_names_the_ends() -> None:
    values = [(1.0 - i / 20, f"t{i}") for i in range(20)]
    root = _parsed(svg_charts.per_topic(values, 0.525, ylabel="AP", title="AP per topic"))
    [outline] = root.iter(f"{SVG}path")
    steps = outline.attrib["d"].count("V")
    assert steps == 20 + 1  # up to each value, then back down to the axis
    named = [element.text for element in root.iter(f"{SVG}text") if (element.text or "").startswith("t")]
    assert named == ["t0", "t1", "t2", "t3", "t4", "t15", "t16", "t17", "t18", "t19", "topics, best to worst (20)"]
    assert "mean 0.5250" in [element.text for element in root.iter(f"{SVG}text")]
    # the axis reaches the best value: the first step's top is the axes' top (1.0 is a tick)
    first_top = float(outline.attrib["d"].split("V")[1].split("H")[0])
    assert first_top == pytest.approx(36)


def test_a_figure_of_no_values_zeros_or_nan_still_draws() -> None:
    for values, mean in (([], None), ([(0.0, "a"), (0.0, "b")], 0.0), ([(math.nan, "a"), (0.2, "b")], math.nan)):
        root = _parsed(svg_charts.per_topic(values, mean, ylabel="AP", title="t"))
        labels = [element.text for element in root.iter(f"{SVG}text")]
        assert f"topics, best to worst ({len(values)})" in labels
        assert not any("nan" in (label or "") for label in labels)


def test_a_curve_is_drawn_on_the_unit_square() -> None:
    line = svg_charts.Line([0.0, 0.5, 1.0], [1.0, 0.5, 0.0], markers=True)
    root = _parsed(svg_charts.curves([line], xlabel="recall", ylabel="precision", title="PR"))
    [polyline] = root.iter(f"{SVG}polyline")
    points = [tuple(map(float, point.split(","))) for point in polyline.attrib["points"].split()]
    (x0, y0), (x1, y1), (x2, y2) = points
    assert x1 == pytest.approx((x0 + x2) / 2) and y0 < y1 < y2  # SVG's y grows downwards
    assert len(list(root.iter(f"{SVG}circle"))) == 3


@given(st.floats(-1e4, 1e4, allow_nan=False), st.floats(1e-3, 1e5, allow_nan=False))
def test_ticks_are_round_even_and_cover_the_range(low: float, width: float) -> None:
    """Over the values measures take (per-topic scores, counts): within a millionth of a step."""
    high = low + width
    ticks = svg_charts.nice_ticks(low, high)
    step = ticks[1] - ticks[0]
    assert ticks[0] <= low + 1e-6 * step and ticks[-1] >= high - 1e-6 * step
    assert 2 <= len(ticks) <= 8
    assert all(abs((b - a) - step) <= 1e-6 * step for a, b in zip(ticks, ticks[1:], strict=False))
    mantissa = step / 10 ** math.floor(math.log10(step) + 1e-9)
    assert min(abs(mantissa - m) for m in (1, 2, 5, 10)) < 1e-6


def test_topic_labels_never_overlap_however_many_topics() -> None:
    for count, expected in ((20, 10), (100, 6), (7000, 2)):
        values = [(1.0 - i / count, f"t{i}") for i in range(count)]
        root = _parsed(svg_charts.per_topic(values, None, ylabel="AP", title="AP per topic"))
        labels = [
            e for e in root.iter(f"{SVG}text") if (e.text or "").startswith("t") and "rotate" in e.get("transform", "")
        ]
        xs = [float(e.attrib["x"]) for e in labels]
        assert len(xs) == expected, count
        assert all(b - a >= svg_charts.LABEL_GAP for a, b in zip(xs, xs[1:], strict=False))
        assert labels[0].text == "t0" and labels[-1].text == f"t{count - 1}"
