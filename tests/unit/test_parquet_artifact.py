"""The per-topic Parquet artifact written from a kept schema (tracking.client._write_parquet) is the
file pandas' own ``to_parquet`` writes, byte for byte, the first time and every time after."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from evalstore.services.context import Lru
from evalstore.services.tracking.client import _write_parquet


def _per_topic(seed: int) -> pd.DataFrame:
    """A frame shaped as a ranking evaluation's: query_id index, float columns (NaN in one), a text
    column between them."""
    rng = np.random.default_rng(seed)
    topics = [str(t) for t in rng.choice(1000, size=7, replace=False)]
    columns: dict[str, object] = {f"P@{k}": rng.random(7) for k in (5, 10)}
    columns["relstring@10"] = ["-1-0--", "0", "", "11", "-", "1", "0-"]
    columns["nDCG"] = np.where(rng.random(7) < 0.3, np.nan, rng.random(7))
    columns["num_ret"] = rng.integers(0, 1000, 7).astype(np.float64)
    return pd.DataFrame(columns, index=pd.Index(topics, name="query_id")).sort_index()


def test_the_kept_schema_writes_the_bytes_pandas_writes(tmp_path: Path) -> None:
    schemas: Lru[tuple[object, ...], object] = Lru(4)
    for seed in range(4):  # the first builds the schema, the rest use it
        frame = _per_topic(seed)
        frame.to_parquet(tmp_path / f"pandas{seed}.parquet")
        _write_parquet(frame, tmp_path / f"ours{seed}.parquet", schemas)
        assert (tmp_path / f"ours{seed}.parquet").read_bytes() == (tmp_path / f"pandas{seed}.parquet").read_bytes()
        assert len(schemas) == 1
    nan = pq.read_table(tmp_path / "ours0.parquet").column("nDCG")
    assert nan.null_count == int(_per_topic(0)["nDCG"].isna().sum()) > 0  # NaN written as null, as pandas does


def test_frames_whose_arrow_types_depend_on_their_values_are_written_by_pandas(tmp_path: Path) -> None:
    """Read back from the store with a text measure among them, every column is an object column;
    one that is NaN for every topic is a null column to pandas, not a float one. Such frames, and
    others whose schema does not follow from their dtypes, are never written from a kept schema."""
    schemas: Lru[tuple[object, ...], object] = Lru(4)
    read_back = _per_topic(3).astype(object)
    read_back["RnDCG"] = np.nan  # no positive gain: NaN for every topic
    cases = {
        "read back": read_back,
        "object, then floats": _per_topic(3).astype(object),
        "a RangeIndex": _per_topic(1).reset_index(),
        "labels with a name": _per_topic(2).rename_axis(columns="measure"),
        "a categorical": _per_topic(2).astype({"relstring@10": "category"}),
        "attrs": _per_topic(2).pipe(lambda frame: frame.__setattr__("attrs", {"run": "r"}) or frame),
    }
    for name, frame in cases.items():
        for attempt in range(2):
            frame.to_parquet(tmp_path / "pandas.parquet")
            _write_parquet(frame, tmp_path / "ours.parquet", schemas)
            ours, theirs = ((tmp_path / f).read_bytes() for f in ("ours.parquet", "pandas.parquet"))
            assert ours == theirs, (name, attempt)
    assert len(schemas) == 0
    _write_parquet(_per_topic(2), tmp_path / "none.parquet", None)  # no cache at all: pandas' own
    _per_topic(2).to_parquet(tmp_path / "pandas.parquet")
    assert (tmp_path / "none.parquet").read_bytes() == (tmp_path / "pandas.parquet").read_bytes()
