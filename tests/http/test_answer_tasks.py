"""Tasks that take generated answers (TREC RAG): teams upload answer JSONL over the API with the
checks `answers register` makes (file:line, nothing stored on error), the task's quota and window;
the organisers import the assessments and queue the evaluation; the scores stay hidden (pages, API,
MLflow) until the release, and the board then shows the nugget measures, equal to the worked
example of docs/guide/answers.md."""

from __future__ import annotations

import html
import json
import re
from typing import Any

import httpx
import numpy as np
import pytest
from fastapi.testclient import TestClient
from scipy import stats
from sqlalchemy import text, update
from sqlalchemy.exc import IntegrityError

from evalstore.db.models import Task
from evalstore.db.session import unit_of_work
from evalstore.metrics.answers import ANSWER_MEASURES, NUGGET_MEASURES, SUPPORT_MEASURES
from evalstore.services import answers, comparisons, embargo, tasks
from evalstore.services.kinds import answers as answer_kind
from evalstore.services.kinds.answers import tiers as answer_tiers
from evalstore.services.orchestration import work_on
from evalstore.services.reports.boards import refresh_answer_tiers
from evalstore.services.worker import Worker, WorkerSettings
from tests.conftest import shared_path
from tests.http.conftest import World, as_principal, client_for, run_text

HIDDEN = "hidden until the organisers release the task"


def gpt4o() -> bytes:
    return shared_path("rag24", "answers", "baseline_rag24.test_gpt-4o_top20.jsonl").read_bytes()


# docs/guide/answers.md's worked example: gpt-4o on NIST's assessment of topic 2024-105741
GPT4O_SCORES = {"V_strict": 2 / 3, "A_strict": 7 / 16, "V": 2 / 3, "A": 7 / 16, "W": 0.4737}


def answer_line(run: str, topic: str, sentences: int = 1, **overrides: Any) -> str:
    record = {
        "run_id": run,
        "topic_id": topic,
        "topic": "a question",
        "references": ["seg-a", "seg-b"],
        "response_length": 3 * sentences,
        "answer": [{"text": f"Sentence {i}.", "citations": [0]} for i in range(sentences)],
        **overrides,
    }
    return json.dumps(record)


def counts(world: World) -> dict[str, int]:
    with world.engine.connect() as connection:
        return {
            table: connection.execute(text(f"SELECT count(*) FROM {table}")).scalar_one()
            for table in ("runs", "answer_runs", "answer_sentences", "submissions", "evaluations")
        }


def answer_task(world: World, name: str = "rag", **settings: Any) -> str:
    """A task over the rag24 example bank (owner: "owner"), hidden unless told otherwise."""
    if answers.list_banks(world.engine) == [] or "rag24" not in [b.name for b in answers.list_banks(world.engine)]:
        answers.import_nuggets(world.engine, shared_path("rag24", "nuggets.example.jsonl"), name="rag24")
    tasks.create_task(world.engine, name, nuggets_name="rag24", owner="owner", **{"hidden": True, **settings})
    return name


def upload(
    client: TestClient, world: World, caller: str, name: str, content: bytes, *, task: str = "rag"
) -> httpx.Response:
    return client.post(
        f"/api/v1/tasks/{task}/runs",
        headers=world.headers(caller),
        files={"file": (f"{name}.jsonl", content)},
        data={"name": name},
    )


