"""What the readers accept, both databases store: a docno of 4096 bytes (URL docnos are that long)
and a topic id of 1000 bytes, through the API and through the CLI, on SQLite and PostgreSQL
(before: PostgreSQL's varchar(400) and varchar(200) made them a 500, and a traceback)."""

from __future__ import annotations

import json
import random
import string
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError
from typer.testing import CliRunner

from evalstore.cli import app
from tests.http.conftest import World, client_for

pytestmark = pytest.mark.both_databases


def _url_docno(seed: int, length: int = 4096) -> str:
    """A URL of ``length`` bytes whose path does not repeat (so no database compresses it away)."""
    chars = random.Random(seed).choices(string.ascii_letters + string.digits + "-_/", k=length - 20)
    return "https://example.org/" + "".join(chars)


LONG_TOPIC = "topic-" + "".join(random.Random(7).choices(string.ascii_lowercase, k=994))


def _run_text(docno: str, tag: str) -> str:
    return (
        f"{LONG_TOPIC} Q0 {docno} 1 2.0 {tag}\n{LONG_TOPIC} Q0 short-doc 2 1.0 {tag}\n301 Q0 FBIS3-10082 1 1.0 {tag}\n"
    )


def test_a_4096_byte_docno_and_a_long_topic_are_stored_over_http(world: World) -> None:
    docno = _url_docno(1)
    assert len(docno.encode()) == 4096 and len(LONG_TOPIC.encode()) == 1000
    with client_for(world.engine) as client:
        response = client.post(
            "/api/v1/tasks/open/runs",
            headers=world.headers("red"),
            data={"name": "wide"},
            files={"file": ("wide.txt", _run_text(docno, "wide").encode())},
        )
    assert response.status_code == 201, response.text
    assert response.json()["rows"] == 3 and response.json()["topics"] == 2
    with world.engine.connect() as connection:
        stored = connection.exec_driver_sql(
            "SELECT r.topic, r.doc FROM run_rows r JOIN runs n ON n.id = r.run_id WHERE n.name = 'wide' ORDER BY r.position"
        ).fetchall()
    assert stored[0] == (LONG_TOPIC, docno)


def _cli(world: World, *args: str) -> Any:
    url = world.engine.url.render_as_string(hide_password=False)
    return CliRunner().invoke(app, ["--database-url", url, *args], env={"EVALSTORE_MLFLOW": "off"})


def test_a_4096_byte_docno_and_a_long_topic_are_stored_and_evaluated_by_the_cli(world: World) -> None:
    """The run's docno of 4096 bytes, its topic of 1000, judged by qrels whose docno (1500 bytes)
    fits PostgreSQL's index beside the topic."""
    judged = _url_docno(3, 1500)
    (world.tmp / "wide.qrels").write_text(f"{LONG_TOPIC} 0 {judged} 1\n{LONG_TOPIC} 0 other-doc 1\n")
    (world.tmp / "wide.run").write_text(_run_text(_url_docno(2), "cli") + f"{LONG_TOPIC} Q0 {judged} 3 0.5 cli\n")
    imported = _cli(world, "qrels", "import", str(world.tmp / "wide.qrels"), "--name", "wide-q")
    assert imported.exit_code == 0, imported.output
    registered = _cli(world, "runs", "register", str(world.tmp / "wide.run"), "--name", "wide-cli")
    assert registered.exit_code == 0, registered.output
    evaluated = _cli(world, "evaluate", "--run", "wide-cli", "--qrels", "wide-q", "--measures", "P@3", "--wait")
    assert evaluated.exit_code == 0, evaluated.output
    assert "│ done  │" in evaluated.stdout, evaluated.stdout


def _random_id(seed: int, length: int = 4096) -> str:
    """An id of ``length`` bytes that does not compress (a repeated one would fit PostgreSQL's
    index entry after compression)."""
    return "".join(random.Random(seed).choices(string.ascii_letters + string.digits, k=length))


