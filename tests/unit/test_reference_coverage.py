"""Every measure the registry holds has a test that checks its values against a reference: another
tool's output (trec_eval, ndeval, ir_measures' providers, scikit-learn) or a published worked
example. A family registered without one fails here (scikit-learn's "we shouldn't forget any
metrics" check): each reference test module says which families it checks, in REFERENCE_FAMILIES,
derived from the names it actually evaluates wherever it can be."""

from __future__ import annotations

from evalstore.metrics import prediction_registry
from evalstore.metrics.registry import REGISTRY
from tests.answers import test_answer_measures
from tests.differential import (
    test_against_cwl_eval,
    test_against_ir_measures,
    test_against_ndeval,
    test_against_trec_eval,
    test_prefs_against_trec_eval,
)
from tests.unit import test_classification, test_textbook_examples

MODULES = [
    test_against_cwl_eval,
    test_against_trec_eval,
    test_prefs_against_trec_eval,
    test_against_ndeval,
    test_against_ir_measures,
    test_textbook_examples,
    test_classification,
    test_answer_measures,
]


def _covered() -> set[str]:
    return set().union(*(module.REFERENCE_FAMILIES for module in MODULES))


def test_every_ranking_family_has_a_reference_value_test() -> None:
    assert sorted(set(REGISTRY) - _covered()) == []


def test_every_classification_and_clustering_measure_has_a_reference_value_test() -> None:
    assert sorted(set(prediction_registry()) - _covered()) == []


def test_the_modules_name_only_registered_measures() -> None:
    assert sorted(_covered() - set(REGISTRY) - set(prediction_registry())) == []
