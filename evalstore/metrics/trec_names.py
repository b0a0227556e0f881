"""trec_eval's measure names on the command line: ``-m`` values (``P.5,10``, ``ndcg_cut``, groups
such as ``all_trec``) expanded into the measures they mean and the names trec_eval prints."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from functools import cache
from typing import Any

from evalstore.errors import InvalidParameterError, Remedy
from evalstore.io.cnumbers import atof, atol
from evalstore.metrics.registry import (
    TREC_FAMILIES,
    TREC_GROUPS,
    TREC_ORDER,
    Measure,
    TrecFamily,
    make,
    unknown_measure,
)


class TrecRequest:
    """One ``-m`` measure asked for. A plain class, not a dataclass: a frozen dataclass compiles
    six methods from source text each time its module is imported (~0.1 ms each, in every
    `trec-eval` process), and a request is never compared, hashed or printed."""

    def __init__(self, root: str, raw: str | None) -> None:
        self.root = root
        self.raw = raw  # parameter text after the first '.', as typed


def parse_trec_specs(specs: Iterable[str]) -> list[TrecRequest]:
    """``-m`` values in trec_eval order. As in trec_eval (``meas_init.c``), a measure's parameters
    are the first ones given for it on the command line: ``-m P.5 -m P.10`` and ``-m P.5 -m P``
    both mean P_5. An empty parameter (``-m ndcg.``) is refused as trec_eval refuses it, and so is
    what trec_eval's shared gain parameters would do silently (:func:`_check_shared_gains`)."""
    chosen: dict[str, TrecRequest] = {}
    for spec in specs:
        root, dot, raw = spec.partition(".")
        if root in TREC_GROUPS:
            for name in TREC_GROUPS[root]:
                chosen.setdefault(name, TrecRequest(name, None))
            continue
        if root not in TREC_FAMILIES:
            raise _unknown_trec(root)
        if dot and not raw:  # trec_eval.c add_meas_arg_info: "improper measure in parameter"
            raise InvalidParameterError(
                f"-m {spec}: the parameters after '.' are empty (trec_eval refuses them "
                f"too); write -m {root} for the defaults or give parameters after the '.'."
            )
        if root not in chosen or (chosen[root].raw is None and dot):
            chosen[root] = TrecRequest(root, raw if dot else None)
    _check_shared_gains(chosen)
    return [chosen[name] for name in TREC_ORDER if name in chosen]


# m_ndcg.c: dcg, ideal_dcg and ndcg point at one static parameter set
SHARED_GAINS = ("dcg", "ideal_dcg", "ndcg")


def _check_shared_gains(chosen: dict[str, TrecRequest]) -> None:
    """trec_eval 10.0 gives dcg, ideal_dcg and ndcg one parameter set: gains given to one of them
    apply to the others asked for without (``-m ideal_dcg.1=5 -m all_trec`` prints ``ndcg_1=5``),
    and gains given to two of them crash it (a double free). evalstore keeps each measure's own
    parameters, so it refuses the combinations where that would differ (docs/conformance.md)."""
    asked = [name for name in SHARED_GAINS if name in chosen]
    with_gains = [name for name in asked if chosen[name].raw is not None]
    if with_gains and len(asked) > 1:
        raise InvalidParameterError(
            f"trec_eval 10.0 shares one gain parameter set between dcg, ideal_dcg and ndcg: with "
            f"{', '.join(f'{n}.{chosen[n].raw}' for n in with_gains)} it would apply those gains to "
            f"{' and '.join(n for n in asked if n not in with_gains) or 'the others'} as well (or crash); "
            "evalstore does not copy that. Ask for one of them with gains at a time, or for all of them without."
        )


def _unknown_trec(root: str) -> InvalidParameterError:
    error = unknown_measure(root)
    return InvalidParameterError(str(error), remedy=Remedy(cli="Run 'evalstore measures --trec' for the list."))


def expand(request: TrecRequest) -> list[tuple[str, Measure | None]]:
    """(printed name, measure) pairs; runid and num_q have no measure."""
    root, raw = request.root, request.raw
    trec = TREC_FAMILIES[root]
    if trec.family in ("runid", "num_q"):
        return [(root, None)]
    try:
        return expand_root(root, raw, trec)
    except InvalidParameterError:
        raise
    except (ValueError, IndexError):
        raise InvalidParameterError(
            f"Cannot read the parameters '{raw}' of trec_eval measure '{root}'.",
            remedy=Remedy(cli="Run 'evalstore measures' for its parameters."),
        ) from None