def test_4096_byte_ids_are_stored_in_every_key_on_both_databases(world: World) -> None:
    """A judgment's, pool entry's, pool judgment's, document's, topic's and run topic's key over a
    4096-byte topic id and docno that do not compress: stored, found and judged on both databases
    (before: PostgreSQL's 2704-byte index entry refused them), and the keys still refuse a second
    row with the same ids."""
    topic, docno = _random_id(8), _url_docno(4)
    (world.tmp / "long.qrels").write_text(f"{topic} 0 {docno} 1\n301 0 {docno} 0\n")
    imported = _cli(world, "qrels", "import", str(world.tmp / "long.qrels"), "--name", "long-q")
    assert imported.exit_code == 0, imported.output
    (world.tmp / "long.run").write_text(f"{topic} Q0 {docno} 1 2.0 long\n{topic} Q0 d2 2 1.0 long\n")
    registered = _cli(world, "runs", "register", str(world.tmp / "long.run"), "--name", "long-run")
    assert registered.exit_code == 0, registered.output
    evaluated = _cli(world, "evaluate", "--run", "long-run", "--qrels", "long-q", "--measures", "P@1", "--wait")
    assert evaluated.exit_code == 0 and "│ done  │" in evaluated.stdout, evaluated.output
    built = _cli(world, "pool", "build", "--name", "long-pool", "--run", "long-run", "--depth", "5")
    assert built.exit_code == 0, built.output
    (world.tmp / "topics.tsv").write_text(f"{topic}\ta long topic\n")
    (world.tmp / "docs.jsonl").write_text(json.dumps({"doc_id": docno, "title": "Long", "text": "its text"}) + "\n")
    for args in (
        ("topics", "import", str(world.tmp / "topics.tsv"), "--name", "long-topics"),
        ("documents", "import", str(world.tmp / "docs.jsonl"), "--collection", "long-docs"),
        ("pool", "configure", "long-pool", "--topics", "long-topics", "--collection", "long-docs"),
        ("pool", "assign", "long-pool", "--assessor", "assessor"),
    ):
        done = _cli(world, *args)
        assert done.exit_code == 0, (args, done.output)
    with client_for(world.engine) as client:
        submitted = client.post(
            "/api/v1/tasks/open/runs",
            headers=world.headers("red"),
            data={"name": "long-topic"},
            files={"file": ("t.txt", f"{topic} Q0 d1 1 1.0 t\n301 Q0 d2 1 1.0 t\n".encode())},
        )
        assert submitted.status_code == 201, submitted.text
        assessor = world.headers("assessor")
        screen = client.get(f"/judge/long-pool/{topic}", headers=assessor)  # the document first in line
        assert screen.status_code == 200 and "its text" in screen.text and "a long topic" in screen.text
        judged = client.post(
            "/api/v1/pools/long-pool/judgments",
            json=[{"topic": topic, "doc": docno, "relevance": 2}],
            headers=assessor,
        )
        assert (judged.status_code, judged.json()) == (200, {"recorded": 1})
        again = client.post(
            "/api/v1/pools/long-pool/judgments", json=[{"topic": topic, "doc": docno, "relevance": 1}], headers=assessor
        )
        assert (again.status_code, again.json()) == (200, {"recorded": 1})  # the same key: changed, not added
        entries = client.get("/api/v1/pools/long-pool/entries", params={"topic": topic}, headers=assessor).json()
        assert {"topic": topic, "doc": docno, "relevance": 1} in entries
    with world.engine.connect() as connection:
        counts = {
            f"{table}.{column}": connection.execute(
                text(f"SELECT count(*) FROM {table} WHERE {column} = :v"), {"v": value}
            ).scalar()
            for table, column, value in (
                ("judgments", "doc", docno),
                ("pool_entries", "doc", docno),
                ("pool_judgments", "doc", docno),
                ("documents", "doc", docno),
                ("topics", "topic", topic),
                ("run_topics", "topic", topic),
            )
        }
    assert counts == {
        "judgments.doc": 2,
        "pool_entries.doc": 1,
        "pool_judgments.doc": 1,
        "documents.doc": 1,
        "topics.topic": 1,
        "run_topics.topic": 2,
    }
    # the keys hold: the same ids again are refused by the database itself
    for statement in (
        "INSERT INTO judgments (qrels_id, position, topic, doc, relevance, iteration, subgroup) "
        "SELECT qrels_id, position + 10, topic, doc, relevance, iteration, subgroup FROM judgments WHERE doc = :d",
        "INSERT INTO pool_entries (pool_id, topic, doc, contributors, best_rank) "
        "SELECT pool_id, topic, doc, contributors, best_rank FROM pool_entries WHERE doc = :d",
        "INSERT INTO documents (collection_id, doc, title, text) SELECT collection_id, doc, title, text FROM documents WHERE doc = :d",
    ):
        with pytest.raises(IntegrityError), world.engine.begin() as connection:
            connection.execute(text(statement), {"d": docno})


