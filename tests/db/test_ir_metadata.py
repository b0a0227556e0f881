"""A run file's ir_metadata block: parsed, validated (path:line), stored with the run, searchable by
key, shown, and written back by `runs export` byte for byte."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest
from sqlalchemy import Engine
from typer.testing import CliRunner

from evalstore.cli import app
from evalstore.errors import InputFormatError, InvalidParameterError, NotFoundError
from evalstore.io.ir_metadata import read_ir_metadata
from evalstore.services import store
from tests.conftest import Templates, migrated_copy

# as repro_eval's MetadataHandler.write_metadata writes it: '# ' + YAML line + ' \n'
BLOCK = (
    "# ir_metadata.start\n"
    "# tag: bm25-rm3 \n"
    "# platform: \n"
    "#   software: \n"
    "#     libraries: \n"
    "#       - pyterrier==0.10 \n"
    "#       - numpy \n"
    "# implementation: \n"
    "#   source: \n"
    "#     lang: python \n"
    "# method: \n"
    "#   retrieval: \n"
    "#     - name: bm25 \n"
    "#       k1: 0.9 \n"
    "# ir_metadata.end\n"
)
ROWS = "1 Q0 d1 1 2.5 bm25-rm3\n1 Q0 d2 2 1.5 bm25-rm3\n2 Q0 d1 1 0.5 bm25-rm3\n"


def test_the_block_is_parsed_and_flattened(write) -> None:  # type: ignore[no-untyped-def]
    found = read_ir_metadata(write("run", BLOCK + ROWS))
    assert found is not None and found.block == BLOCK and found.line == 1
    assert found.data["platform"]["software"]["libraries"] == ["pyterrier==0.10", "numpy"]
    assert found.flat() == {
        "tag": "bm25-rm3",
        "platform.software.libraries": "pyterrier==0.10, numpy",
        "implementation.source.lang": "python",
        "method.retrieval.0.name": "bm25",
        "method.retrieval.0.k1": "0.9",
    }
    assert read_ir_metadata(write("plain", "# a comment\n" + ROWS)) is None
    # a block after the first run line is not the header's: ignored, as trec_eval ignores comments
    assert read_ir_metadata(write("late", ROWS + BLOCK)) is None


def test_broken_blocks_name_the_line(write) -> None:  # type: ignore[no-untyped-def]
    broken = write("broken", "# a comment first\n" + BLOCK.replace("#       k1: 0.9 \n", "#   k1: [0.9\n") + ROWS)
    with pytest.raises(InputFormatError) as caught:
        read_ir_metadata(broken)
    assert str(caught.value).startswith(f"{broken}:")
    assert caught.value.line is not None and 14 <= caught.value.line <= 16  # at or just after the bad line
    assert "the ir_metadata block is not valid YAML" in caught.value.problem
    unclosed = write("unclosed", BLOCK.replace("# ir_metadata.end\n", "") + ROWS)
    with pytest.raises(
        InputFormatError,
        match=r":1: the ir_metadata block has no '# ir_metadata.end' line; "
        r"close it before the first run line$",
    ):
        read_ir_metadata(unclosed)
    scalar = write("scalar", "# ir_metadata.start\n# just text\n# ir_metadata.end\n" + ROWS)
    with pytest.raises(
        InputFormatError,
        match=r":2: the ir_metadata block must be a YAML mapping \(key: value\), "
        r"not a str$",
    ):
        read_ir_metadata(scalar)
    hostile = write(
        "hostile", "# ir_metadata.start\n# x: !!python/object/apply:os.system ['true']\n# ir_metadata.end\n" + ROWS
    )
    with pytest.raises(InputFormatError, match="not valid YAML"):  # the safe loader builds no objects
        read_ir_metadata(hostile)


def test_a_run_round_trips_through_register_and_export(engine: Engine, write, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    crlf = BLOCK.replace("\n", "\r\n")  # line endings are the file's own
    path = tmp_path / "run.gz"
    path.write_bytes(gzip.compress((crlf + ROWS).encode()))
    store.register_run(engine, path, name="r", metadata={"team": "x"})
    stored = store.show_run(engine, "r").details["metadata"]
    assert stored == {"team": "x", "ir_metadata": crlf}
    assert store.ir_metadata_of(engine, "r")["implementation.source.lang"] == "python"
    store.register_run(engine, write("other", ROWS), name="other")
    assert store.ir_metadata_of(engine, "other") == {}
    listed = {s.name for s in store.list_runs(engine, meta={"implementation.source.lang": "python"})}
    assert listed == {"r"}
    assert {s.name for s in store.list_runs(engine, meta={"ir_metadata.platform.software.libraries": "numpy"})} == {"r"}
    assert {s.name for s in store.list_runs(engine, meta={"team": "x", "tag": "bm25-rm3"})} == {"r"}
    assert store.list_runs(engine, meta={"team": "y"}) == []
    assert store.list_runs(engine, meta={"platform": "x"}) == []  # a mapping is not a value
    with pytest.raises(InvalidParameterError, match=r"^The metadata key 'ir_metadata' is reserved"):
        store.register_run(engine, write("third", ROWS), name="third", metadata={"ir_metadata": "x"})
    with pytest.raises(NotFoundError):
        store.ir_metadata_of(engine, "nope")


def test_a_broken_block_stores_nothing(engine: Engine, write) -> None:  # type: ignore[no-untyped-def]
    bad = write("bad", BLOCK.replace("# tag: bm25-rm3 \n", "# tag: [\n") + ROWS)
    with pytest.raises(InputFormatError, match="not valid YAML"):
        store.register_run(engine, bad, name="bad")
    with pytest.raises(InputFormatError, match="not valid YAML"):
        store.register_runs(engine, [write("good", ROWS), bad], name_from="file")
    assert store.list_runs(engine) == []


def test_the_commands_keep_the_block(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, templates: Templates) -> None:
    monkeypatch.setenv("EVALSTORE_HOME", str(tmp_path))
    monkeypatch.setenv("EVALSTORE_MLFLOW", "off")
    url = migrated_copy(templates, "sqlite", tmp_path)  # as `db upgrade` leaves it
    runner = CliRunner()

    def invoke(*args: str):  # type: ignore[no-untyped-def]
        return runner.invoke(app, ["--database-url", url, *args])

    (tmp_path / "run.txt").write_text(BLOCK + ROWS)
    (tmp_path / "bad.txt").write_text(BLOCK.replace("#     lang: python \n", "#     lang: 'python\n") + ROWS)
    registered = invoke("runs", "register", str(tmp_path / "run.txt"), "--name", "r")
    assert registered.exit_code == 0, registered.output
    refused = invoke("runs", "register", str(tmp_path / "bad.txt"), "--name", "bad")
    assert refused.exit_code == 1 and f"{tmp_path / 'bad.txt'}:" in refused.stderr
    assert "the ir_metadata block is not valid YAML" in refused.stderr
    exported = invoke("runs", "export", "r")
    assert exported.stdout_bytes.startswith(BLOCK.encode())  # the block byte for byte, then the rows
    rows = exported.stdout_bytes[len(BLOCK) :].decode().splitlines()
    assert [row.split()[:3] for row in rows] == [line.split()[:3] for line in ROWS.splitlines()]
    csv_export = invoke("runs", "export", "r", "--format", "csv")
    assert "ir_metadata" not in csv_export.stdout  # a table has no comment lines to carry it
    listed = invoke("runs", "list", "--meta", "method.retrieval.0.name=bm25", "--format", "csv")
    assert listed.stdout.splitlines()[1].startswith("r,")
    assert (
        len(invoke("runs", "list", "--meta", "method.retrieval.0.name=dph", "--format", "csv").stdout.splitlines()) == 1
    )
