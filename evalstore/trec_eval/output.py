"""trec_eval's output text: the per-topic lines (``-q``) and the ``all`` lines, each value as
trec_eval prints it.

Output lines are ``%-22s\\t%s\\t%s`` (measure, topic or ``all``, value), values with 4 decimals,
counts as integers, in trec_eval's measure order whatever the order of ``-m`` flags.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from functools import cache
from typing import Any

import numpy as np
import pyarrow as pa

from evalstore import _kernels as pc
from evalstore.metrics.registry import Measure
from evalstore.metrics.trec_names import expand, parse_trec_specs

SUMMARY_ONLY = {  # printed on the 'all' line only
    "runid",
    "num_q",
    "gm_map",
    "gm_bpref",
}


def render_lines(
    rows: list[tuple[str, str, Measure | None]],
    topics: list[str],
    column_of: Callable[[Measure], Sequence[Any] | np.ndarray],
    summary_of: Callable[[Measure], Any],
    runid: str | None,
    *,
    per_query: bool,
    summary: bool,
    zscores: bool = False,
) -> str:
    """trec_eval's output text: per-topic lines (``-q``) then the ``all`` lines. ``column_of``
    gives a measure's values for all ``topics``, in their order. With ``zscores`` (``-Z``) the
    numeric measures print as ``Z<name>`` with 4 decimals, counts too, as trec_eval prints them."""
    text = ""
    shown = [(name, measure) for root, name, measure in rows if root not in SUMMARY_ONLY and measure is not None]
    if per_query and shown and topics:
        text = _per_topic_text(shown, topics, column_of, zscores)
    lines: list[str] = []
    if summary:
        for root, name, summarised in rows:
            if root == "runid":
                lines.append(_line(name, "all", runid or "unknown"))
            elif root == "num_q":
                lines.append(
                    f"Z{name:<22s}\tall\t{len(topics):6.4f}\n" if zscores else _line(name, "all", str(len(topics)))
                )
            elif summarised is not None and summarised.spec.summary != "none":
                value = _format_column(summarised, [summary_of(summarised)], zscores)[0]
                lines.append(f"{_label(name, summarised, zscores)}\tall\t{value}\n")
    return text + "".join(lines)


def _per_topic_text(
    shown: list[tuple[str, Measure]],
    topics: list[str],
    column_of: Callable[[Measure], Sequence[Any] | np.ndarray],
    zscores: bool,
) -> str:
    """The per-topic lines, topic by topic, each in the measures' order. The distinct values of
    the measures printed alike (integers, decimals: bit patterns, so -0.0 and 0.0 stay apart) are
    formatted once, and pyarrow's string kernels join labels, topics and values into lines:
    7,000 topics x 98 measures took ~0.45 s a line at a time in Python, ~0.1 s so. The values of
    all measures of a kind are found distinct together, not a measure at a time (an ordinary run's
    100 topics x 98 measures: ~1 ms, not ~4)."""
    formatted: list[str] = []
    codes = np.empty((len(shown), len(topics)), dtype=np.int64)
    alike: dict[str, list[int]] = {}  # the numeric measures, by how their values print
    numbers: dict[int, np.ndarray] = {}
    for i, (_, measure) in enumerate(shown):
        values = column_of(measure)
        if measure.spec.value_type == "str":
            codes[i] = np.arange(len(topics)) + len(formatted)
            formatted.extend(text + "\n" for text in _format_column(measure, values, zscores))
        else:
            alike.setdefault(measure.spec.value_type, []).append(i)
            numbers[i] = np.asarray(values, dtype=np.float64).reshape(-1)
    for members in alike.values():
        stacked = np.stack([numbers[i] for i in members])
        _, first, inverse = np.unique(stacked.view(np.int64).reshape(-1), return_index=True, return_inverse=True)
        codes[members] = inverse.reshape(len(members), len(topics)) + len(formatted)
        texts = _format_column(shown[members[0]][1], stacked.reshape(-1)[first], zscores)
        formatted.extend(text + "\n" for text in texts)

    def column(indices: np.ndarray, values: list[str]) -> pa.Array:
        return pc.cast(
            pa.DictionaryArray.from_arrays(pa.array(indices), pa.array(values, pa.large_string())), pa.large_string()
        )

    labels = [_label(name, measure, zscores) for name, measure in shown]
    lines = pc.binary_join_element_wise(
        column(np.tile(np.arange(len(shown)), len(topics)), labels),
        column(np.repeat(np.arange(len(topics)), len(shown)), topics),
        column(codes.T.ravel(), formatted),
        pa.scalar("\t", pa.large_string()),
    )
    # every line ends in a line end: their bytes back to back are the text
    offsets = np.frombuffer(lines.buffers()[1], dtype=np.int64)[lines.offset : lines.offset + len(lines) + 1]
    return lines.buffers()[2].to_pybytes()[offsets[0] : offsets[-1]].decode()


def stored_rows(measures: Iterable[Measure]) -> list[tuple[str, str, Measure | None]]:
    """Output rows for stored measures: trec_eval's name and order for those in ``all_trec``
    (with runid and num_q), then the others under their canonical names."""
    wanted = list(measures)
    stored = set(wanted)
    trec_rows = [
        (root, name, measure) for root, name, measure in _all_trec_rows() if measure is None or measure in stored
    ]
    covered = {measure for _, _, measure in trec_rows}
    return trec_rows + [(str(m), str(m), m) for m in wanted if m not in covered]


@cache
def _all_trec_rows() -> tuple[tuple[str, str, Measure | None], ...]:
    """Every row of ``all_trec`` in trec_eval's order (expanded once: ~4,000 rows, and finding
    the stored ones in a list was ~15 ms of each MLflow delivery)."""
    return tuple(
        (request.root, name, measure) for request in parse_trec_specs(["all_trec"]) for name, measure in expand(request)
    )


def _line(name: str, topic: str, value: str) -> str:
    return f"{name:<22s}\t{topic}\t{value}\n"


def _label(name: str, measure: Measure, zscores: bool) -> str:
    # trec_eval -Z prefixes the numeric measures' names (relstring prints as it is)
    return f"Z{name:<22s}" if zscores and measure.spec.value_type != "str" else f"{name:<22s}"


def _format_column(measure: Measure, values: Sequence[Any] | np.ndarray, zscores: bool = False) -> list[str]:
    """trec_eval's text for each value: quoted strings, integers (rint rounds half to even, as
    trec_eval's printf does; z-scores of counts print as %6.4f), or %6.4f (NaN as glibc prints
    trec_eval's: -nan)."""
    kind = measure.spec.value_type
    if kind == "str":
        return [f"'{value}'" for value in values]
    numbers = np.asarray(values, dtype=np.float64)
    if kind == "int" and not zscores:
        return list(map(str, np.rint(numbers).astype(np.int64).tolist()))
    # glibc prints the NaN of trec_eval's 0/0 (x86's default NaN has its sign bit set) as -nan; a
    # z-score keeps the sign standardize gave it (nan from a 'nan' statistic of the -Z file)
    texts = list(map("{:6.4f}".format, numbers.tolist()))
    if zscores:
        return [
            ("  -nan" if np.signbit(number) else "   nan") if text == "   nan" else text
            for text, number in zip(texts, numbers.tolist(), strict=True)
        ]
    return [text if text != "   nan" else "  -nan" for text in texts]
