"""The one registry of measures: families, their parameters, canonical names and aliases.

A *family* (``P``, ``AP``, ``nDCG``...) is one vectorised kernel plus a parameter schema. A
*measure* is a family with parameter values; its canonical name is ``Family(k=v,...)@cutoff``
with default values left out (``P@10``, ``P(rel=2)@5``, ``AP``, ``nDCG(gain=exp)@10``). That
string is what the database stores and what MLflow logs (after :func:`mlflow_key`).

Accepted spellings of the same measure: the canonical name, ir_measures-style aliases (``map``
for ``AP``, ``R@1000``, ``RR``, ``NDCG@10``...) and trec_eval's names (``P_10``, ``map_cut_10``,
``ndcg_cut_10``, ``recip_rank``, ``iprec_at_recall_0.10``...). Measure names are parsed with a
grammar (:data:`_GRAMMAR`), never by splitting on separators.
"""

from __future__ import annotations

import ast
import functools
import importlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from evalstore.errors import InvalidParameterError, Remedy

Kernel = Callable[..., np.ndarray]
MEASURES_LISTED = Remedy(cli="Run 'evalstore measures' for the list.")


@dataclass(frozen=True)
class Param:
    """A measure parameter: its type, default and allowed range."""

    kind: type
    default: Any
    low: float | None = None
    high: float | None = None
    choices: tuple[Any, ...] | None = None
    doc: str = ""
    # None means the evaluation's relevance level (-l): the shared ``rel`` parameter of most families
    from_evaluation: bool = False

    def check(self, family: str, name: str, value: Any) -> Any:
        if value is None and self.default is None:
            return None
        if self.kind is tuple:
            items = value if isinstance(value, (tuple, list)) else (value,)
            try:
                return tuple(float(v) for v in items)
            except (TypeError, ValueError):
                raise InvalidParameterError(
                    f"The '{name}' parameter of {family} must be a list of numbers. Got {value!r} instead."
                ) from None
        if self.kind is dict:
            if not isinstance(value, dict):
                raise InvalidParameterError(
                    f"The '{name}' parameter of {family} must be a mapping level=gain. Got {value!r} instead."
                )
            # stored as sorted pairs so that a Measure stays hashable
            return tuple(sorted((int(k), float(v)) for k, v in value.items()))
        if self.kind is bool:  # True/False, 1/0 or their words; bool("False") would be True
            words = {"true": True, "1": True, "false": False, "0": False}
            if isinstance(value, bool) or value in (0, 1):
                return bool(value)
            if isinstance(value, str) and value.lower() in words:
                return words[value.lower()]
            raise InvalidParameterError(
                f"The '{name}' parameter of {family} must be True or False. Got {value!r} instead."
            )
        try:
            if self.kind is int and isinstance(value, float) and not value.is_integer():
                raise ValueError
            converted = self.kind(value)
        except (TypeError, ValueError):
            raise InvalidParameterError(
                f"The '{name}' parameter of {family} must be {self._describe()}. Got {value!r} instead."
            ) from None
        if self.choices is not None and converted not in self.choices:
            raise InvalidParameterError(
                f"The '{name}' parameter of {family} must be {self._describe()}. Got {value!r} instead."
            )
        if (self.low is not None and converted < self.low) or (self.high is not None and converted > self.high):
            raise InvalidParameterError(
                f"The '{name}' parameter of {family} must be {self._describe()}. Got {value!r} instead."
            )
        return converted

    def _describe(self) -> str:
        if self.choices is not None:
            return "one of " + ", ".join(repr(c) for c in self.choices)
        what = {int: "an int", float: "a number", str: "a string"}.get(self.kind, self.kind.__name__)
        low = "-inf" if self.low is None else _fmt(self.low)
        high = "inf" if self.high is None else _fmt(self.high)
        if self.low is None and self.high is None:
            return what
        return f"{what} in the range [{low}, {high}" + (")" if self.high is None else "]")


