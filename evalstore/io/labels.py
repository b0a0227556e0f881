"""Reading classification files: gold labels, predictions, clusterings, cost matrices.

CSV, TSV or Parquet with named columns. Every check is vectorised over Arrow columns (10M
predictions validate in about a second); a problem is reported at the first row that has it, as
``path:line`` for text files (the header is line 1) or ``path: row N`` for Parquet.
"""

from __future__ import annotations

import hashlib
import io
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from evalstore.errors import InputFormatError
from evalstore.io.formats import _read_bytes

SCORE_PREFIX = "score_"


@dataclass(frozen=True)
class TableFile:
    path: str
    table: pa.Table
    content_hash: str
    first_line: int | None  # line of row 0 in a text file; None for Parquet

    def error(self, row: int, problem: str) -> InputFormatError:
        if self.first_line is None:
            return InputFormatError(self.path, None, f"row {row + 1}: {problem}")
        return InputFormatError(self.path, self.first_line + row, problem)


def read_table_file(path: Path, what: str, fmt: str | None = None) -> TableFile:
    """A CSV/TSV/Parquet file read with every column as text except Parquet's own types."""
    fmt = fmt or _format_of(path)
    raw = _read_bytes(path)
    if not raw.strip():
        raise InputFormatError(str(path), None, f"the file is empty; a {what} file needs a header row and rows")
    try:
        if fmt == "parquet":
            import pyarrow.parquet as pq  # ~40 ms with the file systems it loads; Parquet input only

            table = pq.read_table(io.BytesIO(raw))
            first_line = None
        else:
            delimiter = "," if fmt == "csv" else "\t"
            header = pacsv.read_csv(io.BytesIO(raw), parse_options=pacsv.ParseOptions(delimiter=delimiter),
                                    read_options=pacsv.ReadOptions(block_size=1 << 16)).schema.names
            # ids and labels stay text ("007" is not 7); score columns are parsed as numbers below
            types = {name: pa.string() for name in header if not name.startswith("score")}
            table = pacsv.read_csv(io.BytesIO(raw), parse_options=pacsv.ParseOptions(delimiter=delimiter),
                                   convert_options=pacsv.ConvertOptions(column_types=types,
                                                                        strings_can_be_null=False))
            first_line = 2
    except (pa.ArrowInvalid, OSError) as exc:
        raise InputFormatError(str(path), None, f"cannot be read as {fmt.upper()}: {exc}".rstrip()) from None
    if table.num_rows == 0:
        raise InputFormatError(str(path), None, f"the file has a header but no rows; a {what} file needs rows")
    return TableFile(str(path), table, hashlib.sha256(raw).hexdigest(), first_line)


def _format_of(path: Path) -> str:
    suffix = path.suffix.lower().lstrip(".")
    if suffix in ("parquet", "pq"):
        return "parquet"
    if suffix in ("csv", "tsv"):
        return suffix
    raise InputFormatError(str(path), None, f"unknown format '.{suffix}'; use CSV, TSV or Parquet with named columns")


def _require(file: TableFile, columns: list[str], what: str) -> None:
    missing = [c for c in columns if c not in file.table.column_names]
    if missing:
        raise InputFormatError(file.path, None, f"no column {', '.join(repr(c) for c in missing)}; a {what} file "
                                                f"has columns {', '.join(columns)} (found: "
                                                f"{', '.join(file.table.column_names)})")


def _text(file: TableFile, name: str) -> pa.ChunkedArray:
    column = file.table[name]
    if not pa.types.is_string(column.type) and not pa.types.is_large_string(column.type):
        column = pc.cast(column, pa.string())
    nulls = column.is_null().to_numpy(zero_copy_only=False)
    if nulls.any():
        raise file.error(int(np.argmax(nulls)), f"empty {name}")
    column = pc.utf8_trim_whitespace(column).cast(pa.string())
    empty = pc.equal(pc.utf8_length(column), 0).to_numpy(zero_copy_only=False)
    if empty.any():
        raise file.error(int(np.argmax(empty)), f"empty {name}")
    return column


def _unique_ids(file: TableFile, ids: pa.ChunkedArray) -> None:
    if pc.count_distinct(ids).as_py() == len(ids):
        return
    import pandas as pd  # only to name the repeated id; the readers' importers need not load pandas

    values = pd.Series(ids.to_numpy(zero_copy_only=False))
    repeat = int(np.argmax(values.duplicated().to_numpy()))
    first = int(np.argmax((values == values[repeat]).to_numpy()))
    where = f"line {file.first_line + first}" if file.first_line is not None else f"row {first + 1}"
    raise file.error(repeat, f"item_id '{values[repeat]}' appears twice (first at {where}); keep one row per item")


@dataclass(frozen=True)
class Gold:
    items: pa.ChunkedArray
    labels: pa.ChunkedArray
    groups: pa.ChunkedArray | None
    content_hash: str

    @property
    def classes(self) -> list[str]:
        return sorted(pc.unique(self.labels).to_pylist())


def read_gold(path: Path, fmt: str | None = None) -> Gold:
    file = read_table_file(path, "gold labels", fmt)
    _require(file, ["item_id", "label"], "gold labels")
    items = _text(file, "item_id")
    _unique_ids(file, items)
    groups = _text(file, "group") if "group" in file.table.column_names else None
    return Gold(items, _text(file, "label"), groups, file.content_hash)


