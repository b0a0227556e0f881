"""Statistics over evaluation results: significance tests and rank correlation
(:mod:`.significance`), pooling strategies and assessor agreement (:mod:`.pooling`)."""

from __future__ import annotations

import importlib
import logging


def import_ahead() -> None:
    """Import scipy.stats now, in a process that lives long and will test pairs of runs: a
    served app before it listens, a worker before it takes its first job. The modules here import
    it where a test needs it, which keeps one-shot commands quick; a long-lived process would pay
    the import (~0.7 s, more on a loaded machine) in the first request or batch that tests a pair.
    A failure is left for that request or job to meet and report."""
    try:
        importlib.import_module("scipy.stats")
    except Exception as error:  # the caller that needs it says what is wrong
        logging.getLogger("evalstore").warning("could not import scipy.stats ahead: %s", error)
