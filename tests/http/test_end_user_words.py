"""Pages speak to participants, assessors and viewers in the browser's words: no command to type
(they have no terminal on the server), in the templates or in the messages the services give;
what to do is said in the browser or "ask your organiser". Admins and organisers, who run the
service, keep the commands. Reading another team's run does not say "choose another name"."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from fastapi.testclient import TestClient
from jinja2 import ChainableUndefined

from evalstore.errors import InvalidParameterError, NotFoundError
from evalstore.services import comparisons, pools, splits
from evalstore.services.access import ANONYMOUS, Principal
from evalstore.services.judges import registry
from evalstore.services.judges import running as judges_running
from evalstore.services.orchestration import evaluate_runs
from evalstore.web.api import needs
from evalstore.web.errors import error_response
from evalstore.web.templating import templates
from evalstore.web.wording import ASK
from tests.http.conftest import CALLERS, World, client_for
from tests.http.test_pages import PAGES

ADVICE = re.compile(r"\bevalstore [a-z]|(?<![\w-])--[a-z]|Run '")
TEMPLATES = Path(__file__).resolve().parents[2] / "evalstore" / "web" / "templates"
# the pages only admins and organisers reach (the route x role matrix of tests/http/test_pages.py)
ORGANISERS_ONLY = {
    "agreement.html",
    "bank.html",
    "banks.html",
    "collection.html",
    "collection_compare.html",
    "collection_run.html",
    "collections.html",
    "health.html",
    "judge_report.html",
    "judges.html",
    "judgments.html",
    "manage.html",
    "people.html",
    "new_task.html",
    "review.html",
}
READERS = {
    "participant": Principal(user_id=1, name="red", role="participant", team="red", via="session"),
    "assessor": Principal(user_id=2, name="judy", role="assessor", via="session"),
    "viewer": Principal(user_id=3, name="vic", role="viewer", via="session"),
    "anonymous": ANONYMOUS,
}
# what a template needs beyond "nothing there" to render
CONTEXT: dict[str, dict[str, Any]] = {
    "pool.html": {"settings": SimpleNamespace(grades={}, topics=None, collection=None, double_share=None)},
}


class _Nothing(ChainableUndefined):
    """Every value a template does not get: empty, false, callable, so each template renders its
    empty states (the ones that used to say which command to run)."""

    def __call__(self, *args: object, **kwargs: object) -> _Nothing:
        return self

    def __iter__(self) -> Any:
        return iter(())

    def __len__(self) -> int:
        return 0


@pytest.mark.parametrize("reader", sorted(READERS))
def test_no_template_a_participant_assessor_or_viewer_reaches_gives_a_command(reader: str) -> None:
    env = templates.env.overlay(undefined=_Nothing)
    request = SimpleNamespace(
        url=SimpleNamespace(path="/x", query=""), query_params={}, state=SimpleNamespace(csrf="t")
    )
    reached = sorted(p.name for p in TEMPLATES.glob("*.html") if p.name not in ORGANISERS_ONLY)
    assert {"login.html", "home.html", "pools.html", "judge.html", "profile.html", "submit.html"} <= set(reached)
    advice = {}
    for name in reached:
        page = env.get_template(name).render(me=READERS[reader], request=request, **CONTEXT.get(name, {}))
        if found := ADVICE.findall(page):
            advice[name] = found
    assert advice == {}


def test_no_page_a_participant_assessor_or_viewer_reads_gives_a_command(world: World) -> None:
    readers = ("red", "assessor", "viewer")
    advice = []
    with client_for(world.engine, writes_per_minute=10_000) as client:
        for route, (request_for, statuses) in PAGES.items():
            if not route.startswith("GET "):
                continue
            for caller, status in zip(CALLERS, statuses.split(), strict=True):
                if caller not in readers or status in ("303", "401"):
                    continue
                _, path, kwargs = request_for(world, caller)
                response = client.get(path, headers=world.headers(caller), **kwargs)
                if "html" in response.headers.get("content-type", "") and ADVICE.search(response.text):
                    advice.append(f"{route} as {caller}: {ADVICE.findall(response.text)}")
    assert advice == []


def test_a_services_message_loses_its_command_for_a_participant_only(world: World) -> None:
    with client_for(world.engine) as client:
        participant = client.get("/tasks/open?measure=nosuch", headers=world.headers("red"))
        organiser = client.get("/tasks/open?measure=nosuch", headers=world.headers("owner"))
    assert participant.status_code == organiser.status_code == 422
    assert "Run &#39;evalstore measures&#39; for the list." in organiser.text
    said = re.search(r'<p class="error" role="alert">(.*?)</p>', participant.text, re.S)
    assert said is not None and said.group(1) == f"Unknown measure &#39;nosuch&#39;. {ASK}"


def test_reading_another_teams_run_does_not_say_choose_another_name(world: World) -> None:
    world.submit("open", "blue-run", team_user="blue", evaluate=False)
    with client_for(world.engine) as client:
        page = client.get("/runs/blue-run", headers=world.headers("red"))
    assert page.status_code == 403
    said = re.search(r'<p class="error" role="alert">(.*?)</p>', page.text, re.S)
    assert said is not None
    assert said.group(1) == (
        "The run name &#39;blue-run&#39; belongs to another team&#39;s run (or one you may not see): "
        "it can be neither read nor submitted under."
    )


def test_the_api_gives_the_fact_and_the_remedy_in_the_callers_words(world: World) -> None:
    with client_for(world.engine) as client:
        participant = client.get("/api/v1/tasks/open/leaderboard?measure=nosuch", headers=world.headers("red"))
        organiser = client.get("/api/v1/tasks/open/leaderboard?measure=nosuch", headers=world.headers("owner"))
        no_token = client.delete("/api/v1/tokens/999999", headers=world.headers("red"))
    assert (participant.status_code, participant.json()) == (422, {"error": "Unknown measure 'nosuch'.", "remedy": ASK})
    assert (organiser.status_code, organiser.json()) == (
        422,
        {"error": "Unknown measure 'nosuch'.", "remedy": "Run 'evalstore measures' for the list."},
    )
    assert (no_token.status_code, no_token.json()) == (
        404,
        {"error": "No token 999999 of yours.", "remedy": "Your profile page lists your tokens."},
    )


def _calling(client: TestClient, path: str, service: Callable[[], object]) -> str:
    """An API route at ``path`` that calls ``service`` as the API's routes call theirs, for any
    signed-in caller: what it raises is answered by the app's own error handling."""

    def route(_: Principal = needs("tasks:read")) -> None:
        service()

    client.app.router.add_api_route(path, route, methods=["GET"])  # type: ignore[attr-defined]
    return path