def test_an_organiser_creates_a_task_over_a_nugget_bank(world: World, client: TestClient) -> None:
    answers.import_nuggets(world.engine, shared_path("rag24", "nuggets.example.jsonl"), name="rag24")
    made = client.post(
        "/api/v1/tasks",
        headers=world.headers("admin"),
        json={
            "name": "rag",
            "nuggets": "rag24",
            "owner": "owner",
            "hidden": True,
            "official_measure": "weighted_score",
        },
    )
    assert made.status_code == 201, made.text
    shown = made.json()
    assert (shown["qrels"], shown["nuggets"], shown["takes"], shown["official_measure"]) == (
        None,
        "rag24",
        "answers",
        "W",
    )
    both = client.post(
        "/api/v1/tasks", headers=world.headers("admin"), json={"name": "x", "qrels": "sample", "nuggets": "rag24"}
    )
    assert (both.status_code, both.json()["error"]) == (
        422,
        "A task evaluates runs against qrels or answers on a nugget bank: name one of the two.",
    )
    # one organiser's bank is not had by creating a task over it
    other = client.post("/api/v1/tasks", headers=world.headers("organiser"), json={"name": "y", "nuggets": "rag24"})
    assert (other.status_code, other.json()["error"]) == (
        403,
        "Nugget bank 'rag24' are the nuggets of another organiser's task; an admin may create a task over them "
        "for you.",
    )
    measure = client.post(
        "/api/v1/tasks",
        headers=world.headers("admin"),
        json={"name": "z", "nuggets": "rag24", "owner": "owner", "official_measure": "nDCG@10"},
    )
    assert measure.status_code == 422
    assert measure.json()["error"].startswith("Unknown answer measure 'nDCG@10'; they are V_strict, A_strict, V, A, W")


def test_a_hidden_answer_task_from_upload_to_release(world: World, client: TestClient) -> None:
    answer_task(world)
    before = counts(world)
    sent = upload(client, world, "red", "red-gpt", gpt4o())
    assert sent.status_code == 201, sent.text
    assert sent.json() == {
        "run": "red-gpt",
        "task": "rag",
        "team": "red",
        "topics": 301,
        "sentences": 3975,
        "references": 2417,
        "warnings": [],
        "job": None,
        "state": "awaiting assessment",
    }
    after = counts(world)
    assert (after["answer_runs"], after["submissions"], after["evaluations"]) == (
        before["answer_runs"] + 1,
        before["submissions"] + 1,
        before["evaluations"],
    )
    listed = client.get("/api/v1/tasks/rag/runs", headers=world.headers("red")).json()
    assert [(r["run"], r["team"], r["state"]) for r in listed] == [("red-gpt", "red", None)]
    assert client.get("/api/v1/tasks/rag/runs", headers=world.headers("blue")).json() == []
    waiting = client.get("/api/v1/runs/red-gpt/results", headers=world.headers("red")).json()
    assert waiting["scores"] == HIDDEN

    # the organisers: nothing assessed yet, then NIST's assessment imported (matched by its text)
    early = client.post("/api/v1/tasks/rag/evaluate", headers=world.headers("owner"))
    assert early.json()["jobs"] == []
    assert early.json()["waiting"] == [{"run": "red-gpt", "reason": "no human assignment on nugget bank 'rag24' yet"}]
    imported = answers.import_nuggets(
        world.engine, shared_path("rag24", "nugget_assignment.example.jsonl"), name="rag24"
    )
    assert {m.assessed: m.stored for m in imported.runs}["baseline_frag_rag24.test_gpt-4o_top20"] == "red-gpt"
    for caller in ("organiser", "red", "viewer"):
        refused = client.post("/api/v1/tasks/rag/evaluate", headers=world.headers(caller))
        assert refused.status_code == 403, caller
    assert client.post("/api/v1/tasks/rag/evaluate", headers=world.headers("organiser")).json()["error"] == (
        "Task 'rag' is managed by its organiser; you may not evaluate its runs."
    )
    queued = client.post("/api/v1/tasks/rag/evaluate", headers=world.headers("owner")).json()
    assert [(j["run"], j["state"]) for j in queued["jobs"]] == [("red-gpt", "queued")]
    job = queued["jobs"][0]["id"]
    work_on(world.engine, [job], mlflow=False)

    # hidden: the organiser sees the scores; the team, others and MLflow do not
    board = client.get("/api/v1/tasks/rag/leaderboard", headers=world.headers("owner")).json()
    (row,) = board["rows"]
    assert (row["run"], row["team"], row["topics"]) == ("red-gpt", "red", 1)
    for measure, value in GPT4O_SCORES.items():
        assert row["scores"][measure]["mean"] == pytest.approx(value, abs=5e-5), measure
    assert board["measures"] == ["V_strict", "A_strict", "V", "A", "W"]
    secret = json.dumps(row["scores"]["W"]["mean"])
    for caller in ("anon", "red", "blue", "viewer", "organiser"):
        for path in (
            "/api/v1/tasks/rag/leaderboard",
            "/api/v1/tasks/rag/leaderboard?measure=W",
            "/api/v1/runs/red-gpt/results?per_query=true",
            f"/api/v1/jobs/{job}",
            "/tasks/rag",
            "/tasks/rag/leaderboard.csv",
        ):
            body = client.get(path, headers=world.headers(caller)).text
            assert secret not in body and secret[:6] not in body, (caller, path)
    assert client.get("/api/v1/tasks/rag/leaderboard", headers=world.headers("red")).json()["scores"] == HIDDEN
    assert embargo.is_embargoed(world.engine, job)

    released = client.post("/api/v1/tasks/rag/release", headers=world.headers("owner"))
    assert released.status_code == 200
    assert not embargo.is_embargoed(world.engine, job)
    public = client.get("/api/v1/tasks/rag/leaderboard?measure=W&measure=weighted_score&measure=V").json()
    assert public["measures"] == ["W", "V"]
    assert public["rows"][0]["scores"]["W"]["mean"] == pytest.approx(GPT4O_SCORES["W"], abs=5e-5)
    mine = client.get("/api/v1/runs/red-gpt/results?per_query=true&measure=W", headers=world.headers("red")).json()
    assert mine["aggregates"] == {"W": pytest.approx(GPT4O_SCORES["W"], abs=5e-5)}
    assert list(mine["per_query"]) == ["2024-105741"]
    page = client.get("/runs/red-gpt", headers=world.headers("red"))
    assert page.status_code == 200 and "0.4737" in page.text  # the run's page: its answer measures


