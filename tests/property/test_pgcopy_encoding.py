"""The vectorised binary COPY encoder writes what a row-by-row reading of PostgreSQL's format
writes; and PostgreSQL reads it back exactly (extreme values, UTF-8, empty strings)."""

from __future__ import annotations

import math
import struct

import pyarrow as pa
import pytest
import sqlalchemy as sa
from hypothesis import given, settings
from hypothesis import strategies as st

from evalstore.db import pgcopy

TABLE = sa.Table(
    "probe",
    sa.MetaData(),
    sa.Column("a", sa.Integer),
    sa.Column("s", sa.String(50)),
    sa.Column("x", sa.Float(precision=53)),
    sa.Column("b", sa.SmallInteger),
    sa.Column("t", sa.String(50)),
    sa.Column("c", sa.BigInteger),
)
TYPES = pgcopy.column_types(TABLE, [c.name for c in TABLE.columns])
FORMATS = {pa.int16(): ">h", pa.int32(): ">i", pa.int64(): ">q", pa.float64(): ">d"}

rows = st.lists(
    st.tuples(
        st.integers(-(2**31), 2**31 - 1),
        st.text(max_size=8),
        st.floats(allow_nan=False),
        st.integers(-(2**15), 2**15 - 1),
        st.text(max_size=8),
        st.integers(-(2**63), 2**63 - 1),
    ),
    max_size=30,
)


def _batch(values: list[tuple]) -> pa.RecordBatch:  # type: ignore[type-arg]
    columns = list(zip(*values, strict=True)) or [()] * len(TYPES)
    return pa.RecordBatch.from_arrays(
        [
            pa.array(
                list(column),
                pa.string()
                if TYPES[name] == pa.string()
                else pa.int64()
                if pa.types.is_integer(TYPES[name])
                else pa.float64(),
            )
            for name, column in zip(TYPES, columns, strict=True)
        ],
        names=list(TYPES),
    )


def _reference(values: list[tuple]) -> bytes:  # type: ignore[type-arg]
    """Row by row, field by field, as the PostgreSQL manual describes the format."""
    order = pgcopy.column_order(TYPES)
    names = list(TYPES)
    out = bytearray()
    for row in values:
        out += struct.pack(">h", len(order))
        for name in order:
            value = row[names.index(name)]
            data = value.encode() if isinstance(value, str) else struct.pack(FORMATS[TYPES[name]], value)
            out += struct.pack(">i", len(data)) + data
    return bytes(out)


@settings(max_examples=200, deadline=None)
@given(rows)
def test_encoding_equals_the_row_by_row_format(values: list[tuple]) -> None:  # type: ignore[type-arg]
    assert bytes(pgcopy.encode(_batch(values), TYPES)) == _reference(values)


def test_column_order_puts_fixed_width_fields_first_and_refuses_nulls_and_unknown_types() -> None:
    assert pgcopy.column_order(TYPES) == ["a", "x", "b", "c", "s", "t"]
    with pytest.raises(ValueError, match=r"no nulls \(s\)"):
        pgcopy.encode(pa.RecordBatch.from_pydict({"a": [1], "s": [None]}), {"a": pa.int32(), "s": pa.string()})
    with pytest.raises(TypeError, match="no binary COPY encoding for t.j"):
        pgcopy.column_types(sa.Table("t", sa.MetaData(), sa.Column("j", sa.JSON)), ["j"])


@pytest.mark.postgres
def test_postgres_reads_the_encoding_back_exactly(postgres_server_url: str) -> None:
    values = [
        (-(2**31), "", -0.0, -(2**15), "déjà vu", -(2**63)),
        (2**31 - 1, "#MARCO#\t1", 5e-324, 2**15 - 1, "\u2603", 2**63 - 1),
        (7, "x" * 50, 1.7976931348623157e308, 0, 'a,b"c', 0),
    ]
    engine = sa.create_engine(postgres_server_url)
    try:
        with engine.begin() as connection:
            TABLE.create(connection)
            with (
                connection.connection.driver_connection.cursor() as cursor,
                cursor.copy(
                    f"COPY probe ({', '.join(pgcopy.column_order(TYPES))}) FROM STDIN WITH (FORMAT binary)"
                ) as copy,
            ):
                copy.write(pgcopy.HEADER + bytes(pgcopy.encode(_batch(values), TYPES)) + pgcopy.TRAILER)
            stored = [tuple(row) for row in connection.execute(sa.select(TABLE).order_by(TABLE.c.a))]
            TABLE.drop(connection)
    finally:
        engine.dispose()
    assert stored == sorted(values)
    assert math.copysign(1.0, stored[0][2]) == -1.0  # -0.0 kept its sign