@dataclass(frozen=True)
class TrecFamily:
    """One trec_eval measure name: the family it computes and how its command-line parameters map
    to the family's (``-m P.5,10``: cutoffs; ``-m ndcg.1=3``: gains)."""

    family: str
    param: str | None = None  # name of the multi-valued parameter (cutoffs)
    kind: str = "none"  # none | long | double | pairs | raw
    defaults: tuple[Any, ...] = ()
    # parameters the trec_eval name fixes, where our family's default is another peer's
    # definition (iprec_at_recall: trec_eval 10.0's rounding, IPrec's default being ir_measures')
    fixed: tuple[tuple[str, Any], ...] = ()
    name: str = ""  # trec_eval's name (-m NAME)
    mode: str = "qrels"  # -R qrels, or -R prefs / qrels_prefs


def trec(
    name: str,
    *,
    param: str | None = None,
    kind: str = "none",
    defaults: tuple[Any, ...] = (),
    fixed: tuple[tuple[str, Any], ...] = (),
    mode: str = "qrels",
) -> TrecFamily:
    """A trec_eval name of the family being registered (``family(..., trec=trec("map"))``)."""
    return TrecFamily("", param, kind, defaults, fixed, name, mode)


@dataclass(frozen=True)
class Family:
    name: str
    kernel: Kernel
    params: dict[str, Param]
    summary: str = "mean"  # mean | sum | gmean | defined_mean (over the topics not NaN) | none
    # the 'all' value when every qrels topic is evaluated (-c), where trec_eval's differs from
    # the summary rule applied to the per-topic values (num_rel: m_num_rel.c te_calc_avg_num_rel)
    complete_summary: Callable[[Any], float] | None = None
    value_type: str = "float"  # float | int | str
    description: str = ""
    reference: str = ""
    aliases: tuple[str, ...] = ()
    trec: tuple[TrecFamily, ...] = ()  # trec_eval's names for it (map and map_cut for AP)
    higher_is_better: bool = True
    at: str = "cutoff"  # the parameter written after '@' (IPrec@0.1 sets recall)
    # what the measure is computed from: relevance qrels (the kernel runs on a Ranking), subtopic
    # qrels (metrics.diversity), preference judgments (metrics.preferences) or gold labels
    # (metrics.classification)
    judgments: str = "relevance"
    kind: str = "ranking"  # the evaluation kind that computes it: ranking | classifier | clustering
    # shown by default where a kind's results are summed up (leaderboards, MLflow's figures):
    # its place in that list, 1 first (0: not shown; True counts as 1, the registration order)
    headline: int = 0
    headline_cutoff: int | None = None  # the cutoff a headline ranking measure is shown at (nDCG@10)


@dataclass(frozen=True)
class Measure:
    """A family with its parameter values (defaults omitted): hashable, ordered, printable."""

    family: str
    params: tuple[tuple[str, Any], ...] = ()

    @property
    def spec(self) -> Family:
        return REGISTRY[self.family]

    def param(self, name: str) -> Any:
        return dict(self.params).get(name, self.spec.params[name].default)

    def kwargs(self, rel_default: int = 1) -> dict[str, Any]:
        """Keyword arguments for the kernel; ``rel`` falls back to the evaluation's level."""
        values = {name: p.default for name, p in self.spec.params.items()}
        values.update(dict(self.params))
        for name, param in self.spec.params.items():
            if param.kind is dict and values[name] is not None:
                values[name] = dict(values[name])
        for name, param in self.spec.params.items():
            if param.from_evaluation and values[name] is None:
                values[name] = rel_default
        return values

    def __str__(self) -> str:
        params = dict(self.params)
        cutoff = params.pop(self.spec.at, None)
        inner = ",".join(f"{k}={_fmt(v)}" for k, v in sorted(params.items()))
        text = self.family + (f"({inner})" if inner else "")
        return text + (f"@{_fmt(cutoff)}" if cutoff is not None else "")