@dataclass(frozen=True)
class Predictions:
    items: pa.ChunkedArray
    labels: pa.ChunkedArray | None
    score: np.ndarray | None  # binary: P(positive class)
    class_scores: dict[str, np.ndarray]  # one score column per class
    groups: pa.ChunkedArray | None
    content_hash: str


def read_predictions(path: Path, gold: Gold, *, probabilities: bool, clustering: bool = False,
                     fmt: str | None = None) -> Predictions:
    """Predictions checked against the gold labels: the same items (none missing, none extra),
    known labels, finite scores (within [0, 1] when ``probabilities``)."""
    what = "clustering" if clustering else "predictions"
    file = read_table_file(path, what, fmt)
    label_column = "cluster_id" if clustering else "label"
    _require(file, ["item_id", label_column] if clustering else ["item_id"], what)
    items = _text(file, "item_id")
    _unique_ids(file, items)
    position = pc.index_in(items, value_set=gold.items.combine_chunks())
    unknown = position.is_null().to_numpy(zero_copy_only=False)
    if unknown.any():
        row = int(np.argmax(unknown))
        raise file.error(row, f"item_id '{items[row].as_py()}' is not in the gold labels; predict only the "
                              "labelled items")
    if len(items) < len(gold.items):
        covered = np.zeros(len(gold.items), dtype=bool)
        covered[position.to_numpy(zero_copy_only=False)] = True
        missing = gold.items[int(np.argmax(~covered))].as_py()
        raise InputFormatError(file.path, None, f"{int((~covered).sum())} gold items have no prediction (e.g. "
                                                f"'{missing}'); predict every labelled item")
    labels = _text(file, label_column) if label_column in file.table.column_names else None
    if labels is not None and not clustering:
        known = pc.is_in(labels, value_set=pa.array(gold.classes, pa.string())).to_numpy(zero_copy_only=False)
        if not known.all():
            row = int(np.argmax(~known))
            raise file.error(row, f"label '{labels[row].as_py()}' is not a gold class "
                                  f"({', '.join(gold.classes)})")
    score = _score(file, "score", probabilities) if "score" in file.table.column_names else None
    class_scores = {}
    for name in file.table.column_names:
        if name.startswith(SCORE_PREFIX):
            label = name.removeprefix(SCORE_PREFIX)
            if label not in gold.classes:
                raise InputFormatError(file.path, None, f"column '{name}' scores class '{label}', which is not a "
                                                        f"gold class ({', '.join(gold.classes)})")
            class_scores[label] = _score(file, name, probabilities)
    if not clustering and labels is None and score is None and not class_scores:
        raise InputFormatError(file.path, None, "no prediction: give a 'label' column, a 'score' column (binary "
                                                f"tasks) or one '{SCORE_PREFIX}<class>' column per class")
    if score is not None and len(gold.classes) != 2:
        raise InputFormatError(file.path, None, f"a single 'score' column needs two classes; the gold labels "
                                                f"have {len(gold.classes)}: give one '{SCORE_PREFIX}<class>' column "
                                                "per class")
    if class_scores and len(class_scores) != len(gold.classes):
        absent = sorted(set(gold.classes) - set(class_scores))
        raise InputFormatError(file.path, None, f"per-class scores miss {', '.join(absent)}; give one "
                                                f"'{SCORE_PREFIX}<class>' column for every gold class")
    groups = _text(file, "group") if "group" in file.table.column_names else None
    return Predictions(items, labels, score, class_scores, groups, file.content_hash)


def _score(file: TableFile, name: str, probabilities: bool) -> np.ndarray:
    try:
        column = pc.cast(file.table[name], pa.float64())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        values = file.table[name].to_pylist()
        row = next(i for i, v in enumerate(values) if not _is_number(v))
        raise file.error(row, f"{name} '{values[row]}' is not a number") from None
    values = pc.fill_null(column, float("nan")).to_numpy()
    bad = ~np.isfinite(values)
    if bad.any():
        row = int(np.argmax(bad))
        # pyarrow reads "nan", "NA" and empty cells as missing values
        shown = "missing or NaN" if file.table[name][row].as_py() is None else str(values[row])
        raise file.error(row, f"{name} is {shown}; scores must be finite numbers")
    if probabilities:
        outside = (values < 0) | (values > 1)
        if outside.any():
            row = int(np.argmax(outside))
            raise file.error(row, f"{name} {values[row]:g} is outside [0, 1], and the scores were declared "
                                  "probabilities; drop --probabilities for unbounded scores")
    return values


def _is_number(text: object) -> bool:
    try:
        float(str(text))
    except ValueError:
        return False
    return True


def read_cost_matrix(path: Path, classes: list[str]) -> np.ndarray:
    """A (k, k) cost matrix, rows true class, columns predicted, from a CSV/TSV with columns
    true, predicted, cost (pairs not listed cost 0)."""
    file = read_table_file(path, "cost matrix")
    _require(file, ["true", "predicted", "cost"], "cost matrix")
    costs = np.zeros((len(classes), len(classes)))
    values = _score(file, "cost", probabilities=False)
    for row, (true, predicted) in enumerate(zip(_text(file, "true").to_pylist(), _text(file, "predicted").to_pylist(),
                                                strict=True)):
        for label in (true, predicted):
            if label not in classes:
                raise file.error(row, f"class '{label}' is not a gold class ({', '.join(classes)})")
        costs[classes.index(true), classes.index(predicted)] = values[row]
    return costs
