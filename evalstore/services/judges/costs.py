"""A judge's cost ledger: every label (and every call of an answer assessor: nuggets assign,
support assess, nuggets create) keeps the tokens its calls used (as the endpoint's ``usage``
reports them), its attempts and seconds; a judge's prices (``price_in``, ``price_out``: US dollars
per million input and output tokens, declared with the judge) turn tokens into money. Here: the
sums `judges show` gives, the estimate `judges run --dry-run` gives before anything is sent, and the
budget `judges run --max-cost` holds a run to."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import TypedDict

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from evalstore.db.models import Judge, JudgeAnswerCall, JudgeLabel, JudgePreference, JudgeRepeat, Pool

# a prompt's tokens before it is sent, when the judge has no call of its own to learn from: about 4
# characters a token in English text (OpenAI's rule of thumb); an estimate, said to be one
CHARACTERS_PER_TOKEN = 4
LISTED = 100  # unrateable labels listed by name in a judge's ledger (all are counted)


def prices(judge: Judge) -> tuple[float, float] | None:
    """(input, output) US dollars per million tokens, or None when the judge declares none."""
    low, high = judge.params.get("price_in"), judge.params.get("price_out")
    if low is None or high is None:
        return None
    return float(low), float(high)


def money(judge: Judge, input_tokens: int, output_tokens: int) -> float | None:
    declared = prices(judge)
    if declared is None:
        return None
    return (input_tokens * declared[0] + output_tokens * declared[1]) / 1e6


class UnrateableLabel(TypedDict):
    pool: str
    topic: str
    doc: str
    reason: str | None


class AnswerCalls(TypedDict):
    """A judge's answer-assessing calls of one purpose, summed."""

    calls: int
    labelled: int
    attempts: int
    input_tokens: int
    output_tokens: int
    seconds: float
    cost_usd: float | None


class CostLedger(TypedDict):
    """A judge's cost ledger as `judges show` and its console page give it (a TypedDict: it goes
    to JSON as built). ``repeats`` and ``preferences`` are counted in the sums after them too, as
    are the ``answer_calls`` (per purpose: nuggets assign, support assess, nuggets create);
    ``labels_without_tokens``: labels whose endpoint reported no usage; ``cost_usd`` None: the
    judge declares no prices."""

    labels: int
    repeats: int
    preferences: int
    attempts: int
    input_tokens: int
    output_tokens: int
    labels_without_tokens: int
    seconds: float
    cost_usd: float | None
    unrateable: int
    unrateable_listed: list[UnrateableLabel]
    answer_calls: dict[str, AnswerCalls]