BAD_FILES = [
    (b"not json\n", "bad.jsonl:1: not valid JSON (Expecting value at column 1)"),
    (
        (answer_line("r", "t1") + "\n" + answer_line("r", "t1") + "\n").encode(),
        "bad.jsonl:2: run r answers topic t1 twice (also at line 1); keep one answer",
    ),
    (
        answer_line("r", "t1", 10_000).encode(),
        "bad.jsonl:1: the answer has 10000 sentences; an answer may have at most 1000",
    ),
    (
        (answer_line("r", "t1") + "\n" + answer_line("s", "t1") + "\n").encode(),
        "bad.jsonl: the file holds 2 runs (r, s); submit one a file",
    ),
    (
        answer_line("r", "t1", references=[]).replace('"citations": [0]', '"citations": []').encode(),
        "bad.jsonl: no answer lists references; cite the segments the answers draw on",
    ),
    (run_text().encode(), "bad.jsonl:1: not valid JSON (Extra data at column 5)"),  # a ranking run
]


@pytest.mark.parametrize(("content", "message"), BAD_FILES, ids=[m.split(": ")[1][:30] for _, m in BAD_FILES])
def test_a_bad_answer_file_is_refused_at_its_line_and_stores_nothing(
    world: World, client: TestClient, content: bytes, message: str
) -> None:
    answer_task(world)
    before = counts(world)
    refused = client.post(
        "/api/v1/tasks/rag/runs",
        headers=world.headers("red"),
        files={"file": ("bad.jsonl", content)},
        data={"name": "bad"},
    )
    assert (refused.status_code, refused.json()["error"]) == (422, message)
    assert counts(world) == before


def test_answers_keep_the_quota_the_window_and_the_names_of_runs(world: World, client: TestClient) -> None:
    answer_task(world, max_runs_per_team=1)
    first = upload(client, world, "red", "red-1", answer_line("x", "t1").encode())
    assert first.status_code == 201, first.text
    # awaiting assessment, it holds its slot: answers need no job to count
    second = upload(client, world, "red", "red-2", answer_line("x", "t1").encode())
    assert (second.status_code, second.json()["error"]) == (
        409,
        "Team 'red' has used its 1 runs for task 'rag' (evaluated runs count, and withdrawn ones whose scores "
        "the team could read; failed, cancelled and other withdrawn ones do not).",
    )
    taken = upload(client, world, "blue", "red-1", answer_line("x", "t1").encode())
    assert (taken.status_code, taken.json()["error"]) == (
        403,
        "The run name 'red-1' belongs to another team's run (or one you may not see): it can be neither read "
        "nor submitted under.",
    )
    ranking = client.post(
        "/api/v1/tasks/rag/runs",
        headers=world.headers("blue"),
        files={"file": ("run.txt", run_text().encode())},
        data={"name": "blue-run"},
    )
    assert ranking.status_code == 422
    # a ranking task refuses answers the other way round
    wrong = upload(client, world, "blue", "blue-answers", answer_line("x", "t1").encode(), task="open")
    assert wrong.status_code == 422
    assert tasks.show_task(world.engine, "rag").takes_answers
    # withdrawn before assessment: the answers go with their references, and the slot comes back
    assert client.delete("/api/v1/runs/red-1", headers=world.headers("red")).status_code == 204
    assert [r.name for r in answers.list_answer_runs(world.engine)] == []
    assert upload(client, world, "red", "red-2", answer_line("x", "t1").encode()).status_code == 201


