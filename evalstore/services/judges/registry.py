"""Judges: define, list and show LLM assessors. A judge's configuration (endpoint, model, prompt
template and its hash, scale, temperature, seed, structured output, answer length) is hashed; its
labels are stored under that hash, so re-running the same configuration reuses them and a changed
one judges afresh, the old labels kept with their provenance."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine, func, select
from sqlalchemy.orm import Session

from evalstore.db.models import Judge, JudgeLabel, JudgeProbe, Pool
from evalstore.db.session import read_only, unit_of_work
from evalstore.errors import ConflictError, InvalidParameterError, NotFoundError, Remedy
from evalstore.services.judges import consistency, costs
from evalstore.services.judges.client import STRUCTURED_MODES
from evalstore.services.judges.prompts import load_template, template_hash
from evalstore.services.judges.redaction import url_credentials

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# what decides a label; max_concurrency and timeout do not
CONFIG_KEYS = ("scale", "temperature", "seed", "max_tokens", "structured")


@dataclass(frozen=True)
class PoolLabels:
    """A judge's labels of one pool under its configuration; ``unrateable``: those it gave no grade."""

    labels: int
    unrateable: int


@dataclass(frozen=True)
class JudgeView:
    """A judge as `judges show` and its console page give it: its configuration (``params`` as
    stored: scale, temperature, seed, ...; sent among the other fields), its labels per pool, its
    probes, its cost ledger, and the agreement of its answers across repeats (None: no document
    was asked twice). Never its key: only the name of the variable it is read from."""

    name: str
    endpoint: str
    model: str
    api_key_env: str | None
    prompt: str
    prompt_hash: str
    params: dict[str, Any]
    config_hash: str
    created_at: str
    labels: dict[str, PoolLabels]
    probes: list[dict[str, Any]]  # each stored probe's result, with its collection, qrels and time
    costs: costs.CostLedger
    self_consistency: consistency.SelfConsistency | None

    @property
    def scale(self) -> tuple[int, int]:
        low, high = self.params["scale"]
        return int(low), int(high)

    @property
    def temperature(self) -> float:
        return float(self.params["temperature"])

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "endpoint": self.endpoint,
            "model": self.model,
            "api_key_env": self.api_key_env,
            "prompt": self.prompt,
            "prompt_hash": self.prompt_hash,
            **self.params,
            "config_hash": self.config_hash,
            "created_at": self.created_at,
            "labels": {pool: {"labels": n.labels, "unrateable": n.unrateable} for pool, n in self.labels.items()},
            "probes": self.probes,
            "costs": self.costs,
            "self_consistency": self.self_consistency,
        }


def parse_scale(text: str) -> tuple[int, int]:
    found = re.fullmatch(r"\s*(\d)\s*-\s*(\d)\s*", text)
    if not found or int(found.group(1)) >= int(found.group(2)):
        raise InvalidParameterError(
            f"A judge's grades are LOW-HIGH, 0-9 with LOW below HIGH (e.g. 0-3); not '{text}'.",
            remedy=Remedy(cli="Set them with --scale.", web="Set the grades as LOW-HIGH."),
        )
    return int(found.group(1)), int(found.group(2))


def config_hash(endpoint: str, model: str, prompt_hash: str, params: dict[str, Any]) -> str:
    decided = {
        "endpoint": endpoint.rstrip("/"),
        "model": model,
        "prompt_hash": prompt_hash,
        **{key: params.get(key) for key in CONFIG_KEYS},
    }
    return hashlib.sha256(json.dumps(decided, sort_keys=True).encode()).hexdigest()


