"""Writers for runs and qrels (TREC text, CSV, TSV, Parquet). Floats are written with the
shortest repr that reads back to the same double, so export -> register round-trips exactly."""

from __future__ import annotations

from typing import BinaryIO

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq


def write_run(table: pa.Table, out: BinaryIO, fmt: str, *, tag: str) -> None:
    if fmt == "trec":
        n = table.num_rows
        framed = pa.table(
            {
                "topic": table["topic"],
                "q0": pa.array(["Q0"] * n),
                "doc": table["doc"],
                "rank": table["rank"],
                "score": pc.cast(table["score"], pa.string()),
                "tag": pa.array([tag] * n),
            }
        )
        _write_delimited(framed, out, " ", header=False)
    else:
        _write_table(table.select(["topic", "doc", "rank", "score"]), out, fmt)


def write_qrels(table: pa.Table, out: BinaryIO, fmt: str) -> None:
    """Judgments as imported: ``topic iteration doc relevance``, or for preference judgments (a
    table with a level) trec_eval's ``topic jg jsg doc level`` (the level as written: 5.5 stays)."""
    if "level" in table.column_names:
        layout = table.select(["topic", "iteration", "subgroup", "doc", "level"])
        levels = [str(int(v)) if v.is_integer() else repr(v) for v in layout["level"].to_pylist()]
        layout = layout.set_column(4, "level", pa.array(levels, pa.string()))
    else:
        layout = table.select(["topic", "iteration", "doc", "relevance"])
    if fmt == "trec":
        _write_delimited(layout, out, " ", header=False)
    else:
        _write_table(layout, out, fmt)


def _write_table(table: pa.Table, out: BinaryIO, fmt: str) -> None:
    if fmt == "parquet":
        pq.write_table(table, out)
    else:
        _write_delimited(table, out, "," if fmt == "csv" else "\t", header=True)


def _write_delimited(table: pa.Table, out: BinaryIO, delimiter: str, *, header: bool) -> None:
    quoting = "needed" if delimiter == "," else "none"
    pacsv.write_csv(
        table,
        out,
        write_options=pacsv.WriteOptions(include_header=header, delimiter=delimiter, quoting_style=quoting),
    )
