"""The CLI as a user types it: exit codes, exact messages on stderr, results on stdout."""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path

import pytest

from evalstore.db.engine import SCHEMA_REVISION
from tests.conftest import shared_path

# ``cli``: the shared fixture (tests/conftest.py), on an empty store in the test's folder


def test_command_on_a_database_without_schema_says_to_upgrade(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    result = cli("runs", "list")
    assert result.exit_code == 1
    assert result.stderr == (
        f"Error: The database sqlite:///{tmp_path / 'cli.db'} has no evalstore schema. "
        "Run 'evalstore db upgrade' to create it.\n"
    )


def test_register_list_show_export_delete(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    cli.upgrade()
    source = shared_path("trec_eval_test", "results.test")
    result = cli("runs", "register", str(source), "--name", "std", "--system", "smart", "--meta", "k1=0.9")
    assert result.exit_code == 0, result.stderr
    assert result.stderr == "registered run 'std': 1500 rows, 3 topics\n"
    again = cli("runs", "register", str(source), "--name", "std")
    assert again.exit_code == 0
    assert again.stderr == "run 'std' is already registered with this content (1500 rows); nothing stored\n"

    listed = json.loads(cli("runs", "list", "--format", "json").stdout)
    assert [(r["name"], r["rows"], r["topics"], r["tag"]) for r in listed] == [("std", 1500, 3, "STANDARD")]
    assert {"name", "rows", "topics", "created_at"} <= set(listed[0])
    rows = list(csv.DictReader(io.StringIO(cli("runs", "list", "--format", "csv").stdout)))
    assert rows[0]["name"] == "std" and rows[0]["rows"] == "1500"
    shown = json.loads(cli("runs", "show", "std", "--format", "json").stdout)[0]
    assert shown["metadata"] == {"k1": "0.9"} and shown["system"] == "smart"
    assert "std" in cli("runs", "list").stdout  # the rich table

    out = tmp_path / "std.run"
    assert cli("runs", "export", "std", "-o", str(out)).exit_code == 0
    first = out.read_text().splitlines()[0]
    assert first == "301 Q0 FR940202-2-00150 104 2.129133 STANDARD"
    assert cli("runs", "export", "std").stdout.splitlines()[0] == first

    deleted = cli("runs", "delete", "std")
    assert deleted.exit_code == 0 and deleted.stderr == "deleted run 'std' (1500 rows)\n"
    missing = cli("runs", "show", "std")
    assert missing.exit_code == 1
    assert missing.stderr == "Error: No run named 'std'. See 'evalstore runs list' for the registered runs.\n"


def test_bad_run_file_exit_1_with_path_and_line_and_nothing_stored(cli, write) -> None:  # type: ignore[no-untyped-def]
    cli.upgrade()
    path = write("bad.run", "1 Q0 d1 1 2.5 t\n1 Q0 d2 2 NaN t\n")
    result = cli("runs", "register", str(path), "--name", "bad")
    assert result.exit_code == 1
    assert result.stderr == f"{path}:2: score 'NaN' is not a finite number; scores must be finite\n"
    assert json.loads(cli("runs", "list", "--format", "json").stdout) == []


def test_name_conflict_and_replace(cli, write) -> None:  # type: ignore[no-untyped-def]
    cli.upgrade()
    cli("runs", "register", str(write("a.run", "1 Q0 d1 1 2.5 t\n")), "--name", "r")
    other = write("b.run", "1 Q0 d2 1 2.5 t\n")
    result = cli("runs", "register", str(other), "--name", "r")
    assert result.exit_code == 1
    assert re.fullmatch(
        r"Error: A run named 'r' already exists with different content \(registered \d{4}-\d\d-\d\d \d\d:\d\d UTC\)\. "
        r"Pass --replace to replace it, or choose another --name\.\n",
        result.stderr,
    )
    assert cli("runs", "register", str(other), "--name", "r", "--replace").exit_code == 0


def test_bad_meta_is_a_usage_error(cli, write) -> None:  # type: ignore[no-untyped-def]
    cli.upgrade()
    result = cli("runs", "register", str(write("a.run", "1 Q0 d1 1 2.5 t\n")), "--name", "r", "--meta", "novalue")
    assert result.exit_code == 2
    assert "'novalue' is not KEY=VALUE" in result.stderr


def test_qrels_import_list_show_delete(cli) -> None:  # type: ignore[no-untyped-def]
    cli.upgrade()
    source = shared_path("dl-hard", "dl_hard-passage.qrels")
    result = cli("qrels", "import", str(source), "--name", "dlhard", "--description", "DL-HARD passage")
    assert result.exit_code == 0, result.stderr
    assert result.stderr == "imported qrels 'dlhard': 4256 judgments, 50 topics\n"
    listed = json.loads(cli("qrels", "list", "--format", "json").stdout)
    assert [(q["name"], q["rows"], q["topics"]) for q in listed] == [("dlhard", 4256, 50)]
    assert cli("qrels", "export", "dlhard").stdout.splitlines()[-1] == "1056416 Q0 8739207 0"
    assert cli("qrels", "delete", "dlhard").exit_code == 0
    assert cli("qrels", "show", "dlhard").stderr == (
        "Error: No qrels named 'dlhard'. See 'evalstore qrels list' for the imported qrels.\n"
    )


def test_conflicting_qrels(cli, write) -> None:  # type: ignore[no-untyped-def]
    cli.upgrade()
    path = write("q.txt", "1 0 d1 1\n1 0 d1 0\n")
    result = cli("qrels", "import", str(path), "--name", "q")
    assert result.exit_code == 1
    assert result.stderr == (
        f"{path}:2: conflicting judgments for docno 'd1' in topic '1': relevance 0 here, 1 at line 1; "
        "keep one of them\n"
    )


def test_db_current(cli, mlflow_store: str) -> None:  # type: ignore[no-untyped-def]
    # the MLflow store beside it made already (mlflow_store): making one is tests/db/test_mlflow.py's
    assert cli("db", "current").stdout == f"current: none\nhead: {SCHEMA_REVISION}\n"
    assert cli("db", "upgrade").exit_code == 0
    assert cli("db", "current").stdout == f"current: {SCHEMA_REVISION}\nhead: {SCHEMA_REVISION}\n"


def test_subtopic_qrels_through_the_cli(cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    """qrels import --kind subtopics, evaluate with the kind's own measures, leaderboard without the
    Judged@10 column subtopic judgments cannot fill; an AP asked of them is refused."""
    from tests.db.test_judgment_kinds import RUN, SUBTOPICS

    monkeypatch.setenv("EVALSTORE_MLFLOW", "off")
    (tmp_path / "web.qrels").write_text(SUBTOPICS)
    (tmp_path / "run.txt").write_text(RUN)
    cli.upgrade()
    imported = cli("qrels", "import", str(tmp_path / "web.qrels"), "--name", "web", "--kind", "subtopics")
    assert imported.stderr == "imported qrels 'web': 9 judgments, 3 topics\n"
    assert json.loads(cli("qrels", "list", "--format", "json").stdout)[0]["kind"] == "subtopics"
    assert cli("runs", "register", str(tmp_path / "run.txt"), "--name", "div").exit_code == 0
    refused = cli("evaluate", "--qrels", "web", "--run", "div", "--measures", "AP", "--wait")
    assert refused.exit_code == 1
    assert refused.stderr == (
        "Error: AP is computed from relevance judgments, and qrels 'web' hold subtopic "
        "judgments. 'evalstore measures' lists the judgments each measure needs.\n"
    )
    assert cli("evaluate", "--qrels", "web", "--run", "div", "--wait").exit_code == 0
    board = cli("leaderboard", "--qrels", "web", "--measure", "alpha_nDCG@10", "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(board.stdout)))
    assert [r["run"] for r in rows] == ["div"] and float(rows[0]["alpha_nDCG@10"]) > 0
    # machine formats: every column the table has (the interval too), at full precision
    low, mean, high = (float(rows[0][k]) for k in ("alpha_nDCG@10 CI low", "alpha_nDCG@10", "alpha_nDCG@10 CI high"))
    assert low < mean < high and len(rows[0]["alpha_nDCG@10"]) > 6
    table = cli("leaderboard", "--qrels", "web", "--measure", "alpha_nDCG@10").stdout
    assert "alpha_nDCG@10 [95% CI]" in table and "Judged@10" not in table


def test_replacing_a_run_or_qrels_says_which_evaluations_went(
    cli,
    write,  # type: ignore[no-untyped-def]
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("EVALSTORE_MLFLOW", "off")
    cli.upgrade()
    cli("qrels", "import", str(write("q", "1 0 d1 1\n1 0 d2 0\n")), "--name", "q")
    cli("runs", "register", str(write("a.run", "1 Q0 d1 1 2.5 t\n")), "--name", "r")
    assert cli("evaluate", "--qrels", "q", "--run", "r", "--measures", "AP", "--wait").exit_code == 0
    assert cli("evaluate", "--qrels", "q", "--run", "r", "--measures", "P@5", "--wait").exit_code == 0
    replaced = cli("runs", "register", str(write("b.run", "1 Q0 d2 1 2.5 t\n")), "--name", "r", "--replace")
    assert replaced.exit_code == 0
    assert replaced.stderr == (
        "warning: replacing run 'r' deleted the 2 stored evaluations made with the old "
        "content; evaluate again to have them back\nregistered run 'r': 1 rows, 1 topics\n"
    )
    assert cli("evaluate", "--qrels", "q", "--run", "r", "--measures", "AP", "--wait").exit_code == 0
    replaced = cli("qrels", "import", str(write("q2", "1 0 d1 0\n1 0 d2 1\n")), "--name", "q", "--replace")
    assert replaced.stderr.startswith("warning: replacing qrels 'q' deleted the 1 stored evaluation made with")
    again = cli("runs", "register", str(write("c.run", "1 Q0 d1 1 2.5 t\n")), "--name", "r", "--replace")
    assert again.stderr == "registered run 'r': 1 rows, 1 topics\n"  # no evaluations: nothing to say


def test_version(cli) -> None:  # type: ignore[no-untyped-def]
    from evalstore import __version__

    result = cli("--version")
    assert result.exit_code == 0
    assert result.stdout == f"evalstore {__version__}\n"


def test_registering_many_run_files_names_them_and_validates_all_first(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """`runs register RUN_DIR/*.gz`: names from the file names (TREC's input.TAG.gz -> TAG) or the
    run tags; a bad file anywhere stores nothing and every bad file is named with its line."""
    from tests.cli.usage import usage_message

    cli.upgrade()
    runs = tmp_path / "runs"
    runs.mkdir()
    good = "301 Q0 d1 1 2.0 {tag}\n301 Q0 d2 2 1.0 {tag}\n"
    (runs / "input.bm25.txt").write_text(good.format(tag="bm25-tag"))
    (runs / "dense.run").write_text(good.format(tag="dense-tag"))
    (runs / "broken.txt").write_text("301 Q0 d1 1 2.0 x\n301 Q0 d1 2 1.0 x\n")  # a docno twice
    (runs / "short.txt").write_text("301 Q0 d1 1\n")
    refused = cli("runs", "register", *(str(p) for p in sorted(runs.iterdir())))
    assert refused.exit_code == 1
    assert refused.stderr == (
        f"{runs / 'broken.txt'}:2: docno 'd1' appears twice in topic '301' (first at line 1); trec_eval refuses "
        "duplicate documents, so remove one of them\n"
        f"{runs / 'short.txt'}:1: expected 6 columns (qid Q0 docno rank score tag), found 4\n"
        "nothing stored: 2 of 4 files refused\n"
    )
    assert json.loads(cli("runs", "list", "--format", "json").stdout) == []
    (runs / "broken.txt").unlink()
    (runs / "short.txt").unlink()
    by_file = cli("runs", "register", *(str(p) for p in sorted(runs.iterdir())), "--system", "batch")
    assert by_file.exit_code == 0, by_file.stderr
    assert by_file.stderr == ("registered run 'dense': 2 rows, 1 topics\nregistered run 'bm25': 2 rows, 1 topics\n")
    by_tag = cli("runs", "register", *(str(p) for p in sorted(runs.iterdir())), "--name-from", "tag")
    assert by_tag.exit_code == 0, by_tag.stderr
    listed = {r["name"]: r["system"] for r in json.loads(cli("runs", "list", "--format", "json").stdout)}
    assert listed == {"bm25": "batch", "dense": "batch", "bm25-tag": None, "dense-tag": None}
    one_name = cli("runs", "register", *(str(p) for p in sorted(runs.iterdir())), "--name", "x")
    assert one_name.exit_code == 2
    assert usage_message(one_name.stderr) == (
        "--name names one run; 2 files were given (their names come from the "
        "file names, or the run tags with --name-from tag)."
    )
    (runs / "input.dense.gz").write_bytes(__import__("gzip").compress(good.format(tag="t").encode()))
    clash = cli("runs", "register", str(runs / "dense.run"), str(runs / "input.dense.gz"))
    assert clash.exit_code == 1 and clash.stderr == (
        "Error: Two files would be registered as 'dense'. Register them with --name-from tag, or one at a time with "
        "--name.\n"
    )


def test_importing_many_qrels_files_validates_all_first(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    cli.upgrade()
    folder = tmp_path / "qrels"
    folder.mkdir()
    (folder / "qrels.dl19.txt").write_text("301 0 d1 1\n301 0 d2 0\n")
    (folder / "qrels.dl20.txt").write_text("302 0 d1 2\n")
    (folder / "broken.txt").write_text("301 0 d1 one\n")
    refused = cli("qrels", "import", *(str(p) for p in sorted(folder.iterdir())))
    assert refused.exit_code == 1
    assert refused.stderr == (
        f"{folder / 'broken.txt'}:1: relevance 'one' is not an integer\nnothing stored: 1 of 3 files refused\n"
    )
    assert json.loads(cli("qrels", "list", "--format", "json").stdout) == []
    (folder / "broken.txt").unlink()
    imported = cli("qrels", "import", *(str(p) for p in sorted(folder.iterdir())))
    assert imported.exit_code == 0 and imported.stderr == (
        "imported qrels 'qrels.dl19': 2 judgments, 1 topics\nimported qrels 'qrels.dl20': 1 judgments, 1 topics\n"
    )
    again = cli("qrels", "import", *(str(p) for p in sorted(folder.iterdir())))
    assert again.stderr == (
        "qrels 'qrels.dl19' are already imported with this content (2 judgments); nothing "
        "stored\nqrels 'qrels.dl20' are already imported with this content (1 judgments); "
        "nothing stored\n"
    )
