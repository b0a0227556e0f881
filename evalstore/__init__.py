"""evalstore: an experiment-tracking evaluation service for search, ranking and classification.

Library entry points: :func:`evalstore.evaluate` (the same as :func:`evalstore.metrics.evaluate`:
files, DataFrames or dicts in, per-query values and aggregates out), :mod:`evalstore.services`
(the store), and the ``evalstore`` command.
"""

from __future__ import annotations

from typing import Any

from evalstore._version import __version__

__all__ = ["__version__", "evaluate"]


def __getattr__(name: str) -> Any:
    # imported on first use: `import evalstore` (and so every CLI command) stays free of numpy/pyarrow
    if name == "evaluate":
        from evalstore.metrics import evaluate

        return evaluate
    raise AttributeError(f"module 'evalstore' has no attribute {name!r}")