def _fmt(value: Any) -> str:
    if isinstance(value, tuple) and value and all(isinstance(v, tuple) for v in value):
        return "{" + ",".join(f"{k}:{_fmt(v)}" for k, v in value) + "}"
    if isinstance(value, tuple):
        return "(" + ",".join(_fmt(v) for v in value) + ")"
    if isinstance(value, float):
        return repr(int(value)) if value.is_integer() and abs(value) < 1e15 else repr(value)
    return str(value)


# The modules that register families, in the order evalstore.metrics imported them all (the
# registry lists families in this order: a leaderboard's groups of measures follow it). The
# ranking module's are registered when evalstore.metrics is imported; the others' when a name
# they own (below) is first looked up, or when the registry is listed: an ordinary `trec-eval`
# needs none of them (their import and registration were ~3 ms of its start-up).
FAMILY_MODULES = (
    "evalstore.metrics.cwl",
    "evalstore.metrics.diversity",
    "evalstore.metrics.ranking",
    "evalstore.metrics.ordering",
    "evalstore.metrics.preferences",
)
# every name (canonical or alias) of those modules' families; tests/unit/test_lazy_families.py
# checks it against what they register. None registers a trec_eval name of -R qrels (TREC_FAMILIES
# is complete without them).
LAZY_FAMILIES: dict[str, tuple[str, ...]] = {
    "evalstore.metrics.cwl": (
        *("BPM", "BPM-Static", "SDCG", "NDCG-k", "INST", "INSQ"),
        *("NERR8", "NERR-EQ8", "NERR9", "NERR-EQ9", "NERR10", "NERR-EQ10", "NERR11", "NERR-EQ11"),
    ),
    "evalstore.metrics.diversity": (
        *("alpha_nDCG", "alpha_DCG", "ERR_IA", "nERR_IA", "NRBP", "nNRBP", "AP_IA", "MAP_IA", "P_IA"),
        "StRecall",
    ),
    "evalstore.metrics.ordering": ("Compat", "compat", "Accuracy", "accuracy"),
    "evalstore.metrics.preferences": (
        *("prefs_num_prefs_poss", "prefs_num_prefs_ful", "prefs_num_prefs_ful_ret", "prefs_simp", "prefs_pair"),
        *("prefs_avgjg", "prefs_avgjg_Rnonrel", "prefs_simp_ret", "prefs_pair_ret", "prefs_avgjg_ret"),
        *("prefs_avgjg_Rnonrel_ret", "prefs_simp_imp", "prefs_pair_imp", "prefs_avgjg_imp"),
    ),
}
_OWNER = {name.lower(): module for module, names in LAZY_FAMILIES.items() for name in names}
_EAGER_MODULE = "evalstore.metrics.ranking"


class _Registry(dict[str, "Family"]):
    """The families by canonical name, a lazy module's registered when one of its names is first
    looked up (``REGISTRY[name]``, ``in``, ``get``) and all of them when it is listed (iterated,
    counted, its keys, values or items). A present name is found by dict's own lookup."""

    complete = False  # every module's families registered, in FAMILY_MODULES' order

    def __missing__(self, name: str) -> Family:
        if _load_owner(name):
            return dict.__getitem__(self, name)
        raise KeyError(name)

    def __contains__(self, name: object) -> bool:
        if dict.__contains__(self, name):
            return True
        return isinstance(name, str) and _load_owner(name) and dict.__contains__(self, name)

    def get(self, name: str, default: Any = None) -> Any:
        return self[name] if name in self else default

    def __iter__(self) -> Any:
        _load_all()
        return dict.__iter__(self)

    def __len__(self) -> int:
        _load_all()
        return dict.__len__(self)

    def keys(self) -> Any:
        _load_all()
        return dict.keys(self)

    def values(self) -> Any:
        _load_all()
        return dict.values(self)

    def items(self) -> Any:
        _load_all()
        return dict.items(self)


def _load_owner(name: str) -> bool:
    """Import the module owning ``name`` (any case) if a lazy one does: whether one did."""
    module = _OWNER.get(name.lower())
    if module is None:
        return False
    importlib.import_module(module)
    return True


