"""The one judging loop every judge runs: items asked through the endpoint by up to the judge's
``max_concurrency`` calls at once, each call held to a budget when one is given, the calls'
tokens, seconds and failures counted, and the answers handed on in small batches to be stored
as they arrive (a crash loses at most one batch). Relevance judging (``judges run``), nugget
assignment (``nuggets assign``), citation support (``support assess``) and nugget drafting
(``nuggets create``) differ only in their items, their prompt's schema and parser, and how they
store a label; the answer assessors' calls also go to the cost ledger (:func:`record_calls`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import httpx
from sqlalchemy.orm import Session

from evalstore import config
from evalstore.db.models import Judge, JudgeAnswerCall
from evalstore.errors import InvalidParameterError, Remedy
from evalstore.services import jobs
from evalstore.services.judges import costs
from evalstore.services.judges.client import Answer, ChatJudge, ChatSettings
from evalstore.services.judges.prompts import Parsed
from evalstore.services.judges.registry import provenance

Item = TypeVar("Item")


def api_key(judge: Judge) -> str | None:
    if judge.api_key_env is None:
        return None
    key = config.secret(judge.api_key_env)
    if not key:
        raise InvalidParameterError(
            f"Judge '{judge.name}' reads its API key from ${judge.api_key_env}, which is not "
            "set; export it and run again."
        )
    return key


def chat_judge(
    judge: Judge,
    *,
    client: httpx.Client | None = None,
    sleep: Callable[[float], None] | None = None,
    schema: tuple[str, dict[str, Any]] | None = None,
    parse: Callable[[str | None], Parsed] | None = None,
) -> ChatJudge:
    params = judge.params
    settings = ChatSettings(
        judge.endpoint,
        judge.model,
        api_key(judge),
        float(params["temperature"]),
        params.get("seed"),
        int(params["max_tokens"]),
        float(params["timeout"]),
        str(params["structured"]),
    )
    low, high = params["scale"]
    return ChatJudge(
        settings,
        (int(low), int(high)),
        client=client,
        schema=schema,
        parse=parse,
        **({"sleep": sleep} if sleep else {}),
    )


def check_budget(judge: Judge, max_cost: float | None) -> costs.Budget | None:
    """The budget a run is held to (None: none), refused when the judge's prices cannot keep it."""
    if max_cost is None:
        return None
    if max_cost <= 0:
        raise InvalidParameterError(f"The budget must be above 0 dollars; not {max_cost:g}.")
    if costs.prices(judge) is None:
        raise InvalidParameterError(
            f"Judge '{judge.name}' declares no prices, so a budget cannot be kept.",
            remedy=Remedy(
                cli="Declare its prices per million input and output tokens "
                f"('evalstore judges add {judge.name} ... --price-in X --price-out Y --replace'), or run it without "
                "--max-cost.",
                web="Run it without a budget, or add a judge with its prices per million input and output tokens.",
            ),
        )
    return costs.Budget(judge, max_cost)


class Asker:
    """One judge's calls, each within ``budget`` when one is given: a call the budget cannot hold
    is not sent (its answer says so, ``sent`` False)."""

    def __init__(
        self,
        judge: Judge,
        chat: ChatJudge,
        budget: costs.Budget | None = None,
    ) -> None:
        self.judge, self.chat, self.budget = judge, chat, budget

    def once(self, prompt: str) -> Answer:
        reserved = self.budget.reserve(prompt) if self.budget is not None else 0.0
        if reserved is None:
            assert self.budget is not None
            return Answer(
                None,
                None,
                None,
                f"skipped: the budget of {self.budget.limit:g} USD was reached",
                0,
                "none",
                0.0,
                sent=False,
            )
        answer = self.chat.judge(prompt)
        if self.budget is not None:
            self.budget.settle(reserved, answer.input_tokens, answer.output_tokens, prompt)
        return answer

    def close(self) -> None:
        self.chat.close()


@dataclass(frozen=True)
class Asked(Generic[Item]):
    """An item's answer (its label, or why none) and its repeats (asked again, ``judges run --repeats``)."""

    item: Item
    answer: Answer
    again: tuple[Answer, ...] = ()


@dataclass
class Tally(Generic[Item]):
    """What a run's calls did: items answered, labelled, failed (no label: why), skipped (never
    sent: why), and the tokens and seconds of every call (repeats too)."""

    asked: int = 0
    labelled: int = 0
    failed: list[tuple[Item, str]] = field(default_factory=list)
    skipped: list[tuple[Item, str]] = field(default_factory=list)
    reasons: dict[str, int] = field(default_factory=dict)  # failures per reason (its first words)
    input_tokens: int = 0
    output_tokens: int = 0
    seconds: float = 0.0

    def cost(self, judge: Judge) -> float | None:
        return costs.money(judge, self.input_tokens, self.output_tokens)


