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

from evalstore.errors import InputFormatError, Remedy
from evalstore.io.limits import check_fields
from evalstore.io.parsed import read_bytes

SCORE_PREFIX = "score_"
LABEL_SEPARATOR = "|"  # between the labels of a multilabel item: "sports|politics"


@dataclass(frozen=True)
class TableFile:
    path: str
    table: pa.Table
    content_hash: str
    first_line: int | None  # line of row 0 in a text file; None for Parquet

    def error(self, row: int, problem: str, remedy: Remedy | None = None) -> InputFormatError:
        if self.first_line is None:
            return InputFormatError(self.path, None, f"row {row + 1}: {problem}", remedy=remedy)
        return InputFormatError(self.path, self.first_line + row, problem, remedy=remedy)


def read_table_file(path: Path, what: str, fmt: str | None = None) -> TableFile:
    """A CSV/TSV/Parquet file read with every column as text except Parquet's own types."""
    fmt = fmt or _format_of(path)
    raw = read_bytes(path)
    if not raw.strip():
        raise InputFormatError(str(path), None, f"the file is empty; a {what} file needs a header row and rows")
    try:
        if fmt == "parquet":
            import pyarrow.parquet as pq  # ~40 ms with the file systems it loads; Parquet input only

            table = pq.read_table(io.BytesIO(raw))
            first_line = None
        else:
            delimiter = "," if fmt == "csv" else "\t"
            header = pacsv.read_csv(
                io.BytesIO(raw),
                parse_options=pacsv.ParseOptions(delimiter=delimiter),
                read_options=pacsv.ReadOptions(block_size=1 << 16),
            ).schema.names
            # ids and labels stay text ("007" is not 7); score columns are parsed as numbers below
            types = {name: pa.string() for name in header if not name.startswith("score")}
            table = pacsv.read_csv(
                io.BytesIO(raw),
                parse_options=pacsv.ParseOptions(delimiter=delimiter),
                convert_options=pacsv.ConvertOptions(column_types=types, strings_can_be_null=False),
            )
            first_line = 2
    except (pa.ArrowInvalid, OSError) as exc:
        raise InputFormatError(str(path), None, f"cannot be read as {fmt.upper()}: {exc}".rstrip()) from None
    if table.num_rows == 0:
        raise InputFormatError(str(path), None, f"the file has a header but no rows; a {what} file needs rows")
    check_fields(table, str(path), first_line=first_line)
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
        raise InputFormatError(
            file.path,
            None,
            f"no column {', '.join(repr(c) for c in missing)}; a {what} file "
            f"has columns {', '.join(columns)} (found: "
            f"{', '.join(file.table.column_names)})",
        )


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
    labels: pa.ChunkedArray  # multilabel: each item's set as "a|b" ("" for none)
    groups: pa.ChunkedArray | None
    content_hash: str
    weights: np.ndarray | None = None  # sample weights, finite and >= 0
    multilabel: bool = False

    @property
    def classes(self) -> list[str]:
        labels = pc.list_flatten(label_lists(self.labels)) if self.multilabel else self.labels
        return sorted(pc.unique(labels).to_pylist())


def read_gold(path: Path, fmt: str | None = None) -> Gold:
    """Gold labels: ``item_id`` and ``label``, or ``labels`` for a multilabel task (each item's
    labels joined by '|', none for an item without labels); optional ``group`` and ``weight``
    (sample weights, as scikit-learn's ``sample_weight``)."""
    file = read_table_file(path, "gold labels", fmt)
    multilabel = "labels" in file.table.column_names and "label" not in file.table.column_names
    _require(file, ["item_id", "labels" if multilabel else "label"], "gold labels")
    items = _text(file, "item_id")
    _unique_ids(file, items)
    groups = _text(file, "group") if "group" in file.table.column_names else None
    labels = _label_sets(file, "labels") if multilabel else _text(file, "label")
    weights = _weights(file) if "weight" in file.table.column_names else None
    return Gold(items, labels, groups, file.content_hash, weights, multilabel)


def label_lists(labels: pa.ChunkedArray) -> pa.ChunkedArray:
    """Multilabel sets ("a|b", "" for none) as lists of labels."""
    lists = pc.split_pattern(labels, LABEL_SEPARATOR)
    # "" splits to [""]: an item without labels
    return pc.if_else(pc.equal(labels, ""), pa.scalar([], pa.list_(pa.string())), lists)


