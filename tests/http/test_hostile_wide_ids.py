"""What the readers accept, both databases store: a docno of 4096 bytes (URL docnos are that long)
and a topic id of 1000 bytes, through the API and through the CLI, on SQLite and PostgreSQL
(before: PostgreSQL's varchar(400) and varchar(200) made them a 500, and a traceback)."""

from __future__ import annotations

import random
import string
from typing import Any

from typer.testing import CliRunner

from evalstore.cli import app
from tests.http.conftest import World, client_for


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


def test_a_judgment_key_past_postgresqls_index_entry_is_refused_in_words(world: World, db_backend: str) -> None:
    """A judgment's topic and docno share one index entry, which PostgreSQL bounds at 2704 bytes:
    a 4096-byte docno that does not compress is stored on SQLite and refused on PostgreSQL with
    what is too long (before: a traceback)."""
    (world.tmp / "long.qrels").write_text(f"301 0 {_url_docno(4)} 1\n")
    imported = _cli(world, "qrels", "import", str(world.tmp / "long.qrels"), "--name", "long-q")
    if db_backend == "sqlite":
        assert imported.exit_code == 0, imported.output
        return
    assert imported.exit_code == 1
    assert "Traceback" not in imported.output
    assert imported.stderr.strip().endswith(
        "A topic id, docno or other id is too long for this PostgreSQL store: its key takes 4120 bytes of "
        "index ix_judgments_qrels_id_topic_doc_relevance, which holds at most 2704 (ids of a judgment, pool "
        "entry, document or topic are indexed together); shorten it."
    ), imported.stderr


def test_a_4096_byte_topic_id_over_http_is_stored_or_refused_in_words(world: World, db_backend: str) -> None:
    """A run's topic id is its per-topic count's key: 4096 bytes that do not compress are stored
    on SQLite and refused on PostgreSQL with the index named (before: a 500)."""
    topic = "".join(random.Random(9).choices(string.ascii_letters + string.digits, k=4096))
    with client_for(world.engine) as client:
        response = client.post(
            "/api/v1/tasks/open/runs",
            headers=world.headers("red"),
            data={"name": "wide-topic"},
            files={"file": ("t.txt", f"{topic} Q0 d1 1 1.0 t\n301 Q0 d2 1 1.0 t\n".encode())},
        )
    if db_backend == "sqlite":
        assert response.status_code == 201, response.text
        return
    assert response.status_code == 413, response.text
    assert response.json()["error"] == (
        "A topic id, docno or other id is too long for this PostgreSQL store: its key takes 4112 bytes of "
        "index pk_run_topics, which holds at most 2704 (ids of a judgment, pool entry, document or topic "
        "are indexed together); shorten it."
    )
