"""`evalstore trec-eval`'s command line: trec_eval 10.0's options, parsed with argparse.

This is the one parser of the command, used two ways: straight from the ``evalstore`` entry
point (:mod:`evalstore._entry`) when ``trec-eval`` is the first argument, so that evaluating a
file loads neither typer nor the services (an ordinary run took 0.6 s, ~0.4 s of it imports), and
through ``evalstore [--database-url ...] trec-eval`` (``evalstore.cli.trec_eval``, a pass-through).
Usage errors exit 2 with argparse's usage line; evalstore errors propagate to the caller, which
prints them and exits 1.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Callable, Iterator, Sequence

from evalstore.config import terminal_columns

RELATION_FORMATS = ("qrels", "qrels_jg", "prefs", "qrels_prefs")


def parser() -> argparse.ArgumentParser:
    """The command's one parser: trec_eval's options (with their long names) and evalstore's.

    Long because it is a table, one ``add_argument`` an option in the order of trec_eval's usage
    text; split, an option's help would be looked for in several places."""
    p = argparse.ArgumentParser(
        prog="evalstore trec-eval",
        description="Evaluate a run against qrels exactly as trec_eval 10.0 does, with the same output.",
        allow_abbrev=True,  # getopt_long takes unambiguous prefixes of long options (--nosum), so does trec_eval
        formatter_class=_HelpFormatter,
    )
    p.add_argument("qrels", help="Qrels file (qid iter docno rel).")
    p.add_argument(
        "run",
        nargs="+",
        help="Run file (qid Q0 docno rank score tag; - reads standard input); several: "
        "each one's output in turn, as a loop over trec_eval prints them, the "
        "qrels read once.",
    )
    # trec_eval.c's options with their long names (getopt_long); numbers are read with C's atol
    p.add_argument(
        "-q",
        "--query_eval_wanted",
        dest="per_query",
        action="store_true",
        help="Print per-topic values as well as the summary.",
    )
    p.add_argument(
        "-c",
        "--complete_rel_info_wanted",
        dest="complete",
        action="store_true",
        help="Average over all qrels topics (a missing topic scores 0).",
    )
    p.add_argument(
        "-n", "--nosummary", dest="no_summary", action="store_true", help="Do not print the summary ('all') lines."
    )
    p.add_argument(
        "-J",
        "--Judged_docs_only",
        dest="judged_only",
        action="store_true",
        help="Score only judged documents (drop unjudged ones).",
    )
    p.add_argument(
        "-l",
        "--level_for_rel",
        dest="relevance_level",
        type=_atol,
        default=1,
        metavar="LEVEL",
        help="Relevance level: judged at least this is relevant (default 1).",
    )
    p.add_argument(
        "-M",
        "--Max_retrieved_per_topic",
        dest="max_docs",
        type=_count,
        default=None,
        metavar="N",
        help="Keep only the top N documents per topic.",
    )
    p.add_argument(
        "-m",
        "--measure",
        dest="measure",
        action="append",
        default=[],
        metavar="MEASURE",
        help="Measure or group, trec_eval style: P.5,10 ndcg_cut.10 all_trec (repeatable).",
    )
    p.add_argument(
        "-N",
        "--Number_docs_in_coll",
        dest="collection_size",
        type=_atol,
        default=0,
        metavar="N",
        help="Number of documents in the collection (for utility).",
    )
    p.add_argument(
        "-D",
        "--Debug_level",
        dest="debug",
        default=None,
        metavar="LEVEL[.QID]",
        help="trec_eval's debug level; LEVEL.QID evaluates topic QID only. evalstore prints no "
        "debugging trace: a level above 0 is refused for the measures trec_eval traces.",
    )
    p.add_argument("-o", dest="old_format", action="store_true", help="Obsolete (trec_eval ignores it too).")
    p.add_argument(
        "--Output_old_results_format", dest="old_format_value", default=None, metavar="X", help=argparse.SUPPRESS
    )
    p.add_argument("-v", "--version", action=_Version, nargs=0, help="Print trec_eval's version line and exit.")
    p.add_argument(
        "-R",
        "--Rel_info_format",
        dest="rel_format",
        default="qrels",
        metavar="FORMAT",
        help="Judgments format: qrels; qrels_jg (judgment groups); prefs (preferences: qid jg jsg docno "
        "level); qrels_prefs (a qrels file read as preferences).",
    )
    p.add_argument(
        "-T",
        "--Results_format",
        dest="results_format",
        default="trec_results",
        metavar="FORMAT",
        help="Run format: trec_results (the only one).",
    )
    p.add_argument(
        "--backend",
        default="local",
        choices=("local", "duckdb"),
        help="local (default): the run is read into memory; duckdb: a run of any size (TREC, CSV or "
        "Parquet) is ranked by DuckDB in bounded memory, spilling to disk.",
    )
    p.add_argument(
        "--memory-limit", default="2GB", metavar="SIZE", help="--backend duckdb: DuckDB's memory limit (default 2GB)."
    )
    p.add_argument(
        "--temp-directory",
        default=None,
        metavar="DIR",
        help="--backend duckdb: where DuckDB spills (default: the system's temporary directory).",
    )
    p.add_argument(
        "--jobs", type=_jobs, default=1, metavar="N", help="Several runs: evaluate them in N processes (default 1)."
    )
    p.add_argument(
        "-Z",
        "--Zscore",
        dest="zscores",
        default=None,
        metavar="PATH",
        help="Print z-scores: per-topic means and standard deviations of each measure, lines "
        "'qid measure mean stddev'.",
    )
    return p


