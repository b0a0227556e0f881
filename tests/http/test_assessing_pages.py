"""Answers assessed in the browser, through the pages' forms: the nugget
page (labels stored as ``human:NAME`` with their time, revised, refused whole when one is missing,
scored by ``evaluate --nuggets --assessor human:NAME``), blind double assessment, the support
page, and the bank's page (add, edit, merge, split, reject, a judge's draft reviewed and
accepted), each refusal with its exact message and nothing half-stored."""

from __future__ import annotations

import csv
import io
import json
import re
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select
from typer.testing import CliRunner

from evalstore.cli import app as cli
from evalstore.db.models import AnswerRun, CitationSupport, Nugget, NuggetAssignment, NuggetBank
from evalstore.db.session import read_only
from evalstore.services import access, answers, assessing, collections
from tests.http.conftest import PASSWORD, World, as_principal, client_for

RUNS = ("alpha", "beta", "gamma", "delta")


def _answers(world: World) -> None:
    """Four answer runs to topic 301, each citing two segments; the segments' texts in a collection
    the bank names."""
    path = world.tmp / "answers.jsonl"
    lines = []
    for i, run in enumerate(RUNS):
        lines.append(
            json.dumps(
                {
                    "run_id": run,
                    "topic_id": "301",
                    "references": [f"seg-{i}-a", f"seg-{i}-b"],
                    "answer": [
                        {"text": f"Organized crime crosses borders ({run}).", "citations": [0]},
                        {"text": "Police forces cooperate across Europe.", "citations": [1, 0]},
                        {"text": "Nobody knows more.", "citations": []},
                    ],
                }
            )
        )
    path.write_text("\n".join(lines) + "\n")
    answers.register_answers(world.engine, path)
    segments = world.tmp / "segments.jsonl"
    segments.write_text(
        "\n".join(
            json.dumps({"doc_id": f"seg-{i}-{x}", "title": f"Segment {i}{x}", "text": f"Text of segment {i}{x}."})
            for i in range(len(RUNS))
            for x in "ab"
        )
        + "\n"
    )
    collections.import_documents(world.engine, segments, collection="segments")
    assessing.configure_bank(world.engine, "bank", collection="segments")


def _nuggets(world: World) -> list[int]:
    with read_only(world.engine) as session:
        return list(
            session.scalars(
                select(Nugget.id)
                .join(NuggetBank, NuggetBank.id == Nugget.bank_id)
                .where(NuggetBank.name == "bank")
                .order_by(Nugget.position)
            )
        )


def _labels(world: World, assessor: str) -> dict[tuple[str, int], tuple[str, float | None]]:
    with read_only(world.engine) as session:
        rows = session.execute(
            select(AnswerRun.name, NuggetAssignment.nugget_id, NuggetAssignment.label, NuggetAssignment.seconds)
            .join(AnswerRun, AnswerRun.id == NuggetAssignment.answer_run_id)
            .where(NuggetAssignment.assessor == assessor)
        ).all()
    return {(run, nugget): (label, seconds) for run, nugget, label, seconds in rows}


def _shown_answer(page: str) -> str:
    found = re.search(r'name="answer" value="([^"]+)"', page)
    assert found is not None, page
    return found.group(1)


def _assess(client: TestClient, world: World, caller: str, labels: dict[int, str], **extra: str) -> Any:
    headers = world.headers(caller)
    page = client.get("/assess/bank/301", headers=headers)
    assert page.status_code == 200
    data = {"answer": _shown_answer(page.text), "shown_at": "0"} | {f"label_{n}": v for n, v in labels.items()} | extra
    return client.post("/assess/bank/301", headers=headers, data=data, follow_redirects=False)