def test_a_task_over_a_ranking_qrels_is_not_evaluated_as_answers(world: World, client: TestClient) -> None:
    refused = client.post("/api/v1/tasks/open/evaluate", headers=world.headers("owner"))
    assert (refused.status_code, refused.json()["error"]) == (
        422,
        "Task 'open' takes ranking runs, which are evaluated as they are submitted.",
    )


def test_an_answer_board_on_one_topic_has_no_tiers(world: World, client: TestClient) -> None:
    answer_task(world, hidden=False)
    for team, model in (("red", "gpt-4o"), ("blue", "command-r-plus")):
        path = shared_path("rag24", "answers", f"baseline_rag24.test_{model}_top20.jsonl")
        assert upload(client, world, team, f"{team}-{model}", path.read_bytes()).status_code == 201
    answers.import_nuggets(world.engine, shared_path("rag24", "nugget_assignment.example.jsonl"), name="rag24")
    queued = tasks.evaluate_answers(world.engine, "rag")
    work_on(world.engine, [ref.evaluation_id for _, ref in queued.jobs], mlflow=False)
    board = client.get("/api/v1/tasks/rag/leaderboard?measure=W").json()
    assert [(r["run"], round(r["scores"]["W"]["mean"], 4)) for r in board["rows"]] == [
        ("blue-command-r-plus", 0.5263),
        ("red-gpt-4o", 0.4737),
    ]
    page = client.get("/tasks/rag?measure=W")
    assert page.status_code == 200  # one topic assessed: no tiers (Tukey's HSD needs two)
    assert page.text.count('<td class="tier"></td>') == 2


def six_topics(world: World, client: TestClient, *, hidden: bool = False) -> None:
    """Task 'six': answers on six topics, each with one vital nugget; team red's 'best' supports
    every nugget, its 'mid' half of them, team blue's 'none' none (a partial support on the last)."""
    topics = [f"t{i}" for i in range(6)]
    bank = world.tmp / "bank.jsonl"
    bank.write_text(
        "".join(
            json.dumps({"qid": t, "query": "q", "nuggets": [{"text": f"{t} n", "importance": "vital"}]}) + "\n"
            for t in topics
        )
    )
    answers.import_nuggets(world.engine, bank, name="six")
    tasks.create_task(world.engine, "six", nuggets_name="six", owner="owner", hidden=hidden)
    labels = {
        "best": ["support"] * 6,
        "mid": ["support", "not_support"] * 3,
        "none": ["not_support"] * 5 + ["partial_support"],
    }
    users = {"best": "red", "mid": "red", "none": "blue"}
    assessed = []
    for run, given in labels.items():
        lines = "\n".join(answer_line(run, t, answer=[{"text": f"{run} {t}.", "citations": [0]}]) for t in topics)
        sent = client.post(
            "/api/v1/tasks/six/runs",
            headers=world.headers(users[run]),
            files={"file": (f"{run}.jsonl", lines.encode())},
            data={"name": run},
        )
        assert sent.status_code == 201, sent.text
        for t, label in zip(topics, given, strict=True):
            nuggets = [{"text": f"{t} n", "importance": "vital", "assignment": label}]
            record = {"qid": t, "query": "q", "nuggets": nuggets, "run_id": run, "answer_text": f"{run} {t}."}
            assessed.append(json.dumps(record))
    (world.tmp / "assessed.jsonl").write_text("\n".join(assessed) + "\n")
    answers.import_nuggets(world.engine, world.tmp / "assessed.jsonl", name="six")
    queued = client.post("/api/v1/tasks/six/evaluate", headers=world.headers("owner")).json()
    work_on(world.engine, [j["id"] for j in queued["jobs"]], mlflow=False)