def ledger(session: Session, judge: Judge) -> CostLedger:
    """The judge's calls under its configuration, summed (labels, their repeats and its pairwise
    preferences): attempts,
    tokens, seconds and money, and the unrateable labels (counted, the first ``LISTED`` listed with their reason)."""
    current = (JudgeLabel.judge_id == judge.id, JudgeLabel.config_hash == judge.config_hash)
    labels, attempts, tokens_in, tokens_out, seconds, reported = session.execute(
        select(
            func.count(JudgeLabel.id),
            func.coalesce(func.sum(JudgeLabel.attempts), 0),
            func.coalesce(func.sum(JudgeLabel.input_tokens), 0),
            func.coalesce(func.sum(JudgeLabel.output_tokens), 0),
            func.coalesce(func.sum(JudgeLabel.seconds), 0.0),
            func.count(JudgeLabel.input_tokens),
        ).where(*current)
    ).one()
    repeat_rows = session.execute(
        select(
            func.count(JudgeRepeat.id),
            func.coalesce(func.sum(JudgeRepeat.attempts), 0),
            func.coalesce(func.sum(JudgeRepeat.input_tokens), 0),
            func.coalesce(func.sum(JudgeRepeat.output_tokens), 0),
            func.coalesce(func.sum(JudgeRepeat.seconds), 0.0),
        ).where(JudgeRepeat.judge_id == judge.id, JudgeRepeat.config_hash == judge.config_hash)
    ).one()
    preference_rows = session.execute(
        select(
            func.count(JudgePreference.id),
            func.coalesce(func.sum(JudgePreference.attempts), 0),
            func.coalesce(func.sum(JudgePreference.input_tokens), 0),
            func.coalesce(func.sum(JudgePreference.output_tokens), 0),
            func.coalesce(func.sum(JudgePreference.seconds), 0.0),
        ).where(JudgePreference.judge_id == judge.id, JudgePreference.config_hash == judge.config_hash)
    ).one()
    repeats = int(repeat_rows[0])
    answer_calls = _answer_calls(session, judge)
    calls = answer_calls.values()
    attempts = int(attempts or 0) + int(repeat_rows[1] or 0) + int(preference_rows[1] or 0)
    attempts += sum(c["attempts"] for c in calls)
    tokens_in = int(tokens_in or 0) + int(repeat_rows[2] or 0) + int(preference_rows[2] or 0)
    tokens_in += sum(c["input_tokens"] for c in calls)
    tokens_out = int(tokens_out or 0) + int(repeat_rows[3] or 0) + int(preference_rows[3] or 0)
    tokens_out += sum(c["output_tokens"] for c in calls)
    seconds = float(seconds or 0.0) + float(repeat_rows[4] or 0.0) + float(preference_rows[4] or 0.0)
    seconds += sum(c["seconds"] for c in calls)
    unrateable = session.execute(
        select(Pool.name, JudgeLabel.topic, JudgeLabel.doc, JudgeLabel.reason)
        .join(Pool, Pool.id == JudgeLabel.pool_id)
        .where(*current, JudgeLabel.relevance.is_(None))
        .order_by(Pool.name, JudgeLabel.topic, JudgeLabel.doc)
    ).all()
    return CostLedger(
        labels=int(labels),
        repeats=repeats,
        preferences=int(preference_rows[0]),
        attempts=attempts,
        input_tokens=tokens_in,
        output_tokens=tokens_out,
        labels_without_tokens=int(labels) - int(reported),
        seconds=seconds,
        cost_usd=money(judge, tokens_in, tokens_out),
        unrateable=len(unrateable),
        unrateable_listed=[
            UnrateableLabel(pool=pool, topic=topic, doc=doc, reason=reason)
            for pool, topic, doc, reason in unrateable[:LISTED]
        ],
        answer_calls=answer_calls,
    )


def _answer_calls(session: Session, judge: Judge) -> dict[str, AnswerCalls]:
    """The judge's answer-assessing calls under its configuration, summed per purpose."""
    rows = session.execute(
        select(
            JudgeAnswerCall.purpose,
            func.count(JudgeAnswerCall.id),
            func.count(JudgeAnswerCall.id).filter(JudgeAnswerCall.labelled.is_(True)),
            func.coalesce(func.sum(JudgeAnswerCall.attempts), 0),
            func.coalesce(func.sum(JudgeAnswerCall.input_tokens), 0),
            func.coalesce(func.sum(JudgeAnswerCall.output_tokens), 0),
            func.coalesce(func.sum(JudgeAnswerCall.seconds), 0.0),
        )
        .where(JudgeAnswerCall.judge_id == judge.id, JudgeAnswerCall.config_hash == judge.config_hash)
        .group_by(JudgeAnswerCall.purpose)
        .order_by(JudgeAnswerCall.purpose)
    ).all()
    return {
        purpose: AnswerCalls(
            calls=int(calls),
            labelled=int(labelled),
            attempts=int(attempts or 0),
            input_tokens=int(tokens_in or 0),
            output_tokens=int(tokens_out or 0),
            seconds=float(seconds or 0.0),
            cost_usd=money(judge, int(tokens_in or 0), int(tokens_out or 0)),
        )
        for purpose, calls, labelled, attempts, tokens_in, tokens_out, seconds in rows
    }


def per_answer_call(session: Session, judge: Judge, purpose: str) -> tuple[float, float, float] | None:
    """:func:`per_call` for the judge's answer-assessing calls of ``purpose`` (None: none yet)."""
    row = session.execute(
        select(
            func.avg(JudgeAnswerCall.input_tokens),
            func.avg(JudgeAnswerCall.output_tokens),
            func.avg(JudgeAnswerCall.seconds),
        ).where(
            JudgeAnswerCall.judge_id == judge.id,
            JudgeAnswerCall.config_hash == judge.config_hash,
            JudgeAnswerCall.purpose == purpose,
            JudgeAnswerCall.input_tokens.is_not(None),
        )
    ).one()
    if row[0] is None:
        return None
    return float(row[0]), float(row[1] or 0.0), float(row[2] or 0.0)


