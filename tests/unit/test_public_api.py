"""The public API's documented examples run as written (doctest)."""

from __future__ import annotations

import doctest

import evalstore.metrics


def test_the_examples_in_evaluate_run() -> None:
    result = doctest.testmod(evalstore.metrics, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted >= 4 and result.failed == 0
