"""Out-of-core evaluation with DuckDB: runs and predictions larger than memory, in bounded memory.

Every ranking measure here needs only where each *judged* document sits in its topic's ranking
and how many documents the topic retrieved (:func:`evalstore.metrics.preparation.prepare_ranked`,
what the store computes for a stored run). DuckDB computes exactly that from a file of any size
with three streaming passes and no sort of the run: the judged rows (a hash join with the
qrels, which are small); each judged row's trec_eval rank as 1 + the rows of its topic ahead of
it (score descending, docno descending: a hash join of the run with the judged rows on the topic,
aggregated); and each topic's count of rows. The local engine's kernels then compute every
measure from those, so the numbers are the local engine's by construction. A window
``row_number()`` over 100M rows would sort them all; the counting joins stream.

Binary predictions: AUC with tie-averaged ranks from per-distinct-score counts (exact; Spark's
evaluator bins), GAUC from per-group counts of the same kind, and log loss as a sum: all
aggregates DuckDB computes in a streaming pass, spilling to ``temp_directory`` when
``memory_limit`` is reached.

Storing a run too large to hold (``runs register --backend duckdb``): DuckDB parses and checks it,
ranks every row (there a window per topic is what is asked for) and hands the rows back in file
order, batch by batch (:func:`run_to_store`).
"""

from __future__ import annotations

import gzip
import math
import os
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from evalstore.errors import InputFormatError, InvalidParameterError
from evalstore.io.formats import choose_columns, is_gzip_file
from evalstore.metrics.classification import BinaryCounts, gauc_of_pairs, ratio_of_pairs

if TYPE_CHECKING:
    import duckdb

    from evalstore.metrics.preparation import PrepareOptions, Ranking


@dataclass(frozen=True)
class DuckDBSettings:
    """DuckDB's limits: ``memory_limit`` (DuckDB's syntax: '2GB') bounds its buffers, beyond which
    joins and aggregates spill to ``temp_directory`` (default: a folder under the system's
    temporary directory); ``threads`` defaults to the machine's cores."""

    memory_limit: str = "2GB"
    temp_directory: str | None = None
    threads: int | None = None


def connect(settings: DuckDBSettings, *, keep_order: bool = False) -> duckdb.DuckDBPyConnection:
    try:
        import duckdb
    except ImportError:  # an optional extra
        raise InvalidParameterError("--backend duckdb needs DuckDB: pip install 'evalstore[duckdb]'.") from None
    temp = settings.temp_directory or os.path.join(tempfile.gettempdir(), "evalstore-duckdb")
    try:
        con = duckdb.connect(
            config={
                "memory_limit": settings.memory_limit,
                "temp_directory": temp,
                "threads": settings.threads or os.cpu_count() or 1,
                # evaluating never relies on row order, and dropping it lets scans
                # stream; storing a run keeps its file order
                "preserve_insertion_order": keep_order,
            }
        )
    except duckdb.Error as exc:
        raise InvalidParameterError(
            f"DuckDB refused its settings ({exc}); --memory-limit takes DuckDB's syntax, e.g. 2GB."
        ) from None
    con.execute("SET enable_progress_bar = false")  # it would write to stdout, where results go
    return con


def _first(rows: list[tuple[Any, ...]]) -> tuple[Any, ...] | None:
    """The first row of a LIMIT 1 query's rows, None when there is none (DuckDB 2 wants every
    result fetched whole before the next statement, so no fetchone)."""
    return rows[0] if rows else None


