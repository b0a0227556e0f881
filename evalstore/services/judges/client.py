"""The one path to an LLM: the OpenAI-compatible chat-completions API (vLLM, Ollama, llama.cpp's
server, OpenAI and Azure all serve it) through httpx.

Structured output where the server supports it: ``json_schema`` (OpenAI, vLLM) or ``json_object``
with a ``schema`` (llama-cpp-python's server, which turns it into a grammar); ``auto`` tries them in
that order and falls back to the prompt's own answer format when a server refuses both (HTTP 400
or 422; llama-cpp-python's server says 500 and names response_format). Rate limits (429),
server errors (5xx), timeouts and dropped connections are retried with exponential back-off
(``Retry-After`` is honoured); what still fails is returned as unrateable
with the reason, never raised, except a refused key or an unknown model, which stop the run.
Every text the endpoint sends back is redacted (:mod:`.redaction`) before it is returned or raised:
an error body that echoes the request's ``Authorization`` header must not store the key.

The back-off is a dozen lines rather than tenacity's: one more dependency for one loop.
"""

from __future__ import annotations

import functools
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx

from evalstore.errors import EvaluationError, Remedy
from evalstore.services.judges.prompts import Parsed, answer_schema, parse_answer
from evalstore.services.judges.redaction import redact

STRUCTURED_MODES = ("auto", "json_schema", "json_object", "none")
RETRIED_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}
FATAL_STATUS = {
    401: "the endpoint refused the key",
    403: "the endpoint refused the key",
    404: "the endpoint or model was not found",
}


@functools.cache
def tls_context() -> ssl.SSLContext:
    """The TLS context every judge's client verifies its endpoint with: httpx's own default (the
    CA bundle of certifi, or ``SSL_CERT_FILE``/``SSL_CERT_DIR``), made once per process. Made
    anew, as each ``httpx.Client()`` makes it, it loads the whole CA bundle: ~24 ms of CPU per
    judge run, probe or nugget bank, more than a local model's answer. An ``SSLContext`` is safe
    to share between clients and threads; only its connections are not."""
    return httpx.create_ssl_context()


@dataclass(frozen=True)
class ChatSettings:
    endpoint: str
    model: str
    api_key: str | None = None
    temperature: float = 0.0
    seed: int | None = None
    max_tokens: int = 200
    timeout: float = 60.0
    structured: str = "auto"
    retries: int = 5  # attempts after the first
    backoff: float = 1.0  # seconds before the first retry; doubled each time, at most ``backoff_cap``
    backoff_cap: float = 60.0


@dataclass(frozen=True)
class Answer:
    relevance: int | None
    explanation: str | None
    raw_output: str | None
    reason: str | None  # why unrateable
    attempts: int
    structured: str  # the mode the answer was asked in
    seconds: float
    input_tokens: int | None = None  # as the endpoint's ``usage`` reports them (None: not reported)
    output_tokens: int | None = None
    sent: bool = True  # False: never asked (e.g. the budget was reached first)


def completions_url(endpoint: str) -> str:
    base = endpoint.rstrip("/")
    return base if base.endswith("/chat/completions") else base + "/chat/completions"


