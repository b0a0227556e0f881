"""The readers of runs and qrels: the format named or told by the file's name, then TREC text
(:mod:`evalstore.io.trec_text`) or a table (:mod:`evalstore.io.tables`).

Every reader returns a pyarrow Table with fixed column names and types:

    run:   topic (string), doc (string), rank (int64), score (float64)   [+ tag on TREC input]
    qrels: topic (string), iteration (string), doc (string), relevance (int64)
"""

from __future__ import annotations

from pathlib import Path

from evalstore.errors import InputFormatError, Remedy
from evalstore.io.parsed import Kind, ParsedFile, has_duplicate_docs
from evalstore.io.trec_text import parse_trec_file, read_qrels_jg, stream_trec_run

FORMATS = ("trec", "csv", "tsv", "parquet")


def detect_format(path: Path, explicit: str | None = None) -> str:
    """The input format from ``explicit`` or the file name; TREC text is the default."""
    if explicit is not None:
        if explicit not in FORMATS:
            raise InputFormatError(str(path), None, f"unknown format '{explicit}'; use one of {', '.join(FORMATS)}")
        return explicit
    suffixes = [s.lower() for s in path.suffixes if s.lower() != ".gz"]
    last = suffixes[-1].lstrip(".") if suffixes else ""
    if last in ("parquet", "pq"):
        return "parquet"
    if last == "csv":
        return "csv"
    if last == "tsv":
        return "tsv"
    if last in ("xlsx", "xls", "json", "jsonl", "zip", "feather", "arrow", "pkl"):
        raise InputFormatError(
            str(path),
            None,
            f"unknown format '.{last}'; use TREC text, CSV, TSV or Parquet",
            remedy=Remedy(cli="(or name the format with --format)"),
        )
    return "trec"


def read_run(
    path: str | Path,
    *,
    fmt: str | None = None,
    strict: bool = True,
    content_hash: bool = True,
    check_duplicates: bool = True,
    coded_topics: bool = False,
) -> ParsedFile:
    """Read and validate a run file. ``strict=False`` accepts trec_eval's leniencies;
    ``content_hash=False`` skips hashing the bytes (for one-off evaluation, nothing stored);
    ``check_duplicates=False`` leaves the duplicate-docno check to the caller
    (:func:`has_duplicate_docs`), which may run it alongside other work; ``coded_topics=True``
    lets the topic column be dictionary-coded (a 7M-row run's topics in 28 MB, not 77 MB), for a
    caller that only groups rows by topic."""
    return _read(Path(path), "run", fmt, strict, content_hash, check_duplicates, coded_topics)


def read_qrels(
    path: str | Path,
    *,
    fmt: str | None = None,
    judgment_groups: bool = False,
    strict: bool = True,
    content_hash: bool = True,
    evaluated_topic: str | None = None,
) -> ParsedFile:
    """Read and validate a qrels file (conflicting duplicate judgments are refused).

    With ``judgment_groups`` the second column names a judgment group (trec_eval ``-R qrels_jg``):
    the same document may then be judged once per group. ``strict=False`` accepts relevance
    values the store could not hold, as trec_eval does (for evaluating files, storing nothing);
    ``content_hash=False`` skips hashing a TREC file's bytes (nothing stored). ``strict=False``
    refuses a repeated identical judgment, as trec_eval does when it evaluates the topic; with
    ``evaluated_topic`` (trec_eval ``-D LEVEL.QID``) only in that topic (others are kept once).
    """
    if judgment_groups:
        return read_qrels_jg(Path(path), strict)
    return _read(Path(path), "qrels", fmt, strict, content_hash, evaluated_topic=evaluated_topic)


def _read(
    path: Path,
    kind: Kind,
    fmt: str | None,
    strict: bool,
    content_hash: bool = True,
    check_duplicates: bool = True,
    coded_topics: bool = False,
    evaluated_topic: str | None = None,
) -> ParsedFile:
    if not path.is_file():
        raise InputFormatError(str(path), None, "no such file; check the path")
    resolved = detect_format(path, fmt)
    if resolved == "trec":
        if kind == "run" and not strict and not content_hash:  # read to evaluate, nothing stored
            streamed = stream_trec_run(path, coded_topics)
            if streamed is not None and not (check_duplicates and has_duplicate_docs(streamed.table)):
                return streamed
        return parse_trec_file(path, kind, strict, content_hash, check_duplicates, evaluated_topic)
    from evalstore.io.tables import parse_table  # here: CSV, TSV and Parquet are no `trec-eval` start-up's

    return parse_table(path, resolved, kind, check_duplicates)
