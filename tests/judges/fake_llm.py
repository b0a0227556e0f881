"""A deterministic, local OpenAI-compatible chat-completions endpoint for tests (Starlette under
uvicorn on 127.0.0.1, in a thread). Its grade of a prompt is the number of the query's words (4
letters or more) found in the passage, at most 3; a passage that says it is "perfectly relevant"
gets 3 (it is fooled, as real judges are). A nugget's label (:func:`nugget_label`) is as plain. Scripted failures: HTTP statuses to answer first,
answers to delay past the client's timeout, documents answered with text that holds no grade,
structured-output modes it refuses, error bodies that echo the request's headers (as some proxies
do), and answers that repeat the passage before the grade (as a chatty model does)."""

from __future__ import annotations

import asyncio
import json
import re
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route


@dataclass
class Script:
    statuses: list[int] = field(default_factory=list)  # answered first, one per request (then 200)
    retry_after: str | None = None  # sent with a scripted 429
    delays: list[float] = field(default_factory=list)  # seconds to wait before answering, one per request
    garbled: set[str] = field(default_factory=set)  # passages holding one of these get an answer with no grade
    refuse: set[str] = field(default_factory=set)  # response_format types refused
    refuse_status: int = 400  # llama-cpp-python's server refuses with 500
    echo_headers: bool = False  # a scripted error's body repeats the request's headers
    echo_passage: bool = False  # a text answer repeats the passage (delimiters and all) before its grade
    vary: bool = False  # every other request's grade is one higher (at most 3): answers that move
    first_always: bool = False  # a pairwise prompt is always answered "the first": pure position bias
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)


def grade(prompt: str) -> int:
    query = re.search(r"Query: (.*)", prompt)
    passage = re.search(r"Passage: (.*?)\n\nSplit this problem", prompt, re.S)
    if query is None or passage is None:
        return 0
    if "perfectly relevant" in passage.group(1):
        return 3
    words = {w for w in re.findall(r"[a-z]+", query.group(1).lower()) if len(w) >= 4}
    found = set(re.findall(r"[a-z]+", passage.group(1).lower()))
    return min(3, len(words & found))


def nugget_label(prompt: str) -> str | None:
    """A nugget assignment prompt's label: support when the answer holds every word of the nugget
    (4 letters or more), partial_support when some, not_support when none; None: not such a prompt."""
    nugget = re.search(r"\nNugget: (.*)\n", prompt)
    answer = re.search(r"<document>\n(.*?)\n</document>", prompt, re.S)
    if nugget is None or answer is None:
        return None
    words = {w for w in re.findall(r"[a-z]+", nugget.group(1).lower()) if len(w) >= 4}
    found = words & set(re.findall(r"[a-z]+", answer.group(1).lower()))
    return "support" if found and found == words else "partial_support" if found else "not_support"


def support_grade(prompt: str) -> int | None:
    """A citation-support prompt's grade: 2 when the passage holds every word of the statement (4
    letters or more), 1 when some, 0 when none; None: not such a prompt."""
    statement = re.search(r"\nStatement: (.*)\n", prompt)
    passage = re.search(r"<document>\n(.*?)\n</document>", prompt, re.S)
    if statement is None or passage is None:
        return None
    words = {w for w in re.findall(r"[a-z]+", statement.group(1).lower()) if len(w) >= 4}
    found = words & set(re.findall(r"[a-z]+", passage.group(1).lower()))
    return 2 if found and found == words else 1 if found else 0


