"""Measures of generated answers (TREC RAG): nugget recall and citation support, per topic.

Nugget scores, per (answer, topic), from each nugget's assignment a(n): support = 1,
partial_support = 0.5, not_support = 0; "strict" counts support only (castorini/nuggetizer,
``core/metrics.py``; Pradeep et al., arXiv 2411.09607):

- ``V_strict`` = #vital nuggets supported / #vital; ``V`` the same with a(n);
- ``A_strict`` = #nuggets supported / #nuggets; ``A`` the same with a(n);
- ``W`` = (sum over vital a(n) + 0.5 * sum over okay a(n)) / (#vital + 0.5 * #okay) (section 3.5);
  ``W_strict`` with strict assignments.

A topic whose nuggets are all okay gives V and V_strict 0, as nuggetizer's
``calculate_nugget_scores`` does (``... if vital_nuggets else 0.0``), and counts in the mean.

Citation support (arXiv 2504.15205): each sentence's first citation judged full (1), partial
(0.5) or none (0); sentences with an unjudged first citation are left out.
``support_precision`` = sum over cited sentences / #cited sentences; ``support_recall`` = the same
sum / #sentences (an uncited sentence lowers recall only). A topic with no cited, judged sentence
has no support_precision (NaN: left out of the mean).

Each measure is one function over every topic at once (arrays of nuggets or sentences with their
topic's code); a run's score is the mean over the topics assessed, as the track reports it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from evalstore.errors import InvalidParameterError, Remedy
from evalstore.metrics.registry import PREDICTION_REGISTRY, Family

# a(n) by assignment, and the citation-support grades (2 / 1 / 0) as values
ASSIGNMENT_VALUE = {"support": 1.0, "partial_support": 0.5, "not_support": 0.0}
SUPPORT_VALUE = {2: 1.0, 1: 0.5, 0: 0.0}

_NUGGETIZER = "castorini/nuggetizer core/metrics.py; Pradeep et al., arXiv 2411.09607"
_WEIGHTED = "Pradeep et al., arXiv 2411.09607, section 3.5"
_SUPPORT = "arXiv 2504.15205 (TREC 2024 RAG support evaluation)"


@dataclass(frozen=True)
class NuggetTable:
    """Every assessed nugget of a run: its topic's code (0..topics-1), whether it is vital, and a(n)."""

    topic: np.ndarray  # int64
    vital: np.ndarray  # bool
    value: np.ndarray  # float64: 1, 0.5 or 0
    topics: int


@dataclass(frozen=True)
class SentenceTable:
    """Every sentence of a run: its topic's code, whether it cites, and its first citation's
    support value (NaN: no citation, or unjudged)."""

    topic: np.ndarray  # int64
    cited: np.ndarray  # bool
    value: np.ndarray  # float64
    topics: int


def _sum(table: NuggetTable | SentenceTable, weights: np.ndarray) -> np.ndarray:
    return np.bincount(table.topic, weights=weights, minlength=table.topics)[: table.topics]


def _ratio(numerator: np.ndarray, denominator: np.ndarray, empty: float) -> np.ndarray:
    out = np.full(numerator.shape, empty, dtype=np.float64)
    np.divide(numerator, denominator, out=out, where=denominator > 0)
    return out


def _strict(table: NuggetTable) -> np.ndarray:
    return (table.value == 1.0).astype(np.float64)


def vital_strict(table: NuggetTable) -> np.ndarray:
    vital = table.vital.astype(np.float64)
    return _ratio(_sum(table, vital * _strict(table)), _sum(table, vital), 0.0)


def vital(table: NuggetTable) -> np.ndarray:
    weights = table.vital.astype(np.float64)
    return _ratio(_sum(table, weights * table.value), _sum(table, weights), 0.0)


def all_strict(table: NuggetTable) -> np.ndarray:
    return _ratio(_sum(table, _strict(table)), _sum(table, np.ones_like(table.value)), 0.0)


def all_nuggets(table: NuggetTable) -> np.ndarray:
    return _ratio(_sum(table, table.value), _sum(table, np.ones_like(table.value)), 0.0)


def _weighted(table: NuggetTable, values: np.ndarray) -> np.ndarray:
    weight = np.where(table.vital, 1.0, 0.5)
    return _ratio(_sum(table, weight * values), _sum(table, weight), 0.0)


def weighted(table: NuggetTable) -> np.ndarray:
    return _weighted(table, table.value)


def weighted_strict(table: NuggetTable) -> np.ndarray:
    return _weighted(table, _strict(table))


def _judged(table: SentenceTable) -> np.ndarray:
    return table.cited & ~np.isnan(table.value)


