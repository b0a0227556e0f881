"""The figures a user asks for (a comparison's per-topic differences, a collection's swap rates),
drawn with matplotlib's object API on the Agg backend (workers have no screen). matplotlib is
imported on first use: it costs ~0.6 s, and most commands never draw. The figures every evaluation
logs are SVG text written by :mod:`evalstore.svg_charts`.

Speed notes: margins are fixed (constrained layout measures every label: ~0.1 s a figure) and
titles placed explicitly (matplotlib otherwise measures every tick to place them).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

BLUE, RED, GREY = "#4c72b0", "#c44e52", "#999999"


def _figure(width: float, height: float) -> Any:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), dpi=90)


def swap_rates(series: dict[str, tuple[list[int], list[float]]], *, title: str) -> Any:
    """Voorhees and Buckley's picture: the share of run pairs two disjoint topic sets order
    differently, against the number of topics in each, one line per measure."""
    figure = _figure(6.5, 4.2)
    figure.subplots_adjust(left=0.12, right=0.97, top=0.9, bottom=0.13)
    axes = figure.add_subplot()
    for label, (sizes, rates) in series.items():
        axes.plot(sizes, rates, marker="o", linewidth=1.5, markersize=4, label=label)
    axes.set_xlabel("topics in each of the two disjoint sets")
    axes.set_ylabel("swap rate (share of run pairs ordered differently)")
    axes.set_ylim(bottom=0)
    axes.set_title(title, y=1.0, pad=6)
    axes.grid(alpha=0.3)
    axes.legend(loc="upper right")
    return figure


def paired_differences(panels: Sequence[tuple[Any, np.ndarray]], *, level: int, title: str) -> Any:
    """Per-topic differences of pairs of runs, sorted, one panel each: bars above zero are topics
    the run wins, below it topics it loses; the dashed line is the mean difference and the band its
    ``level``% confidence interval. Each panel is (the pair's outcome, its per-topic differences);
    the outcome names its runs, measure, mean difference, interval, p-values and wins/ties/losses."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    columns = min(3, len(panels))
    rows = -(-len(panels) // columns)
    figure = Figure(figsize=(4.6 * columns, 3.2 * rows), dpi=100, layout="constrained")
    for index, (pair, differences) in enumerate(panels):
        axes = figure.add_subplot(rows, columns, index + 1)
        values = np.sort(differences)[::-1]
        positions = np.arange(len(values))
        axes.bar(positions, values, width=1.0, color=np.where(values >= 0, BLUE, RED), linewidth=0)
        axes.axhline(0, color="black", linewidth=0.6)
        axes.axhspan(pair.ci_low, pair.ci_high, color=GREY, alpha=0.25, label=f"{level}% CI")
        axes.axhline(pair.difference, color="black", linestyle="--", linewidth=1, label=f"mean {pair.difference:+.4f}")
        axes.set_xlim(-0.5, len(values) - 0.5)
        axes.set_xticks([])
        axes.set_xlabel(f"topics, sorted (wins {pair.wins} / ties {pair.ties} / losses {pair.losses})", fontsize=8)
        axes.set_ylabel(f"{pair.measure} difference", fontsize=8)
        mark = "*" if pair.significant else ""
        axes.set_title(
            f"{pair.run} - {pair.versus}\np={pair.p_value:.3g}, adjusted {pair.p_corrected:.3g}{mark}", fontsize=9
        )
        axes.legend(fontsize=7, loc="upper right")
    figure.suptitle(title, fontsize=10)
    return figure