def _quoted(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _format_of(path: Path) -> str:
    if path.is_dir():  # a dataset as Spark (or pyarrow) writes one: a folder of Parquet part files
        return "parquet"
    suffix = path.suffix.lower()
    if suffix == ".gz":
        suffix = Path(path.stem).suffix.lower()
    return {".parquet": "parquet", ".pq": "parquet", ".csv": "csv", ".tsv": "tsv"}.get(suffix, "trec")


def run_source(con: duckdb.DuckDBPyConnection, path: Path, strict: bool = False) -> tuple[str, str | None]:
    """(SQL of the run as rows (topic, doc, score, rank as given, as text), the run's tag as
    trec_eval reports it: the last line's) for a TREC run file (any white space between fields,
    gzip or not), a CSV/TSV with a header, or Parquet: a file or a folder of part files (columns
    named as the local reader names them)."""
    if not path.exists():
        raise InputFormatError(str(path), None, "no such file")
    fmt = _format_of(path)
    if fmt == "trec":
        return _trec_rows(con, path, strict)
    if fmt == "parquet":
        table = f"read_parquet({_parquet_files(path)})"
    else:
        table = (
            f"read_csv({_quoted(str(path))}, header=true, delim={_quoted(',' if fmt == 'csv' else chr(9))}, "
            "all_varchar=true)"
        )
    names = [row[0] for row in con.execute(f"DESCRIBE SELECT * FROM {table}").fetchall()]
    found = choose_columns(str(path), names, ["topic", "doc", "score"], ["rank", "tag"])
    chosen = {canonical: '"' + source.replace('"', '""') + '"' for canonical, source in found.items()}
    rank = f"CAST({chosen['rank']} AS VARCHAR)" if "rank" in chosen else "'0'"
    tag = None
    if "tag" in chosen:
        last = _first(con.execute(f"SELECT CAST({chosen['tag']} AS VARCHAR) FROM {table} LIMIT 1").fetchall())
        tag = None if last is None else last[0]
    score = chosen["score"]
    bad_score = _first(
        con.execute(
            f"SELECT {score} FROM {table} WHERE TRY_CAST({score} AS DOUBLE) IS NULL OR NOT "
            f"isfinite(TRY_CAST({score} AS DOUBLE)) LIMIT 1"
        ).fetchall()
    )
    if bad_score is not None:
        raise _refusal(
            path,
            [place for place, _ in _found(path, _bad_score)],
            f"score '{bad_score[0]}' is not a finite number; scores must be finite",
        )
    return (
        f"(SELECT CAST({chosen['topic']} AS VARCHAR) AS topic, CAST({chosen['doc']} AS VARCHAR) AS doc, "
        f"CAST({chosen['score']} AS DOUBLE) AS score, {rank} AS rank FROM {table})"
    ), tag


# The scores DuckDB's DOUBLE reads as C's atof does: plain decimal numbers. DuckDB also reads
# '1_000' (1000: atof reads 1) and ' 1'; a run with any other spelling (hexadecimal, inf, nan, digit
# separators, trailing text) goes to the precise reader
_PLAIN_SCORE = "'[+-]?([0-9]+[.]?[0-9]*|[.][0-9]+)([eE][+-]?[0-9]+)?'"
_SPACE = "[ \\t\\n\\v\\f\\r]"  # C's isspace, as RE2 reads it


def _trec_rows(con: duckdb.DuckDBPyConnection, path: Path, strict: bool = False) -> tuple[str, str | None]:
    """A TREC run parsed once into a temporary table (DuckDB spills it to disk past its memory
    limit), which the three passes then read: parsing is most of the work. A regular file (one
    space or one tab between fields, nothing else: the local reader's test,
    :func:`evalstore.io.formats.regular_trec_text`) goes through DuckDB's CSV reader; any other
    (runs of white space, comment lines, more fields than six) is split on white space as
    trec_eval's reader splits it, ~8x slower. A line either cannot read as the local reader does
    (too few fields, a score that is not a plain decimal number) sends the whole file to the
    local reader (:func:`_precise_rows`), which reads it line for line or says where it is wrong."""
    import duckdb

    from evalstore.io.formats import regular_trec_text

    name = _quoted(str(path))
    with _binary(path) as handle:
        head = handle.read(4096)
    delimiter = "\t" if b"\t" in head.split(b"\n", 1)[0] else " "
    with _binary(path) as handle:
        irregular = not regular_trec_text(handle, delimiter.encode())
    columns = (
        "{'topic': 'VARCHAR', 'q0': 'VARCHAR', 'doc': 'VARCHAR', 'rank': 'VARCHAR', 'score': 'VARCHAR', "
        "'tag': 'VARCHAR'}"
    )
    regular = (
        f"read_csv({name}, delim={_quoted(delimiter)}, header=false, columns={columns}, auto_detect=false, "
        "quote='', escape='', strict_mode=true)"
    )
    plain = f"CAST(CASE WHEN regexp_full_match({{score}}, {_PLAIN_SCORE}) THEN {{score}} END AS DOUBLE)"
    if not irregular:
        try:
            con.execute(
                f"CREATE OR REPLACE TEMP TABLE run_rows AS SELECT topic, doc, {plain.format(score='score')} "
                f"AS score, score AS score_text, rank, tag FROM {regular} WHERE NOT starts_with(topic, '#')"
            )
        except duckdb.Error:  # more or fewer fields than six on some line: the general path says where
            irregular = True
    if irregular:
        # one column per line, split on runs of C white space; '#' after any indentation starts a
        # comment line (get_trec_results.c; a '#' inside a docno is kept); fields after the sixth
        # are ignored, as trec_eval ignores them
        lines = (
            f"read_csv({name}, columns={{'line': 'VARCHAR'}}, header=false, delim='\\x01', quote='', "
            "escape='', auto_detect=false, new_line='\\n', strict_mode=false)"
        )
        fields = (
            f"(SELECT regexp_split_to_array(regexp_replace(regexp_replace(line, '^{_SPACE}+', ''), "
            f"'{_SPACE}+$', ''), '{_SPACE}+') AS f FROM {lines} "
            f"WHERE NOT regexp_full_match(line, '{_SPACE}*') AND NOT regexp_matches(line, '^{_SPACE}*#'))"
        )
        try:
            con.execute(
                f"CREATE OR REPLACE TEMP TABLE run_rows AS SELECT f[1] AS topic, f[3] AS doc, "
                f"{plain.format(score='f[5]')} AS score, f[5] AS score_text, f[4] AS rank, f[6] AS tag, "
                f"len(f) AS width FROM {fields}"
            )
        except duckdb.Error:  # bytes that are not UTF-8: the local reader says where
            return _precise_rows(con, path, strict)
        if (
            _first(
                con.execute("SELECT 1 FROM run_rows WHERE width < 6 OR (width > 6 AND ?) LIMIT 1", [strict]).fetchall()
            )
            is not None
        ):
            return _precise_rows(con, path, strict)
    if _first(con.execute("SELECT 1 FROM run_rows WHERE score IS NULL OR NOT isfinite(score) LIMIT 1").fetchall()):
        return _precise_rows(con, path, strict)  # a score C reads otherwise, or not a number: the local reader
    tag = _last_tag(path)
    if tag is None:  # gzip: no end to seek to; every line of a run has the same tag
        row = _first(con.execute("SELECT tag FROM run_rows LIMIT 1").fetchall())
        tag = None if row is None else row[0]
    return "(SELECT topic, doc, score, rank FROM run_rows)", tag


def _precise_rows(con: duckdb.DuckDBPyConnection, path: Path, strict: bool) -> tuple[str, str | None]:
    """The run as the local reader reads it (line by line where the file is irregular; it raises
    with path:line where the file is wrong), handed to DuckDB: a file DuckDB's readers cannot
    read as trec_eval does is held in memory, as the local backend would hold it."""
    from evalstore.io.formats import read_run

    parsed = read_run(path, fmt="trec", strict=strict, content_hash=False, check_duplicates=False)
    table = parsed.table
    con.register(
        "precise_rows",
        pa.table(
            {
                "topic": table["topic"],
                "doc": table["doc"],
                "score": table["score"],
                "rank": table["rank"].cast(pa.string()),
            }
        ),
    )
    con.execute("CREATE OR REPLACE TEMP TABLE run_rows AS SELECT topic, doc, score, rank FROM precise_rows")
    con.unregister("precise_rows")
    return "(SELECT topic, doc, score, rank FROM run_rows)", parsed.tag


@contextmanager
def _binary(path: Path) -> Iterator[IO[bytes]]:
    """The file's bytes, gunzipped when gzipped."""
    with open(path, "rb") as raw:
        if raw.read(2) == b"\x1f\x8b":
            raw.seek(0)
            with gzip.GzipFile(fileobj=raw) as unzipped:
                yield unzipped  # type: ignore[misc]
        else:
            raw.seek(0)
            yield raw


# --- where a refused row is: read the file again (an error path only) ----------------------------
# DuckDB finds what is wrong without keeping where it was; the local reader says path:line (or
# "row N" of a Parquet file), and so do these, by reading the file once more in Python for the
# first rows that show the fault, in constant memory.


def _rows_as_text(path: Path) -> Iterator[tuple[int, dict[str, str]]]:
    """(line, or row of a Parquet file, 1-based; the row's topic, doc, score and rank as text) in
    file order. TREC lines as trec_eval splits them, blank and comment lines counted but skipped."""
    fmt = _format_of(path)
    if fmt == "parquet":
        import pyarrow.parquet as pq

        row = 0
        for part in _parquet_parts(path):
            parquet = pq.ParquetFile(part)
            found = choose_columns(str(path), parquet.schema_arrow.names, ["topic", "doc", "score"], ["rank"])
            for batch in parquet.iter_batches(columns=list(found.values())):
                columns = {name: batch.column(source).to_pylist() for name, source in found.items()}
                for values in zip(*columns.values(), strict=True):
                    row += 1
                    yield row, {name: str(value) for name, value in zip(columns, values, strict=True)}
        return
    with _text(path) as handle:
        if fmt == "trec":
            for number, line in enumerate(handle, start=1):
                fields = line.split()
                if len(fields) == 6 and not fields[0].startswith("#"):
                    yield number, {"topic": fields[0], "doc": fields[2], "rank": fields[3], "score": fields[4]}
            return
        import csv

        reader = csv.reader(handle, delimiter="," if fmt == "csv" else "\t")
        header: list[str] = next(reader, [])
        found = choose_columns(str(path), header, ["topic", "doc", "score"], ["rank"])
        at = {name: header.index(source) for name, source in found.items()}
        for cells in reader:
            yield reader.line_num, {name: cells[index] if index < len(cells) else "" for name, index in at.items()}


def _found(path: Path, wanted: Callable[[dict[str, str]], bool], limit: int = 1) -> list[tuple[int, dict[str, str]]]:
    """(line, or row of a Parquet file; the row) of the first ``limit`` rows ``wanted`` picks."""
    if not path.exists():  # not a file: a stored run handed over by the worker
        return []
    found = []
    for place, row in _rows_as_text(path):
        if wanted(row):
            found.append((place, row))
            if len(found) == limit:
                break
    return found


def _text(path: Path) -> IO[str]:
    """A text file opened for reading again, gunzipped when gzipped; bad bytes replaced."""
    return (
        gzip.open(path, "rt", errors="replace")
        if is_gzip_file(path)
        else open(path, encoding="utf-8", errors="replace")
    )


def _bad_score(row: dict[str, str]) -> bool:
    try:
        return not math.isfinite(float(row["score"]))
    except ValueError:
        return True


def _refusal(path: Path | str, places: list[int], problem: str) -> InputFormatError:
    """``path:line: problem`` (``path: row N: problem`` for Parquet; ``path: problem`` when the
    place is unknown), as the local reader words it."""
    if not places:
        return InputFormatError(str(path), None, problem)
    if _format_of(Path(path)) == "parquet":
        return InputFormatError(str(path), None, f"row {places[0]}: {problem}")
    return InputFormatError(str(path), places[0], problem)


def _twice(path: Path | str, topic: str, doc: str) -> InputFormatError:
    """A document listed twice in a topic, at its second place, naming its first."""
    places = [
        place for place, _ in _found(Path(path), lambda row: row["topic"] == topic and row["doc"] == doc, limit=2)
    ]
    unit = "row" if _format_of(Path(path)) == "parquet" else "line"
    first = f" (first at {unit} {places[0]})" if len(places) == 2 else ""
    return _refusal(
        path,
        places[1:],
        f"docno '{doc}' appears twice in topic '{topic}'{first}; trec_eval refuses "
        "duplicate documents, so remove one of them",
    )


def _parquet_parts(path: Path) -> list[Path]:
    """A Parquet file, or a folder's part files in name order (Spark names them part-00000...)."""
    if not path.is_dir():
        return [path]
    parts = sorted(part for part in path.glob("*.parquet") if part.is_file())
    if not parts:
        raise InputFormatError(str(path), None, "the folder holds no .parquet file")
    return parts


def _parquet_files(path: Path) -> str:
    """DuckDB's argument for the Parquet file(s), read in name order."""
    return "[" + ", ".join(_quoted(str(part)) for part in _parquet_parts(path)) + "]"


def _last_tag(path: Path) -> str | None:
    """The last line's tag (trec_eval's runid), read from the file's end; None for gzip."""
    if is_gzip_file(path) or path.is_dir():
        return None
    with open(path, "rb") as handle:
        handle.seek(0, os.SEEK_END)
        size = handle.tell()
        handle.seek(max(0, size - 4096))
        lines = handle.read().split(b"\n")
    # get_trec_results.c: the sixth field of the last line that is not blank or a comment
    runs = [
        fields for fields in (line.split() for line in lines) if len(fields) >= 6 and not fields[0].startswith(b"#")
    ]
    return runs[-1][5].decode("utf-8", errors="replace") if runs else None


class _UncountedDuplicates(Exception):  # noqa: N818  (a signal, not an error: prepare_file catches it)
    """A docno twice in a topic, where trec_eval does not look (a topic the qrels lack, or below
    the -M cut): the counting joins would count both copies, so the local engine ranks the run."""


def judged_ranks(
    con: duckdb.DuckDBPyConnection, run_sql: str, qrels: pa.Table, path: Path | str, max_docs: int | None = None
) -> tuple[pa.Table, pa.Table]:
    """(topic, retrieved) for every run topic and (topic, rank, relevance) for every run row the
    qrels judge, rank in trec_eval order; refuses a docno twice in a topic where trec_eval does
    (form_res_rels.c: in a topic the qrels have, within the top ``max_docs``)."""
    con.register("judgments", qrels.select(["topic", "doc", "relevance"]))
    con.execute(
        f"CREATE OR REPLACE TEMP TABLE judged AS SELECT r.topic, r.doc, r.score, q.relevance "
        f"FROM {run_sql} r JOIN judgments q ON q.topic = r.topic AND q.doc = r.doc"
    )
    retrieved = con.sql(
        f"SELECT topic, count(*) AS retrieved, count(DISTINCT doc) AS docs FROM {run_sql} GROUP BY topic"
    ).to_arrow_table()
    if not (retrieved["retrieved"].to_numpy() == retrieved["docs"].to_numpy()).all():
        twice = _first(
            con.execute(
                "SELECT topic, doc FROM (SELECT topic, doc, row_number() OVER (PARTITION BY topic "
                f"ORDER BY score DESC, doc DESC) AS place FROM {run_sql} "
                "WHERE topic IN (SELECT DISTINCT topic FROM judgments)) "
                "WHERE place <= ? GROUP BY ALL HAVING count(*) > 1 LIMIT 1",
                [max_docs or 2**62],
            ).fetchall()
        )
        if twice is not None:
            raise _twice(path, twice[0], twice[1])
        raise _UncountedDuplicates
    judged = con.sql(
        f"SELECT j.topic, 1 + count(r.doc) FILTER (WHERE r.score > j.score OR (r.score = j.score AND r.doc > j.doc)) "
        f"AS rank, any_value(j.relevance) AS relevance FROM judged j JOIN {run_sql} r ON r.topic = j.topic "
        "GROUP BY j.topic, j.doc"
    ).to_arrow_table()
    con.execute("DROP TABLE judged")
    return retrieved.select(["topic", "retrieved"]), judged


def prepare_file(
    qrels: pa.Table, run_path: str | Path, options: PrepareOptions, settings: DuckDBSettings
) -> tuple[Ranking, str | None]:
    """The local engine's :class:`Ranking` of a run file of any size, and its tag."""
    from evalstore.metrics.preparation import prepare, prepare_ranked

    path = Path(run_path)
    con = connect(settings)
    try:
        run_sql, tag = run_source(con, path)
        try:
            retrieved, judged = judged_ranks(con, run_sql, qrels, path, options.max_docs)
        except _UncountedDuplicates:
            con.register("judgments", qrels.select(["topic"]))
            rows = con.sql(
                f"SELECT topic, doc, score FROM {run_sql} WHERE topic IN (SELECT DISTINCT topic FROM judgments)"
            ).to_arrow_table()
            return prepare(qrels, rows, options, runid=tag), tag
    finally:
        con.close()
    return prepare_ranked(qrels, retrieved, judged, options, runid=tag), tag


# --- binary predictions ---------------------------------------------------------------------------

# Per (group, distinct score): positives and negatives; then, per group, twice the pairs ordered
# right (a tie counts half) as an exact integer: sum over scores of pos x (2 x negatives below +
# negatives at the score), and the sum over scores of pos x the precision of everything scoring at
# least that (average precision x positives). The local engine's group_auc and Curve count the same.
PAIR_COUNTS = """
WITH counts AS (
    SELECT {group} AS g, {score} AS s, sum({label})::BIGINT AS pos, (count(*) - sum({label}))::BIGINT AS neg
    FROM {source} GROUP BY ALL),
below AS (
    SELECT g, pos, neg, coalesce(sum(neg) OVER lower, 0) AS neg_below,
           sum(pos) OVER whole - coalesce(sum(pos) OVER lower, 0) AS tp_at,
           sum(pos + neg) OVER whole - coalesce(sum(pos + neg) OVER lower, 0) AS predicted_at
    FROM counts
    WINDOW lower AS (PARTITION BY g ORDER BY s ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING),
           whole AS (PARTITION BY g))
SELECT g AS "group", sum(pos)::BIGINT AS positives, sum(neg)::BIGINT AS negatives,
       sum(pos * (2 * neg_below + neg))::HUGEINT AS twice_pairs, sum(pos * (tp_at / predicted_at)) AS precision_sum
FROM below GROUP BY g
"""

# PAIR_COUNTS with each group's confusion counts of the predicted labels, for rows (y, s, g,
# predicted) as evalstore.db.repositories.binary_prediction_batches reads a stored set
BINARY_COUNTS = """
WITH pairs AS ({pairs}),
cells AS (
    SELECT {group} AS "group", sum(y * predicted)::BIGINT AS tp, sum((1 - y) * predicted)::BIGINT AS fp,
           sum(y * (1 - predicted))::BIGINT AS fn, sum((1 - y) * (1 - predicted))::BIGINT AS tn
    FROM {source} GROUP BY ALL)
SELECT "group", positives, negatives, CAST(twice_pairs AS VARCHAR) AS twice_pairs, precision_sum, tp, fp, fn, tn
FROM pairs JOIN cells USING ("group") ORDER BY "group"
"""

# the log loss and Brier terms of each item, as scikit-learn computes them (the probability of the
# gold class clipped to [eps, 1 - eps]), summed
LOSS_SUMS = """
SELECT sum(-ln(least(greatest(CASE WHEN y = 1 THEN s ELSE 1 - s END, {eps!r}), {one_minus_eps!r}))),
       sum((y - s) * (y - s))
FROM {source}
"""


def _loss_sums(con: duckdb.DuckDBPyConnection, source: str) -> tuple[float, float]:
    """(sum of the log loss terms, of the Brier terms) of the rows (y, s) of ``source``."""
    eps = float(np.finfo(np.float64).eps)
    total_log_loss, total_brier = con.execute(
        LOSS_SUMS.format(eps=eps, one_minus_eps=1 - eps, source=source)
    ).fetchall()[0]
    return float(total_log_loss), float(total_brier)


def binary_counts(con: duckdb.DuckDBPyConnection, source: str) -> BinaryCounts:
    """:class:`BinaryCounts` of the rows (y, s, g, predicted) of ``source`` (a table or a query
    in parentheses): two aggregating passes with a window over each group's distinct scores,
    spilling to disk past the memory limit; per group only when every row has one."""
    items, scored, grouped, lowest, highest = con.execute(
        f"SELECT count(*), count(s), count(g), min(s), max(s) FROM {source}"
    ).fetchall()[0]
    if items == 0:
        raise InvalidParameterError("no predictions to evaluate")
    if scored < items:
        raise InvalidParameterError(
            f"{items - scored} of {items} predictions have no score; the out-of-core "
            "backends evaluate scored predictions"
        )

    def counts(group: str) -> pa.Table:
        pairs = PAIR_COUNTS.format(group=group, score="s", label="y", source=source)
        return con.sql(BINARY_COUNTS.format(pairs=pairs, group=group, source=source)).to_arrow_table()

    log_loss_sum = brier_sum = None
    if 0 <= lowest and highest <= 1:
        log_loss_sum, brier_sum = _loss_sums(con, source)
    return BinaryCounts.from_tables(counts("''"), counts("g") if grouped == items else None, log_loss_sum, brier_sum)


def _prediction_source(con: duckdb.DuckDBPyConnection, source: str | Path | pa.Table) -> str:
    if isinstance(source, pa.Table):
        con.register("predictions", source)
        return "predictions"
    path = Path(source)
    if not path.exists():
        raise InputFormatError(str(path), None, "no such file")
    fmt = _format_of(path)
    if fmt == "parquet":
        return f"read_parquet({_parquet_files(path)})"
    return f"read_csv({_quoted(str(path))}, header=true, delim={_quoted(',' if fmt == 'csv' else chr(9))})"


def evaluate_predictions(
    source: str | Path | pa.Table,
    *,
    label_col: str = "label",
    score_col: str = "score",
    group_col: str | None = None,
    settings: DuckDBSettings = DuckDBSettings(),
) -> dict[str, float]:
    """AUC (exact, ties counting half), GAUC over ``group_col`` (AUC per group weighted by its
    size, over groups holding both classes) and log loss (scikit-learn's, scores clipped to
    [eps, 1 - eps], when every score is a probability) of binary predictions (label 0/1) in a
    Parquet/CSV file or an Arrow table, in DuckDB's bounded memory."""
    con = connect(settings)
    try:
        table = _prediction_source(con, source)
        label, score = f'CAST("{label_col}" AS BIGINT)', f'CAST("{score_col}" AS DOUBLE)'
        overall = con.execute(
            f"SELECT count(*), min({label}), max({label}), min({score}), max({score}), count(*) - count({score}) "
            f"FROM {table}"
        ).fetchall()[0]
        items, low, high, lowest, highest, missing = overall
        if items == 0:
            raise InvalidParameterError("no predictions to evaluate")
        if low not in (0, 1) or high not in (0, 1) or missing:
            raise InvalidParameterError(
                f"labels must be 0 or 1 and every score a number (labels {low}..{high}, {missing} missing scores)"
            )
        everything = con.execute(PAIR_COUNTS.format(group="0", score=score, label=label, source=table)).fetchall()[0]
        _, positives, negatives, twice, _ = everything
        values: dict[str, float] = {
            "items": float(items),
            "positives": float(positives),
            "auc": float(ratio_of_pairs(np.array([twice]), np.array([positives]), np.array([negatives]))[0]),
        }
        if group_col is not None:
            groups = con.sql(
                PAIR_COUNTS.format(group=f'"{group_col}"', score=score, label=label, source=table)
            ).to_arrow_table()
            values["gauc"], values["gauc_groups_skipped"] = gauc_of_pairs(
                groups["twice_pairs"].to_pylist(), groups["positives"].to_numpy(), groups["negatives"].to_numpy()
            )
        if 0 <= lowest and highest <= 1:
            values["log_loss"] = _loss_sums(con, f"(SELECT {label} AS y, {score} AS s FROM {table})")[0] / items
        return values
    finally:
        con.close()


# --- storing a run too large to hold -----------------------------------------------------------


@dataclass(frozen=True)
class RunToStore:
    """A run file parsed and checked by DuckDB for storing (evalstore.services.store)."""

    tag: str | None
    rows: int
    topics: int
    counts: pa.Table  # topic, retrieved
    content_hash: str  # as the local reader's: sha256 of the (decompressed) bytes


@contextmanager
def run_to_store(
    path: str | Path, settings: DuckDBSettings, batch_rows: int
) -> Iterator[tuple[RunToStore, pa.RecordBatchReader]]:
    """Parse and check a run file of any size, and read its rows back for storing in file order
    (topic, doc, score, rank as given, trec_rank), ``batch_rows`` at a time. DuckDB holds the
    parsed rows (spilling past its memory limit) and computes each row's trec_eval rank with a
    window per topic; the same checks as the local reader refuse the file whole, before anything
    is stored: a bad line, a score that is not a finite number, a rank that is not a 32-bit
    integer, a document twice in a topic, no rows."""
    path = Path(path)
    con = connect(settings, keep_order=True)
    try:
        source, tag = run_source(con, path, strict=True)
        con.execute(
            f"CREATE OR REPLACE TEMP TABLE parsed AS SELECT topic, doc, score, rank AS rank_text, "
            f"TRY_CAST(rank AS INTEGER) AS rank FROM {source}"
        )
        rows = con.execute("SELECT count(*) FROM parsed").fetchall()[0][0]
        if rows == 0:
            raise InputFormatError(
                str(path), None, "the file has no rows; a run file needs at least one (qid Q0 docno rank score tag)"
            )
        bad_rank = _first(con.execute("SELECT rank_text FROM parsed WHERE rank IS NULL LIMIT 1").fetchall())
        if bad_rank is not None:
            raise _refusal(
                path,
                [place for place, _ in _found(path, lambda row: row["rank"] == bad_rank[0])],
                f"rank '{bad_rank[0]}' is not an integer between -2147483648 and 2147483647",
            )
        twice = _first(con.execute("SELECT topic, doc FROM parsed GROUP BY ALL HAVING count(*) > 1 LIMIT 1").fetchall())
        if twice is not None:
            raise _twice(path, twice[0], twice[1])
        counts = con.sql("SELECT topic, count(*)::BIGINT AS retrieved FROM parsed GROUP BY topic").to_arrow_table()
        reader = con.sql(
            "SELECT topic, doc, score, rank, CAST(row_number() OVER (PARTITION BY topic ORDER BY score DESC, "
            "doc DESC) AS INTEGER) AS trec_rank FROM parsed ORDER BY rowid"
        ).to_arrow_reader(batch_rows)
        yield RunToStore(tag, rows, counts.num_rows, counts, _content_hash(path)), reader
    finally:
        con.close()


def _content_hash(path: Path) -> str:
    """sha256 of the file's bytes, decompressed when gzipped, read in blocks (as the local reader
    hashes them whole)."""
    import hashlib

    digest = hashlib.sha256()
    for part in _parquet_parts(path) if path.is_dir() else [path]:  # a folder: its part files in name order
        with gzip.open(part, "rb") if is_gzip_file(part) else open(part, "rb") as handle:
            while block := handle.read(1 << 22):
                digest.update(block)
    return digest.hexdigest()