def test_4096_byte_item_ids_are_stored_in_labels_predictions_scores_and_splits_on_both_databases(
    world: World,
) -> None:
    """Gold labels, predictions with per-class scores and a split of the items, over item ids of
    4096 bytes that do not compress: stored, evaluated and split on both databases (before:
    PostgreSQL's 2704-byte index entry refused them in words), and a second row with the same item
    is still refused by the key."""
    items = [_random_id(100 + i) for i in range(6)]
    gold = ["yes", "no", "yes", "no", "yes", "no"]
    (world.tmp / "gold.csv").write_text(
        "item_id,label\n" + "".join(f"{i},{g}\n" for i, g in zip(items, gold, strict=True))
    )
    (world.tmp / "pred.csv").write_text(
        "item_id,label,score_no,score_yes\n"
        + "".join(
            f"{i},{p},{1 - s},{s}\n"
            for i, p, s in zip(
                items, ["yes", "no", "no", "no", "yes", "yes"], [0.9, 0.2, 0.4, 0.1, 0.8, 0.6], strict=True
            )
        )
    )
    for args in (
        ("labels", "import", str(world.tmp / "gold.csv"), "--name", "long-items"),
        ("predictions", "register", str(world.tmp / "pred.csv"), "--name", "long-pred", "--labels", "long-items"),
        ("splits", "make", "--labels", "long-items", "--method", "kfold", "--k", "2", "--seed", "3", "--name", "ls"),
    ):
        done = _cli(world, *args)
        assert done.exit_code == 0, (args, done.output)
    evaluated = _cli(world, "evaluate", "--labels", "long-items", "--wait", "--format", "json")
    assert evaluated.exit_code == 0, evaluated.output
    [row] = json.loads(evaluated.stdout)
    assert row["accuracy"] == pytest.approx(4 / 6)
    with world.engine.connect() as connection:
        counts = [
            connection.execute(text(f"SELECT count(*) FROM {table} WHERE {column} = :v"), {"v": items[0]}).scalar()
            for table, column in (
                ("gold_labels", "item_id"),
                ("predictions", "item_id"),
                ("prediction_scores", "item_id"),
                ("split_members", "unit"),
            )
        ]
    assert counts == [1, 1, 2, 2]  # two classes' scores; in one fold's train part, the other's test
    with pytest.raises(IntegrityError), world.engine.begin() as connection:
        connection.execute(
            text(
                "INSERT INTO gold_labels (label_set_id, item_id, label, group_id) "
                "SELECT label_set_id, item_id, label, group_id FROM gold_labels WHERE item_id = :i"
            ),
            {"i": items[0]},
        )


def test_a_nul_in_a_file_is_refused_by_the_readers_on_both_databases(world: World) -> None:
    """PostgreSQL's text cannot hold a NUL (the command line's imports were a traceback there):
    the readers refuse one, naming the line, on both databases, and nothing is stored."""
    nul = "holds a NUL character (byte 0), which no docno, topic id, tag or label has"
    files = {
        "nul.qrels": b"301 0 doc-a 1\n301 0 doc\x00b 1\n",
        "nul.run": b"301 Q0 doc\x00a 1 1.0 x\n",
        "nul.csv": b"topic,doc,score\n301,doc-a,2.0\n301,doc\x00b,1.0\n",
        "nul.jsonl": b'{"doc_id": "a\\u0000b", "text": "x"}\n',
        "nul.tsv": b"301\ta title\n30\x002\tanother\n",
    }
    for name, content in files.items():
        (world.tmp / name).write_bytes(content)
    answers = {
        name: _cli(world, *args).stderr.strip()
        for name, args in {
            "nul.qrels": ("qrels", "import", str(world.tmp / "nul.qrels"), "--name", "nq"),
            "nul.run": ("runs", "register", str(world.tmp / "nul.run"), "--name", "nr"),
            "nul.csv": ("runs", "register", str(world.tmp / "nul.csv"), "--name", "nr"),
            "nul.jsonl": ("documents", "import", str(world.tmp / "nul.jsonl"), "--collection", "nc"),
            "nul.tsv": ("topics", "import", str(world.tmp / "nul.tsv"), "--name", "nt"),
        }.items()
    }
    where = {
        "nul.qrels": f"2: the line {nul}",
        "nul.run": f"1: the line {nul}",
        "nul.csv": f"3: column 'doc' {nul}",
        "nul.jsonl": f"1: the line {nul}",
        "nul.tsv": f"2: the line {nul}",
    }
    assert answers == {name: f"{world.tmp / name}:{line}" for name, line in where.items()}
    with world.engine.connect() as connection:
        stored = [
            connection.execute(text(f"SELECT count(*) FROM {table} WHERE name = :n"), {"n": name}).scalar()
            for table, name in (("qrels_sets", "nq"), ("runs", "nr"), ("collections", "nc"), ("topic_sets", "nt"))
        ]
    assert stored == [0, 0, 0, 0]