class _HelpFormatter(argparse.HelpFormatter):
    """argparse's formatter, given the terminal's width as shutil would find it: left to find it
    itself it imports shutil, and with it bz2 and lzma, when the parser is built (~3 ms of every
    run), not only when help is printed."""

    def __init__(
        self, prog: str, indent_increment: int = 2, max_help_position: int = 24, width: int | None = None
    ) -> None:
        super().__init__(prog, indent_increment, max_help_position, _columns() - 2 if width is None else width)


def _columns() -> int:
    """shutil.get_terminal_size().columns: $COLUMNS, else the terminal's, else 80."""
    columns = terminal_columns()
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns or 80


def _atol(text: str) -> int:
    """An option value as trec_eval reads it (C's atol): ``-l 1.5`` is 1, ``-N 1e3`` is 1, text
    without leading digits is 0."""
    from evalstore.io.cnumbers import atol

    value = atol(text)
    return 0 if value is None else value


def _count(text: str) -> int:
    value = _atol(text)
    if value < 0:  # trec_eval 10.0 crashes (a segmentation fault) on a negative -M
        raise argparse.ArgumentTypeError(
            f"{text} is not a count of documents (0 or more); trec_eval 10.0 crashes on a negative -M"
        )
    return value


def _jobs(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not a number of processes (1 or more)")
    return value


TREC_EVAL_VERSION = "10.0-rc3"  # trec_eval 10.0's Makefile VERSIONID, which its -v prints


class _Version(argparse.Action):
    """``-v``: trec_eval's version line on stderr, exit 0 (before any file is read)."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        from evalstore._version import __version__

        sys.stderr.write(f"trec_eval version {TREC_EVAL_VERSION} (evalstore trec-eval {__version__})\n")
        parser.exit(0)


def debug_option(text: str | None) -> tuple[int, str | None]:
    """``-D LEVEL[.QID]`` as trec_eval.c get_debug_level_query reads it: (atol(LEVEL), QID or None)."""
    if text is None:
        return 0, None
    level, dot, query = text.partition(".")
    return _atol(level), (query if dot else None)


def run(args: Sequence[str], *, warn: Callable[[str], None] | None = None) -> None:
    """Parse ``args`` and write trec_eval's output to stdout (usage errors: SystemExit 2)."""
    from evalstore.errors import InvalidParameterError

    options = parser().parse_args(list(args))
    if options.rel_format not in RELATION_FORMATS:
        raise InvalidParameterError(
            f"-R {options.rel_format} is not a judgments format; use qrels, qrels_jg, prefs or qrels_prefs."
        )
    if options.results_format != "trec_results":
        raise InvalidParameterError(
            f"-T {options.results_format} is not a results format; trec_eval has only -T trec_results."
        )
    debug_level, debug_query = debug_option(options.debug)
    settings = None
    if options.backend == "duckdb":
        from evalstore.backends.duckdb_engine import DuckDBSettings

        settings = DuckDBSettings(memory_limit=options.memory_limit, temp_directory=options.temp_directory)
    # -D's options go only where given: the several-run path evaluates runs together without them
    debug = {"debug_level": debug_level, "debug_query": debug_query} if options.debug is not None else {}
    flags = {
        "measures": options.measure,
        "per_query": options.per_query,
        "complete": options.complete,
        "no_summary": options.no_summary,
        "judged_only": options.judged_only,
        "relevance_level": options.relevance_level,
        "max_docs": options.max_docs,
        "collection_size": options.collection_size,
        "rel_format": options.rel_format,
        "zscores_path": options.zscores,
        "backend": options.backend,
        "duckdb_settings": settings,
        **debug,
    }
    with _stdin_as_file(options.run) as run_paths:
        if len(run_paths) == 1:  # the several-run module (its processes, its stacking) is not imported
            from evalstore.trec_eval.one_run import run_trec_eval

            run_trec_eval(options.qrels, run_paths[0], out=sys.stdout, warn=warn or _warn, **flags)
        else:
            from evalstore.trec_eval.many_runs import run_trec_eval_runs

            run_trec_eval_runs(options.qrels, run_paths, out=sys.stdout, warn=warn or _warn, jobs=options.jobs, **flags)


@contextlib.contextmanager
def _stdin_as_file(paths: list[str]) -> Iterator[list[str]]:
    """A run named ``-`` is read from standard input, as trec_eval 10.0 reads it: copied (once) to
    a temporary file (the readers take paths), which errors name as ``-``."""
    if "-" not in paths:
        yield paths
        return
    import shutil
    import tempfile

    from evalstore.errors import InputFormatError

    with tempfile.NamedTemporaryFile(prefix="evalstore-stdin-", suffix=".run") as copy:
        shutil.copyfileobj(sys.stdin.buffer, copy)
        copy.flush()
        try:
            yield [copy.name if path == "-" else path for path in paths]
        except InputFormatError as error:
            if error.path != copy.name:
                raise
            raise InputFormatError("-", error.line, error.problem) from None


def _warn(message: str) -> None:
    sys.stderr.write(f"warning: {message}\n")