def expand_root(root: str, raw: str | None, trec: TrecFamily) -> list[tuple[str, Measure | None]]:
    """Parameters read as trec_eval's meas_init.c reads them: comma-separated, each with C's
    ``atol`` (cutoffs: ``P.1e1`` is P_1, ``P.5abc`` P_5) or ``atof`` (everything else; text that is
    no number reads as 0, as in C); duplicate cutoffs and malformed ``name=value`` pairs refused
    with trec_eval's reason."""
    if trec.kind == "none":
        return [(root, make(trec.family))]
    param = str(trec.param)  # every kind but "none" names its parameter
    fixed = dict(trec.fixed)
    if trec.kind == "long":
        cutoffs = sorted(_long(v) for v in raw.split(",")) if raw else list(trec.defaults)
        if cutoffs[0] <= 0:
            raise InvalidParameterError(
                f"Cutoffs of {root} must be positive integers. Got {cutoffs[0]} "
                f"(from '{raw}', read as C's atol reads it, as trec_eval does)."
            )
        _no_duplicates(root, raw, cutoffs)
        return [(f"{root}_{v}", make(trec.family, **{param: v})) for v in cutoffs]
    if trec.kind == "double":
        levels = sorted(_double(v) for v in raw.split(",")) if raw else list(trec.defaults)
        _no_duplicates(root, raw, levels)
        return [(f"{root}_{v:.2f}", make(trec.family, **{param: v}, **fixed)) for v in levels]
    name = f"{root}_{raw}" if raw else root
    if trec.kind == "pairs":
        params: dict[str, Any] = {}
        if raw:
            gains: dict[int, float] = {}
            for key, value in _pairs(root, raw):
                if key == "p":  # m_rbp.c: every 'p' pair in turn, so the last one counts
                    params["p"] = value
                elif _is_int(key):  # gain_init.c valid_int; other names are ignored
                    level = int(key)
                    if level in gains:  # gain_init.c then uses one gain for the ranking, another for the ideal
                        raise InvalidParameterError(
                            f"-m {root}.{raw} gives relevance level {level} two gains; trec_eval 10.0 then mixes "
                            "them (one for the ranking, another for the ideal ranking), which evalstore does not "
                            "copy: give each level one gain."
                        )
                    gains[level] = value
            if gains and "gains" in param:
                params["gains"] = gains
        return [(name, make(trec.family, **{**fixed, **params}))]
    # raw: one value or a list of values, as typed (meas_init.c get_double_params: atof each)
    if root == "relstring":
        return [(name, make(trec.family, cutoff=int(_double(raw.split(",")[0])) if raw else 10))]
    if root == "set_F":
        return [(name, make(trec.family, x=_double(raw.split(",")[0]) if raw else 1.0))]
    values = tuple(_double(v) for v in raw.split(",")) if raw else trec.defaults[0]
    return [(name, make(trec.family, **{param: values}))]


def _long(text: str) -> int:
    value = atol(text)
    return 0 if value is None else value  # C's atol reads no digits as 0


def _double(text: str) -> float:
    value = atof(text)
    if value is not None and not math.isfinite(value):  # nan and inf reach (long) casts: undefined in C
        raise InvalidParameterError(
            f"The parameter '{text}' is not a finite number; trec_eval computes with it "
            "(printing nan, or converting it to an integer, which C leaves undefined), "
            "evalstore refuses it."
        )
    return 0.0 if value is None else value  # C's atof reads no number as 0


def _no_duplicates(root: str, raw: str | None, values: list[Any]) -> None:
    if any(a == b for a, b in zip(values, values[1:], strict=False)):
        raise InvalidParameterError(
            f"-m {root}.{raw} names a cutoff twice (trec_eval: 'duplicate cutoffs detected'); name each once."
        )


