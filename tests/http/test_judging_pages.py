"""An assessor's judgments of a topic through the pages: the list of their own judgments, each
revisable (grade and note kept where not changed), undo keeping the note, and, with double
judging, the role they are told (open, first, second) and the notice when it changes."""

from __future__ import annotations

import html
import re

from fastapi.testclient import TestClient
from sqlalchemy import select

from evalstore.db.models import PoolJudgment
from evalstore.db.session import read_only
from evalstore.services import judging
from tests.http.conftest import World, as_principal


def docs_of(world: World) -> list[str]:
    admin = as_principal(world.engine, "admin")
    return [str(e["doc"]) for e in judging.pool_entries(world.engine, admin, "pool", topic="301")]


def mine(world: World, assessor: str = "assessor") -> list[tuple[str, int, str | None]]:
    """(doc, relevance, note) of the assessor's judgments, oldest first."""
    with read_only(world.engine) as session:
        return [
            tuple(row)
            for row in session.execute(  # type: ignore[misc]
                select(PoolJudgment.doc, PoolJudgment.relevance, PoolJudgment.note)
                .where(PoolJudgment.assessor == assessor)
                .order_by(PoolJudgment.created_at, PoolJudgment.doc)
            )
        ]


def judge(
    client: TestClient, world: World, doc: str, grade: str, note: str = "", *, caller: str = "assessor", role: str = ""
) -> str:
    """Judge through the form; returns where the browser is sent next."""
    response = client.post(
        "/judge/pool/301",
        headers=world.headers(caller),
        follow_redirects=False,
        data={"doc": doc, "grade": grade, "shown_at": "0", "note": note, "role": role},
    )
    assert response.status_code == 303, response.text
    return str(response.headers["location"])


def test_an_assessor_lists_and_revises_their_own_judgments(world: World, client: TestClient) -> None:
    docs = docs_of(world)
    headers = world.headers("assessor")
    judge(client, world, docs[0], "3", "clearly on topic")
    judge(client, world, docs[1], "0", "an advert")
    judge(client, world, docs[2], "skip")
    judging.judge_document(
        world.engine, as_principal(world.engine, "admin"), "pool", "301", docs[3], 2, note="the admin's secret note"
    )
    page = client.get("/judge/pool/301/judgments", headers=headers)
    assert page.status_code == 200
    listed = re.findall(r'name="doc" value="([^"]+)"', page.text)
    assert listed == docs[:3]  # their own, in judging order; never another assessor's (blind)
    assert "clearly on topic</textarea>" in page.text and "an advert</textarea>" in page.text
    assert "the admin&#39;s secret note" not in page.text and "the admin's secret note" not in page.text
    assert re.search(r'<option value="3" selected>3 Perfectly relevant</option>', page.text)
    assert re.search(r'<option value="skip" selected>Skipped \(not rateable\)</option>', page.text)

    # a grade changed, the note sent back unchanged (as the form does): the note is kept
    saved = client.post(
        "/judge/pool/301/judgments",
        headers=headers,
        follow_redirects=False,
        data={"doc": docs[0], "grade": "1", "note": "clearly on topic"},
    )
    assert saved.status_code == 303
    assert saved.headers["location"] == f"/judge/pool/301/judgments?saved={docs[0]}#j-{docs[0]}"
    # a skip turned into a grade with a note; a note cleared
    client.post("/judge/pool/301/judgments", headers=headers, data={"doc": docs[2], "grade": "2", "note": " seen "})
    client.post("/judge/pool/301/judgments", headers=headers, data={"doc": docs[1], "grade": "skip", "note": ""})
    # the judgments keep their order (a revision moves neither the first assessor nor the undo)
    assert mine(world) == [(docs[0], 1, "clearly on topic"), (docs[1], judging.SKIPPED, None), (docs[2], 2, "seen")]
    assert (
        f"Saved your judgment of <code>{docs[0]}</code>"
        in client.get(f"/judge/pool/301/judgments?saved={docs[0]}", headers=headers).text
    )
    bogus = client.get("/judge/pool/301/judgments?saved=<i>everything</i>", headers=headers).text
    assert "Saved your judgment" not in bogus and "<i>everything" not in bogus  # only a listed judgment
    client.post("/judge/pool/301/undo", headers=headers)
    assert [d for d, _, _ in mine(world)] == docs[:2]  # the newest judged (docs[2]), not the newest revised

    wrong = client.post("/judge/pool/301/judgments", headers=headers, data={"doc": docs[0], "grade": "7"})
    assert wrong.status_code == 422
    assert "Grade 7 is not on pool &#39;pool&#39;s scale (0 Not relevant, 1 Related" in wrong.text
    missing = client.post("/judge/pool/301/judgments", headers=headers, data={"doc": docs[3], "grade": "1"})
    assert missing.status_code == 404  # the admin judged it, not this assessor
    assert (
        html.unescape(missing.text).count(
            f"You have not judged document '{docs[3]}' of topic '301' in pool 'pool'; judge it on the topic's "
            "judging screen first."
        )
        == 1
    )
    no_grade = client.post("/judge/pool/301/judgments", headers=headers, data={"doc": docs[0], "grade": "-1"})
    assert no_grade.status_code == 422 and "Pick a grade (a number of the pool&#39;s scale) or skip." in no_grade.text
    long_note = client.post(
        "/judge/pool/301/judgments", headers=headers, data={"doc": docs[0], "grade": "1", "note": "x" * 2001}
    )
    assert long_note.status_code == 422 and "A note holds at most 2000 characters; this one has 2001." in long_note.text
    assert mine(world)[0] == (docs[0], 1, "clearly on topic")  # refused revisions changed nothing
    assert client.get("/judge/pool/999/judgments", headers=headers).status_code == 404
    assert client.get("/judge/other/301/judgments", headers=headers).status_code == 404


