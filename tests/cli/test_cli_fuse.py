"""`evalstore runs fuse` as a user types it: the fused run stored with its provenance, the file
mode, and every refusal a one-line message with exit code 1 and nothing stored."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evalstore.fusion import fuse
from evalstore.io.formats import read_run
from tests.cli.usage import usage_message
from tests.conftest import Cli

RUNS = {
    "a": "1 Q0 d1 1 3.0 a\n1 Q0 d2 2 2.0 a\n1 Q0 d3 3 1.0 a\n2 Q0 d4 1 1.0 a\n2 Q0 d5 2 0.5 a\n",
    "b": "1 Q0 d3 1 9.0 b\n1 Q0 d1 2 4.0 b\n1 Q0 d6 3 1.0 b\n2 Q0 d5 1 2.0 b\n2 Q0 d7 2 1.0 b\n",
    "c": "1 Q0 d2 1 5.0 c\n1 Q0 d9 2 4.5 c\n",  # lacks topic 2
}


@pytest.fixture
def store(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> Cli:
    monkeypatch.setenv("EVALSTORE_MLFLOW", "off")
    cli.upgrade()
    for name, text in RUNS.items():
        (cli.folder / f"{name}.txt").write_text(text)
        assert cli("runs", "register", str(cli.folder / f"{name}.txt"), "--name", name).exit_code == 0
    return cli


def test_fused_run_is_stored_with_its_provenance(store: Cli) -> None:
    result = store("runs", "fuse", "a", "b", "--method", "wsum", "--weights", "0.7,0.3", "--name", "ab")
    assert result.exit_code == 0, result.stderr
    assert result.stderr == "registered run 'ab': 7 rows, 2 topics\n"
    shown = store("runs", "show", "ab", "--format", "json")
    meta = json.loads(shown.stdout)[0]["metadata"]
    hashes = {n: json.loads(store("runs", "show", n, "--format", "json").stdout)[0]["content_hash"] for n in "ab"}
    assert meta["fusion.inputs"] == f"a ({hashes['a']}), b ({hashes['b']})"
    assert meta["fusion.method"] == "wsum" and meta["fusion.norm"] == "min-max"
    assert meta["fusion.weights"] == "0.7,0.3" and meta["fusion.params"] == "{}" and meta["fusion.depth"] == "1000"
    assert "fusion.evalstore_version" in meta
    # the stored rows are the library's fusion of the stored runs
    exported = store("runs", "export", "ab", "-o", str(store.folder / "ab.out"))
    assert exported.exit_code == 0, exported.stderr
    stored = read_run(store.folder / "ab.out").table
    expected = fuse(
        [read_run(store.folder / f"{n}.txt").table for n in "ab"], "wsum", "min-max", weights=[0.7, 0.3]
    ).table
    assert (
        stored.select(["topic", "doc", "score"]).to_pylist() == expected.select(["topic", "doc", "score"]).to_pylist()
    )
    assert (
        store("runs", "list", "--meta", "fusion.method=wsum", "--format", "csv")
        .stdout.splitlines()[1]
        .startswith("ab,")
    )


def test_file_mode_writes_a_trec_run(cli: Cli) -> None:
    for name in "ab":
        (cli.folder / f"{name}.txt").write_text(RUNS[name])
    out = cli.folder / "fused.txt"
    files = [str(cli.folder / f"{n}.txt") for n in "ab"]
    result = cli(
        "runs", "fuse", "--files", *files, "--method", "rrf", "--norm", "none", "--depth", "2", "--out", str(out)
    )
    assert result.exit_code == 0, result.stderr
    assert result.stderr == f"wrote 4 rows, 2 topics to {out}\n"
    assert out.read_text().splitlines() == [
        f"1 Q0 d1 1 {1 / 61 + 1 / 62!r} fused",
        f"1 Q0 d3 2 {1 / 63 + 1 / 61!r} fused",
        f"2 Q0 d5 1 {1 / 61 + 1 / 62!r} fused",
        f"2 Q0 d4 2 {1 / 61!r} fused",
    ]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["a", "nope", "--method", "rrf"],
            "Error: No run named 'nope'. See 'evalstore runs list' for the registered runs.",
        ),
        (
            ["a", "c", "--method", "rrf"],
            "Error: The runs' topics differ: run 'c' lacks topic 2 that run 'a' has; fuse runs of the same topics.",
        ),
        (
            ["a", "b", "--method", "wsum", "--weights", "1,x"],
            "Error: --weights: 'x' is not a number; give one number per run, separated by commas.",
        ),
        (["a", "b", "--method", "wsum", "--weights", "1,2,3"], "Error: 3 weights for 2 runs; give one weight per run."),
        (
            ["a", "b", "--method", "wsum", "--weights", "1,-2"],
            "Error: A weight must be a number of 0 or more, not -2.0.",
        ),
        (
            ["a", "b", "--method", "comb"],
            "Error: Unknown fusion method 'comb'; the methods are combsum, combmnz, combmax, combmin, combmed, combanz, combgmnz, rrf, isr, log_isr, logn_isr, rbc, wsum, wmnz, mixed, bordafuse, w_bordafuse, condorcet, w_condorcet, probfuse, segfuse, slidefuse, bayesfuse, mapfuse, posfuse.",
        ),
        (["a", "a", "--method", "rrf"], "Error: 'a' is given twice; fuse each run once (weigh it instead)."),
        (["a", "b", "--method", "rbc"], "Error: rbc needs its parameter phi."),
    ],
)
def test_refusals_are_one_line_and_store_nothing(store: Cli, args: list[str], message: str) -> None:
    result = store("runs", "fuse", *args, "--name", "fused")
    assert result.exit_code == 1
    assert result.stderr == message + "\n"
    assert "fused" not in store("runs", "list", "--format", "csv").stdout


def test_optimize_needs_a_split(store: Cli) -> None:
    result = store("runs", "fuse", "a", "b", "--method", "wsum", "--optimize", "AP", "--name", "x")
    assert result.exit_code == 2
    assert (
        usage_message(result.stderr)
        == "--optimize chooses the weights on a split's training topics; give --split SPLIT."
    )


def test_files_need_out(cli: Cli, tmp_path: Path) -> None:
    result = cli("runs", "fuse", "--files", "x.txt", "y.txt", "--method", "rrf")
    assert result.exit_code == 2
    assert usage_message(result.stderr) == "--files writes the fused run to a file; give --out FILE."


QRELS = "1 0 d3 1\n1 0 d2 0\n2 0 d5 2\n"


def test_a_trained_method_learns_from_stored_qrels_and_records_them(store: Cli) -> None:
    (store.folder / "q.txt").write_text(QRELS)
    assert store("qrels", "import", str(store.folder / "q.txt"), "--name", "q").exit_code == 0
    result = store("runs", "fuse", "a", "b", "--method", "mapfuse", "--train-qrels", "q", "--name", "m")
    assert result.exit_code == 0, result.stderr
    meta = json.loads(store("runs", "show", "m", "--format", "json").stdout)[0]["metadata"]
    qrels_hash = json.loads(store("qrels", "show", "q", "--format", "json").stdout)[0]["content_hash"]
    assert meta["fusion.method"] == "mapfuse" and meta["fusion.training_qrels"] == f"q ({qrels_hash})"
    assert meta["fusion.training_topics"] == "2"
    # a's MAP: topic 1 (d3 third) 1/3, topic 2 (d5 second) 1/2; b's: d3 first, d5 first
    assert json.loads(meta["fusion.trained"]) == [[(1 / 3 + 1 / 2) / 2], [1.0]]
    shown = store(
        "runs", "fuse", "a", "b", "--method", "probfuse", "--n-segments", "2", "--train-qrels", "q", "--name", "p"
    )
    assert shown.exit_code == 0, shown.stderr
    meta = json.loads(store("runs", "show", "p", "--format", "json").stdout)[0]["metadata"]
    assert meta["fusion.params"] == '{"n_segments": 2}'


def test_a_trained_method_in_file_mode_learns_from_a_qrels_file(cli: Cli) -> None:
    for name in "ab":
        (cli.folder / f"{name}.txt").write_text(RUNS[name])
    (cli.folder / "q.txt").write_text(QRELS)
    out = cli.folder / "fused.txt"
    files = [str(cli.folder / f"{n}.txt") for n in "ab"]
    result = cli(
        "runs",
        "fuse",
        "--files",
        *files,
        "--method",
        "posfuse",
        "--train-qrels-file",
        str(cli.folder / "q.txt"),
        "--out",
        str(out),
    )
    assert result.exit_code == 0, result.stderr
    # posfuse: d3 is first in b (relevant there in both topics: 1.0) and third in a (relevant there in
    # the one topic a has three documents of: 1.0)
    assert out.read_text().splitlines()[0] == "1 Q0 d3 1 2 fused"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["a", "b", "--method", "probfuse", "--n-segments", "2"],
            "probfuse is trained on judgments; give --train-qrels QRELS or --split SPLIT.",
        ),
        (
            ["a", "b", "--method", "rrf", "--train-qrels", "q"],
            "--train-qrels trains one of probfuse, segfuse, slidefuse, bayesfuse, mapfuse, posfuse; rrf is not trained.",
        ),
    ],
)
def test_a_trained_method_without_training_is_refused_in_one_line(store: Cli, args: list[str], message: str) -> None:
    result = store("runs", "fuse", *args, "--name", "x")
    assert result.exit_code == 2
    assert usage_message(result.stderr) == message
    assert "x," not in store("runs", "list", "--format", "csv").stdout


def test_files_train_on_a_qrels_file_only(cli: Cli) -> None:
    result = cli(
        "runs",
        "fuse",
        "--files",
        "x.txt",
        "y.txt",
        "--method",
        "mapfuse",
        "--split",
        "s",
        "--train-qrels-file",
        "q.txt",
        "--out",
        "f.txt",
    )
    assert result.exit_code == 2
    assert (
        usage_message(result.stderr)
        == "With --files a trained method learns from a qrels file; give --train-qrels-file."
    )
