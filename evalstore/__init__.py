"""evalstore: an experiment-tracking evaluation service for search, ranking and classification.

Library entry points: :func:`evalstore.evaluate` (the same as :func:`evalstore.metrics.evaluate`:
files, DataFrames or dicts in, per-query values and aggregates out), :mod:`evalstore.services`
(the store), and the ``evalstore`` command.
"""

from __future__ import annotations

from typing import Any

__all__ = ["__version__", "evaluate"]


def __getattr__(name: str) -> Any:
    # imported on first use: `import evalstore` (and so every CLI command) stays free of numpy/pyarrow,
    # and of importlib.metadata (~25 ms) unless the version is asked for
    if name == "evaluate":
        from evalstore.metrics import evaluate

        return evaluate
    if name == "__version__":
        from evalstore._version import __version__

        return __version__
    raise AttributeError(f"module 'evalstore' has no attribute {name!r}")
