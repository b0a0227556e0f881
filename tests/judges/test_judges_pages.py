"""Judges in the browser and the API: the judging page shows a judge's suggestion only when the
pool's organiser turns it on (and stores that it was shown); the pool's review page reports
agreement with it apart; the organiser's compare page (who may open it, its numbers, GET writes
nothing, POST queues what is missing); leaderboards mark circular runs and show the judge's probe."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, func, select

from evalstore.db.models import Evaluation, PoolJudgment
from evalstore.db.session import read_only
from evalstore.services import access, judging, store, tasks
from evalstore.services.judges import probe, registry, running, suggestions, versions
from evalstore.services.orchestration import work_on
from tests.http.conftest import client_for

USERS = {
    "admin": ("admin", None),
    "owner": ("organiser", None),
    "other": ("organiser", None),
    "red": ("participant", "red"),
    "ann": ("assessor", None),
    "viewer": ("viewer", None),
}


@pytest.fixture
def site(world: Engine, endpoint: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Engine]:
    """Pool 'p' labelled by judge 'fake' (model fake-model) and assigned to assessor 'ann'; task
    'task' (owner 'owner') with runs good, fair and self (which declares fake-model), evaluated on
    qrels 'human', then moved to version human@v1 (judge:fake) and evaluated on it."""
    monkeypatch.setattr(tasks.boards, "BOARD_FRESHNESS", 0.0)
    for name, (role, team) in USERS.items():
        access.add_user(world, name, role=role, team=team)
    judging.assign_assessor(world, "p", "ann")
    registry.add_judge(world, "fake", endpoint=endpoint, model="fake-model")
    running.run_judge(world, "fake", pool_name="p")
    # self: each topic's best document first, as good does, then the worst (good: the second best)
    (tmp_path / "self.txt").write_text(
        "".join(
            f"{topic} Q0 {doc} {rank} {10 - rank} self\n"
            for topic, docs in {"1": "d1 d7 d2", "2": "d3 d7 d4", "3": "d5 d7 d6"}.items()
            for rank, doc in enumerate(docs.split(), start=1)
        )
    )
    store.register_run(world, tmp_path / "self.txt", name="self", metadata={"models": "Fake-Model"})
    tasks.create_task(world, "task", qrels_name="human", owner="owner", measures=["AP", "nDCG@10"])
    attached = tasks.attach_runs(world, "task", ["good", "fair", "self"])
    work_on(world, [a.job for a in attached], mlflow=False)
    built = versions.build_version(world, "human", pool_name="p", source="judge:fake")
    work_on(world, [q.job for q in built.queued], mlflow=False)
    yield world


def _headers(engine: Engine, user: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {access.create_token(engine, user, expires_days=1).token}"}


def _evaluations(engine: Engine) -> int:
    with read_only(engine) as session:
        return int(session.scalar(select(func.count()).select_from(Evaluation)) or 0)


def test_the_judging_page_shows_a_suggestion_only_when_the_organiser_turns_it_on(site: Engine) -> None:
    ann = _headers(site, "ann")
    with client_for(site) as client:
        page = client.get("/judge/p/1", headers=ann)
        assert page.status_code == 200
        assert 'id="suggestion"' not in page.text and 'name="suggested"' not in page.text  # off by default
        doc = re.search(r'name="doc" value="([^"]+)"', page.text)
        assert doc is not None
        first = doc.group(1)
        client.post("/judge/p/1", headers=ann, data={"doc": first, "grade": "2", "shown_at": "0"})

        suggestions.set_suggestions(site, "p", "fake")
        page = client.get("/judge/p/1", headers=ann)
        doc = re.search(r'name="doc" value="([^"]+)"', page.text)
        assert doc is not None and doc.group(1) != first
        grade = {"d1": 3, "d2": 1, "d7": 0}[doc.group(1)]  # the fake judge's labels
        shown = re.search(r'id="suggested-grade">([^<]+)<', page.text)
        assert shown is not None and shown.group(1).startswith(f"{grade} ")
        assert f'id="suggested-explanation">{grade} query words found<' in page.text
        assert f'name="suggested" value="{grade}"' in page.text and 'name="suggested_by" value="fake"' in page.text
        sent = client.post(
            "/judge/p/1",
            headers=ann,
            follow_redirects=False,
            data={"doc": doc.group(1), "grade": "1", "shown_at": "0", "suggested": str(grade), "suggested_by": "fake"},
        )
        assert sent.status_code == 303
        forged = client.post(
            "/judge/p/1",
            headers=ann,
            data={"doc": "d7", "grade": "0", "shown_at": "0", "suggested": "3", "suggested_by": "fake"},
        )
        assert forged.status_code == 422
    with read_only(site) as session:
        stored = {
            d: (r, s, by)
            for d, r, s, by in session.execute(
                select(PoolJudgment.doc, PoolJudgment.relevance, PoolJudgment.suggested, PoolJudgment.suggested_by)
            )
        }
    assert stored == {first: (2, None, None), doc.group(1): (1, grade, "fake")}

    with client_for(site) as client:
        review = client.get("/pools/p/review", headers=_headers(site, "admin"))
    assert review.status_code == 200
    table = review.text[review.text.index('id="suggestion-agreement"') :]
    assert re.search(r"suggestion shown</th><td class=\"num\">1</td>", table)
    assert re.search(r"suggestion not shown</th><td class=\"num\">1</td>", table)
    assert f'<td>ann</td><td class="num">1</td><td class="num">{int(grade == 1)}</td>' in review.text


def test_the_compare_page_is_the_organisers_and_admins_only(site: Engine) -> None:
    query = "?first=human&second=human%40v1"
    expected = {  # caller -> (GET, POST)
        None: (303, 303),  # to the sign-in form
        "admin": (200, 303),
        "owner": (200, 303),
        "other": (403, 403),  # another organiser's task
        "red": (403, 403),
        "ann": (403, 403),
        "viewer": (403, 403),
    }
    wrong = []
    with client_for(site, writes_per_minute=10_000) as client:
        for caller, (get_status, post_status) in expected.items():
            headers = _headers(site, caller) if caller else {}
            got = client.get(f"/tasks/task/judgments{query}", headers=headers, follow_redirects=False)
            posted = client.post(
                "/tasks/task/judgments/evaluate",
                headers=headers,
                data={"qrels": "human", "first": "human", "second": "human@v1"},
                follow_redirects=False,
            )
            if (got.status_code, posted.status_code) != (get_status, post_status):
                wrong.append(f"{caller}: GET {got.status_code}, POST {posted.status_code}")
    assert wrong == []


def test_the_compare_page_reports_the_commands_numbers_and_its_get_writes_nothing(site: Engine) -> None:
    probe.probe(site, "fake", collection="c", qrels_name="human", limit=4)
    owner = _headers(site, "owner")
    late = tasks.attach_runs(site, "task", ["poor"])  # queued on human@v1, not run; none on human
    before = _evaluations(site)
    with client_for(site) as client:
        page = client.get("/tasks/task/judgments?first=human&second=human%40v1&measure=AP", headers=owner)
        assert page.status_code == 200, page.text
        assert _evaluations(site) == before  # GET computes the report and stores nothing
        text = " ".join(page.text.split())
        assert "human@v1 against human: 7 documents judged in both (7 in human, 9 in human@v1), 3 topics." in text
        labels = text[text.index('id="labels"') : text.index('id="confusion"')]
        # human against the fake judge: 5 of 7 alike, kappa (5/7 - 2/7) / (1 - 2/7) = 0.6; d3 2->3, d4 0->1
        for name, value in (
            ("Same label", "0.7143"),
            ("Cohen's kappa", "0.6000"),
            ("Mean label difference (compared − reference)", "0.2857"),
            ("Rated higher / lower", "2 / 0"),
        ):
            assert re.search(rf"<td[^>]*>{re.escape(name)}</td><td class=\"num\">{re.escape(value)}</td>", labels), name
        confusion = re.findall(r"<tr><th scope=\"row\">(\d)</th>((?:<td class=\"num\">\d+</td>)+)</tr>", text)
        assert [(label, re.findall(r"\d+", cells)) for label, cells in confusion] == [
            ("0", ["1", "1", "0", "0"]),
            ("1", ["0", "2", "0", "0"]),
            ("2", ["0", "0", "0", "1"]),
            ("3", ["0", "0", "0", "2"]),
        ]
        systems = text[text.index('id="systems-1"') :]
        # good, fair, self and poor (evaluated in the request: its stored evaluation is not needed)
        for name, value in (
            ("Runs", "4"),
            ("Kendall's tau", "0.5477"),
            ("tau-AP", "0.6667"),
            ("Swaps among the reference's top 4", "1 of 6"),
            ("Pairs significant (t-test, alpha 0.05): reference / compared", "1 / 5 of 6"),
            ("Significance preserved", "1 (1.0000)"),
            ("Reversed / gained", "0 / 4"),
        ):
            assert re.search(rf"<td[^>]*>{re.escape(name)}</td><td class=\"num\">{re.escape(value)}</td>", systems), (
                name
            )
        assert "Swapped pairs</td><td>self › fair</td>" in systems
        assert "⊙ Run <strong>self</strong> declares fake-model" in text
        assert re.search(
            r'class="probe">query words inserted: 4 of 4 labels rose \(mean change \+[0-9.]+\); instruction inserted: 4 of 4',
            text,
        )
        assert re.search(r"on <strong>human</strong>: poor\. on <strong>human@v1</strong>: poor\.", text)

        queued = client.post(
            "/tasks/task/judgments/evaluate",
            headers=owner,
            data={"qrels": ["human", "human@v1"], "first": "human", "second": "human@v1"},
            follow_redirects=False,
        )
        assert queued.status_code == 303
        assert queued.headers["location"] == "/tasks/task/judgments?first=human&second=human%40v1&queued=2"
        assert _evaluations(site) == before + 1  # poor on human; poor's job on human@v1 is reused
        wrong = client.get("/tasks/task/judgments?first=human&second=sample", headers=owner)
        assert wrong.status_code == 200
        assert "Task &#39;task&#39; is compared on its qrels&#39; lineage (human@v1, human); not &#39;sample&#39;." in (
            wrong.text
        )
        # a choice the report cannot take: what to change is said in the form's words, not the command's
        for asked, said in (
            (
                "test=bootstrap",
                "The paired test is t, wilcoxon or sign; not &#39;bootstrap&#39;. Choose one in the Test field.",
            ),
            (
                "top_k=1",
                "The systems&#39; orders are compared over the reference&#39;s top k systems, k at least 2; not 1. "
                "Set Top k to 2 or more.",
            ),
            ("alpha=2", "The significance level is between 0 and 1; not 2. Set Alpha between 0 and 1."),
        ):
            refused = client.get(f"/tasks/task/judgments?first=human&second=human%40v1&{asked}", headers=owner)
            assert refused.status_code == 200 and f'<p class="error" role="alert">{said}</p>' in refused.text
    assert late[0].run == "poor"


def test_leaderboards_on_judge_labels_mark_circular_runs_and_show_the_probe(site: Engine) -> None:
    with client_for(site) as client:
        board = client.get("/api/v1/tasks/task/leaderboard", headers=_headers(site, "viewer")).json()
        assert board["judge"]["judge"] == "fake" and board["judge"]["model"] == "fake-model"
        assert board["judge"]["probe"] is None and board["judge"]["from"] == "judge:fake"
        assert {r["run"]: r["circular"] for r in board["rows"]} == {"good": [], "fair": [], "self": ["fake-model"]}
        page = client.get("/tasks/task", headers=_headers(site, "viewer"))
        assert page.status_code == 200
        marks = re.findall(r"<td class=\"run\">(\w+)\s*<span class=\"warn circular\" title=\"([^\"]+)\"", page.text)
        assert marks == [
            (
                "self",
                "circular: this run declares fake-model, the model of judge fake that made these labels; "
                "the judge's labels favour it",
            )
        ]
        assert '<span id="probe">not probed (evalstore judges probe)</span>' in page.text

        probe.probe(site, "fake", collection="c", qrels_name="human", limit=2)
        board = client.get("/api/v1/tasks/task/leaderboard", headers=_headers(site, "viewer")).json()
        assert board["judge"]["probe"]["attacks"]["query_words"]["rose"] == 2
        page = client.get("/tasks/task", headers=_headers(site, "viewer"))
        assert re.search(r'<span id="probe">query words inserted: 2 of 2 labels rose', page.text)
