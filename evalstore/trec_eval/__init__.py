"""``evalstore trec-eval``: a drop-in for trec_eval 10.0's command line and output.

The package's modules, by job: command_line (trec_eval's options, parsed with argparse; the
command's one parser), many_runs (several runs against one qrels in one command, stacked),
one_run (one run against one qrels, as ``trec_eval QRELS RUN``), output (trec_eval's text) and
zscores (``-Z``).

The names below are imported on first use, not with the package: ``evalstore trec-eval --help``
and a usage error load argparse alone, and a module that prints stored values imports
:mod:`evalstore.trec_eval.output` without the parser and the evaluation.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from evalstore.trec_eval.command_line import RELATION_FORMATS, parser, run
    from evalstore.trec_eval.many_runs import run_trec_eval_runs
    from evalstore.trec_eval.one_run import BACKENDS, expand_trec_spec, parse_trec_specs, run_trec_eval
    from evalstore.trec_eval.output import render_lines, stored_rows
    from evalstore.trec_eval.zscores import read_zscores, standardize

# each name, and the module of this package that defines it
_HOMES = {
    "RELATION_FORMATS": "command_line",
    "parser": "command_line",
    "run": "command_line",
    "run_trec_eval_runs": "many_runs",
    "BACKENDS": "one_run",
    "expand_trec_spec": "one_run",
    "parse_trec_specs": "one_run",
    "run_trec_eval": "one_run",
    "render_lines": "output",
    "stored_rows": "output",
    "read_zscores": "zscores",
    "standardize": "zscores",
}


def __getattr__(name: str) -> object:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_HOMES[name]}"), name)


__all__ = [
    "BACKENDS",
    "RELATION_FORMATS",
    "expand_trec_spec",
    "parse_trec_specs",
    "parser",
    "read_zscores",
    "render_lines",
    "run",
    "run_trec_eval",
    "run_trec_eval_runs",
    "standardize",
    "stored_rows",
]