def test_an_answer_board_has_tiers_from_tukeys_hsd_on_its_runs_topics(world: World, client: TestClient) -> None:
    """Three runs' answers on six topics: 'best' supports every nugget, 'mid' half of them, 'none'
    none; Tukey's HSD (the code ranking boards use) separates best from none."""
    six_topics(world, client)
    page = client.get("/tasks/six?measure=V_strict")
    assert page.status_code == 200, page.text
    tiers = re.findall(r'<td class="tier">(\w*)</td>', page.text)
    comparison = comparisons.compare_answers(
        world.engine, bank_name="six", answer_names=["best", "mid", "none"], measures=["V_strict"], multi="tukey"
    )
    significant = {(p.run, p.versus) for p in comparison.pairs if p.significant}
    assert ("best", "none") in significant and ("best", "mid") not in significant
    assert tiers[0] != tiers[2] and set(tiers[1]) & set(tiers[0])  # best and none apart, mid shares with best
    assert "not significantly different on V_strict (Tukey&#39;s HSD" in page.text


@pytest.mark.both_databases
def test_an_idle_worker_stores_an_answer_boards_letters_and_the_page_reads_them(
    world: World, client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Pages ready before anyone asks: once its queue is empty a worker stores the letters of each
    answer task's board on every measure the task evaluates (not only the board's); the page shows
    them without comparing a run (a page never stores), and a newer evaluation changes what
    decides them. The runs have no citations: no letters on citation support, none compared."""
    six_topics(world, client)  # evaluated by `evaluate --wait` alone: nothing stored yet
    with unit_of_work(world.engine) as session:  # a board of two measures: the others are picked by ?measure=
        session.execute(update(Task).where(Task.name == "six").values(measures=["W", "V_strict"]))
    assert _answer_tiers_stored(world) == 0
    computed = re.findall(r'<td class="tier">(\w*)</td>', client.get("/tasks/six?measure=V_strict").text)
    assert _answer_tiers_stored(world) == 0  # GET never writes
    worker = Worker(world.engine, WorkerSettings(until_empty=True, index_runs=False, reports=(refresh_answer_tiers,)))
    worker.run()
    board = tasks.task_leaderboard(world.engine, as_principal(world.engine, "owner"), "six").body
    assert board["measures"] == ["W", "V_strict"]
    assert _answer_tiers_stored(world) == len(NUGGET_MEASURES)  # the board's and the others
    assert refresh_answer_tiers(world.engine) == 0  # nothing missing now

    def no_comparison(*_: Any, **__: Any) -> Any:
        raise AssertionError("the page compared the runs")

    monkeypatch.setattr(comparisons, "compare_answers", no_comparison)
    with client_for(world.engine) as fresh:  # a server process of its own: nothing kept in memory
        for measure in ANSWER_MEASURES:
            page = fresh.get(f"/tasks/six?measure={measure}")
            assert page.status_code == 200, page.text
            assert ('<td class="tier"></td>' in page.text) == (measure in SUPPORT_MEASURES), measure
        stored = re.findall(r'<td class="tier">(\w*)</td>', fresh.get("/tasks/six?measure=V_strict").text)
    assert stored == computed and len(set(stored)) >= 2


def test_a_worker_stores_the_answer_letters_after_it_evaluates_answer_runs(world: World, client: TestClient) -> None:
    """Not only at its sweep (its first idle moment, then each minute): the answer jobs a worker
    finished have it look at the answer tasks' letters as soon as its queue is empty."""
    six_topics(world, client)
    worker = Worker(world.engine, WorkerSettings(until_empty=True, index_runs=False, reports=(refresh_answer_tiers,)))
    worker.run()  # its first sweep
    assert _answer_tiers_stored(world) > 0
    with world.engine.begin() as connection:
        connection.execute(text("DELETE FROM answer_tiers"))
    refs = answer_kind.enqueue(world.engine, bank_name="six", answer_names=["best", "mid", "none"], force=True)
    assert len(refs) == 3
    while worker.process_one():  # within the minute of its sweep: its answer jobs ask for the next one
        pass
    worker.refresh_boards(interruptible=True)  # its queue is empty
    assert _answer_tiers_stored(world) > 0


