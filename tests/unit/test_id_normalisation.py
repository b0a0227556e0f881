"""One text for a topic id or docno whatever form ``evaluate`` is given it in: a pyarrow Table
turned the float 1.0 into '1' and a DataFrame or dict into '1.0', so a run and qrels given in two
forms matched nothing and every value was 0, silently. Every pair of forms (dict, DataFrame,
Table, tuples, TREC file) with int, float and string ids now gives trec_eval's values on the files
written with the ids' text; a CSV's ids are read as the text they are, as trec_eval reads them."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pytest

import evalstore

QRELS = [("A", "x", 1), ("A", "y", 0), ("A", "z", 2), ("B", "w", 1), ("B", "v", 1)]
RUN = [("A", "y", 0.9), ("A", "x", 0.8), ("A", "z", 0.1), ("B", "v", 0.7), ("B", "u", 0.6), ("B", "w", 0.2)]
IDS: dict[str, dict[str, Any]] = {
    "int": {"A": 301, "B": 302, "x": 11, "y": 12, "z": 13, "w": 14, "v": 15, "u": 16},
    "float": {"A": 301.0, "B": 302.0, "x": 11.0, "y": 12.0, "z": 13.0, "w": 14.0, "v": 15.0, "u": 16.0},
    "str": {"A": "q1", "B": "q2", "x": "d1", "y": "d2", "z": "d3", "w": "d4", "v": "d5", "u": "d6"},
}
# the ids' text in a TREC file, as trec_eval reads it: an integral float is written as its integer
TEXT = {"int": str, "float": lambda v: str(int(v)), "str": str}


def _rows(triples: list[tuple[str, str, Any]], ids: dict[str, Any]) -> list[tuple[Any, Any, Any]]:
    return [(ids[q], ids[d], v) for q, d, v in triples]


def _as_dict(rows: list[tuple[Any, Any, Any]], _: str, __: Path) -> Any:
    out: dict[Any, dict[Any, Any]] = {}
    for q, d, v in rows:
        out.setdefault(q, {})[d] = v
    return out


def _as_frame(rows: list[tuple[Any, Any, Any]], value: str, _: Path) -> Any:
    return pd.DataFrame(rows, columns=["query_id", "doc_id", value])


def _as_table(rows: list[tuple[Any, Any, Any]], value: str, _: Path) -> Any:
    q, d, v = zip(*rows, strict=True)
    return pa.table({"topic": list(q), "doc": list(d), value: list(v)})


def _as_tuples(rows: list[tuple[Any, Any, Any]], _: str, __: Path) -> Any:
    return list(rows)


FORMS: dict[str, Callable[[list[tuple[Any, Any, Any]], str, Path], Any]] = {
    "dict": _as_dict,
    "DataFrame": _as_frame,
    "Table": _as_table,
    "tuples": _as_tuples,
}


def _trec_files(kind: str, folder: Path) -> tuple[Path, Path]:
    text = TEXT[kind]
    qrels, run = folder / f"{kind}.qrels", folder / f"{kind}.run"
    qrels.write_text("".join(f"{text(q)} 0 {text(d)} {r}\n" for q, d, r in _rows(QRELS, IDS[kind])))
    run.write_text(
        "".join(f"{text(q)} Q0 {text(d)} {i} {s} t\n" for i, (q, d, s) in enumerate(_rows(RUN, IDS[kind]), start=1))
    )
    return qrels, run


def _values(result: Any) -> dict[str, float]:
    return {name: round(value, 10) for name, value in result.aggregates.items()}


MEASURES = ["AP", "nDCG@10", "P@2", "RR"]


@pytest.mark.parametrize("kind", ["int", "float", "str"])
def test_every_pair_of_forms_gives_the_files_values(kind: str, tmp_path: Path) -> None:
    qrels_file, run_file = _trec_files(kind, tmp_path)
    expected = _values(evalstore.evaluate(qrels_file, run_file, MEASURES))
    assert expected["AP"] > 0
    forms: dict[str, tuple[Any, Any]] = {"file": (qrels_file, run_file)}
    for name, make in FORMS.items():
        forms[name] = (
            make(_rows(QRELS, IDS[kind]), "relevance", tmp_path),
            make(_rows(RUN, IDS[kind]), "score", tmp_path),
        )
    wrong = []
    for (q_form, (qrels, _)), (r_form, (_, run)) in itertools.product(forms.items(), forms.items()):
        got = _values(evalstore.evaluate(qrels, run, MEASURES))
        if got != expected:
            wrong.append(f"qrels as {q_form}, run as {r_form}: {got}")
    assert wrong == [], f"{kind} ids; expected {expected}"


def test_a_csv_reads_its_ids_as_text(tmp_path: Path) -> None:
    """'007' and '1.0' stay what they are, as trec_eval reads them (a CSV's ids were numbers:
    '007' became '7' and matched nothing of a TREC file's '007')."""
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("007 0 1.0 1\n007 0 2 0\n")
    run = tmp_path / "run.csv"
    run.write_text("qid,docno,score\n007,2,0.9\n007,1.0,0.5\n")
    result = evalstore.evaluate(qrels, run, ["AP"])
    assert result.aggregates["AP"] == 0.5
    assert result.topics == ["007"]


def test_id_texts_of_every_kind() -> None:
    from evalstore.io.tables import id_texts, id_texts_of

    assert id_texts(pa.array([1.0, 2.5, -0.0, 1e20, None])).to_pylist() == ["1", "2.5", "0", "1e+20", None]
    assert id_texts(pa.array([123456789012.0])).to_pylist() == ["123456789012"]
    assert id_texts(pa.array([7, 8])).to_pylist() == ["7", "8"]
    assert id_texts(pa.array(["007"]).dictionary_encode()).to_pylist() == ["007"]
    assert id_texts_of([1.0, "q2", 3, float("nan")]).to_pylist() == ["1", "q2", "3", None]