def _load_all() -> None:
    if REGISTRY.complete:
        return
    for module in LAZY_FAMILIES:
        importlib.import_module(module)
    place = {module: i for i, module in enumerate(FAMILY_MODULES)}
    # the same order as when evalstore.metrics imported every module (a stable sort keeps each
    # module's own order)
    ordered = sorted(dict.items(REGISTRY), key=lambda kv: place[_OWNER.get(kv[0].lower(), _EAGER_MODULE)])
    dict.clear(REGISTRY)
    dict.update(REGISTRY, ordered)
    REGISTRY.complete = True


REGISTRY: _Registry = _Registry()
_ALIASES: dict[str, str] = {}


def canonical_name(name: str) -> str | None:
    """The canonical family name of any spelling (any case) of a family's name, or None."""
    canonical = _ALIASES.get(name.lower())
    if canonical is None and _load_owner(name):
        canonical = _ALIASES.get(name.lower())
    return canonical


# trec_eval 10.0's measure table (measures.c): measures print in this order whatever the command
# line says. runid and num_q are lines of the output, not measures of a family.
TREC_ORDER = (
    "runid",
    "num_q",
    "num_ret",
    "num_rel",
    "num_rel_ret",
    "map",
    "gm_map",
    "Rprec",
    "bpref",
    "recip_rank",
    "iprec_at_recall",
    "P",
    "relstring",
    "recall",
    "infAP",
    "gm_bpref",
    "Rprec_mult",
    "utility",
    "11pt_avg",
    "binG",
    "G",
    "dcg",
    "ideal_dcg",
    "ndcg",
    "ndcg_rel",
    "Rndcg",
    "ndcg_cut",
    "map_cut",
    "relative_P",
    "success",
    "set_P",
    "set_relative_P",
    "set_recall",
    "set_map",
    "set_F",
    "num_nonrel_judged_ret",
    "yaap",
    "rbp",
    "rbp_resid",
    "unj",
)
# trec_eval's names, filled by register() from each family's ``trec`` specs
TREC_FAMILIES: dict[str, TrecFamily] = {name: TrecFamily(name, name=name) for name in ("runid", "num_q")}


def register(family: Family) -> Family:
    if dict.__contains__(REGISTRY, family.name):
        raise RuntimeError(f"measure family {family.name} registered twice")
    # built from the fields (vars), not by dataclasses.replace: ~1 us a family, not ~20, for the
    # ~50 families registered at every start-up
    named = tuple(TrecFamily(**{**vars(spec), "family": family.name}) for spec in family.trec)
    family = Family(**{**vars(family), "trec": named})
    dict.__setitem__(REGISTRY, family.name, family)
    REGISTRY.complete = False
    for alias in (family.name, *family.aliases):
        _ALIASES[alias.lower()] = family.name
    for spec in named:
        if spec.mode == "qrels":
            if spec.name not in TREC_ORDER:
                raise RuntimeError(f"trec_eval name {spec.name} of {family.name} is not in TREC_ORDER")
            TREC_FAMILIES[spec.name] = spec
    return family


def family(
    name: str, *, params: dict[str, Param] | None = None, trec: TrecFamily | tuple[TrecFamily, ...] = (), **kwargs: Any
) -> Callable[[Kernel], Kernel]:
    """Decorator: register ``kernel`` as the measure family ``name`` (``trec``: its trec_eval name
    or names, :func:`trec`)."""

    def wrap(kernel: Kernel) -> Kernel:
        register(
            Family(
                name=name,
                kernel=kernel,
                params=params or {},
                trec=_as_tuple(trec),
                description=(kernel.__doc__ or "").strip(),
                **kwargs,
            )
        )
        return kernel

    return wrap


def _as_tuple(trec: TrecFamily | tuple[TrecFamily, ...]) -> tuple[TrecFamily, ...]:
    return (trec,) if isinstance(trec, TrecFamily) else trec


