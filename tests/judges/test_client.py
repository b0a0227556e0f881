"""The one HTTP path to an LLM, against the fake endpoint: structured output and its fallback,
retries of 429s, server errors and timeouts with back-off, unparseable answers kept as unrateable."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import httpx
import pytest

from evalstore.errors import EvaluationError, Remedy
from evalstore.services.judges.client import ChatJudge, ChatSettings, completions_url
from evalstore.services.judges.prompts import UMBRELA, answer_schema, parse_answer, render
from tests.judges.fake_llm import Script

PROMPT = render(UMBRELA, query="supersonic wing flutter", passage="flutter of a supersonic wing", scale=(0, 3))


@pytest.fixture
def judge() -> Iterator[Callable[..., ChatJudge]]:
    """judge(endpoint, sleeps, **settings): a ChatJudge that records its back-off sleeps, closed at the end."""
    made: list[ChatJudge] = []

    def make(endpoint: str, sleeps: list[float], **settings: object) -> ChatJudge:
        made.append(
            ChatJudge(
                ChatSettings(endpoint, "fake", **settings),
                (0, 3),  # type: ignore[arg-type]
                sleep=sleeps.append,
            )
        )
        return made[-1]

    yield make
    for asker in made:
        asker.close()


def test_a_grade_in_json_schema_with_the_request_as_configured(
    endpoint: str, script: Script, judge: Callable[..., ChatJudge]
) -> None:
    sleeps: list[float] = []
    answer = judge(endpoint, sleeps, seed=7, api_key="sekret", temperature=0.0, max_tokens=50).judge(PROMPT)
    assert (answer.relevance, answer.explanation, answer.reason, answer.attempts, answer.structured) == (
        3,
        "3 query words found",
        None,
        1,
        "json_schema",
    )
    [body] = script.requests
    assert body["seed"] == 7 and body["temperature"] == 0.0 and body["max_tokens"] == 50 and body["model"] == "fake"
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "relevance_judgment", "strict": True, "schema": answer_schema((0, 3))},
    }
    assert script.headers[0]["authorization"] == "Bearer sekret"
    assert sleeps == []


def test_auto_falls_back_to_json_object_then_to_the_prompts_format(
    endpoint: str, script: Script, judge: Callable[..., ChatJudge]
) -> None:
    script.refuse = {"json_schema"}
    asker = judge(endpoint, [])
    assert (asker.judge(PROMPT).structured, asker.judge(PROMPT).structured) == ("json_object", "json_object")
    assert script.requests[1]["response_format"] == {"type": "json_object", "schema": answer_schema((0, 3))}
    script.refuse = {"json_schema", "json_object"}
    answer = judge(endpoint, []).judge(PROMPT)
    assert (answer.relevance, answer.structured, answer.explanation) == (3, "none", "The passage mentions the query.")
    assert "response_format" not in script.requests[-1]


def test_a_500_that_names_response_format_is_a_refusal_too(
    endpoint: str, script: Script, judge: Callable[..., ChatJudge]
) -> None:
    script.refuse, script.refuse_status = {"json_schema"}, 500
    sleeps: list[float] = []
    answer = judge(endpoint, sleeps).judge(PROMPT)
    assert (answer.relevance, answer.structured, sleeps) == (3, "json_object", [])


def test_429_and_5xx_are_retried_with_back_off_and_retry_after(
    endpoint: str, script: Script, judge: Callable[..., ChatJudge]
) -> None:
    script.statuses = [429, 503, 429]
    script.retry_after = "0.25"
    sleeps: list[float] = []
    answer = judge(endpoint, sleeps, backoff=0.5).judge(PROMPT)
    assert (answer.relevance, answer.attempts) == (3, 4)
    assert sleeps == [0.25, 1.0, 0.25]  # Retry-After where sent, else 0.5 * 2**retry


def test_a_timeout_is_retried(endpoint: str, script: Script, judge: Callable[..., ChatJudge]) -> None:
    script.delays = [1.0]
    sleeps: list[float] = []
    answer = judge(endpoint, sleeps, timeout=0.3, backoff=0.01).judge(PROMPT)
    assert (answer.relevance, answer.attempts, len(sleeps)) == (3, 2, 1)


def test_failures_past_the_retries_are_unrateable(
    endpoint: str, script: Script, judge: Callable[..., ChatJudge]
) -> None:
    script.statuses = [429] * 3
    answer = judge(endpoint, [], retries=2, backoff=0.01).judge(PROMPT)
    assert (answer.relevance, answer.attempts) == (None, 3)
    assert answer.reason == 'HTTP 429: {"error":{"message":"scripted 429"}} (after 3 attempts)'


def test_an_unparseable_answer_is_unrateable_with_the_reason(
    endpoint: str, script: Script, judge: Callable[..., ChatJudge]
) -> None:
    script.garbled = {"supersonic"}
    script.refuse = {"json_schema", "json_object"}
    answer = judge(endpoint, []).judge(PROMPT)
    assert (answer.relevance, answer.raw_output, answer.reason) == (
        None,
        "I cannot decide.",
        "unparseable answer: 'I cannot decide.'",
    )


def test_a_refused_key_stops_the_run(endpoint: str, script: Script, judge: Callable[..., ChatJudge]) -> None:
    script.statuses = [401]
    with pytest.raises(EvaluationError) as caught:
        judge(endpoint, []).judge(PROMPT)
    assert str(caught.value) == (
        f'{endpoint}/chat/completions answered 401: the endpoint refused the key ({{"error":{{"message":"scripted '
        '401"}}).'
    )
    assert caught.value.remedy == Remedy(
        cli="Check --endpoint, --model and --api-key-env.", web="Check the judge's endpoint, model and key variable."
    )


def test_a_refused_connection_is_retried_then_stops_the_run() -> None:
    """Nothing listening at the endpoint refuses every item alike: after its retries the first item
    stops the run (the labels so far are kept), rather than each item waiting through them."""
    sleeps: list[float] = []
    client = httpx.Client(
        transport=httpx.MockTransport(
            lambda request: (_ for _ in ()).throw(httpx.ConnectError("refused", request=request))
        )
    )
    with ChatJudge(
        ChatSettings("http://127.0.0.1:9/v1", "m", retries=2), (0, 3), client=client, sleep=sleeps.append
    ) as asker:
        with pytest.raises(EvaluationError) as caught:
            asker.judge(PROMPT)
    assert sleeps == [1.0, 2.0]
    assert caught.value.on_the_command_line() == (
        "Could not connect to http://127.0.0.1:9/v1/chat/completions after 3 attempts (connection failed: "
        "ConnectError: refused). Is its server running? Check --endpoint."
    )
    assert caught.value.remedy is not None and caught.value.remedy.web == (
        "Is its server running? Check the judge's endpoint."
    )


def test_a_dropped_connection_is_retried_then_unrateable() -> None:
    sleeps: list[float] = []
    client = httpx.Client(
        transport=httpx.MockTransport(lambda request: (_ for _ in ()).throw(httpx.ReadError("reset", request=request)))
    )
    with ChatJudge(
        ChatSettings("http://127.0.0.1:9/v1", "m", retries=2), (0, 3), client=client, sleep=sleeps.append
    ) as asker:
        answer = asker.judge(PROMPT)
    assert answer.relevance is None and answer.attempts == 3 and sleeps == [1.0, 2.0]
    assert answer.reason == "connection failed: ReadError: reset (after 3 attempts)"


@pytest.mark.parametrize(
    ("text", "relevance", "explanation", "reason"),
    [
        ('{"relevance": 2, "explanation": "close"}', 2, "close", None),
        ('{"relevance": 2, "explanation": "clo', 2, None, None),  # truncated JSON: the grade came first
        ("Some thought.\n##final score: 1", 1, "Some thought.", None),
        ("**Final Score:** 3", 3, None, None),
        (" 0 ", 0, None, None),
        ("##final score: 7", None, None, "answer 7 is outside the scale 0-3"),
        ('{"relevance": "high"}', None, None, 'unparseable answer: \'{"relevance": "high"}\''),
        ("", None, None, "empty answer"),
        ("relevant, I think 2 or 3", None, None, "unparseable answer: 'relevant, I think 2 or 3'"),
    ],
)
def test_answers_are_parsed_in_the_prompts_format_or_json(
    text: str, relevance: int | None, explanation: str | None, reason: str | None
) -> None:
    parsed = parse_answer(text, (0, 3))
    assert (parsed.relevance, parsed.explanation, parsed.reason) == (relevance, explanation, reason)


def test_prompts_replace_literally_and_urls_are_completed() -> None:
    text = render("Q={query} P={passage} {x} {min}-{max}", query="a {passage} b", passage="{query} c", scale=(0, 2))
    assert text == "Q=a { passage} b P=<document>\n{query} c\n</document> {x} 0-2"
    assert completions_url("http://h:1/v1/") == "http://h:1/v1/chat/completions"
    assert completions_url("http://h:1/v1/chat/completions") == "http://h:1/v1/chat/completions"


def test_judges_share_one_verifying_tls_context(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every judge's client verifies its endpoint as httpx does by default, with a TLS context made
    once per process: made per client, loading the CA bundle cost more CPU than a local model's
    answer."""
    import ssl

    from evalstore.services.judges import client

    made: list[ssl.SSLContext] = []

    def counted(*args: object, **kwargs: object) -> ssl.SSLContext:
        made.append(create(*args, **kwargs))  # type: ignore[arg-type]
        return made[-1]

    create = httpx.create_ssl_context
    monkeypatch.setattr(httpx, "create_ssl_context", counted)
    client.tls_context.cache_clear()
    try:
        judges = [ChatJudge(ChatSettings("https://llm.invalid/v1", "fake"), (0, 3)) for _ in range(3)]
        for asker in judges:
            asker.close()
        assert len(made) == 1
        [context] = made
        assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
        assert client.tls_context() is context
    finally:
        client.tls_context.cache_clear()