def support_precision(table: SentenceTable) -> np.ndarray:
    judged = _judged(table)
    return _ratio(_sum(table, np.where(judged, table.value, 0.0)), _sum(table, judged.astype(np.float64)), np.nan)


def support_recall(table: SentenceTable) -> np.ndarray:
    judged = _judged(table)
    # unjudged cited sentences are left out; uncited ones count in the denominator
    counted = judged | ~table.cited
    return _ratio(_sum(table, np.where(judged, table.value, 0.0)), _sum(table, counted.astype(np.float64)), np.nan)


@dataclass(frozen=True)
class AnswerMeasure:
    family: Family
    nuggets: Callable[[NuggetTable], np.ndarray] | None = None
    sentences: Callable[[SentenceTable], np.ndarray] | None = None


ANSWER_MEASURES: dict[str, AnswerMeasure] = {}
_ALIASES: dict[str, str] = {}


def _register(
    name: str,
    description: str,
    reference: str,
    *,
    aliases: tuple[str, ...] = (),
    nuggets: Callable[[NuggetTable], np.ndarray] | None = None,
    sentences: Callable[[SentenceTable], np.ndarray] | None = None,
    headline: int = 0,
) -> None:
    def computed_by_kind(rk: object, **_: object) -> np.ndarray:
        raise InvalidParameterError(
            f"{name} is computed from nugget assignments.",
            remedy=Remedy(cli="Evaluate it with 'evalstore evaluate --nuggets'."),
        )

    family = Family(
        name=name,
        kernel=computed_by_kind,
        params={},
        summary="mean",
        judgments="nuggets",
        kind="answers",
        description=description,
        reference=reference,
        aliases=aliases,
        headline=headline,
    )
    if name in PREDICTION_REGISTRY:
        raise RuntimeError(f"answer measure {name} registered twice")
    PREDICTION_REGISTRY[name] = family
    ANSWER_MEASURES[name] = AnswerMeasure(family, nuggets, sentences)
    for alias in (name, *aliases):
        _ALIASES[alias.lower()] = name


_register(
    "V_strict",
    "vital nuggets fully supported / vital nuggets, per topic (0 for a topic with no vital nugget)",
    _NUGGETIZER,
    aliases=("strict_vital_score", "Vstrict"),
    nuggets=vital_strict,
    headline=1,
)
_register(
    "A_strict",
    "nuggets fully supported / nuggets, per topic",
    _NUGGETIZER,
    aliases=("strict_all_score", "Astrict"),
    nuggets=all_strict,
    headline=2,
)
_register(
    "V",
    "vital nuggets' a(n) summed / vital nuggets (support 1, partial_support 0.5); 0 with no vital nugget",
    _NUGGETIZER,
    aliases=("vital_score",),
    nuggets=vital,
    headline=3,
)
_register(
    "A",
    "every nugget's a(n) summed / nuggets (support 1, partial_support 0.5)",
    _NUGGETIZER,
    aliases=("all_score",),
    nuggets=all_nuggets,
    headline=4,
)
_register(
    "W",
    "(sum over vital a(n) + 0.5 * sum over okay a(n)) / (#vital + 0.5 * #okay)",
    _WEIGHTED,
    aliases=("weighted_score",),
    nuggets=weighted,
    headline=5,
)
_register(
    "W_strict",
    "W with strict assignments (support 1, otherwise 0)",
    _WEIGHTED,
    aliases=("strict_weighted_score",),
    nuggets=weighted_strict,
)
_register(
    "support_precision",
    "sum over cited sentences of the first citation's support (full 1, partial 0.5, none 0) / cited "
    "sentences; sentences with an unjudged first citation left out",
    _SUPPORT,
    sentences=support_precision,
)
_register(
    "support_recall",
    "the same sum / every sentence (an uncited sentence counts 0); unjudged first citations left out",
    _SUPPORT,
    sentences=support_recall,
)


def answer_measure(name: str) -> AnswerMeasure:
    """The measure called ``name`` or one of its aliases (nuggetizer's names), any case."""
    canonical = _ALIASES.get(name.strip().lower())
    if canonical is None:
        raise InvalidParameterError(
            f"Unknown answer measure '{name}'; they are {', '.join(ANSWER_MEASURES)}.",
            remedy=Remedy(cli="'evalstore measures --kind answers' defines them."),
        )
    return ANSWER_MEASURES[canonical]


NUGGET_MEASURES = tuple(name for name, m in ANSWER_MEASURES.items() if m.nuggets is not None)
SUPPORT_MEASURES = tuple(name for name, m in ANSWER_MEASURES.items() if m.sentences is not None)
