"""Evaluation options resolved for a kind of judgments and kept in the application context (a
server resolves a task's options upload after upload)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from sqlalchemy import create_engine

from evalstore.errors import InvalidParameterError
from evalstore.services import jobs
from evalstore.services.context import AppContext
from evalstore.services.jobs import EvaluationOptions


def _qrels(kind: str, name: str = "q") -> Any:
    return SimpleNamespace(kind=kind, name=name)


def test_kept_options_are_what_resolving_gives_and_each_caller_gets_its_own() -> None:
    context = AppContext(create_engine("sqlite://"))
    for options in (EvaluationOptions(), EvaluationOptions(measures=("AP", "nDCG@10"), relevance_level=2)):
        for kind in ("relevance", "subtopics", "preferences"):
            if kind != "relevance" and options.relevance_level != 1:
                continue
            expected = jobs.for_judgments(options, _qrels(kind))
            first = jobs.resolved_for(context, options, _qrels(kind))
            assert first == expected
            first["measures"].append("changed by the caller")
            first["relevance_level"] = 99
            assert jobs.resolved_for(context, options, _qrels(kind)) == expected
    # the default set resolves to each kind's own measures, kept apart
    assert (
        jobs.resolved_for(context, EvaluationOptions(), _qrels("subtopics"))["measures"]
        != (jobs.resolved_for(context, EvaluationOptions(), _qrels("relevance"))["measures"])
    )
    assert len(context.resolved_options) == 4


def test_a_refusal_is_not_kept_and_names_each_callers_qrels() -> None:
    context = AppContext(create_engine("sqlite://"))
    options = EvaluationOptions(measures=("alpha_nDCG@10",))
    for name in ("first", "second"):
        with pytest.raises(InvalidParameterError, match=f"qrels '{name}' hold relevance judgments"):
            jobs.resolved_for(context, options, _qrels("relevance", name))
    assert len(context.resolved_options) == 0