def indicator(labels: pa.ChunkedArray, classes: list[str]) -> np.ndarray:
    """Multilabel sets as an (items, classes) boolean matrix; labels outside ``classes`` are left out."""
    lists = label_lists(labels).combine_chunks()
    rows = pc.list_parent_indices(lists).to_numpy(zero_copy_only=False)
    columns = pc.index_in(pc.list_flatten(lists), value_set=pa.array(classes, pa.string()))
    known = columns.is_valid().to_numpy(zero_copy_only=False)
    matrix = np.zeros((len(labels), len(classes)), dtype=bool)
    matrix[rows[known], columns.to_numpy(zero_copy_only=False)[known].astype(np.int64)] = True
    return matrix


def _label_sets(file: TableFile, name: str) -> pa.ChunkedArray:
    """A multilabel column, each cell's labels trimmed and joined by '|' again ("" for none)."""
    column = (
        pc.cast(file.table[name], pa.string()) if not pa.types.is_string(file.table[name].type) else file.table[name]
    )
    column = pc.fill_null(column, "")
    lists = pc.split_pattern(pc.utf8_trim_whitespace(column), LABEL_SEPARATOR).combine_chunks()
    labels = pc.utf8_trim_whitespace(pc.list_flatten(lists))
    empty = pc.equal(pc.utf8_length(labels), 0).to_numpy(zero_copy_only=False)
    single_empty = pc.equal(pc.list_value_length(lists), 1).to_numpy(zero_copy_only=False)
    parents = pc.list_parent_indices(lists).to_numpy(zero_copy_only=False)
    # an empty cell is an item without labels; an empty label between separators ("a||b") is a mistake
    bad = empty & ~single_empty[parents]
    if bad.any():
        row = int(parents[np.argmax(bad)])
        raise file.error(
            row, f"{name} '{column[row].as_py()}' has an empty label; separate labels with one '{LABEL_SEPARATOR}'"
        )
    offsets = lists.offsets
    trimmed = pa.ListArray.from_arrays(offsets, labels)
    return pa.chunked_array([pc.binary_join(trimmed, LABEL_SEPARATOR)])


def _weights(file: TableFile) -> np.ndarray:
    values = _score(file, "weight", probabilities=False)
    negative = values < 0
    if negative.any():
        row = int(np.argmax(negative))
        raise file.error(row, f"weight {values[row]:g} is negative; sample weights are 0 or more")
    if values.sum() == 0:
        raise InputFormatError(file.path, None, "every weight is 0; give some items a positive weight")
    return values


@dataclass(frozen=True)
class Predictions:
    items: pa.ChunkedArray
    labels: pa.ChunkedArray | None
    score: np.ndarray | None  # binary: P(positive class)
    class_scores: dict[str, np.ndarray]  # one score column per class
    groups: pa.ChunkedArray | None
    content_hash: str


def read_predictions(
    path: Path, gold: Gold, *, probabilities: bool, clustering: bool = False, fmt: str | None = None
) -> Predictions:
    """Predictions checked against the gold labels: the same items (none missing, none extra),
    known labels, finite scores (within [0, 1] when ``probabilities``)."""
    what = "clustering" if clustering else "predictions"
    file = read_table_file(path, what, fmt)
    label_column = "cluster_id" if clustering else "labels" if gold.multilabel else "label"
    if gold.multilabel and not clustering and "label" in file.table.column_names:
        raise InputFormatError(
            file.path,
            None,
            "the gold labels are multilabel: give each item's predicted labels "
            f"in a 'labels' column, joined by '{LABEL_SEPARATOR}', or one "
            f"'{SCORE_PREFIX}<class>' column per class",
        )
    _require(file, ["item_id", label_column] if clustering else ["item_id"], what)
    items = _text(file, "item_id")
    _unique_ids(file, items)
    _check_items(file, items, gold)
    labels = None
    if label_column in file.table.column_names:
        labels = _label_sets(file, label_column) if gold.multilabel else _text(file, label_column)
    if labels is not None and not clustering:
        _check_labels(file, labels, gold)
    score = _score(file, "score", probabilities) if "score" in file.table.column_names else None
    class_scores = _class_scores(file, gold, probabilities)
    _check_what_is_predicted(file, gold, clustering=clustering, labels=labels, score=score, class_scores=class_scores)
    groups = _text(file, "group") if "group" in file.table.column_names else None
    return Predictions(items, labels, score, class_scores, groups, file.content_hash)