def test_undo_keeps_the_judgments_note_for_the_document_shown_again(world: World, client: TestClient) -> None:
    docs = docs_of(world)
    headers = world.headers("assessor")
    judge(client, world, docs[0], "2", "a <b>bold</b> claim & more")
    screen = client.get("/judge/pool/301", headers=headers).text
    assert '<textarea id="note" name="note" rows="2" maxlength="2000"></textarea>' in screen  # the next one: empty
    client.post("/judge/pool/301/undo", headers=headers)
    assert mine(world) == []
    screen = client.get("/judge/pool/301", headers=headers).text
    assert f'name="doc" value="{docs[0]}"' in screen
    assert '<details id="note-box" open>' in screen
    assert ">a &lt;b&gt;bold&lt;/b&gt; claim &amp; more</textarea>" in screen  # kept, escaped
    judge(client, world, docs[0], "2", "a <b>bold</b> claim & more")  # the form sends it back
    assert mine(world) == [(docs[0], 2, "a <b>bold</b> claim & more")]
    judge(client, world, docs[1], "1")
    screen = client.get("/judge/pool/301", headers=headers).text
    assert '<details id="note-box">' in screen and "bold" not in screen  # another document: not its note


def role_line(client: TestClient, world: World, caller: str) -> str:
    page = client.get("/judge/pool/301", headers=world.headers(caller)).text
    found = re.search(r'<p class="muted" id="role">(.*?)</p>', page, re.S)
    assert found is not None, page
    return re.sub(r"<[^>]+>", "", found.group(1))


def test_with_double_judging_each_assessor_is_told_their_role_and_when_it_changes(
    world: World, client: TestClient
) -> None:
    judging.configure_pool(world.engine, "pool", double_share=0.4, seed=7)
    docs = docs_of(world)
    sample = judging.double_sample(7, 0.4, "301", docs)
    opened = (
        "Nobody has judged this topic yet: your first judgment makes you its first assessor (every document). "
        "If another assessor judges it before you, you become a second, blind assessor of a sample of it, "
        "and this page tells you so."
    )
    # both open the topic before anyone judged it: neither is told it is theirs
    assert role_line(client, world, "assessor") == opened
    assert role_line(client, world, "admin") == opened
    # the admin judges first: the topic becomes theirs, as they were told (no notice)
    assert judge(client, world, docs[0], "1", caller="admin", role="open") == "/judge/pool/301"
    assert role_line(client, world, "admin") == (
        "You are this topic's first assessor: you judge every document of "
        "it; other assessors judge a blind sample of it, for agreement."
    )
    # the assessor, whose screen still said "open", judges: told that the topic is another's now
    target = sorted(sample)[0]
    location = judge(client, world, target, "2", "on topic", role="open")
    assert location == "/judge/pool/301?was=open"
    page = client.get(location, headers=world.headers("assessor")).text
    notice = re.search(r'<p class="notice" role="alert" id="role-changed">(.*?)</p>', page, re.S)
    assert notice is not None
    assert " ".join(notice.group(1).split()) == (
        "Your role on this topic changed: you were told you are the first assessor, unless another assessor judges "
        "this topic first; you are now the second assessor (blind sample). Another assessor judged this topic "
        f"before you, so it is theirs: you judge a blind sample of it ({len(sample)} documents), and your "
        "judgments so far are kept."
    )
    assert role_line(client, world, "assessor") == (
        f"You are a second assessor on this topic: another assessor judges all of it; you judge a blind sample of "
        f"{len(sample)} documents, for agreement."
    )
    assert judge(client, world, sorted(sample)[1], "0", role="second") == "/judge/pool/301"  # unchanged: no notice
    # the first assessor takes back their only judgment: the topic goes to the assessor, who judged next
    undone = client.post(
        "/judge/pool/301/undo", headers=world.headers("admin"), data={"role": "first"}, follow_redirects=False
    )
    assert undone.headers["location"] == "/judge/pool/301?was=first"
    assert "you are now the second assessor (blind sample)" in " ".join(
        client.get(undone.headers["location"], headers=world.headers("admin")).text.split()
    )
    assert judging.topic_role(world.engine, as_principal(world.engine, "assessor"), "pool", "301") == judging.ROLE_FIRST
    # a notice only for a real change, and only the roles the service knows (a crafted link shows nothing)
    for was in ("first", "<script>", ""):
        page = client.get(f"/judge/pool/301?was={was}", headers=world.headers("assessor")).text
        assert 'id="role-changed"' not in page and "<script>alert" not in page
    assert 'id="role-changed"' in client.get("/judge/pool/301?was=second", headers=world.headers("assessor")).text


def test_without_double_judging_nobody_is_told_a_role(world: World, client: TestClient) -> None:
    docs = docs_of(world)
    page = client.get("/judge/pool/301", headers=world.headers("assessor")).text
    assert 'id="role"' not in page and 'name="role" value="every"' in page
    assert judge(client, world, docs[0], "1", role="every") == "/judge/pool/301"
    assert judge(client, world, docs[1], "1", role="nonsense") == "/judge/pool/301"
