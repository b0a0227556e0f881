"""Circularity (Clarke & Dietz 2024): a run that declares, in its metadata, the model that made the
labels it is evaluated on is favoured by them. A run declares its models as ``models`` in its
metadata (``runs register --meta models=gpt-4o,monot5``: names separated by commas) or under a
``model``/``models`` key of its ir_metadata block; qrels made by a judge know its model (their
version's sources). The rules live in :mod:`evalstore.services.tasks.judge_made`, which a task's
leaderboard reads too."""

from __future__ import annotations

from evalstore.services.tasks.judge_made import circular_runs, declared_models, judge_models

__all__ = ["circular_runs", "declared_models", "judge_models"]