# the kinds of judgments (qrels_sets.kind, and gold labels) as a sentence names them
JUDGMENTS_NAMED = {
    "relevance": "relevance",
    "subtopics": "subtopic",
    "preferences": "preference",
    "labels": "gold label",
    "nuggets": "nugget",
}

# Classifier and clustering measures, by name. Their own namespace: they are computed together by
# one suite (metrics.classification) and stored under plain names ('precision' of the positive
# class, 'precision.<class>' of each class, 'f1_macro_beta2'), where 'precision' in REGISTRY's
# namespace is an alias of the ranking measure P.
PREDICTION_REGISTRY: dict[str, Family] = {}
# patterns as text, compiled by re when first matched (and kept in its cache): ~0.1 ms each at
# import otherwise, and an ordinary `trec-eval` matches neither
_PER_CLASS = r"^(?P<name>[a-z_0-9]+?)(?:_beta[0-9.e+-]+)?(?:\.(?P<label>.+))?$"


def register_prediction_measure(
    name: str, kind: str, *, description: str, reference: str, higher_is_better: bool = True, headline: bool = False
) -> Family:
    """Register a measure of the classification suite (``kind``: classifier or clustering)."""

    def computed_by_suite(rk: Any, **_: Any) -> np.ndarray:
        raise InvalidParameterError(
            f"{name} is computed from gold labels.",
            remedy=Remedy(cli="Evaluate it with 'evalstore evaluate --labels'."),
        )

    if name in PREDICTION_REGISTRY:
        raise RuntimeError(f"prediction measure {name} registered twice")
    family = Family(
        name=name,
        kernel=computed_by_suite,
        params={},
        summary="none",
        judgments="labels",
        kind=kind,
        description=" ".join(description.split()),
        reference=reference,
        higher_is_better=higher_is_better,
        headline=headline,
    )
    PREDICTION_REGISTRY[name] = family
    return family


def prediction_family_in(registry: dict[str, Family], stored: str) -> Family | None:
    """The family of a stored classification value: ``f1_macro``, ``f1_macro_beta2``,
    ``precision.cat`` (one class's), ``threshold_youden_value``."""
    if stored in registry:
        return registry[stored]
    match = re.match(_PER_CLASS, stored)
    return registry.get(match["name"]) if match else None


def register_elsewhere(
    name: str,
    judgments: str,
    *,
    description: str,
    params: dict[str, Param] | None = None,
    trec: TrecFamily | tuple[TrecFamily, ...] = (),
    **kwargs: Any,
) -> Family:
    """Register a family computed from subtopic or preference judgments by its own module, on
    all topics at once; :func:`evalstore.metrics.compute` (relevance qrels) refuses it."""

    def computed_elsewhere(rk: Any, **_: Any) -> np.ndarray:
        raise InvalidParameterError(
            f"{name} is computed from {JUDGMENTS_NAMED[judgments]} judgments, not from relevance qrels."
        )

    return register(
        Family(
            name=name,
            kernel=computed_elsewhere,
            params=params or {},
            judgments=judgments,
            trec=_as_tuple(trec),
            description=" ".join(description.split()),
            **kwargs,
        )
    )


# as text, as _PER_CLASS is
_GRAMMAR = r"^\s*(?P<name>[A-Za-z_][\w\-]*)\s*(?:\((?P<params>.*)\))?\s*(?:@\s*(?P<cutoff>[0-9.]+))?\s*$"


