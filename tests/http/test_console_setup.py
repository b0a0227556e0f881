"""Setting a campaign up from the organiser's console: create a task (hidden, a private split, a
topics file participants download, measures checked against the qrels, a Markdown description
rendered safely), change settings with a confirm step when accepted runs would have been refused,
attach topics and documents to a pool (uploaded or picked), and schedule a release that a worker
performs (cancellable). Another organiser is refused on each."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select, update

from evalstore.db.models import Pool, Task
from evalstore.db.session import read_only, unit_of_work
from evalstore.services import access, collections, organising, tasks
from evalstore.services.worker import Worker, WorkerSettings
from tests.http.conftest import PASSWORD, World, as_principal, client_for
from tests.http.test_pages import csrf_of, sign_in

TOPICS = (
    "<top>\n<num> Number: 301\n<title> International Organized Crime\n"
    "<desc> Description:\nIdentify organizations.\n<narr> Narrative:\nA relevant document names one.\n</top>\n"
    "<top>\n<num> Number: 302\n<title> Poliomyelitis and Post-Polio\n</top>\n"
)
DESCRIPTION = (
    "# Robust track\n\nRank **news** articles; see [the guidelines](https://example.org/g).\n\n"
    "<script>alert(1)</script> [bad](javascript:alert(1)) <img src=x onerror=alert(2)>"
)


@pytest.fixture
def owner(world: World) -> TestClient:
    access.set_password(world.engine, "owner", PASSWORD)
    with client_for(world.engine) as client:
        assert sign_in(client, "owner").status_code == 303
        yield client


def _new_task(owner: TestClient, **fields: object) -> object:
    page = owner.get("/new-task")
    assert page.status_code == 200
    data: dict[str, object] = {"csrf": csrf_of(page.text), "qrels": "sample", "visibility": "hidden", **fields}
    files = data.pop("files", None)
    return owner.post("/new-task", data=data, files=files, follow_redirects=False)  # type: ignore[arg-type]


def test_an_organiser_creates_a_hidden_task_with_a_private_split_and_a_topics_file(
    world: World, owner: TestClient
) -> None:
    form = owner.get("/new-task")
    assert '<option value="sample">sample (' in form.text  # the qrels of their own tasks
    assert 'value="alpha_nDCG@10"' not in form.text  # only measures relevance qrels compute are offered
    created = _new_task(
        owner,
        name="robust",
        private_fraction="0.5",
        split_seed="7",
        measure=["AP", "nDCG@10"],
        more_measures="P@5",
        official_measure="nDCG@10",
        max_runs_per_team="3",
        daily_cap="2",
        opens="2026-11-01T09:00",
        closes="2030-12-01T12:00",
        closes_offset="60",
        description=DESCRIPTION,
        files={"topics_file": ("robust-topics.txt", TOPICS.encode())},
    )
    assert created.status_code == 303, created.text  # type: ignore[attr-defined]
    assert created.headers["location"] == "/tasks/robust/manage?created=1"  # type: ignore[attr-defined]
    shown = tasks.show_task(world.engine, "robust")
    assert shown.hidden and shown.owner == "owner" and shown.split_seed == 7 and shown.private_fraction == 0.5
    assert shown.measures == ["AP", "nDCG@10", "P@5"] and shown.official_measure == "nDCG@10"
    assert shown.max_runs_per_team == 3 and shown.daily_cap == 2 and shown.topics == "robust-topics"
    assert shown.closes_at is not None and shown.closes_at.astimezone(UTC).isoformat().startswith("2030-12-01T11:00")
    console = owner.get("/tasks/robust/manage?created=1")
    assert "Task robust created: its scores are hidden until you release them." in console.text
    assert 'href="/tasks/robust/topics" download' in console.text

    # participants read the description as Markdown, with no markup of the organiser's own
    board = owner.get("/tasks/robust", headers=world.headers("red"))
    assert "<h1>Robust track</h1>" in board.text and "<strong>news</strong>" in board.text
    assert '<a href="https://example.org/g" rel="noopener noreferrer nofollow">the guidelines</a>' in board.text
    assert "<script>alert(1)" not in board.text and "&lt;script&gt;alert(1)&lt;/script&gt;" in board.text
    assert 'href="javascript' not in board.text and "<img" not in board.text
    # ... and download the topics file: JSON lines, an attachment, never shown inline
    topics = owner.get("/tasks/robust/topics", headers=world.headers("red"))
    assert topics.status_code == 200 and topics.headers["content-type"] == "application/x-ndjson"
    assert topics.headers["content-disposition"].startswith('attachment; filename="robust-topics.jsonl"')
    rows = [json.loads(line) for line in topics.text.splitlines()]
    assert rows == [
        {
            "topic": "301",
            "title": "International Organized Crime",
            "description": "Identify organizations.",
            "narrative": "A relevant document names one.",
        },
        {"topic": "302", "title": "Poliomyelitis and Post-Polio", "description": None, "narrative": None},
    ]
    assert owner.get("/tasks/open/topics", headers=world.headers("red")).status_code == 404  # none attached

    # a new topics file from the console: a bad one names its line and changes nothing
    page = owner.get("/tasks/robust/manage")
    bad = owner.post(
        "/tasks/robust/topics",
        data={"csrf": csrf_of(page.text)},
        files={"topics_file": ("new.tsv", b"401\tOne\n401\tAgain\n")},
    )
    assert bad.status_code == 422 and "new.tsv:2: topic 401 is given twice (also at line 1); keep one" in bad.text
    assert tasks.show_task(world.engine, "robust").topics == "robust-topics"
    replaced = owner.post(
        "/tasks/robust/topics",
        data={"csrf": csrf_of(page.text)},
        files={"topics_file": ("new.tsv", b"401\tOne\n402\tTwo\n")},
        follow_redirects=False,
    )
    assert replaced.status_code == 303 and tasks.show_task(world.engine, "robust").topics == "robust-topics-2"
    again = owner.get("/tasks/robust/topics", headers=world.headers("red"))
    assert [json.loads(line)["topic"] for line in again.text.splitlines()] == ["401", "402"]


def test_a_measure_the_qrels_cannot_compute_is_refused_with_the_reason(world: World, owner: TestClient) -> None:
    refused = _new_task(owner, name="diverse", more_measures="alpha_nDCG@10", description="kept")
    assert refused.status_code == 422  # type: ignore[attr-defined]
    assert (
        "alpha_nDCG@10 is computed from subtopic judgments, and qrels &#39;sample&#39; hold relevance judgments: "
        "a task over them cannot compute it."
    ) in refused.text  # type: ignore[attr-defined]
    assert 'value="alpha_nDCG@10"' in refused.text and ">kept</textarea>" in refused.text  # type: ignore[attr-defined]
    assert "diverse" not in [t.name for t in tasks.list_tasks(world.engine)]
    # the same on the settings of an existing task, and from the library (the CLI's path)
    page = owner.get("/tasks/open/manage")
    again = owner.post("/tasks/open/settings", data={"csrf": csrf_of(page.text), "measures": "AP, alpha_nDCG@10"})
    assert again.status_code == 422 and "alpha_nDCG@10 is computed from subtopic judgments" in again.text
    with pytest.raises(Exception, match="alpha_nDCG@10 is computed from subtopic judgments"):
        tasks.create_task(world.engine, "lib", qrels_name="sample", measures=["alpha_nDCG@10"])


def test_a_bad_topics_file_stores_nothing_and_names_its_line(world: World, owner: TestClient) -> None:
    bad = "<top>\n<num> Number: 301\n<title> One\n</top>\n<top>\n<num> Number: 301\n<title> Again\n</top>\n"
    refused = _new_task(owner, name="broken", files={"topics_file": ("mine.txt", bad.encode())})
    assert refused.status_code == 422  # type: ignore[attr-defined]
    assert "mine.txt:5: topic 301 is given twice (also at line 1); keep one" in refused.text  # type: ignore[attr-defined]
    assert "broken" not in [t.name for t in tasks.list_tasks(world.engine)]
    assert not [t for t in collections.list_text_sets(world.engine) if t.name.startswith("broken")]


def test_the_form_refuses_what_cannot_be_a_task(world: World, owner: TestClient) -> None:
    share = _new_task(owner, name="half", private_fraction="1.5")
    assert share.status_code == 422  # type: ignore[attr-defined]
    assert "The private share is the fraction of topics kept private, between 0 and 1 (e.g. 0.5); got 1.5." in (
        share.text  # type: ignore[attr-defined]
    )
    taken = _new_task(owner, name="open")
    assert taken.status_code == 409  # type: ignore[attr-defined]
    assert "A task named &#39;open&#39; exists already; choose another name." in taken.text  # type: ignore[attr-defined]
    quota = _new_task(owner, name="q", max_runs_per_team="0")
    assert "The quota per team must be at least 1 run; got 0." in quota.text  # type: ignore[attr-defined]
    assert "--" not in quota.text.split('role="alert"')[1].split("</p>")[0]  # type: ignore[attr-defined]


def test_another_organiser_is_offered_no_qrels_and_refused_them(world: World) -> None:
    access.set_password(world.engine, "organiser", PASSWORD)
    with client_for(world.engine) as other:
        assert sign_in(other, "organiser").status_code == 303
        page = other.get("/new-task")
        assert page.status_code == 200 and '<option value="sample"' not in page.text
        assert "There are no qrels or nugget banks you may create a task over yet" in page.text
        refused = other.post(
            "/new-task", data={"csrf": csrf_of(page.text), "name": "mine", "qrels": "sample"}, follow_redirects=False
        )
        assert refused.status_code == 403
        assert "Qrels &#39;sample&#39; are the judgments of another organiser&#39;s task" in refused.text
        console = other.get("/tasks/open/manage")
        for url, data in (
            ("/tasks/open/release/schedule", {"release_at": "2030-01-01T00:00"}),
            ("/tasks/open/release/cancel", {}),
            ("/tasks/open/pools/pool/texts", {"topic_set": "x"}),
            ("/tasks/open/topics", {}),
        ):
            assert other.post(url, data={"csrf": csrf_of(page.text), **data}).status_code == 403, url
        assert console.status_code == 403


def test_an_admin_creates_a_task_over_a_nugget_bank_that_takes_answers(world: World) -> None:
    access.set_password(world.engine, "admin", PASSWORD)
    with client_for(world.engine) as admin:
        assert sign_in(admin, "admin").status_code == 303
        page = admin.get("/new-task")
        assert '<option value="bank">bank (' in page.text and 'name="answer_measure" value="W"' in page.text
        fields = {"csrf": csrf_of(page.text), "name": "rag", "visibility": "hidden", "official_measure": "W"}
        both = admin.post("/new-task", data={**fields, "qrels": "sample", "nuggets": "bank"})
        assert both.status_code == 422
        assert (
            "A task evaluates ranked runs against qrels or generated answers on a nugget bank; choose one of the two."
            in both.text
        )
        neither = admin.post("/new-task", data={**fields, "qrels": "", "nuggets": ""})
        assert neither.status_code == 422 and "Choose the qrels (ranked runs) or the nugget bank" in neither.text
        split = admin.post("/new-task", data={**fields, "qrels": "", "nuggets": "bank", "private_fraction": "0.5"})
        assert split.status_code == 422
        assert "A task over a nugget bank keeps no private topics; leave the split out." in split.text
        created = admin.post(
            "/new-task",
            data={**fields, "qrels": "", "nuggets": "bank", "answer_measure": ["W", "V_strict"], "measure": ["AP"]},
            follow_redirects=False,
        )
        assert created.status_code == 303, created.text
    shown = tasks.show_task(world.engine, "rag").as_dict()
    assert (shown["qrels"], shown["nuggets"], shown["measures"], shown["official_measure"]) == (
        None,
        "bank",
        ["W", "V_strict"],
        "W",
    )


def test_an_admin_creates_a_task_an_organiser_then_manages(world: World) -> None:
    """The browser alone hands a campaign to an invited organiser: the admin names the task's
    organiser on the form, and the organiser manages it on its console."""
    access.set_password(world.engine, "admin", PASSWORD)
    with client_for(world.engine) as admin:
        assert sign_in(admin, "admin").status_code == 303
        page = admin.get("/new-task")
        assert '<option value="organiser">organiser</option>' in page.text
        assert '<option value="red"' not in page.text  # participants manage no task
        created = admin.post(
            "/new-task",
            data={"csrf": csrf_of(page.text), "name": "handed", "qrels": "sample", "owner": "organiser"},
            follow_redirects=False,
        )
        assert created.status_code == 303, created.text
    assert tasks.show_task(world.engine, "handed").as_dict()["owner"] == "organiser"
    access.set_password(world.engine, "organiser", PASSWORD)
    with client_for(world.engine) as organiser:
        assert sign_in(organiser, "organiser").status_code == 303
        assert organiser.get("/tasks/handed/manage").status_code == 200
        assert 'id="owner"' not in organiser.get("/new-task").text  # an organiser owns what they create


def test_settings_that_would_refuse_accepted_runs_are_confirmed_first(world: World, owner: TestClient) -> None:
    world.submit("open", "red-two")  # team red now holds two runs
    page = owner.get("/tasks/open/manage")
    fields = {"csrf": csrf_of(page.text), "max_runs_per_team": "1", "measures": "AP", "description": "Two words."}
    asked = owner.post("/tasks/open/settings", data=fields)
    assert asked.status_code == 200 and "Save these settings of open?" in asked.text
    assert "Team red already holds more than 1 run: its runs stay and it submits no more." in asked.text
    assert 'name="max_runs_per_team" value="1"' in asked.text and 'name="confirm" value="yes"' in asked.text
    assert tasks.show_task(world.engine, "open").max_runs_per_team is None  # nothing saved yet
    saved = owner.post("/tasks/open/settings", data={**fields, "confirm": "yes"}, follow_redirects=False)
    assert saved.status_code == 303 and tasks.show_task(world.engine, "open").max_runs_per_team == 1
    # the same quota again asks nothing: it was confirmed when set
    same = owner.post("/tasks/open/settings", data={**fields, "description": "Other words."}, follow_redirects=False)
    assert same.status_code == 303
    # a refused value is said on the form, not asked about
    bad = owner.post("/tasks/open/settings", data={**fields, "max_runs_per_team": "0"})
    assert bad.status_code == 422


def test_texts_are_attached_to_a_pool_uploaded_or_picked(world: World, owner: TestClient, tmp_path: object) -> None:
    owner_principal = as_principal(world.engine, "owner")
    organising.build_task_pool(world.engine, owner_principal, "open", name="open-pool", depth=5)
    page = owner.get("/tasks/open/manage")
    assert 'action="/tasks/open/pools/open%3Aopen-pool/texts' in page.text
    docs = '{"doc_id": "d1", "title": "One", "text": "First."}\n{"doc_id": "d2", "text": "Second."}\n'
    bad_docs = '{"doc_id": "d1", "text": "First."}\n{"doc_id": "d1", "text": "Again."}\n'
    refused = owner.post(
        "/tasks/open/pools/open%3Aopen-pool/texts",
        data={"csrf": csrf_of(page.text)},
        files={
            "topics_file": ("t.txt", TOPICS.encode()),
            "documents_file": ("docs.jsonl", bad_docs.encode()),
        },
    )
    assert refused.status_code == 422
    assert "docs.jsonl:2: document d1 is given twice (also at line 1); keep one" in refused.text
    assert not [
        t for t in collections.list_text_sets(world.engine) if t.name.startswith("open:open-pool")
    ]  # nothing kept
    attached = owner.post(
        "/tasks/open/pools/open%3Aopen-pool/texts",
        data={"csrf": csrf_of(page.text)},
        files={"topics_file": ("t.txt", TOPICS.encode()), "documents_file": ("docs.jsonl", docs.encode())},
        follow_redirects=False,
    )
    assert attached.status_code == 303 and attached.headers["location"] == "/tasks/open/manage?saved=texts#pools"
    with read_only(world.engine) as session:
        pool = session.scalar(select(Pool).where(Pool.name == "open:open-pool"))
        assert pool is not None and (pool.topic_set, pool.collection) == (
            "open:open-pool-topics",
            "open:open-pool-documents",
        )
    sets = {t.name: t.count for t in collections.list_text_sets(world.engine)}
    assert sets["open:open-pool-topics"] == 2 and sets["open:open-pool-documents"] == 2
    # picking an imported set instead; both at once is refused
    picked = owner.post(
        "/tasks/open/pools/open%3Aopen-pool/texts",
        data={
            "csrf": csrf_of(page.text),
            "collection": "open:open-pool-documents",
            "topic_set": "open:open-pool-topics",
        },
        follow_redirects=False,
    )
    assert picked.status_code == 303
    both = owner.post(
        "/tasks/open/pools/open%3Aopen-pool/texts",
        data={"csrf": csrf_of(page.text), "topic_set": "open:open-pool-topics"},
        files={"topics_file": ("t.txt", TOPICS.encode())},
    )
    assert both.status_code == 422 and "Pick imported topics or upload a topics file, not both." in both.text
    nothing = owner.post("/tasks/open/pools/open%3Aopen-pool/texts", data={"csrf": csrf_of(page.text)})
    assert nothing.status_code == 422 and "Pick or upload the topics or the documents to attach." in nothing.text
    # a pool that is not the task's is not found there
    other = owner.post("/tasks/open/pools/pool/texts", data={"csrf": csrf_of(page.text), "topic_set": "x"})
    assert other.status_code == 404


def test_a_release_is_scheduled_confirmed_cancelled_and_performed_by_the_worker(
    world: World, owner: TestClient
) -> None:
    page = owner.get("/tasks/to-release/manage")
    when = (datetime.now(UTC) + timedelta(days=2)).replace(second=0, microsecond=0)
    fields = {"csrf": csrf_of(page.text), "release_at": when.strftime("%Y-%m-%dT%H:%M"), "release_at_offset": "0"}
    asked = owner.post("/tasks/to-release/release/schedule", data=fields)
    assert asked.status_code == 200 and "Release the scores of to-release at a set time?" in asked.text
    assert tasks.show_task(world.engine, "to-release").release_at is None  # asked, nothing stored
    scheduled = owner.post(
        "/tasks/to-release/release/schedule", data={**fields, "confirm": "yes"}, follow_redirects=False
    )
    assert scheduled.status_code == 303
    shown = tasks.show_task(world.engine, "to-release")
    assert shown.release_at is not None and shown.release_at.astimezone(UTC) == when and shown.released_at is None
    console = owner.get("/tasks/to-release/manage")
    assert "Release scheduled for" in console.text and "Cancel the scheduled release" in console.text
    assert f'datetime="{when.isoformat(timespec="seconds")}"' in console.text
    board = owner.get("/tasks/to-release", headers=world.headers("red"))
    assert "release scheduled for" in board.text

    past = owner.post(
        "/tasks/to-release/release/schedule",
        data={**fields, "release_at": "2020-01-01T00:00", "confirm": "yes"},
    )
    assert past.status_code == 422 and "The release time 2020-01-01T00:00:00+00:00 has passed" in past.text

    question = owner.post("/tasks/to-release/release/cancel", data={"csrf": csrf_of(page.text)})
    assert question.status_code == 200 and "Cancel the scheduled release of to-release?" in question.text
    cancelled = owner.post(
        "/tasks/to-release/release/cancel", data={"csrf": csrf_of(page.text), "confirm": "yes"}, follow_redirects=False
    )
    assert cancelled.status_code == 303 and tasks.show_task(world.engine, "to-release").release_at is None
    again = owner.post("/tasks/to-release/release/cancel", data={"csrf": csrf_of(page.text), "confirm": "yes"})
    assert again.status_code == 409 and "Task &#39;to-release&#39; has no scheduled release to cancel." in again.text

    # scheduled again, its time comes: an idle worker releases it, once
    owner.post("/tasks/to-release/release/schedule", data={**fields, "confirm": "yes"})
    with unit_of_work(world.engine) as session:
        session.execute(
            update(Task).where(Task.name == "to-release").values(release_at=datetime.now(UTC) - timedelta(minutes=1))
        )
    assert tasks.release_due(world.engine) == ["to-release"]
    assert tasks.release_due(world.engine) == []
    shown = tasks.show_task(world.engine, "to-release")
    assert shown.released_at is not None and shown.release_at is None
    public = owner.post("/tasks/open/release/schedule", data={**fields, "confirm": "yes"})
    assert public.status_code == 409
    assert "Task &#39;open&#39; is public: its scores are shown already; there is nothing to release." in public.text


def test_an_idle_worker_performs_a_due_release(world: World) -> None:
    tasks.schedule_release(world.engine, "secret", datetime.now(UTC) + timedelta(hours=1))
    with unit_of_work(world.engine) as session:
        session.execute(
            update(Task).where(Task.name == "secret").values(release_at=datetime.now(UTC) - timedelta(seconds=1))
        )
    worker = Worker(world.engine, WorkerSettings(poll_interval=0.01, index_runs=False))
    worker._release_due()  # noqa: SLF001 (the chore the idle loop runs)
    assert tasks.show_task(world.engine, "secret").released_at is not None