def test_the_api_gives_a_services_fact_without_its_command_and_the_remedy_in_the_callers_words(
    world: World,
) -> None:
    engine = world.engine
    with client_for(engine) as client:
        routes = {
            "taken": _calling(client, "/api/v1/x/taken", lambda: pools.build_pool(engine, name="pool", run_names=None)),
            "one assessor": _calling(client, "/api/v1/x/agreement", lambda: pools.pool_agreement(engine, "pool")),
            "no count": _calling(client, "/api/v1/x/batch", lambda: pools.next_batch(engine, "pool", count=0)),
            "no part": _calling(client, "/api/v1/x/part", lambda: splits.export_split(engine, "s", part="dev")),
        }
        said = {
            (what, who): client.get(path, headers=world.headers(who))
            for what, path in routes.items()
            for who in ("red", "owner")
        }
    got = {key: (response.status_code, response.json()) for key, response in said.items()}
    assert got == {
        ("taken", "red"): (409, {"error": "A pool named 'pool' exists.", "remedy": "Choose another name."}),
        ("taken", "owner"): (409, {"error": "A pool named 'pool' exists.", "remedy": "Choose another name."}),
        ("one assessor", "red"): (
            400,
            {"error": "Pool 'pool' has judgments from fewer than two assessors.", "remedy": ASK},
        ),
        ("one assessor", "owner"): (
            400,
            {
                "error": "Pool 'pool' has judgments from fewer than two assessors.",
                "remedy": "Import another assessor's with 'evalstore judgments import PATH --pool pool --assessor NAME'.",
            },
        ),
        ("no count", "red"): (422, {"error": "A batch adds at least 1 document per topic; not 0.", "remedy": ASK}),
        ("no count", "owner"): (
            422,
            {"error": "A batch adds at least 1 document per topic; not 0.", "remedy": "Give --count 1 or more."},
        ),
        ("no part", "red"): (422, {"error": "A fold's parts are train and test, not 'dev'.", "remedy": ASK}),
        ("no part", "owner"): (
            422,
            {"error": "A fold's parts are train and test, not 'dev'.", "remedy": "Choose one with --part."},
        ),
    }
    # a participant is told no command, in the fact or the remedy
    assert [key for key, response in said.items() if key[1] == "red" and ADVICE.search(response.text)] == []