def test_letters_another_worker_stored_first_are_left_to_it(
    world: World, client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    six_topics(world, client)

    def stored_meanwhile(*_: Any) -> int:
        raise IntegrityError("INSERT INTO answer_tiers", {}, Exception("UNIQUE constraint failed: answer_tiers.key"))

    monkeypatch.setattr(answer_tiers, "store_tiers", stored_meanwhile)
    assert refresh_answer_tiers(world.engine) == 0  # no error: the next sweep finds them stored


def test_an_answer_task_keeps_its_newest_letters(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    """What a worker prepared for older states of a board is let go beyond the newest kept."""
    tasks.create_task(world.engine, "kept", nuggets_name=_small_bank(world), owner="owner")
    monkeypatch.setattr(answer_tiers, "TIERS_KEPT_PER_TASK", 2)
    with world.engine.connect() as connection:
        task_id = connection.execute(text("SELECT id FROM tasks WHERE name = 'kept'")).scalar_one()
    for state in ("first", "second", "third"):  # each stored after the one before
        with unit_of_work(world.engine) as session:
            assert answer_tiers.store_tiers(session, task_id, {state: {"best": "a"}}) == 1
    with world.engine.connect() as connection:
        kept = set(connection.execute(text("SELECT key FROM answer_tiers")).scalars())
    assert kept == {"second", "third"}


def _small_bank(world: World) -> str:
    bank = world.tmp / "small-bank.jsonl"
    bank.write_text(json.dumps({"qid": "t0", "query": "q", "nuggets": [{"text": "n", "importance": "vital"}]}) + "\n")
    answers.import_nuggets(world.engine, bank, name="small")
    return "small"


def _answer_tiers_stored(world: World) -> int:
    with world.engine.connect() as connection:
        return int(connection.execute(text("SELECT count(*) FROM answer_tiers")).scalar_one())


def words(page: httpx.Response) -> str:
    """A page's main text as a reader sees it: tags out, entities decoded, spaces collapsed."""
    main = page.text.split('id="main">')[-1]
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", main)))


def test_an_answer_tasks_runs_are_compared_as_ranking_runs_are(world: World, client: TestClient) -> None:
    """The compare page of an answer task: the paired tests (Holm-corrected) on an answer measure,
    the per-topic differences and the topics where the runs disagree most; a participant compares
    only their team's runs, and only once the task is released."""
    six_topics(world, client, hidden=True)
    best_mid = "/tasks/six/compare?run=best&run=mid"
    red = world.headers("red")
    hidden = client.get(best_mid, headers=red)
    assert (hidden.status_code, words(hidden).split(" Back to")[0].strip()) == (
        404,
        "Not found The scores of task 'six' are hidden until the organisers release the task.",
    )
    assert "0.0756" not in hidden.text
    owner = client.get(best_mid, headers=world.headers("owner"))
    assert owner.status_code == 200 and "0.0756" in owner.text  # the organisers see it before the release
    assert client.post("/api/v1/tasks/six/release", headers=world.headers("owner")).status_code == 200

    page = client.get(best_mid + "&measure=weighted_score", headers=red)
    assert page.status_code == 200, page.text
    text = words(page)
    # best - mid on W per topic: 0, 1, 0, 1, 0, 1; the paired t test (one pair: Holm leaves p as is)
    reference = stats.ttest_rel([1.0] * 6, [1.0, 0.0] * 3)
    assert "t test, holm-corrected over the 1 pairs, alpha 0.05; 6 topics" in text
    assert "Only 6 topics: with fewer than 10, intervals and p-values mean little." in text
    assert f"best mid 1.0000 0.5000 +0.5000 (-0.075, 1.075) {reference.pvalue:.4f} {reference.pvalue:.4f} no" in text
    assert 'value="W"' in page.text  # the alias, by the board's name
    assert "Topic t1 spread 1.0000 best W 1.0000 mid W 0.0000" in text and "<ol>" not in page.text
    assert "Per-topic differences Topic best − mid t1 +1.0000 t3 +1.0000 t5 +1.0000 t0 +0.0000" in text
    assert "<svg" in page.text
    comparison = comparisons.compare_answers(
        world.engine, bank_name="six", answer_names=["best", "mid"], measures=["W"]
    )  # the CLI's numbers
    assert f"{comparison.pairs[0].p_corrected:.4f}" == f"{reference.pvalue:.4f}"

    refusals = [
        ("red", "/tasks/six/compare?run=best&run=none", 403, "The run name 'none' belongs to another team's run"),
        ("blue", best_mid, 403, "The run name 'best' belongs to another team's run"),
        ("viewer", best_mid, 403, "Your role (viewer) may not do this; it is for: admin, organiser, participant."),
        (
            "red",
            best_mid + "&measure=support_precision",
            422,
            "None of these runs has support_precision on task 'six': their answers' citations are not assessed.",
        ),
        ("red", best_mid + "&measure=AP", 422, "Unknown answer measure 'AP'; they are V_strict, A_strict, V, A, W,"),
        ("red", "/tasks/six/compare?run=best", 200, "Pick two or more runs."),
    ]
    for caller, path, status, message in refusals:
        refused = client.get(path, headers=world.headers(caller))
        assert (refused.status_code, message in words(refused)) == (status, True), (caller, path, words(refused))
        assert "0.0756" not in refused.text and "Traceback" not in refused.text
    assert "evalstore measures" not in words(client.get(best_mid + "&measure=AP", headers=red))

    later = upload(client, world, "red", "late", answer_line("late", "t0").encode(), task="six")
    assert later.status_code == 201, later.text
    unassessed = client.get("/tasks/six/compare?run=best&run=late", headers=red)
    assert (unassessed.status_code, words(unassessed).split(" Back to")[0].strip()) == (
        422,
        "Something is wrong Run 'late' has no scores yet: its answers are not assessed.",
    )


def test_an_answer_runs_page_shows_its_topics_against_the_median_after_the_release(
    world: World, client: TestClient
) -> None:
    """An answer run's page: each topic's value of an answer measure against the median of the
    task's runs (chart and table), hidden from its team until the release."""
    six_topics(world, client, hidden=True)
    red = world.headers("red")
    before = client.get("/runs/mid?measure=A", headers=red)
    assert before.status_code == 200
    assert "Scores are hidden until the organisers release the task." in words(before)
    assert "<svg" not in before.text and "Per topic" not in before.text and "median" not in before.text
    assert "<svg" in client.get("/runs/mid", headers=world.headers("owner")).text
    assert client.post("/api/v1/tasks/six/release", headers=world.headers("owner")).status_code == 200

    page = client.get("/runs/mid?measure=A", headers=red)
    assert page.status_code == 200, page.text
    # A per topic: best 1 everywhere, mid 1/0 alternating, none 0 but a partial support (0.5) on t5
    runs = np.array([[1.0] * 6, [1.0, 0.0] * 3, [0.0] * 5 + [0.5]])
    median = np.median(runs, axis=0)
    for topic, value, middle in zip([f"t{i}" for i in range(6)], runs[1], median, strict=True):
        assert f"topic {topic}: A {value:.4f}, median {middle:.4f}" in page.text
    text = words(page)
    assert "mid: per-topic A minus the median of the task's 3 runs" in text
    assert "Per topic Topic A V_strict A_strict V W W_strict t0 1.0000" in text
    assert 'href="/tasks/six/compare?run=mid"' in page.text
    default = client.get("/runs/mid", headers=red)  # the board's first measure
    assert "mid: per-topic V_strict minus the median" in words(default)
    refused = client.get("/runs/mid?measure=support_recall", headers=red)
    assert (refused.status_code, words(refused).split(" Back to")[0].strip()) == (
        422,
        "Something is wrong Run 'mid' has no per-topic support_recall; pick one of A, A_strict, V, V_strict, W, "
        "W_strict.",
    )
    assert client.get("/runs/mid", headers=world.headers("blue")).status_code == 403