def _pairs(root: str, raw: str) -> list[tuple[str, float]]:
    """``name=value`` pairs as meas_init.c get_param_pairs reads them, which refuses two commas or
    two '=' in a row, a pair without '=' and a trailing comma."""
    last = ","
    malformed = False
    for char in raw:
        if char in ",=":
            if char == last:
                malformed = True
                break
            last = char
    if malformed or last != "=":
        raise InvalidParameterError(
            f"-m {root}.{raw}: malformed pair parameters (trec_eval: 'malformed pair "
            f"parameters in '{raw}''); write them as level=gain,level=gain (or p=0.8)."
        )
    pairs = []
    for item in raw.split(","):
        key, _, value = item.partition("=")
        pairs.append((key, _double(value)))
    return pairs


def _is_int(text: str) -> bool:
    body = text[1:] if text[:1] in "+-" else text
    return bool(body) and all("0" <= char <= "9" for char in body)  # C isdigit: ASCII only


def expand_trec_spec(spec: str) -> list[tuple[str, Measure | None]]:
    """All (printed name, measure) pairs of one ``-m`` value or group."""
    return [pair for request in parse_trec_specs([spec]) for pair in expand(request)]


# ir_measures' parse_trec_measure (after pytrec_eval): a trec_eval name with its parameters after
# '_' or '.', several separated by commas (P_5,10, ndcg_cut.5,10, iprec_at_recall_0.1,0.2)
# (patterns as text, compiled by re when first matched: ~0.1 ms each at import otherwise, and an
# ordinary `trec-eval` matches neither)
_TREC_LIST = r"^(?P<root>\w+?)(?P<sep>[._])(?P<values>[0-9]+(?:\.[0-9]+)?(?:,[0-9]+(?:\.[0-9]+)?)*)$"
_NUMBER = r"^[0-9]+(?:\.[0-9]+)?$"


def trec_list(name: str) -> list[Measure] | None:
    """The measures of a trec_eval name with a list of cutoffs or levels, as ir_measures'
    ``parse_trec_measure`` accepts it (``P_5,10``, ``P.5,10``, ``ndcg_cut_5,10``), each meaning
    what the trec_eval name means (``P_5``, ``P_10``); None for any other name."""
    match = re.match(_TREC_LIST, name.strip())
    if match is None or ("," not in match["values"] and match["sep"] == "_"):
        return None  # P_10 and iprec_at_recall_0.10 are names of one measure: parse reads them
    spec = TREC_FAMILIES.get(match["root"])
    if spec is None or spec.kind not in ("long", "double"):
        return None
    try:
        expanded = expand_trec_spec(f"{match['root']}.{match['values']}")
    except InvalidParameterError as error:
        if "twice" in str(error):
            raise InvalidParameterError(f"'{name.strip()}' names a cutoff twice; name each once.") from None
        raise
    return [measure for _, measure in expanded if measure is not None]


def split_measure_names(text: str) -> list[str]:
    """Measure names from one comma-separated text: commas inside parentheses belong to a name
    (``AP,P(rel=2)@5,nDCG(gain=exp,discount=jk)@10``), and so do those of a trec_eval list
    (``P_5,10,AP`` is ``P_5,10`` and ``AP``)."""
    parts, depth, current = [], 0, ""
    for char in text:
        depth += (char == "(") - (char == ")")
        if char == "," and depth == 0:
            parts.append(current.strip())
            current = ""
        else:
            current += char
    parts.append(current.strip())
    names: list[str] = []
    for part in (p for p in parts if p):
        if (
            names
            and re.match(_NUMBER, part)
            and re.match(_TREC_LIST, f"{names[-1]},{part}")
            and trec_list(f"{names[-1]},{part}")
        ):
            names[-1] = f"{names[-1]},{part}"
        else:
            names.append(part)
    return names


@cache
def _fixed_spellings() -> dict[str, str]:
    """The stored names that spell out a parameter trec_eval's name fixes, each with that name
    (``IPrec(rounding=trec_eval10)@0.1`` is trec_eval's ``iprec_at_recall_0.10``)."""
    found: dict[str, str] = {}
    for root, trec in TREC_FAMILIES.items():
        if not trec.fixed:
            continue
        for name, measure in expand_root(root, None, trec):
            if measure is not None:
                found[str(measure)] = name
    return found


def reader_name(stored: str) -> str:
    """The name a reader knows a stored measure by: the stored name itself, unless it spells out
    a parameter that only says which peer's definition it follows; then trec_eval's name."""
    return _fixed_spellings().get(stored, stored) if "(" in stored else stored
