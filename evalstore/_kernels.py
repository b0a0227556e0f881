"""The Arrow compute kernels the engine (readers, ranking order, measures, trec-eval) calls.

``import pyarrow.compute`` builds a Python wrapper for each of pyarrow's ~300 kernels when it is
first imported, with a docstring scraped from numpydoc text: 25-30 ms, a tenth of an ordinary
``evalstore trec-eval`` (robust03's 100k rows), which calls twenty kernels. The kernels are in the
compiled ``pyarrow._compute`` (5 ms), whose ``call_function`` and options classes are the objects
``pyarrow.compute`` re-exports; the functions here call them by name with ``pyarrow.compute``'s
signatures. Array methods such as ``filter``, ``take``, ``cast`` or ``fill_null`` import
``pyarrow.compute`` themselves, so the engine calls these instead (tests/golden/test_trec_eval_entry.py
checks that an evaluation never loads it). Code off the start-up path uses ``pyarrow.compute``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa
from pyarrow._compute import (
    ArraySortOptions,
    CastOptions,
    CountOptions,
    DictionaryEncodeOptions,
    FilterOptions,
    JoinOptions,
    MatchSubstringOptions,
    SetLookupOptions,
    SortOptions,
    TakeOptions,
    call_function,
)


def _call(name: str, *args: Any, options: Any = None) -> Any:
    return call_function(name, list(args), options)


# element-wise
def equal(left: Any, right: Any) -> Any:
    return _call("equal", left, right)


def less(left: Any, right: Any) -> Any:
    return _call("less", left, right)


def greater(left: Any, right: Any) -> Any:
    return _call("greater", left, right)


def and_(left: Any, right: Any) -> Any:
    return _call("and", left, right)


def or_(left: Any, right: Any) -> Any:
    return _call("or", left, right)


def binary_length(strings: Any) -> Any:
    return _call("binary_length", strings)


def starts_with(strings: Any, pattern: str) -> Any:
    return _call("starts_with", strings, options=MatchSubstringOptions(pattern))


def binary_join_element_wise(*strings: Any, null_handling: str = "emit_null") -> Any:
    """The last of ``strings`` is the separator, as in pyarrow.compute."""
    return _call("binary_join_element_wise", *strings, options=JoinOptions(null_handling))


def cast(values: Any, target: pa.DataType) -> Any:
    return _call("cast", values, options=CastOptions.safe(target))


# aggregates
def all(values: Any) -> pa.Scalar:  # noqa: A001  (pyarrow.compute's name)
    return _call("all", values)


def any(values: Any) -> pa.Scalar:  # noqa: A001
    return _call("any", values)


def min(values: Any) -> pa.Scalar:  # noqa: A001
    return _call("min", values)


def min_max(values: Any) -> pa.StructScalar:
    return _call("min_max", values)


def count_distinct(values: Any) -> pa.Scalar:
    return _call("count_distinct", values, options=CountOptions("only_valid"))


# look-ups, encodings, selections
def index_in(values: Any, value_set: pa.Array) -> Any:
    return _call("index_in", values, options=SetLookupOptions(value_set))


def is_in(values: Any, value_set: pa.Array) -> Any:
    return _call("is_in", values, options=SetLookupOptions(value_set))


def unique(values: Any) -> pa.Array:
    return _call("unique", values)


def dictionary_encode(values: Any) -> Any:
    return _call("dictionary_encode", values, options=DictionaryEncodeOptions())


def array_sort_indices(values: Any) -> pa.Array:
    return _call("array_sort_indices", values, options=ArraySortOptions())


def sort_indices(table: Any, sort_keys: Sequence[tuple[str, str]]) -> pa.Array:
    return _call("sort_indices", table, options=SortOptions(sort_keys))


def take(values: Any, indices: Any) -> Any:
    return _call("take", values, indices, options=TakeOptions())


def filter(values: Any, mask: Any) -> Any:  # noqa: A001
    return _call("filter", values, mask, options=FilterOptions())


def fill_null(values: Any, fill_value: object) -> Any:
    return _call("coalesce", values, pa.scalar(fill_value, type=values.type))
