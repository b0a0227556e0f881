"""A ranking evaluation's per-topic table, built from the stored arrays, is the table the long
(measure, topic) rows pivoted gave: same rows in the same order, same columns, same dtypes and
values, textual measures included."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from evalstore.db.repositories import StoredColumns
from evalstore.services.kinds.ranking.readback import per_topic_frame


def pivoted(stored: StoredColumns, wanted: list[str]) -> pd.DataFrame:
    """The table as the long rows (``repositories.result_table``'s) pivoted made it."""
    n = len(stored.query_ids)
    measures = [m for m in stored.numbers if m in wanted]
    table = pa.table(
        {
            "measure": pa.array([m for m in measures for _ in range(n)], pa.string()),
            "query_id": pa.array(stored.query_ids * len(measures), pa.string()),
            "value": pa.concat_arrays(
                [
                    pa.array(numbers, pa.float64())
                    if (numbers := stored.numbers[m]) is not None
                    else pa.nulls(n, pa.float64())
                    for m in measures
                ]
                or [pa.array([], pa.float64())]
            ),
            "text_value": pa.concat_arrays(
                [
                    pa.array(texts, pa.string()) if (texts := stored.texts[m]) is not None else pa.nulls(n, pa.string())
                    for m in measures
                ]
                or [pa.array([], pa.string())]
            ),
        }
    ).to_pandas()
    numbers = table.pivot(index="query_id", columns="measure", values="value")
    texts = table[table["text_value"].notna()]
    frame = numbers.astype(object) if len(texts) else numbers
    if len(texts):
        for measure, column in texts.pivot(index="query_id", columns="measure", values="text_value").items():
            frame[measure] = column
    frame = frame.reindex(columns=wanted)
    frame.columns.name = None
    return frame


IDS = ["10", "9", "301", "2", "b", "A"]  # stored in the run's order, not sorted


def numbers(*values: float) -> np.ndarray:
    return np.array(values, dtype="<f8")


@pytest.mark.parametrize(
    ("stored", "wanted"),
    [
        (
            StoredColumns(
                IDS,
                {"AP": numbers(0.5, 0.25, np.nan, 1.0, 0.0, -0.0), "P@10": numbers(1, 2, 3, 4, 5, 6)},
                {"AP": None, "P@10": None},
            ),
            ["P@10", "AP"],
        ),
        (  # a textual measure, one topic without its text; a measure asked for that is not stored
            StoredColumns(
                IDS,
                {"AP": numbers(0.5, 0.25, np.nan, 1.0, 0.0, 0.125), "RelString": None},
                {"AP": None, "RelString": ["0110", "1", None, "", "10", "0"]},
            ),
            ["AP", "RelString", "num_rel"],
        ),
        (  # textual values all missing: a numeric table
            StoredColumns(IDS, {"AP": numbers(1, 2, 3, 4, 5, 6), "RelString": None}, {"AP": None, "RelString": None}),
            ["AP", "RelString"],
        ),
    ],
)
def test_the_table_from_stored_arrays_is_the_pivoted_one(stored: StoredColumns, wanted: list[str]) -> None:
    built = per_topic_frame(stored, wanted)
    pd.testing.assert_frame_equal(built, pivoted(stored, wanted), check_exact=True)
    assert built.index.tolist() == sorted(IDS)
    # the values themselves, bit for bit (NaN's sign and -0.0 show in trec_eval's text)
    for measure, values in stored.numbers.items():
        if values is not None and measure not in (m for m, t in stored.texts.items() if t and any(t)):
            column = np.asarray(built[measure], dtype=np.float64)
            expected = values[np.argsort(np.array(IDS))]
            assert column.view(np.int64).tolist() == expected.view(np.int64).tolist()