def make(family_name: str, **params: Any) -> Measure:
    """A measure from a family name and parameters, validated; defaults are dropped."""
    canonical = canonical_name(family_name)
    if canonical is None:
        raise unknown_measure(family_name)
    spec = REGISTRY[canonical]
    checked: dict[str, Any] = {}
    for name, value in params.items():
        if name not in spec.params:
            allowed = ", ".join(spec.params) or "none"
            raise InvalidParameterError(f"{canonical} has no parameter '{name}'. Its parameters: {allowed}.")
        value = spec.params[name].check(canonical, name, value)
        if value != spec.params[name].default:
            checked[name] = value
    missing = [n for n, p in spec.params.items() if p.default is REQUIRED and n not in checked]
    if missing:
        example = f"{canonical}@10" if missing[0] == spec.at else f"{canonical}({missing[0]}=...)"
        raise InvalidParameterError(f"{canonical} needs a value for '{missing[0]}' (e.g. {example}).")
    return Measure(canonical, tuple(sorted(checked.items())))


REQUIRED = object()


def parse(text: str) -> Measure:
    """Parse a canonical or alias name: ``nDCG@10``, ``P(rel=2)@5``, ``AP``, ``map``, ``P_10``..."""
    trec = parse_trec_output_name(text)
    if trec is not None:
        return trec
    match = re.match(_GRAMMAR, text)
    if not match:
        raise InvalidParameterError(
            f"Cannot parse measure '{text}'; write it as Name, Name@cutoff or Name(param=value,...)@cutoff."
        )
    params: dict[str, Any] = {}
    if match["params"]:
        params.update(_parse_params(text, match["params"]))
    if match["cutoff"] is not None:
        cutoff = float(match["cutoff"])
        canonical = canonical_name(match["name"])
        at = REGISTRY[canonical].at if canonical else "cutoff"
        params[at] = int(cutoff) if cutoff.is_integer() and at == "cutoff" else cutoff
    name, params = _from_ir_measures(match["name"], params)
    return make(name, **params)


def _from_ir_measures(name: str, params: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """ir_measures' parameter spellings of measures we have under other parameters (ir_measures
    0.4 docs; values checked against it in tests/differential/test_against_ir_measures.py)."""
    family = canonical_name(name)
    if family == "nDCG" and "dcg" in params:  # nDCG(dcg='exp-log2'): gdeval's gain 2^rel - 1
        dcg = params.pop("dcg")
        if dcg not in _IR_MEASURES_DCG:
            raise InvalidParameterError(
                f"The 'dcg' parameter of nDCG must be one of {', '.join(map(repr, _IR_MEASURES_DCG))}. Got {dcg!r} "
                "instead."
            )
        params.update(_IR_MEASURES_DCG[dcg])
    if family == "SetF" and "beta" in params:  # ir_measures hands beta to trec_eval's set_F as its x
        params["x"] = params.pop("beta")
    if family == "NumRet" and "rel" in params:  # retrieved documents at or above rel
        return "NumRelRet", params
    if name.lower() == "iprec_at_recall":  # trec_eval's name means trec_eval 10.0's count (TREC_FAMILIES)
        params.setdefault("rounding", "trec_eval10")
    if name == "rbp":  # trec_eval's (lower-case) name means its default p, 0.9; RBP's is ir_measures' 0.8
        params.setdefault("p", 0.9)
    return name, params


_IR_MEASURES_DCG: dict[str, dict[str, Any]] = {"log2": {}, "exp-log2": {"gain": "exp"}}


def _parse_params(text: str, inner: str) -> dict[str, Any]:
    try:
        call = ast.parse(f"f({inner})", mode="eval").body
    except SyntaxError:
        raise InvalidParameterError(
            f"Cannot parse the parameters of '{text}'; write them as name=value, separated by commas."
        ) from None
    assert isinstance(call, ast.Call)
    if call.args:
        raise InvalidParameterError(f"Cannot parse '{text}': parameters need names (name=value).")
    values: dict[str, Any] = {}
    for keyword in call.keywords:
        node = keyword.value
        if isinstance(node, ast.Name):
            values[str(keyword.arg)] = node.id  # bare words: gain=exp
        else:
            try:
                values[str(keyword.arg)] = ast.literal_eval(node)
            except ValueError:
                raise InvalidParameterError(f"Cannot read the value of '{keyword.arg}' in '{text}'.") from None
    return values


def unknown_measure(name: str) -> InvalidParameterError:
    if name in TREC_FAMILIES and TREC_FAMILIES[name].family not in REGISTRY:  # runid: output only
        return InvalidParameterError(
            f"'{name}' is a line trec_eval prints, not a measure to store; the run tag is kept with every run.",
            remedy=Remedy(
                cli=f"Run 'evalstore measures' for the measures ('evalstore trec-eval -m {name}' prints the line)."
            ),
        )
    import difflib  # here: an error path's, not every `trec-eval`'s start-up

    known = sorted({*REGISTRY, *TREC_FAMILIES} - {name})  # the name itself is never its own correction
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.6) or difflib.get_close_matches(
        name.lower(), [k.lower() for k in known], n=1, cutoff=0.6
    )
    hint = f" Did you mean '{_restore_case(close[0], known)}'?" if close else ""
    return InvalidParameterError(f"Unknown measure '{name}'.{hint}", remedy=MEASURES_LISTED)