class ChatJudge:
    """Asks one model for grades; safe to share between threads (httpx.Client is)."""

    def __init__(
        self,
        settings: ChatSettings,
        scale: tuple[int, int],
        *,
        client: httpx.Client | None = None,
        sleep: Callable[[float], None] = time.sleep,
        schema: tuple[str, dict[str, Any]] | None = None,
        parse: Callable[[str | None], Parsed] | None = None,
    ) -> None:
        """``schema`` (its name, the JSON schema) and ``parse`` ask for another answer than a grade on
        ``scale`` (a nugget's label, say): ``parse`` turns the answer into a ``relevance`` code."""
        if settings.structured not in STRUCTURED_MODES:
            raise ValueError(f"structured output is one of {', '.join(STRUCTURED_MODES)}")
        self.settings = settings
        self.scale = scale
        self._client = client or httpx.Client(timeout=settings.timeout, verify=tls_context())
        self._sleep = sleep
        self._schema = schema or ("relevance_judgment", answer_schema(scale))
        self._parse = parse or (lambda text: parse_answer(text, scale))
        self._lock = threading.Lock()
        self._modes = ["json_schema", "json_object", "none"] if settings.structured == "auto" else [settings.structured]

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> ChatJudge:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def _body(self, prompt: str, mode: str) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.settings.model,
            "messages": [{"role": "user", "content": prompt}],
            "temperature": self.settings.temperature,
            "max_tokens": self.settings.max_tokens,
        }
        if self.settings.seed is not None:
            body["seed"] = self.settings.seed
        name, schema = self._schema
        if mode == "json_schema":
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": name, "strict": True, "schema": schema},
            }
        elif mode == "json_object":
            body["response_format"] = {"type": "json_object", "schema": schema}
        return body

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.settings.api_key}"} if self.settings.api_key else {}

    def _wait(self, attempt: int, response: httpx.Response | None) -> float:
        if response is not None:
            after = response.headers.get("retry-after")
            if after is not None:
                try:
                    return min(max(float(after), 0.0), self.settings.backoff_cap)
                except ValueError:
                    pass
        return float(min(self.settings.backoff * 2**attempt, self.settings.backoff_cap))

    def judge(self, prompt: str) -> Answer:
        started = time.perf_counter()
        attempts = 0
        retried = 0
        reason = "no attempt"
        while True:
            with self._lock:
                mode = self._modes[0]
            attempts += 1
            response: httpx.Response | None = None
            try:
                response = self._client.post(
                    completions_url(self.settings.endpoint), json=self._body(prompt, mode), headers=self._headers()
                )
            except httpx.TimeoutException:
                reason = f"timed out after {self.settings.timeout:g} s"
            except httpx.ConnectError as error:
                reason = f"connection failed: {type(error).__name__}: {self._redact(str(error))}"
                if retried >= self.settings.retries:
                    # nothing listens there (or the name does not resolve): every other item would
                    # wait through the same retries, so the run stops here, its labels so far kept
                    raise EvaluationError(
                        f"Could not connect to {completions_url(self.settings.endpoint)} after {attempts} attempts "
                        f"({reason}).",
                        remedy=Remedy(
                            cli="Is its server running? Check --endpoint.",
                            web="Is its server running? Check the judge's endpoint.",
                        ),
                    ) from None
            except httpx.TransportError as error:
                reason = f"connection failed: {type(error).__name__}: {self._redact(str(error))}"
            if response is not None:
                status = response.status_code
                if status in FATAL_STATUS:
                    raise EvaluationError(
                        f"{completions_url(self.settings.endpoint)} answered {status}: "
                        f"{FATAL_STATUS[status]} ({self._excerpt(response)}).",
                        remedy=Remedy(
                            cli="Check --endpoint, --model and --api-key-env.",
                            web="Check the judge's endpoint, model and key variable.",
                        ),
                    )
                if _refused_format(response) and mode != "none" and self.settings.structured == "auto":
                    with self._lock:  # this server does not take this kind of structured output
                        if self._modes[0] == mode and len(self._modes) > 1:
                            self._modes.pop(0)
                    continue
                if status < 400:
                    return self._answer(response, attempts, mode, started)
                reason = f"HTTP {status}: {self._excerpt(response)}"
                if status not in RETRIED_STATUS:
                    return Answer(
                        None,
                        None,
                        self._redact(response.text)[:2000],
                        reason,
                        attempts,
                        mode,
                        time.perf_counter() - started,
                    )
            if retried >= self.settings.retries:
                return Answer(
                    None,
                    None,
                    None,
                    f"{reason} (after {attempts} attempts)",
                    attempts,
                    mode,
                    time.perf_counter() - started,
                )
            self._sleep(self._wait(retried, response))
            retried += 1

    def _redact(self, text: str) -> str:
        return redact(text, [self.settings.api_key]) or ""

    def _excerpt(self, response: httpx.Response) -> str:
        # redacted before it is cut: a cut through the key would leave its start unrecognised
        return " ".join(self._redact(response.text).split())[:200] or response.reason_phrase

    def _answer(self, response: httpx.Response, attempts: int, mode: str, started: float) -> Answer:
        seconds = time.perf_counter() - started
        try:
            content = response.json()["choices"][0]["message"]["content"]
        except (ValueError, KeyError, IndexError, TypeError):
            return Answer(
                None,
                None,
                self._redact(response.text)[:2000],
                "the answer is not a chat completion",
                attempts,
                mode,
                seconds,
            )
        if content is not None and not isinstance(content, str):
            content = str(content)
        content = redact(content, [self.settings.api_key])
        parsed = self._parse(content)
        used_in, used_out = _usage(response)
        return Answer(
            parsed.relevance, parsed.explanation, content, parsed.reason, attempts, mode, seconds, used_in, used_out
        )


def _refused_format(response: httpx.Response) -> bool:
    """The server does not take this response_format: 400 or 422, or a 500 that says so
    (llama-cpp-python's server answers a request it cannot validate with 500)."""
    return response.status_code in (400, 422) or (response.status_code == 500 and "response_format" in response.text)


def _usage(response: httpx.Response) -> tuple[int | None, int | None]:
    """The tokens a chat completion reports (``usage.prompt_tokens``, ``usage.completion_tokens``)."""
    try:
        usage = response.json().get("usage") or {}
    except ValueError:
        return None, None
    found = [usage.get(key) for key in ("prompt_tokens", "completion_tokens")]
    return (
        found[0] if isinstance(found[0], int) and found[0] >= 0 else None,
        found[1] if isinstance(found[1], int) and found[1] >= 0 else None,
    )