def _check_items(file: TableFile, items: pa.ChunkedArray, gold: Gold) -> None:
    """Every item is a gold item, and every gold item is predicted."""
    position = pc.index_in(items, value_set=gold.items.combine_chunks())
    unknown = position.is_null().to_numpy(zero_copy_only=False)
    if unknown.any():
        row = int(np.argmax(unknown))
        raise file.error(
            row, f"item_id '{items[row].as_py()}' is not in the gold labels; predict only the labelled items"
        )
    if len(items) < len(gold.items):
        covered = np.zeros(len(gold.items), dtype=bool)
        covered[position.to_numpy(zero_copy_only=False)] = True
        missing = gold.items[int(np.argmax(~covered))].as_py()
        raise InputFormatError(
            file.path,
            None,
            f"{int((~covered).sum())} gold items have no prediction (e.g. '{missing}'); predict every labelled item",
        )


def _check_labels(file: TableFile, labels: pa.ChunkedArray, gold: Gold) -> None:
    """Every predicted label is a gold class."""
    each = pc.list_flatten(label_lists(labels)).combine_chunks() if gold.multilabel else labels
    known = pc.is_in(each, value_set=pa.array(gold.classes, pa.string())).to_numpy(zero_copy_only=False)
    if not known.all():
        at = int(np.argmax(~known))
        row = int(pc.list_parent_indices(label_lists(labels).combine_chunks())[at].as_py()) if gold.multilabel else at
        raise file.error(row, f"label '{each[at].as_py()}' is not a gold class ({', '.join(gold.classes)})")


def _class_scores(file: TableFile, gold: Gold, probabilities: bool) -> dict[str, np.ndarray]:
    """The ``score_<class>`` columns by class, each class a gold class."""
    class_scores: dict[str, np.ndarray] = {}
    for name in file.table.column_names:
        if name.startswith(SCORE_PREFIX):
            label = name.removeprefix(SCORE_PREFIX)
            if label not in gold.classes:
                raise InputFormatError(
                    file.path,
                    None,
                    f"column '{name}' scores class '{label}', which is not a gold class ({', '.join(gold.classes)})",
                )
            class_scores[label] = _score(file, name, probabilities)
    return class_scores


def _check_what_is_predicted(
    file: TableFile,
    gold: Gold,
    *,
    clustering: bool,
    labels: pa.ChunkedArray | None,
    score: np.ndarray | None,
    class_scores: dict[str, np.ndarray],
) -> None:
    """Something is predicted, in a shape the gold labels' task takes (one score column: two
    classes, not multilabel; class scores: one for every class)."""
    if not clustering and labels is None and score is None and not class_scores:
        if gold.multilabel:
            raise InputFormatError(
                file.path,
                None,
                "no prediction: give a 'labels' column (each item's labels "
                f"joined by '{LABEL_SEPARATOR}') or one '{SCORE_PREFIX}<class>' "
                "column per class",
            )
        raise InputFormatError(
            file.path,
            None,
            "no prediction: give a 'label' column, a 'score' column (binary "
            f"tasks) or one '{SCORE_PREFIX}<class>' column per class",
        )
    if score is not None and gold.multilabel:
        raise InputFormatError(
            file.path,
            None,
            "a single 'score' column cannot score a multilabel task; give one "
            f"'{SCORE_PREFIX}<class>' column per class",
        )
    if score is not None and len(gold.classes) != 2:
        raise InputFormatError(
            file.path,
            None,
            f"a single 'score' column needs two classes; the gold labels "
            f"have {len(gold.classes)}: give one '{SCORE_PREFIX}<class>' column "
            "per class",
        )
    if class_scores and len(class_scores) != len(gold.classes):
        absent = sorted(set(gold.classes) - set(class_scores))
        raise InputFormatError(
            file.path,
            None,
            f"per-class scores miss {', '.join(absent)}; give one '{SCORE_PREFIX}<class>' column for every gold class",
        )


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
            raise file.error(
                row,
                f"{name} {values[row]:g} is outside [0, 1], and the scores were declared probabilities",
                Remedy(cli="drop --probabilities for unbounded scores"),
            )
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
    for row, (true, predicted) in enumerate(
        zip(_text(file, "true").to_pylist(), _text(file, "predicted").to_pylist(), strict=True)
    ):
        for label in (true, predicted):
            if label not in classes:
                raise file.error(row, f"class '{label}' is not a gold class ({', '.join(classes)})")
        costs[classes.index(true), classes.index(predicted)] = values[row]
    return costs
