"""The per-topic Parquet file and JSON table a delivery writes are byte for byte what pandas (and
so MLflow's log_artifact and log_table) writes, on tables of every layout the writers take a
faster path for and some they leave to pandas: numbers, object columns of floats (a textual
measure's table), all-NaN columns, texts with quotes, brackets, commas and non-ASCII, empty tables."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from evalstore.services.tracking.client import _write_parquet, _write_table

PIECES = ["a", '"', "\\", ",", "]", "[", "/", "é", "\u2028", "\x01", "😀", " ", '","', "null"]
VALUES = [0.5, np.nan, -0.0, 1.0, 1e-15, 123456789.123456789, np.inf, -np.inf, 5e300]


def table(rng: random.Random) -> pd.DataFrame:
    pieces = PIECES if rng.random() < 0.3 else [p for p in PIECES if '"' not in p]
    ids = list(
        dict.fromkeys(
            "".join(rng.choices(pieces, k=rng.randint(0, 3))) + str(i) for i in range(rng.choice([0, 1, 5, 43]))
        )
    )
    width = rng.choice([1, 3, 20])
    values = np.array([[rng.choice(VALUES) if rng.random() < 0.5 else rng.random() for _ in range(width)] for _ in ids])
    values = values.reshape(len(ids), width)
    if rng.random() < 0.3:
        values[:, 0] = np.nan
    labels = pd.Index([f"m{j}{rng.choice(pieces)}" for j in range(width)], dtype="str")
    frame = pd.DataFrame(values, index=pd.Index(ids, dtype="str", name="query_id"), columns=labels)
    if rng.random() < 0.6:  # a textual measure: an object table, as the read-back makes it
        frame = frame.astype(object)
        texts = [rng.choice([None, "".join(rng.choices(pieces, k=3))]) for _ in ids]
        frame[labels[-1]] = pd.Series(texts, index=frame.index, dtype="str")
    return frame


@pytest.mark.parametrize("seed", range(40))
def test_the_files_are_the_bytes_pandas_writes(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(5):
        frame = table(rng)
        if not frame.columns.is_unique:
            continue
        for attempt in range(2):  # the first writes through pandas and keeps the schema
            frame.to_parquet(tmp_path / "pandas.parquet")
            _write_parquet(frame, tmp_path / "ours.parquet")
            assert (tmp_path / "ours.parquet").read_bytes() == (tmp_path / "pandas.parquet").read_bytes(), attempt
        rows = frame.reset_index()
        rows.to_json(tmp_path / "pandas.json", orient="split", index=False, date_format="iso")
        _write_table(rows, tmp_path / "ours.json")
        assert (tmp_path / "ours.json").read_bytes() == (tmp_path / "pandas.json").read_bytes()
