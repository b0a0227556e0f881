"""The figures every evaluation logs to MLflow, written as SVG text.

Written here rather than drawn with matplotlib (:mod:`evalstore.plots`, which the figures a user
asks for still use): each evaluation's MLflow run holds two of these, and a worker logs one run per
job. matplotlib took ~100 ms to draw and save the two (after ~0.6 s to import it once a process),
most of a DL-sized job's logging; this module writes both in about a millisecond. Each figure is a
few filled paths, lines and labels on fixed axes, which is all SVG needs; the MLflow UI shows
``.svg`` artifacts as images (as it shows PNGs).

Downloads are inert: everything that comes from a user (run, topic and measure names) goes in as
escaped character data, and the figures hold no script, link or external reference.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

BLUE, RED, GREY = "#4c72b0", "#c44e52", "#999999"
FONT = "DejaVu Sans, Arial, Helvetica, sans-serif"
LABEL_GAP = 10  # pixels between two rotated topic labels (8 px text)

# XML 1.0 allows no C0 control character but tab, newline and carriage return, even escaped
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def text(value: str) -> str:
    """``value`` as SVG character data or attribute text."""
    return escape(_NOT_XML.sub("\ufffd", value), quote=True)


def _number(value: float) -> str:
    return f"{value:.2f}".rstrip("0").rstrip(".")


def nice_ticks(low: float, high: float, most: int = 6) -> list[float]:
    """Round tick values (steps of 1, 2 or 5 times a power of ten) from at or below ``low`` to at
    or above ``high``, at most ``most`` + 2 of them: the axis runs from the first to the last."""
    if not high > low:
        high = low + 1.0
    raw = (high - low) / most
    power = 10 ** math.floor(math.log10(raw))
    step = next(power * m for m in (1, 2, 5, 10) if power * m >= raw)
    first = math.floor(low / step + 1e-9) * step
    return [round(first + i * step, 12) for i in range(math.ceil((high - first) / step - 1e-9) + 1)]


def _tick_label(value: float, step: float) -> str:
    decimals = max(0, -math.floor(math.log10(step))) if step > 0 else 0
    return f"{value:.{decimals}f}"


def _line(x1: float, x2: float, y1: float, y2: float, style: str = 'stroke="black"') -> str:
    return f'<line x1="{_number(x1)}" x2="{_number(x2)}" y1="{_number(y1)}" y2="{_number(y2)}" {style}/>'


GRID = 'stroke="#b0b0b0" stroke-opacity="0.6" stroke-width="0.8"'


@dataclass(frozen=True)
class _Frame:
    """A figure's plotting area: ``width`` x ``height`` pixels, the axes' box inside it, and the
    data range the box shows."""

    width: float
    height: float
    left: float
    right: float
    top: float
    bottom: float
    x_range: tuple[float, float]
    y_range: tuple[float, float]

    def x(self, value: float) -> float:
        low, high = self.x_range
        return self.left + (value - low) / (high - low) * (self.right - self.left)

    def y(self, value: float) -> float:
        low, high = self.y_range
        return self.bottom - (value - low) / (high - low) * (self.bottom - self.top)


def _document(frame: _Frame, title: str, body: list[str]) -> str:
    centre = (frame.left + frame.right) / 2
    return "\n".join(
        [
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{frame.width:g}" height="{frame.height:g}" '
            f'viewBox="0 0 {frame.width:g} {frame.height:g}" font-family="{FONT}" font-size="11">',
            f'<rect width="{frame.width:g}" height="{frame.height:g}" fill="white"/>',
            *body,
            f'<rect x="{_number(frame.left)}" y="{_number(frame.top)}" width="{_number(frame.right - frame.left)}" '
            f'height="{_number(frame.bottom - frame.top)}" fill="none" stroke="black" stroke-width="0.8"/>',
            f'<text x="{_number(centre)}" y="{_number(frame.top - 8)}" text-anchor="middle" '
            f'font-size="13">{text(title)}</text>',
            "</svg>",
            "",
        ]
    )


def _legend_entry(frame: _Frame, y: float, style: str, label: str) -> str:
    """A legend's line (drawn as its curve is) and label, at the axes' right, ``y`` down."""
    return _line(frame.right - 128, frame.right - 104, y, y, style) + (
        f'<text x="{_number(frame.right - 98)}" y="{_number(y)}" dominant-baseline="middle">{text(label)}</text>'
    )


def _y_axis(frame: _Frame, ticks: list[float], label: str, grid: bool) -> list[str]:
    step = ticks[1] - ticks[0] if len(ticks) > 1 else 1.0
    parts = []
    for tick in ticks:
        y = frame.y(tick)
        if grid:
            parts.append(_line(frame.left, frame.right, y, y, GRID))
        parts.append(
            _line(frame.left - 4, frame.left, y, y)
            + f'<text x="{_number(frame.left - 6)}" y="{_number(y)}" text-anchor="end" dominant-baseline="middle">'
            f"{_tick_label(tick, step)}</text>"
        )
    middle = _number((frame.top + frame.bottom) / 2)
    parts.append(
        f'<text x="14" y="{middle}" text-anchor="middle" transform="rotate(-90 14 {middle})">{text(label)}</text>'
    )
    return parts


def per_topic(values: Sequence[tuple[float, str]], mean: float | None, *, ylabel: str, title: str) -> str:
    """One measure's per-topic values, best to worst (``values`` come sorted), as one filled
    outline of steps, with the mean as a dashed line; the 5 best and 5 worst topics are named, as
    many of them as fit side by side."""
    count = len(values)
    heights = [v if math.isfinite(v) else 0.0 for v, _ in values]
    low = min([0.0, *heights])
    high = max([*heights, *([mean] if mean is not None and math.isfinite(mean) else []), low])
    high = high if high > low else low + 1.0  # every value 0: the axis runs to 1
    ticks = nice_ticks(low, high)
    frame = _Frame(720, 360, 57.6, 705.6, 36, 280.8, (0, max(count, 1)), (ticks[0], ticks[-1]))
    body = _y_axis(frame, ticks, ylabel, grid=False)
    if count:
        base = _number(frame.y(max(low, ticks[0])))
        steps = [f"M{_number(frame.x(0))} {base}"]
        for i, height in enumerate(heights):
            y = _number(frame.y(height))
            steps.append(f"V{y}H{_number(frame.x(i + 1))}")
        steps.append(f"V{base}Z")
        body.append(f'<path d="{"".join(steps)}" fill="{BLUE}"/>')
    for i in _named_topics(frame, count):
        x, y = _number(frame.x(i + 0.5)), _number(frame.bottom + 6)
        body.append(
            _line(frame.x(i + 0.5), frame.x(i + 0.5), frame.bottom, frame.bottom + 4)
            + f'<text x="{x}" y="{y}" text-anchor="end" dominant-baseline="middle" font-size="8" '
            f'transform="rotate(-90 {x} {y})">{text(values[i][1])}</text>'
        )
    if mean is not None and math.isfinite(mean):
        dashed = f'stroke="{RED}" stroke-width="1.5" stroke-dasharray="6 3"'
        at = frame.y(mean)
        body.append(
            _line(frame.left, frame.right, at, at, dashed)
            + _legend_entry(frame, frame.top + 14, dashed, f"mean {mean:.4f}")
        )
    centre = _number((frame.left + frame.right) / 2)
    body.append(
        f'<text x="{centre}" y="{frame.height - 8:g}" text-anchor="middle">'
        f"{text(f'topics, best to worst ({count})')}</text>"
    )
    return _document(frame, title, body)


def _named_topics(frame: _Frame, count: int) -> list[int]:
    """The places of the 5 best and 5 worst topics whose labels fit side by side: the best and the
    worst are always named; where a step is too narrow for a label each (many topics), the labels
    nearest them are kept and the rest dropped."""

    def spaced(places: range) -> list[int]:
        kept: list[int] = []
        for i in places:
            if not kept or abs(frame.x(i + 0.5) - frame.x(kept[-1] + 0.5)) >= LABEL_GAP:
                kept.append(i)
        return kept

    best = spaced(range(min(5, count)))
    worst = [i for i in spaced(range(count - 1, max(0, count - 5) - 1, -1)) if i not in best]
    worst = [i for i in worst if not best or frame.x(i + 0.5) - frame.x(best[-1] + 0.5) >= LABEL_GAP]
    return best + worst[::-1]


@dataclass(frozen=True)
class Line:
    """One curve of :func:`curves`: its points, colour, legend label (none: not in the legend),
    and whether it is drawn dotted or with a marker at each point."""

    x: Sequence[float]
    y: Sequence[float]
    colour: str = BLUE
    label: str | None = None
    dotted: bool = False
    markers: bool = False


def curves(lines: Sequence[Line], *, xlabel: str, ylabel: str, title: str) -> str:
    """Curves on the unit square (precision-recall, ROC), labelled and gridded."""
    frame = _Frame(450, 405, 63, 432, 40.5, 356.4, (0.0, 1.0), (0.0, 1.02))
    ticks = [i / 5 for i in range(6)]
    body = _y_axis(frame, ticks, ylabel, grid=True)
    for tick in ticks:
        x = frame.x(tick)
        body.append(
            _line(x, x, frame.top, frame.bottom, GRID)
            + _line(x, x, frame.bottom, frame.bottom + 4)
            + f'<text x="{_number(x)}" y="{_number(frame.bottom + 15)}" text-anchor="middle">{tick:.1f}</text>'
        )
    body.append(
        f'<text x="{_number((frame.left + frame.right) / 2)}" y="{frame.height - 8:g}" text-anchor="middle">'
        f"{text(xlabel)}</text>"
    )
    legend = 0
    for line in lines:
        points = [
            (frame.x(x), frame.y(y))
            for x, y in zip(line.x, line.y, strict=True)
            if math.isfinite(x) and math.isfinite(y)
        ]
        style = f'stroke="{line.colour}" stroke-width="1.5"' + (' stroke-dasharray="1.5 3"' if line.dotted else "")
        coordinates = " ".join(f"{_number(x)},{_number(y)}" for x, y in points)
        body.append(f'<polyline points="{coordinates}" fill="none" {style}/>')
        if line.markers:
            body.extend(f'<circle cx="{_number(x)}" cy="{_number(y)}" r="3" fill="{line.colour}"/>' for x, y in points)
        if line.label is not None:
            body.append(_legend_entry(frame, frame.bottom - 14 - 16 * legend, style, line.label))
            legend += 1
    return _document(frame, title, body)
