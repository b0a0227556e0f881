"""A comparison's figure: the per-topic differences of every (pair, measure), one panel each (drawn
by :func:`evalstore.plots.paired_differences`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from evalstore import plots
from evalstore.errors import InvalidParameterError, Remedy

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from evalstore.services.comparisons.pairwise import Comparison

# A plot with more panels than this is unreadable; the CLI asks for --baseline or fewer runs.
MAX_PLOT_PANELS = 24


def check_plot_size(panels: int) -> None:
    if panels > MAX_PLOT_PANELS:
        raise InvalidParameterError(
            f"A plot of {panels} comparisons is unreadable (at most {MAX_PLOT_PANELS}).",
            remedy=Remedy(cli="Name a --baseline, or fewer runs or measures."),
        )


def comparison_figure(comparison: Comparison) -> Figure:
    """Per-topic differences of every (pair, measure), sorted, one panel each: bars above zero are
    topics the run wins, below it topics it loses; the dashed line is the mean difference and the
    band its confidence interval."""
    check_plot_size(len(comparison.pairs))
    settings = comparison.settings
    figure: Figure = plots.paired_differences(
        [(pair, comparison.differences(pair)) for pair in comparison.pairs],
        level=round(100 * (1 - settings.alpha)),
        title=f"{settings.qrels}: {settings.test} test, {settings.correction} correction",
    )
    return figure