def per_call(session: Session, judge: Judge) -> tuple[float, float, float] | None:
    """The judge's mean input tokens, output tokens and seconds per label so far (its current
    configuration, labels with tokens reported), or None when it has none."""
    row = session.execute(
        select(
            func.avg(JudgeLabel.input_tokens), func.avg(JudgeLabel.output_tokens), func.avg(JudgeLabel.seconds)
        ).where(
            JudgeLabel.judge_id == judge.id,
            JudgeLabel.config_hash == judge.config_hash,
            JudgeLabel.input_tokens.is_not(None),
        )
    ).one()
    if row[0] is None:
        return None
    return float(row[0]), float(row[1] or 0.0), float(row[2] or 0.0)


@dataclass(frozen=True)
class Estimate:
    """What a run would cost before anything is sent."""

    items: int
    input_tokens: int
    output_tokens: int  # an upper bound (the judge's answer length) unless its past calls say
    cost_usd: float | None  # None: the judge declares no prices
    seconds: float | None  # None: no past call to time
    basis: str  # what the figures come from


def estimate(judge: Judge, prompts: list[str], past: tuple[float, float, float] | None) -> Estimate:
    """Input tokens from the prompts' length (4 characters a token) or the judge's past calls'
    mean, whichever is larger; output tokens the judge's answer length (``max_tokens``), or its
    past calls' mean; seconds its past calls' mean, spread over its concurrency."""
    by_length = sum(len(p) // CHARACTERS_PER_TOKEN + 1 for p in prompts)
    if past is None:
        tokens_in, tokens_out = by_length, len(prompts) * int(judge.params["max_tokens"])
        seconds = None
        basis = f"prompt length ({CHARACTERS_PER_TOKEN} characters a token); answers at their longest"
    else:
        tokens_in = max(by_length, round(past[0] * len(prompts)))
        tokens_out = round(past[1] * len(prompts))
        seconds = past[2] * len(prompts) / int(judge.params["max_concurrency"])
        basis = "this judge's past calls (mean tokens and seconds a label)"
    return Estimate(len(prompts), tokens_in, tokens_out, money(judge, tokens_in, tokens_out), seconds, basis)


class Budget:
    """A run's spending held under ``limit`` US dollars across its threads: a call is sent only
    when what is spent, plus what the calls in flight may cost, plus its own worst case (its
    prompt's tokens by length, its answer at its longest) stays within the limit."""

    def __init__(self, judge: Judge, limit: float) -> None:
        declared = prices(judge)
        assert declared is not None  # checked by the caller, which says what to do
        self._prices = declared
        self._limit = limit
        self._max_tokens = int(judge.params["max_tokens"])
        self._spent = 0.0
        self._reserved = 0.0
        self._lock = threading.Lock()

    def _worst(self, prompt: str) -> float:
        tokens_in = len(prompt) // CHARACTERS_PER_TOKEN + 1
        return (tokens_in * self._prices[0] + self._max_tokens * self._prices[1]) / 1e6

    def reserve(self, prompt: str) -> float | None:
        """The amount reserved for this call, or None when it would pass the limit (not sent)."""
        worst = self._worst(prompt)
        with self._lock:
            if self._spent + self._reserved + worst > self._limit:
                return None
            self._reserved += worst
            return worst

    def settle(self, reserved: float, input_tokens: int | None, output_tokens: int | None, prompt: str) -> None:
        """Replace the reservation by what the call used (its worst case when unreported)."""
        if input_tokens is None or output_tokens is None:
            used = self._worst(prompt)
        else:
            used = (input_tokens * self._prices[0] + output_tokens * self._prices[1]) / 1e6
        with self._lock:
            self._reserved -= reserved
            self._spent += used

    @property
    def limit(self) -> float:
        return self._limit

    @property
    def spent(self) -> float:
        with self._lock:
            return self._spent
