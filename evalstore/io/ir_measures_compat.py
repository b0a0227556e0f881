"""What ir_measures (and PyTerrier) users hold, as ``evalstore.evaluate`` takes it.

- measures: ir_measures' measure objects (``ir_measures.nDCG@10``, ``AP(rel=2)``) become their
  string forms, which evalstore's parser reads (ir_measures' spellings are among its accepted
  names); the strings are kept to name the results as the caller did;
- qrels and runs: iterables of ir_measures' ``Qrel(query_id, doc_id, relevance, iteration)`` and
  ``ScoredDoc(query_id, doc_id, score)`` namedtuples (any objects with those attributes, or plain
  tuples in that order) become Arrow tables; dicts of dicts and DataFrames with ir_measures'
  column names are read by evaluate as they were already.

ir_measures itself is not imported: it is a test dependency, and duck typing reads its objects.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa

from evalstore.errors import InvalidParameterError

PER_QUERY_COLUMNS = ["query_id", "measure", "value"]  # ir_measures' Metric(query_id, measure, value)


def _is_measure_object(value: object) -> bool:
    """An ir_measures measure (``Measure`` or a parameterised one): its class lives in ir_measures."""
    return type(value).__module__.split(".")[0] == "ir_measures"


def measure_names(measures: Iterable[Any]) -> list[Any]:
    """The measures with ir_measures' objects as their string forms (``str(AP(rel=2))`` is
    ``AP(rel=2)``); strings and evalstore's own measures pass through."""
    if isinstance(measures, str) or _is_measure_object(measures):
        raise InvalidParameterError(f"Pass the measures as a list (['{measures}']), not one {type(measures).__name__}.")
    return [str(m) if _is_measure_object(m) else m for m in measures]


def _is_table_like(value: object) -> bool:
    if isinstance(value, (str, Path, Mapping, pa.Table)):
        return True
    module = type(value).__module__.split(".")[0]
    return module == "pandas"


def as_table(source: Any, kind: str) -> Any:
    """``source`` as evaluate reads it: an iterable of Qrel/ScoredDoc namedtuples (or of tuples in
    their field order) becomes a table with topic, doc and relevance/score; anything else is
    returned as it is."""
    if _is_table_like(source) or not isinstance(source, Iterable):
        return source
    value = "relevance" if kind == "qrels" else "score"
    topics: list[str] = []
    docs: list[str] = []
    values: list[Any] = []
    for number, item in enumerate(source, start=1):
        try:
            if hasattr(item, "query_id"):
                topic, doc, amount = item.query_id, item.doc_id, getattr(item, value)
            else:
                topic, doc, amount = item[0], item[1], item[2]
        except (AttributeError, IndexError, TypeError, KeyError):
            shape = "Qrel(query_id, doc_id, relevance)" if kind == "qrels" else "ScoredDoc(query_id, doc_id, score)"
            raise InvalidParameterError(
                f"Item {number} of the {kind} is a {type(item).__name__}, not a {shape}."
            ) from None
        topics.append(topic)
        docs.append(doc)
        values.append(amount)
    try:
        column = (
            pa.array([int(v) for v in values], pa.int64())
            if kind == "qrels"
            else pa.array([float(v) for v in values], pa.float64())
        )
    except (TypeError, ValueError) as exc:
        raise InvalidParameterError(f"The {kind}' {value} values must be numbers ({exc}).") from None
    from evalstore.io.tables import id_texts_of  # here: the table readers are no `trec-eval` start-up's

    return pa.table({"topic": id_texts_of(topics), "doc": id_texts_of(docs), value: column})


def adapt(qrels: Any, run: Any, measures: Iterable[Any]) -> tuple[Any, Any, list[Any]]:
    """evaluate's inputs, with ir_measures' shapes converted (see the module's docstring)."""
    return as_table(qrels, "qrels"), as_table(run, "run"), measure_names(measures)


def per_query_frame(frame: Any, spelled: Mapping[str, str]) -> Any:
    """evaluate's per-query frame in ir_measures' shape: columns query_id, measure, value, the
    measures named as the caller spelled them (``spelled``: canonical name -> that spelling)."""
    shaped = frame[frame["value"].notna()][PER_QUERY_COLUMNS].copy()
    shaped["measure"] = shaped["measure"].map(lambda name: spelled.get(name, name))
    return shaped.reset_index(drop=True)
