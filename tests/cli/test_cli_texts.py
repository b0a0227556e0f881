"""Topics, documents and a pool's judging settings from the command line, bad input included."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import Cli, shared_path
from tests.factories import SAMPLE


@pytest.fixture
def cli(cli: Cli) -> Cli:
    """The shared ``cli`` with trec_eval's sample run 'std' stored and pooled to depth 3 as 'p'."""
    cli.upgrade()
    assert cli("runs", "register", str(SAMPLE / "results.test"), "--name", "std").exit_code == 0
    assert cli("pool", "build", "--name", "p", "--run", "std", "--depth", "3").exit_code == 0
    return cli


def test_topics_documents_and_pool_settings(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    topics = tmp_path / "topics.tsv"
    topics.write_text("301\tinternational organized crime\n302\tpoliomyelitis and post-polio\n")
    done = cli("topics", "import", str(topics), "--name", "t")
    assert done.exit_code == 0 and done.stderr == "imported 2 topics as 't'\n"
    docs = tmp_path / "docs.jsonl"
    docs.write_text('{"doc_id": "FBIS3-10082", "title": "A", "text": "a"}\n{"doc_id": "FBIS3-10169", "text": "b"}\n')
    done = cli("documents", "import", str(docs), "--collection", "c")
    assert done.exit_code == 0 and done.stderr == "imported 2 documents into 'c'\n"
    configured = cli(
        "pool",
        "configure",
        "p",
        "--topics",
        "t",
        "--collection",
        "c",
        "--grade",
        "0=No",
        "--grade",
        "1=Yes",
        "--double-share",
        "0.25",
        "--seed",
        "3",
        "--format",
        "json",
    )
    assert configured.exit_code == 0, configured.stderr
    assert json.loads(configured.stdout)[0] == {
        "pool": "p",
        "topics": "t",
        "collection": "c",
        "grades": "0=No, 1=Yes",
        "double_share": 0.25,
        "double_seed": 3,
        "suggestions": "off",  # no judge's suggestions unless the organiser turns them on
    }
    listed = json.loads(cli("topics", "list", "--format", "json").stdout)
    assert [(r["name"], r["kind"], r["count"]) for r in listed] == [("t", "topics", 2), ("c", "documents", 2)]


def test_a_bad_file_says_where_and_stores_nothing(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    docs = tmp_path / "docs.jsonl"
    docs.write_text('{"doc_id": "d1", "text": "a"}\n{"doc_id": "d2", "text": "b"}\n{"doc_id": "d1", "text": "c"}\n')
    refused = cli("documents", "import", str(docs), "--collection", "c")
    assert refused.exit_code == 1
    assert refused.stderr == f"{docs}:3: document d1 is given twice (also at line 1); keep one\n"
    assert json.loads(cli("topics", "list", "--format", "json").stdout) == []  # not even the collection's name
    missing = cli("pool", "configure", "p", "--topics", "nope")
    assert missing.exit_code == 1
    assert (
        missing.stderr
        == "Error: No topics named 'nope'. Import them with 'evalstore topics import PATH --name nope'.\n"
    )
    grade = cli("pool", "configure", "p", "--grade", "high")
    assert grade.exit_code == 2 and "give a grade as VALUE=LABEL" in grade.stderr


@pytest.mark.parametrize("relative", ["core18/topics.core18.txt", "dl-hard/topics.tsv"])
def test_real_topic_files_import_whole(cli, relative: str) -> None:  # type: ignore[no-untyped-def]
    path = shared_path(relative)
    done = cli("topics", "import", str(path), "--name", "real")
    assert done.exit_code == 0, done.stderr
    assert done.stderr == "imported 50 topics as 'real'\n"