def preference(prompt: str) -> int | None:
    """A pairwise prompt's choice: the text (1 or 2) whose lines hold more of the query's words (4
    letters or more), each line's count divided by its position (a ranking's top counts most); 0
    when equal; None: not such a prompt."""
    if "##preferred" not in prompt:
        return None
    query = re.search(r"\nQuery: (.*)\n", prompt)
    blocks = re.findall(r"<document>\n(.*?)\n</document>", prompt, re.S)
    if query is None or len(blocks) != 2:
        return None
    words = {w for w in re.findall(r"[a-z]+", query.group(1).lower()) if len(w) >= 4}

    def score(block: str) -> float:
        lines = block.splitlines()
        return sum(len(words & set(re.findall(r"[a-z]+", line.lower()))) / i for i, line in enumerate(lines, 1))

    first, second = score(blocks[0]), score(blocks[1])
    return 1 if first > second else 2 if second > first else 0


def drafted_nuggets(prompt: str) -> list[dict[str, str]] | None:
    """A nugget creation prompt's nuggets: each sentence of the answers (delimited), vital when more
    than one answer holds it, okay otherwise; None: not such a prompt."""
    if "\nAnswers:\n" not in prompt:
        return None
    answers = re.findall(r"<document>\n(.*?)\n</document>", prompt, re.S)
    held: dict[str, int] = {}
    for answer in answers:
        for sentence in dict.fromkeys(s.strip(" .") for s in answer.split(". ") if s.strip(" .")):
            held[sentence] = held.get(sentence, 0) + 1
    return [{"text": s, "importance": "vital" if n > 1 else "okay"} for s, n in held.items()]


def app(script: Script) -> Starlette:
    async def completions(request: Request) -> JSONResponse:
        body = await request.json()
        script.requests.append(body)
        script.headers.append(dict(request.headers))
        if script.delays:
            await asyncio.sleep(script.delays.pop(0))
        if script.statuses:
            status = script.statuses.pop(0)
            headers = {"Retry-After": script.retry_after} if status == 429 and script.retry_after else {}
            error: dict[str, Any] = {"message": f"scripted {status}"}
            if script.echo_headers:
                error["request_headers"] = dict(request.headers)
            return JSONResponse({"error": error}, status_code=status, headers=headers)
        form = (body.get("response_format") or {}).get("type")
        if form in script.refuse:
            return JSONResponse(
                {"error": {"message": f"response_format {form} is not supported"}}, status_code=script.refuse_status
            )
        prompt = body["messages"][-1]["content"]
        supported = support_grade(prompt)
        value = grade(prompt) if supported is None else supported
        if script.vary and len(script.requests) % 2 == 0:
            value = min(3, value + 1)
        label = nugget_label(prompt)
        drafted = drafted_nuggets(prompt)
        preferred = 1 if script.first_always and "##preferred" in prompt else preference(prompt)
        if any(marker in prompt for marker in script.garbled):
            content = "I cannot decide."
        elif preferred is not None:
            content = (
                json.dumps({"preferred": preferred, "explanation": "more of the query's words"})
                if form in ("json_schema", "json_object")
                else f"The texts differ.\n##preferred: {preferred}"
            )
        elif drafted is not None:
            content = json.dumps({"nuggets": drafted})
        elif label is not None:
            content = json.dumps({"label": label}) if form in ("json_schema", "json_object") else f"Label: {label}"
        elif form in ("json_schema", "json_object"):
            content = json.dumps({"relevance": value, "explanation": f"{value} query words found"})
        elif script.echo_passage:
            passage = re.search(r"Passage: (.*?)\n\nSplit this problem", prompt, re.S)
            content = f"The passage reads: {passage.group(1) if passage else ''}\n##final score: {value}"
        else:
            content = f"The passage mentions the query.\n##final score: {value}"
        return JSONResponse(
            {
                "id": "x",
                "object": "chat.completion",
                "model": body["model"],
                "choices": [
                    {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}
                ],
                # tokens: words, so that a test can count them
                "usage": {"prompt_tokens": len(prompt.split()), "completion_tokens": len(content.split())},
            }
        )

    return Starlette(routes=[Route("/v1/chat/completions", completions, methods=["POST"])])


@contextmanager
def serve(script: Script) -> Iterator[str]:
    """The endpoint's base URL (…/v1) while the server runs."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app(script), log_level="error", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()
