"""evalstore: an experiment-tracking evaluation service for search, ranking and classification.

Library entry points: :func:`evalstore.metrics.evaluate` (files, DataFrames or dicts in, per-query
values and aggregates out), :mod:`evalstore.services` (the store), and the ``evalstore`` command.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("evalstore")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+unknown"

__all__ = ["__version__"]