def _said(page: Any) -> str:
    found = re.search(r'<p class="error" role="alert">(.*?)</p>', page.text, re.S)
    assert found is not None, page.text
    return str(found.group(1))


def test_a_comparisons_refusal_names_the_forms_field_not_the_option(world: World) -> None:
    world.submit("open", "red-two")
    with client_for(world.engine) as client:
        pages = {
            caller: client.get("/tasks/open/compare?run=red-open&run=red-two&test=z", headers=world.headers(caller))
            for caller in ("red", "owner")
        }
    for page in pages.values():
        assert page.status_code == 422
        assert _said(page) == (
            "The paired test is one of t, randomization, bootstrap, wilcoxon, sign; not &#39;z&#39;. "
            "Choose one in the Test field."
        )


def test_runs_evaluated_apart_tell_a_participant_to_ask_and_an_organiser_the_command(world: World) -> None:
    world.submit("open", "red-two")
    evaluate_runs(world.engine, qrels_name="sample", run_names=["red-two"], measures=["AP"], relevance_level=2)
    fact = (
        "Runs &#39;red-open&#39; and &#39;red-two&#39; were evaluated with different relevance_level (1 vs 2), so "
        "their values do not compare."
    )
    compare = "/tasks/open/compare?run=red-open&run=red-two&measure=AP"
    with client_for(world.engine) as client:
        participant = client.get(compare, headers=world.headers("red"))
        organiser = client.get(compare, headers=world.headers("owner"))
    assert participant.status_code == organiser.status_code == 400
    assert _said(participant) == f"{fact} {ASK}"
    assert _said(organiser) == (
        f"{fact} Evaluate both with the same options: &#39;evalstore evaluate --qrels sample --run red-open "
        "--run red-two --force --wait&#39;."
    )


def test_the_api_gives_a_converted_refusal_as_its_fact_and_the_callers_remedy(world: World) -> None:
    """What the API answers (evalstore.web.errors) for the refusals of the comparisons and the
    judges: the fact with no option in it, and the remedy in the caller's words."""
    with pytest.raises(InvalidParameterError) as wrong_test:
        comparisons.compare(
            world.engine, qrels_name="sample", run_names=["red-open", "red-secret"], measures=["AP"], test="z"
        )
    with pytest.raises(InvalidParameterError) as bad_endpoint:
        registry.add_judge(world.engine, "j", endpoint="localhost:8000", model="m")
    with pytest.raises(NotFoundError) as no_judge:
        judges_running.run_judge(world.engine, "nope", pool_name="pool")
    participant, organiser = READERS["participant"], Principal(user_id=4, name="olga", role="organiser", via="session")
    answers = {
        (name, reader.role): (response.status_code, json.loads(bytes(response.body)))
        for name, error in (("test", wrong_test), ("endpoint", bad_endpoint), ("judge", no_judge))
        for reader in (participant, organiser)
        for response in [error_response(error.value, reader)]
    }
    test_fact = "The paired test is one of t, randomization, bootstrap, wilcoxon, sign; not 'z'."
    endpoint_fact = (
        "A judge's endpoint is the http(s) URL of an OpenAI-compatible API, e.g. http://127.0.0.1:8000/v1; "
        "not 'localhost:8000'."
    )
    assert answers == {
        ("test", "participant"): (422, {"error": test_fact, "remedy": "Choose one in the Test field."}),
        ("test", "organiser"): (422, {"error": test_fact, "remedy": "Choose one in the Test field."}),
        ("endpoint", "participant"): (422, {"error": endpoint_fact, "remedy": "Give the endpoint's URL."}),
        ("endpoint", "organiser"): (422, {"error": endpoint_fact, "remedy": "Give the endpoint's URL."}),
        ("judge", "participant"): (404, {"error": "No judge named 'nope'.", "remedy": ASK}),
        ("judge", "organiser"): (
            404,
            {
                "error": "No judge named 'nope'.",
                "remedy": "Define one with 'evalstore judges add nope --endpoint URL --model MODEL'.",
            },
        ),
    }
    for (_, role), (_, body) in answers.items():
        if role == "participant":
            assert not ADVICE.search(json.dumps(body))