def add_judge(
    engine: Engine,
    name: str,
    *,
    endpoint: str,
    model: str,
    api_key_env: str | None = None,
    prompt: str = "umbrela",
    scale: str = "0-3",
    temperature: float = 0.0,
    seed: int | None = None,
    max_concurrency: int = 4,
    structured: str = "auto",
    max_tokens: int = 200,
    timeout: float = 60.0,
    price_in: float | None = None,
    price_out: float | None = None,
    replace: bool = False,
    owner_id: int | None = None,
) -> JudgeView:
    """Define a judge (``replace``: change an existing one's configuration; its labels stay, under
    the old configuration's hash). The key is read from ``api_key_env`` when the judge runs.
    ``price_in``/``price_out``: US dollars per million input and output tokens, for its cost
    ledger (both or neither; they do not decide a label, so they are not in its configuration)."""
    if not re.match(r"https?://", endpoint):
        raise InvalidParameterError(
            f"A judge's endpoint is the http(s) URL of an OpenAI-compatible API, e.g. http://127.0.0.1:8000/v1; "
            f"not '{endpoint}'.",
            remedy=Remedy(cli="Set it with --endpoint.", web="Give the endpoint's URL."),
        )
    credentials = url_credentials(endpoint)
    if credentials:
        raise InvalidParameterError(
            f"The endpoint's URL carries {' and '.join(credentials)}; a judge's endpoint is stored and "
            "shown, its key never is: give the URL without it, and the key by the name of the "
            "environment variable that holds it."
        )
    if api_key_env is not None and not _ENV_NAME.fullmatch(api_key_env):
        raise InvalidParameterError(
            f"A judge's key is read from an environment variable (the key itself is never stored); "
            f"'{api_key_env}' is not a variable's name.",
            remedy=Remedy(
                cli="Name the variable with --api-key-env.", web="Give the variable's name as Key's variable."
            ),
        )
    if structured not in STRUCTURED_MODES:
        raise InvalidParameterError(
            f"A judge's structured output is one of {', '.join(STRUCTURED_MODES)}; not '{structured}'.",
            remedy=Remedy(cli="Choose one with --structured."),
        )
    if not 0 <= temperature <= 2:
        raise InvalidParameterError(
            f"A judge's temperature is 0 to 2; not {temperature:g}.",
            remedy=Remedy(cli="Set it with --temperature.", web="Set the temperature from 0 to 2."),
        )
    if max_concurrency < 1 or max_tokens < 1 or timeout <= 0:
        raise InvalidParameterError(
            "A judge's requests at once, tokens per answer and timeout are above 0; "
            f"not {max_concurrency}, {max_tokens} and {timeout:g}.",
            remedy=Remedy(cli="Set them with --max-concurrency, --max-tokens and --timeout."),
        )
    if (price_in is None) != (price_out is None):
        raise InvalidParameterError("A judge's prices are two: per million input tokens and per million output tokens.")
    for price in (price_in, price_out):
        if price is not None and not 0 <= price < 1e6:
            raise InvalidParameterError(
                f"A price per million tokens is 0 or more dollars (below a million); not {price:g}."
            )
    low, high = parse_scale(scale)
    prompt_name, template = load_template(prompt)
    prompt_hash = template_hash(template)
    params = {
        "scale": [low, high],
        "temperature": temperature,
        "seed": seed,
        "max_tokens": max_tokens,
        "structured": structured,
        "max_concurrency": max_concurrency,
        "timeout": timeout,
        "price_in": price_in,
        "price_out": price_out,
    }
    with unit_of_work(engine) as session:
        judge = session.scalar(select(Judge).where(Judge.name == name))
        if judge is not None and not replace:
            raise ConflictError(
                f"A judge named '{name}' exists already.",
                remedy=Remedy(
                    cli="Pass --replace to change its configuration (its labels are kept), or choose another name.",
                    web="Choose another name.",
                ),
            )
        if judge is None:
            judge = Judge(name=name, owner_id=owner_id)
            session.add(judge)
        judge.endpoint, judge.model, judge.api_key_env = endpoint, model, api_key_env
        judge.prompt_name, judge.prompt_template, judge.prompt_hash = prompt_name, template, prompt_hash
        judge.params = params
        judge.config_hash = config_hash(endpoint, model, prompt_hash, params)
        session.flush()
        return _view(session, judge)


def get_judge(session: Session, name: str) -> Judge:
    judge = session.scalar(select(Judge).where(Judge.name == name))
    if judge is None:
        raise NotFoundError(
            f"No judge named '{name}'.",
            remedy=Remedy(cli=f"Define one with 'evalstore judges add {name} --endpoint URL --model MODEL'."),
        )
    return judge


def _view(session: Session, judge: Judge) -> JudgeView:
    counts = session.execute(
        select(Pool.name, func.count(JudgeLabel.id), func.count(JudgeLabel.relevance))
        .join(Pool, Pool.id == JudgeLabel.pool_id)
        .where(JudgeLabel.judge_id == judge.id, JudgeLabel.config_hash == judge.config_hash)
        .group_by(Pool.name)
        .order_by(Pool.name)
    ).all()
    probes = session.execute(
        select(JudgeProbe.collection, JudgeProbe.qrels, JudgeProbe.result, JudgeProbe.created_at)
        .where(JudgeProbe.judge_id == judge.id, JudgeProbe.config_hash == judge.config_hash)
        .order_by(JudgeProbe.id)
    ).all()
    return JudgeView(
        name=judge.name,
        endpoint=judge.endpoint,
        model=judge.model,
        api_key_env=judge.api_key_env,
        prompt=judge.prompt_name,
        prompt_hash=judge.prompt_hash,
        params=dict(judge.params),
        config_hash=judge.config_hash,
        created_at=judge.created_at.isoformat(),
        labels={pool: PoolLabels(total, total - rated) for pool, total, rated in counts},
        probes=[{"collection": c, "qrels": q, **r, "at": at.isoformat()} for c, q, r, at in probes],
        costs=costs.ledger(session, judge),
        self_consistency=consistency.self_consistency(session, judge),
    )


def list_judges(engine: Engine) -> list[JudgeView]:
    with read_only(engine) as session:
        return [_view(session, judge) for judge in session.scalars(select(Judge).order_by(Judge.name))]


def show_judge(engine: Engine, name: str) -> JudgeView:
    with read_only(engine) as session:
        return _view(session, get_judge(session, name))


def provenance(judge: Judge, structured: str) -> dict[str, Any]:
    """What a label records of who made it: the judge's configuration as it was, and the
    structured-output mode its answer was asked in."""
    return {
        "judge": judge.name,
        "endpoint": judge.endpoint,
        "model": judge.model,
        "prompt": judge.prompt_name,
        "prompt_hash": judge.prompt_hash,
        **{key: judge.params.get(key) for key in CONFIG_KEYS},
        "answered_in": structured,
    }