def test_an_assessor_labels_every_nugget_of_an_answer_and_evaluate_scores_on_them(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    _answers(world)
    vital, okay = _nuggets(world)
    with client_for(world.engine) as client:
        headers = world.headers("assessor")
        page = client.get("/assess/bank/301", headers=headers)
        assert "Answer 1 of 4" in page.text and "Organized crime crosses borders (alpha)." in page.text
        assert "Crime crosses borders" in page.text and "Text of segment" not in page.text
        # one nugget without a label: refused, nothing stored
        missing = _assess(client, world, "assessor", {vital: "support"})
        assert missing.status_code == 422
        assert "Label every nugget of the answer: 1 of 2 have no label; nothing was stored." in missing.text
        wrong = _assess(client, world, "assessor", {vital: "support", okay: "maybe"})
        assert wrong.status_code == 422
        assert "A label is support, partial_support or not_support, not &#39;maybe&#39;." in wrong.text
        assert _labels(world, "human:assessor") == {}
        # each label with the time the page's script measured
        done = _assess(
            client,
            world,
            "assessor",
            {vital: "support", okay: "partial_support"},
            **{
                f"seconds_{vital}": "2.5",
                f"seconds_{okay}": "4000",
            },
        )
        assert done.status_code == 303 and done.headers["location"] == "/assess/bank/301?saved=alpha"
        assert _labels(world, "human:assessor") == {
            ("alpha", vital): ("support", 2.5),
            ("alpha", okay): ("partial_support", 3600.0),  # away from the page: capped
        }
        following = client.get("/assess/bank/301?saved=alpha", headers=headers)
        assert "Answer 2 of 4" in following.text and "1 / 4 answers assessed" in following.text
        assert "Saved your labels of the answer." in following.text
        for _ in range(3):
            assert _assess(client, world, "assessor", {vital: "not_support", okay: "support"}).status_code == 303
        assert "You have assessed all 4 answers of this topic." in client.get("/assess/bank/301", headers=headers).text
        # revised: the label changes, its time stays the first labelling's
        again = client.get("/assess/bank/301?answer=alpha", headers=headers)
        assert re.search(rf'name="label_{vital}" value="support" data-key="s" checked', again.text)
        revised = client.post(
            "/assess/bank/301",
            headers=headers,
            data={"answer": "alpha", f"label_{vital}": "not_support", f"label_{okay}": "partial_support"},
            follow_redirects=False,
        )
        assert revised.status_code == 303
    assert _labels(world, "human:assessor")["alpha", vital] == ("not_support", 2.5)
    monkeypatch.setenv("EVALSTORE_MLFLOW", "off")
    url = world.engine.url.render_as_string(hide_password=False)
    runner = CliRunner()
    evaluated = runner.invoke(
        cli,
        [
            "--database-url",
            url,
            "evaluate",
            "--nuggets",
            "bank",
            "--all-answers",
            "--assessor",
            "human:assessor",
            "--wait",
        ],
    )
    assert evaluated.exit_code == 0, evaluated.stderr
    board = runner.invoke(
        cli,
        ["--database-url", url, "leaderboard", "--nuggets", "bank", "--assessor", "human:assessor", "--format", "csv"],
    )
    assert board.exit_code == 0, board.stderr
    scores = {r["answers"]: r for r in csv.DictReader(io.StringIO(board.stdout))}
    # alpha: vital not supported (0), okay partly (0.5): W = (0 + 0.5 * 0.5) / (1 + 0.5)
    assert float(scores["alpha"]["W"]) == pytest.approx(0.25 / 1.5)
    # the others: vital 0, okay 1: W = 0.5 / 1.5
    assert float(scores["beta"]["W"]) == pytest.approx(0.5 / 1.5)


def test_a_second_assessor_assesses_a_blind_seeded_sample(world: World) -> None:
    _answers(world)
    access.add_user(world.engine, "second", role="assessor")
    world.tokens["second"] = access.create_token(world.engine, "second", expires_days=1).token
    assessing.configure_bank(world.engine, "bank", double_share=0.5, seed=7)
    assessing.assign_bank_assessor(world.engine, "bank", "second")
    vital, okay = _nuggets(world)
    sample = assessing.double_sample(7, 0.5, "301", list(RUNS))
    assert len(sample) == 2
    with client_for(world.engine) as client:
        opened = client.get("/assess/bank/301", headers=world.headers("assessor"))
        assert "Nobody has assessed this topic yet" in opened.text
        for _ in RUNS:
            assert _assess(client, world, "assessor", {vital: "support", okay: "support"}).status_code == 303
        first = client.get("/assess/bank", headers=world.headers("assessor"))
        assert "first assessor" in first.text
        second = client.get("/assess/bank/301", headers=world.headers("second"))
        assert "You are a <strong>second assessor</strong>" in second.text and "Answer 1 of 2" in second.text
        assert _shown_answer(second.text) in sample
        assert " checked" not in second.text  # blind: the first assessor's labels are not shown
        outside = sorted(set(RUNS) - sample)[0]
        refused = client.post(
            "/assess/bank/301",
            headers=world.headers("second"),
            data={"answer": outside, f"label_{vital}": "support", f"label_{okay}": "support"},
            follow_redirects=False,
        )
        assert refused.status_code == 404
        assert f"Answer &#39;{outside}&#39; to topic &#39;301&#39; is not one you assess in bank &#39;bank&#39;." in (
            refused.text
        )
        for _ in sample:
            assert _assess(client, world, "second", {vital: "support", okay: "not_support"}).status_code == 303
    assert {run for run, _ in _labels(world, "human:second")} == sample
    report = answers.compare_assignments(world.engine, "bank", "human:assessor", "human:second")
    assert (report.pairs.first, report.pairs.second, report.pairs.both) == (8, 4, 4)
    assert report.labels.observed == pytest.approx(0.5)


def test_people_s_labels_are_one_set_each_topic_its_first_assessor_s_unless_imported(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    _answers(world)
    access.add_user(world.engine, "second", role="assessor")
    world.tokens["second"] = access.create_token(world.engine, "second", expires_days=1).token
    assessing.configure_bank(world.engine, "bank", double_share=0.5, seed=7)
    assessing.assign_bank_assessor(world.engine, "bank", "second")
    vital, okay = _nuggets(world)
    sample = assessing.double_sample(7, 0.5, "301", list(RUNS))
    with client_for(world.engine) as client:
        for _ in RUNS:  # the topic's first assessor: every nugget supported
            assert _assess(client, world, "assessor", {vital: "support", okay: "support"}).status_code == 303
        for _ in sample:  # the second, blind: the okay nugget not supported
            assert _assess(client, world, "second", {vital: "support", okay: "not_support"}).status_code == 303
    # one run's topic has imported labels too (NIST's): they are read for it, not the page's
    imported = sorted(sample)[0]
    with world.engine.begin() as connection:
        run_id = connection.execute(select(AnswerRun.id).where(AnswerRun.name == imported)).scalar_one()
        connection.execute(
            NuggetAssignment.__table__.insert(),
            [
                {"nugget_id": vital, "answer_run_id": run_id, "assessor": "human", "label": "not_support"},
                {"nugget_id": okay, "answer_run_id": run_id, "assessor": "human", "label": "not_support"},
            ],
        )
    report = answers.compare_assignments(world.engine, "bank", "human", "human:assessor")
    assert (report.pairs.first, report.pairs.second, report.pairs.both) == (8, 8, 8)
    assert report.labels.observed == pytest.approx(6 / 8)  # the imported run's two labels differ
    monkeypatch.setenv("EVALSTORE_MLFLOW", "off")
    url = world.engine.url.render_as_string(hide_password=False)
    runner = CliRunner()
    for assessor in ("human", "human:assessor"):
        evaluated = runner.invoke(
            cli,
            ["--database-url", url, "evaluate", "--nuggets", "bank", "--all-answers", "--assessor", assessor]
            + ["--wait"],
        )
        assert evaluated.exit_code == 0, evaluated.stderr
    scores = {}
    for assessor in ("human", "human:assessor"):
        board = runner.invoke(
            cli, ["--database-url", url, "leaderboard", "--nuggets", "bank", "--assessor", assessor, "--format", "csv"]
        )
        assert board.exit_code == 0, board.stderr
        scores[assessor] = {r["answers"]: float(r["W"]) for r in csv.DictReader(io.StringIO(board.stdout))}
    # the first assessor's labels everywhere but on the imported run; never the second's
    assert scores["human:assessor"] == dict.fromkeys(RUNS, 1.0)
    assert scores["human"] == {**dict.fromkeys(RUNS, 1.0), imported: 0.0}


def test_the_support_page_shows_each_cited_sentence_beside_its_segment(world: World) -> None:
    _answers(world)
    with client_for(world.engine) as client:
        headers = world.headers("assessor")
        page = client.get("/assess/bank/301/support", headers=headers)
        assert page.status_code == 200
        assert "Text of segment 0a." in page.text and "Text of segment 0b." in page.text
        assert "Nobody knows more." not in page.text  # cites nothing: not judged
        bad = client.post(
            "/assess/bank/301/support",
            headers=headers,
            data={"answer": "alpha", "support_2": "2"},
            follow_redirects=False,
        )
        assert bad.status_code == 422
        assert "Sentence 3 of the answer cites nothing; only a sentence&#39;s first citation is judged." in bad.text
        done = client.post(
            "/assess/bank/301/support",
            headers=headers,
            data={"answer": "alpha", "support_0": "2", "support_1": "0", "seconds_0": "1.5", "shown_at": "0"},
            follow_redirects=False,
        )
        assert done.status_code == 303
    with read_only(world.engine) as session:
        rows = session.execute(
            select(
                CitationSupport.sentence, CitationSupport.segment, CitationSupport.label, CitationSupport.assessor
            ).order_by(CitationSupport.sentence)
        ).all()
    assert [tuple(r) for r in rows] == [(0, "seg-0-a", 2, "human:assessor"), (1, "seg-0-b", 0, "human:assessor")]


def test_the_organiser_edits_the_bank_and_labels_of_a_changed_text_go(world: World) -> None:
    _answers(world)
    vital, okay = _nuggets(world)
    with client_for(world.engine) as client:
        _assess(client, world, "assessor", {vital: "support", okay: "support"})
        owner = world.headers("owner")
        page = client.get("/banks/bank", headers=owner)
        assert page.status_code == 200 and "Crime crosses borders" in page.text
        other = client.get("/banks/bank", headers=world.headers("organiser"))
        assert other.status_code == 404 and "No nugget bank named &#39;bank&#39; that you organise." in other.text
        # importance only: the labels stay
        kept = client.post(
            f"/banks/bank/nuggets/{okay}",
            headers=owner,
            data={"action": "save", "text": "Police cooperate", "importance": "vital"},
            follow_redirects=False,
        )
        assert kept.status_code == 303 and "done=Nugget+saved#n-" in kept.headers["location"]
        assert len(_labels(world, "human:assessor")) == 2
        edited = client.post(
            f"/banks/bank/nuggets/{okay}",
            headers=owner,
            data={"action": "save", "text": "Police forces  cooperate", "importance": "okay"},
            follow_redirects=False,
        )
        assert "labels+of+the+old+text+were+removed" in edited.headers["location"]
        assert set(_labels(world, "human:assessor")) == {("alpha", vital)}
        added = client.post(
            "/banks/bank/nuggets",
            headers=owner,
            data={"topic": "301", "text": "Europol coordinates", "importance": "okay"},
            follow_redirects=False,
        )
        assert added.status_code == 303
        split = client.post(
            f"/banks/bank/nuggets/{vital}",
            headers=owner,
            data={"action": "split", "parts": "Crime crosses borders\nCrime is organized", "importance": "vital"},
            follow_redirects=False,
        )
        assert split.status_code == 303 and "Nugget+split+into+2" in split.headers["location"]
        texts = [
            n.text
            for t in assessing.bank_page(world.engine, as_principal(world.engine, "owner"), "bank").topics
            for n in t.nuggets
        ]
        assert texts == [
            "Crime crosses borders",
            "Crime is organized",
            "Police forces cooperate",
            "Europol coordinates",
        ]
        ids = _nuggets(world)
        short = client.post(
            "/banks/bank/merge", headers=owner, data={"nugget": str(ids[0]), "text": "x", "importance": "okay"}
        )
        assert short.status_code == 422 and "Pick two or more nuggets of one topic to merge." in short.text
        merged = client.post(
            "/banks/bank/merge",
            headers=owner,
            data={"nugget": [str(ids[2]), str(ids[3])], "text": "Police and Europol cooperate", "importance": "okay"},
            follow_redirects=False,
        )
        assert merged.status_code == 303
        rejected = client.post(
            f"/banks/bank/nuggets/{ids[1]}", headers=owner, data={"action": "reject"}, follow_redirects=False
        )
        assert rejected.status_code == 303
    page_now = assessing.bank_page(world.engine, as_principal(world.engine, "owner"), "bank")
    shown = [(n.position, n.text, n.importance, n.edited_by) for n in page_now.topics[0].nuggets]
    assert shown == [
        (0, "Crime crosses borders", "vital", "owner"),
        (1, "Police and Europol cooperate", "okay", "owner"),
    ]
    with read_only(world.engine) as session:
        bank = session.scalar(select(NuggetBank).where(NuggetBank.name == "bank"))
        assert bank is not None and bank.nugget_count == 2
        digest = answers.stored_bank_hash(session, bank)
    assert bank.content_hash == digest
    # the bank's hash is the one a file holding the edited nuggets would have
    edited_file = world.tmp / "edited.jsonl"
    edited_file.write_text(
        json.dumps(
            {
                "qid": "301",
                "query": "international organized crime",
                "nuggets": [
                    {"text": "Crime crosses borders", "importance": "vital"},
                    {"text": "Police and Europol cooperate", "importance": "okay"},
                ],
            }
        )
        + "\n"
    )
    from evalstore.io.nuggets import read_nuggets

    assert answers.bank_hash(read_nuggets(edited_file)) == digest


def _draft(world: World) -> None:
    """A bank as ``nuggets create`` stores a judge's draft."""
    from evalstore.db.session import unit_of_work
    from evalstore.io.nuggets import read_nuggets
    from evalstore.services.answers.nuggets import add_bank

    path = world.tmp / "draft.jsonl"
    path.write_text(
        json.dumps(
            {
                "qid": "301",
                "query": "crime",
                "nuggets": [
                    {"text": "Drafted one", "importance": "vital"},
                    {"text": "Drafted two", "importance": "okay"},
                ],
            }
        )
        + "\n"
    )
    with unit_of_work(world.engine) as session:
        add_bank(session, read_nuggets(path), "draft", "judge gemma", drafted_by="judge:gemma")
    assessing.configure_bank(world.engine, "draft", organiser="owner")


def test_a_judges_draft_is_reviewed_nugget_by_nugget_before_it_is_accepted(world: World) -> None:
    _draft(world)
    owner = world.headers("owner")
    with client_for(world.engine) as client:
        page = client.get("/banks/draft", headers=owner)
        assert "A draft by <strong>judge:gemma</strong>" in page.text and 'id="unreviewed">2<' in page.text
        assert page.text.count("drafted by judge:gemma") == 2
        early = client.post("/banks/draft/accept", headers=owner)
        assert early.status_code == 422
        assert (
            "2 nuggets of bank &#39;draft&#39; are not reviewed yet: accept, edit or reject each first." in early.text
        )
        first, second = (
            n.id
            for n in assessing.bank_page(world.engine, as_principal(world.engine, "owner"), "draft").topics[0].nuggets
        )
        client.post(f"/banks/draft/nuggets/{first}", headers=owner, data={"action": "accept"})
        client.post(
            f"/banks/draft/nuggets/{second}",
            headers=owner,
            data={"action": "save", "text": "Drafted two, edited", "importance": "okay"},
        )
        listed = client.get("/banks", headers=owner)
        assert "draft by judge:gemma: 0 to review" in listed.text
        accepted = client.post("/banks/draft/accept", headers=owner, follow_redirects=False)
        assert accepted.status_code == 303
        page = client.get("/banks/draft", headers=owner)
        assert "Drafted by judge:gemma; accepted for scoring." in page.text
        assert "drafted by judge:gemma · reviewed by owner" in page.text
        assert "drafted by judge:gemma · edited by owner · reviewed by owner" in page.text


def test_a_form_posted_from_a_session_needs_its_csrf_token(world: World) -> None:
    from tests.http.test_pages import csrf_of, sign_in

    access.set_password(world.engine, "owner", PASSWORD)
    with client_for(world.engine) as client:
        assert sign_in(client, "owner").status_code == 303
        page = client.get("/banks/bank")
        forged = client.post(
            "/banks/bank/nuggets", data={"topic": "301", "text": "forged", "importance": "okay"}, follow_redirects=False
        )
        assert forged.status_code == 403
        assert "This form&#39;s CSRF token is missing or wrong" in forged.text
        made = client.post(
            "/banks/bank/nuggets",
            data={"topic": "301", "text": "with token", "importance": "okay", "csrf": csrf_of(page.text)},
            follow_redirects=False,
        )
        assert made.status_code == 303
    texts = [
        n.text for n in assessing.bank_page(world.engine, as_principal(world.engine, "owner"), "bank").topics[0].nuggets
    ]
    assert texts[-1] == "with token" and "forged" not in texts
