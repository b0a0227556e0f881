"""trec_eval's measure names on the command line: ``-m`` values (``P.5,10``, ``ndcg_cut``, groups
such as ``all_trec``) expanded into the measures they mean and the names trec_eval prints."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from evalstore.errors import InvalidParameterError
from evalstore.metrics._registry import (
    TREC_FAMILIES,
    TREC_GROUPS,
    TREC_ORDER,
    Measure,
    TrecFamily,
    make,
    unknown_measure,
)


@dataclass(frozen=True)
class TrecRequest:
    root: str
    raw: str | None  # parameter text after the first '.', as typed


def parse_trec_specs(specs: Iterable[str]) -> list[TrecRequest]:
    """``-m`` values in trec_eval order. As in trec_eval (``meas_init.c``), a measure's parameters
    are the first ones given for it on the command line: ``-m P.5 -m P.10`` and ``-m P.5 -m P``
    both mean P_5."""
    chosen: dict[str, TrecRequest] = {}
    for spec in specs:
        root, dot, raw = spec.partition(".")
        if root in TREC_GROUPS:
            for name in TREC_GROUPS[root]:
                chosen.setdefault(name, TrecRequest(name, None))
            continue
        if root not in TREC_FAMILIES:
            raise _unknown_trec(root)
        if root not in chosen or (chosen[root].raw is None and dot):
            chosen[root] = TrecRequest(root, raw if dot else None)
    return [chosen[name] for name in TREC_ORDER if name in chosen]


def _unknown_trec(root: str) -> InvalidParameterError:
    error = unknown_measure(root)
    return InvalidParameterError(str(error).replace("evalstore measures", "evalstore measures --trec"))


def expand(request: TrecRequest) -> list[tuple[str, Measure | None]]:
    """(printed name, measure) pairs; runid and num_q have no measure."""
    root, raw = request.root, request.raw
    trec = TREC_FAMILIES[root]
    if trec.family in ("runid", "num_q"):
        return [(root, None)]
    try:
        return _expand(root, raw, trec)
    except (ValueError, IndexError):
        raise InvalidParameterError(
            f"Cannot read the parameters '{raw}' of trec_eval measure '{root}'; "
            f"run 'evalstore measures' for its parameters."
        ) from None


def _expand(root: str, raw: str | None, trec: TrecFamily) -> list[tuple[str, Measure | None]]:
    if trec.kind == "none":
        return [(root, make(trec.family))]
    param = str(trec.param)  # every kind but "none" names its parameter
    fixed = dict(trec.fixed)
    if trec.kind == "long":
        cutoffs = sorted({int(float(v)) for v in raw.split(",")}) if raw else list(trec.defaults)
        for v in cutoffs:
            if v <= 0:
                raise InvalidParameterError(f"Cutoffs of {root} must be positive integers. Got {v}.")
        return [(f"{root}_{v}", make(trec.family, **{param: v})) for v in cutoffs]
    if trec.kind == "double":
        levels = sorted({float(v) for v in raw.split(",")}) if raw else list(trec.defaults)
        return [(f"{root}_{v:.2f}", make(trec.family, **{param: v}, **fixed)) for v in levels]
    name = f"{root}_{raw}" if raw else root
    if trec.kind == "pairs":
        params: dict[str, Any] = {}
        if raw:
            gains: dict[int, float] = {}
            for item in raw.split(","):
                key, _, value = item.partition("=")
                if key == "p":
                    params["p"] = float(value)
                elif _is_int(key):
                    gains[int(key)] = float(value)
            if gains and "gains" in param:
                params["gains"] = gains
        return [(name, make(trec.family, **{**fixed, **params}))]
    # raw: one value or a list of values, as typed
    if root == "relstring":
        return [(name, make(trec.family, cutoff=int(float(raw)) if raw else 10))]
    if root == "set_F":
        return [(name, make(trec.family, x=float(raw.split(",")[0]) if raw else 1.0))]
    values = tuple(float(v) for v in raw.split(",")) if raw else trec.defaults[0]
    return [(name, make(trec.family, **{param: values}))]


def _is_int(text: str) -> bool:
    body = text[1:] if text[:1] in "+-" else text
    return body.isdigit()


def expand_trec_spec(spec: str) -> list[tuple[str, Measure | None]]:
    """All (printed name, measure) pairs of one ``-m`` value or group."""
    return [pair for request in parse_trec_specs([spec]) for pair in expand(request)]