def _restore_case(lowered: str, known: list[str]) -> str:
    return next((k for k in known if k.lower() == lowered.lower()), lowered)


# --------------------------------------------------------------------------- trec_eval names
# trec_eval family -> (our family, how its command-line parameters map to ours)


TREC_GROUPS = {
    "official": [
        "runid",
        "num_q",
        "num_ret",
        "num_rel",
        "num_rel_ret",
        "map",
        "gm_map",
        "Rprec",
        "bpref",
        "recip_rank",
        "iprec_at_recall",
        "P",
    ],
    "set": [
        "runid",
        "num_q",
        "num_ret",
        "num_rel",
        "num_rel_ret",
        "utility",
        "set_P",
        "set_recall",
        "set_relative_P",
        "set_map",
        "set_F",
    ],
}
# registered in trec_eval's table but in none of its groups: dcg, ideal_dcg, yaap (measures.c)
TREC_GROUPS["all_trec"] = [name for name in TREC_ORDER if name not in ("dcg", "ideal_dcg", "yaap")]


def _trec_output_pattern() -> re.Pattern[str]:
    """trec_eval's printed names with a cutoff or recall level: the roots of every name whose
    parameter is a list of numbers (``P_10``, ``ndcg_cut_10``, ``iprec_at_recall_0.10``)."""
    return _pattern_of(len(TREC_FAMILIES))  # names are only ever added: their count keys the cache


@functools.lru_cache(maxsize=2)
def _pattern_of(_count: int) -> re.Pattern[str]:
    roots = sorted(
        (name for name, spec in TREC_FAMILIES.items() if spec.kind in ("long", "double")), key=lambda root: -len(root)
    )  # the longest first: ndcg_cut before a shorter root
    return re.compile(rf"^(?P<root>{'|'.join(map(re.escape, roots))})_(?P<value>[0-9.]+)$")


def parse_trec_output_name(text: str) -> Measure | None:
    """trec_eval's printed names with a cutoff (``P_10``, ``ndcg_cut_10``, ``iprec_at_recall_0.10``)
    and its plain root names (``map``, ``recip_rank``, ``ndcg``)."""
    match = _trec_output_pattern().match(text.strip())
    if match:
        trec = TREC_FAMILIES[match["root"]]
        raw = float(match["value"])
        value = int(raw) if trec.kind == "long" else raw
        return make(trec.family, **{str(trec.param): value}, **dict(trec.fixed))
    root = TREC_FAMILIES.get(text.strip())
    if root is not None and root.family in REGISTRY and root.param in (None, "gains", "p") and not root.defaults:
        return make(root.family, **dict(root.fixed))
    return None


def mlflow_key(measure: Measure | str) -> str:
    """The canonical name made MLflow-safe (alphanumerics, _ - . space / only)."""
    text = str(measure)
    text = text.replace("@", "_at_").replace("(", "_").replace(")", "").replace("=", "-")
    text = text.replace(",", "_").replace("{", "").replace("}", "").replace(":", "-")
    return re.sub(r"[^\w\-. /]", "_", text)