def ask_all(
    judge: Judge,
    items: Sequence[Item],
    ask: Callable[[Item], Asked[Item]],
    store: Callable[[list[Asked[Item]]], None],
    *,
    write_every: int,
    progress: Callable[[int, int], None] | None = None,
) -> Tally[Item]:
    """Ask every item (``ask``, on the judge's ``max_concurrency`` threads), counting as the answers
    come, and hand the answered ones to ``store`` (a use case of its own: it opens its unit of
    work) ``write_every`` at a time and at the end, also when a call raised. An answer never sent
    is counted in ``skipped`` and not stored; ``failed`` and ``skipped`` keep the items' order."""
    tally: Tally[Item] = Tally()
    pending: list[Asked[Item]] = []
    failed: list[tuple[int, Item, str]] = []
    skipped: list[tuple[int, Item, str]] = []
    try:
        with ThreadPoolExecutor(max_workers=int(judge.params["max_concurrency"])) as executor:
            futures = {executor.submit(ask, item): n for n, item in enumerate(items)}
            try:
                for future in as_completed(futures):
                    asked, n = future.result(), futures[future]
                    answer = asked.answer
                    if not answer.sent:  # never asked: no label, nothing stored; counted and listed
                        skipped.append((n, asked.item, answer.reason or ""))
                    else:
                        tally.asked += 1
                        for call in (answer, *asked.again):
                            tally.input_tokens += call.input_tokens or 0
                            tally.output_tokens += call.output_tokens or 0
                            tally.seconds += call.seconds
                        if answer.relevance is None:
                            reason = answer.reason or "unknown"
                            failed.append((n, asked.item, reason))
                            key = reason.split(":")[0]
                            tally.reasons[key] = tally.reasons.get(key, 0) + 1
                        else:
                            tally.labelled += 1
                        pending.append(asked)
                    if len(pending) >= write_every:
                        store(pending)
                        pending = []
                    if progress is not None:
                        progress(tally.asked + len(skipped), len(items))
            except BaseException:
                for future in futures:
                    future.cancel()
                raise
    finally:
        if pending:
            store(pending)
    tally.failed = [(item, reason) for _, item, reason in sorted(failed, key=lambda row: row[0])]
    tally.skipped = [(item, reason) for _, item, reason in sorted(skipped, key=lambda row: row[0])]
    return tally


def record_calls(session: Session, judge: Judge, purpose: str, asked: list[tuple[str, Answer]]) -> list[int]:
    """A step: the calls of an answer assessor (``purpose``), each ``(item, answer)``, into the cost
    ledger; their rows' ids, in order (a label names its call in its provenance)."""
    now = jobs.db_now(session)
    rows = [
        JudgeAnswerCall(
            judge_id=judge.id,
            config_hash=judge.config_hash,
            purpose=purpose,
            item=item,
            labelled=answer.relevance is not None,
            reason=answer.reason,
            attempts=answer.attempts,
            seconds=answer.seconds,
            input_tokens=answer.input_tokens,
            output_tokens=answer.output_tokens,
            created_at=now,
        )
        for item, answer in asked
    ]
    session.add_all(rows)
    session.flush()
    return [row.id for row in rows]


def label_source(judge: Judge, answer: Answer, prompt: str, prompt_hash: str, call: int) -> str:
    """A judge's answer label's provenance (JSON), as a relevance label's: the judge's configuration,
    the structured-output mode, the prompt and its hash, the attempts, and the ledger row of its
    call."""
    made = provenance(judge, answer.structured) | {"prompt": prompt, "prompt_hash": prompt_hash}
    return json.dumps(made | {"attempts": answer.attempts, "call": call}, sort_keys=True)


def asker_for(
    judge: Judge,
    *,
    schema: tuple[str, dict[str, Any]] | None,
    parse: Callable[[str | None], Parsed] | None,
    max_cost: float | None,
    client: httpx.Client | None,
    sleep: Callable[[float], None] | None,
) -> Asker:
    """The judge's asker for a prompt ``schema`` and ``parse``r, held to ``max_cost``."""
    budget = check_budget(judge, max_cost)
    return Asker(judge, chat_judge(judge, client=client, sleep=sleep, schema=schema, parse=parse), budget)
