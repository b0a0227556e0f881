"""Qrels kept between `evalstore trec-eval` commands (evalstore.io.parsed_cache): used only while
the file, the options and the reader are as they were; anything wrong with the cache reads the file."""

from __future__ import annotations

import io
import os
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from evalstore.io.formats import ParsedFile, read_qrels
from evalstore.io.parsed_cache import ABANDONED_SECONDS, KEPT_FILES, ParsedCache, cache_dir
from evalstore.trec_eval.command_line import run as trec_eval
from tests.conftest import shared_path

OPTIONS = {"strict": False}


class Reader:
    """read_qrels, counting its calls."""

    def __init__(self, path: Path) -> None:
        self.path, self.calls = path, 0

    def __call__(self) -> ParsedFile:
        self.calls += 1
        return read_qrels(self.path, strict=False, content_hash=False)


def qrels_file(tmp_path: Path, text: str = "1 0 d1 1\n1 0 d2 0\n2 0 d1 2\n") -> Path:
    path = tmp_path / "qrels.txt"
    path.write_text(text)
    return path


def test_a_settled_file_is_read_once_then_its_kept_copy_is_used(tmp_path: Path) -> None:
    path, cache = qrels_file(tmp_path), ParsedCache(tmp_path / "cache", settled_seconds=0.0)
    reader = Reader(path)
    first = cache.read(path, OPTIONS, reader)[0]
    second = cache.read(path, OPTIONS, reader)[0]
    assert reader.calls == 1
    assert second.table.equals(first.table) and second.table.schema.metadata is None
    assert (second.tag, second.warnings, second.content_hash) == (first.tag, first.warnings, first.content_hash)
    assert len(list((tmp_path / "cache").glob("qrels-*.arrow"))) == 1


def test_tags_and_warnings_come_back_as_they_were_read(tmp_path: Path) -> None:
    path, cache = qrels_file(tmp_path), ParsedCache(tmp_path / "cache", settled_seconds=0.0)
    table = read_qrels(path, strict=False, content_hash=False).table
    for tag, warnings in (("run\x1etag", ("one", "two: x")), (None, ()), ("", ("only",))):
        os.utime(path)  # a new state: read (and kept) again
        cache.read(path, OPTIONS, lambda t=tag, w=warnings: ParsedFile(table, "abc", t, w))[0]
        kept = cache.read(path, OPTIONS, lambda: pytest.fail("read again"))[0]
        assert (kept.tag, kept.warnings, kept.content_hash) == (tag, warnings, "abc")


def test_a_file_changed_to_the_same_size_with_its_old_mtime_is_read_again(tmp_path: Path) -> None:
    path, cache = qrels_file(tmp_path), ParsedCache(tmp_path / "cache", settled_seconds=0.0)
    reader = Reader(path)
    cache.read(path, OPTIONS, reader)[0]
    before = path.stat()
    path.write_text("1 0 d1 0\n1 0 d2 1\n2 0 d1 2\n")  # the same bytes but two
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))  # touch -d: the change time still moves
    assert path.stat().st_size == before.st_size and path.stat().st_mtime_ns == before.st_mtime_ns
    again = cache.read(path, OPTIONS, reader)[0]
    assert reader.calls == 2
    assert again.table["relevance"].to_pylist() == [0, 1, 2]


def test_a_file_changed_just_now_is_read_and_not_kept(tmp_path: Path) -> None:
    path, cache = qrels_file(tmp_path), ParsedCache(tmp_path / "cache")  # settled: 3 s
    reader = Reader(path)
    cache.read(path, OPTIONS, reader)[0]
    cache.read(path, OPTIONS, reader)[0]
    assert reader.calls == 2
    assert not (tmp_path / "cache").exists()


def test_other_options_are_kept_apart(tmp_path: Path) -> None:
    path, cache = qrels_file(tmp_path), ParsedCache(tmp_path / "cache", settled_seconds=0.0)
    reader = Reader(path)
    cache.read(path, {"evaluated_topic": None}, reader)[0]
    cache.read(path, {"evaluated_topic": "1"}, reader)[0]
    cache.read(path, {"evaluated_topic": None}, reader)[0]
    assert reader.calls == 2


@pytest.mark.parametrize("damage", [b"", b"not arrow at all", None])
def test_a_damaged_or_foreign_copy_is_read_anew_and_replaced(tmp_path: Path, damage: bytes | None) -> None:
    path, cache = qrels_file(tmp_path), ParsedCache(tmp_path / "cache", settled_seconds=0.0)
    reader = Reader(path)
    expected = cache.read(path, OPTIONS, reader)[0].table
    (entry,) = (tmp_path / "cache").glob("qrels-*.arrow")
    if damage is None:  # a valid Arrow file, not of ours
        with pa.OSFile(str(entry), "wb") as out, pa.ipc.new_file(out, expected.schema) as writer:
            writer.write_table(expected)
    else:
        entry.write_bytes(damage)
    assert cache.read(path, OPTIONS, reader)[0].table.equals(expected)
    assert reader.calls == 2
    assert cache.read(path, OPTIONS, reader)[0].table.equals(expected)
    assert reader.calls == 2  # kept again


def test_a_cache_that_cannot_be_written_only_reads(tmp_path: Path) -> None:
    path = qrels_file(tmp_path)
    blocked = tmp_path / "a file"
    blocked.write_text("")
    cache = ParsedCache(blocked / "cache", settled_seconds=0.0)
    reader = Reader(path)
    assert cache.read(path, OPTIONS, reader)[0].table.num_rows == 3
    assert cache.read(path, OPTIONS, reader)[0].table.num_rows == 3
    assert reader.calls == 2


def test_reader_errors_are_the_readers(tmp_path: Path) -> None:
    cache = ParsedCache(tmp_path / "cache", settled_seconds=0.0)
    with pytest.raises(Exception, match="no such file"):
        cache.read(tmp_path / "missing", OPTIONS, Reader(tmp_path / "missing"))[0]
    bad = qrels_file(tmp_path, "1 0 d1 x\n")
    with pytest.raises(Exception, match=":1:"):
        cache.read(bad, OPTIONS, Reader(bad))[0]
    assert not list((tmp_path / "cache").glob("*")) if (tmp_path / "cache").exists() else True


def test_at_most_kept_files_are_kept_the_least_recently_used_dropped(tmp_path: Path) -> None:
    cache = ParsedCache(tmp_path / "cache", settled_seconds=0.0)
    paths = []
    for number in range(KEPT_FILES + 2):
        folder = tmp_path / f"q{number}"
        folder.mkdir()
        paths.append(qrels_file(folder))
    for path in paths[: KEPT_FILES + 1]:
        cache.read(path, OPTIONS, Reader(path))[0]
    assert len(list((tmp_path / "cache").glob("qrels-*.arrow"))) == KEPT_FILES
    abandoned, writing = (tmp_path / "cache" / f".qrels-1-2-0000abcd.arrow.{pid}.partial" for pid in (1, 2))
    abandoned.write_bytes(b"half")
    writing.write_bytes(b"half")
    old = time.time() - 2 * ABANDONED_SECONDS
    os.utime(abandoned, (old, old))
    # the user's own files in the folder, named nearly as ours, and old: never deleted
    theirs = [tmp_path / "cache" / name for name in ("qrels-trec1.arrow", ".qrels-trec.arrow.1.partial", "notes")]
    for path in theirs:
        path.write_bytes(b"mine")
        os.utime(path, (old, old))
    first_reader = Reader(paths[0])  # the oldest, dropped
    cache.read(paths[0], OPTIONS, first_reader)[0]
    assert first_reader.calls == 1
    assert len([path for path in (tmp_path / "cache").glob("qrels-*.arrow") if path not in theirs]) == KEPT_FILES
    assert not abandoned.exists() and writing.exists()
    assert all(path.exists() for path in theirs)


def test_derived_arrays_are_kept_beside_and_come_back(tmp_path: Path) -> None:
    path, cache = qrels_file(tmp_path), ParsedCache(tmp_path / "cache", settled_seconds=0.0)
    derived = {"codes": pa.array(np.arange(5)), "names": pa.array(["a", "b"]), "none": pa.array([], pa.int64())}
    calls = []

    def derive(parsed: ParsedFile) -> dict[str, pa.Array]:
        calls.append(parsed.table.num_rows)
        return derived

    first, made = cache.read(path, OPTIONS, Reader(path), derive)
    kept, again = cache.read(path, OPTIONS, lambda: pytest.fail("read again"), derive)
    assert calls == [3] and made == derived
    assert again is not None and set(again) == set(derived)
    assert all(again[name].equals(array) for name, array in derived.items())
    assert kept.table.equals(first.table)


def test_nothing_is_derived_for_a_file_not_kept(tmp_path: Path) -> None:
    path = qrels_file(tmp_path)  # written just now
    parsed, derived = ParsedCache(tmp_path / "cache").read(
        path, OPTIONS, Reader(path), lambda _: pytest.fail("derived")
    )
    assert derived is None and parsed.table.num_rows == 3


@pytest.mark.parametrize("twice", [False, True])
def test_the_qrels_lookups_remembered_are_the_ones_worked_out(twice: bool) -> None:
    """prepare's qrels-side arrays, kept and given back: the same topics, codes, hashes, and an
    index that finds every key where the one built finds it (and knows when a key is given twice)."""
    from evalstore.io.hashing import KeyIndex
    from evalstore.metrics import preparation

    rng = np.random.default_rng(7)
    pairs = rng.choice(30 * 5_000, 2_000, replace=False)  # (topic, docno) pairs, each once
    topics, docs = [str(p // 5_000) for p in pairs], [f"doc{p % 5_000}" for p in pairs]
    if twice:
        topics.append(topics[0])
        docs.append(docs[0])
    qrels = pa.table({"topic": topics, "iteration": ["0"] * len(docs), "doc": docs, "relevance": [1] * len(docs)})
    lookups = preparation.qrels_lookups(qrels)
    built = KeyIndex(lookups["pair_key"].to_numpy().copy())
    again = pa.table({name: qrels[name].combine_chunks() for name in qrels.column_names})  # other buffers
    preparation.remember_qrels_lookups(again, lookups)
    judged = preparation._judged_docs(again)
    assert np.array_equal(judged.hashes, lookups["doc_hash"].to_numpy())
    assert preparation._qrels_topics(again)[0].equals(lookups["topics"])
    (_, remembered) = judged.pairs[preparation._column_key(again["topic"])]
    assert (not remembered.distinct) == twice == (not built.distinct)
    if remembered.distinct:
        queries = np.concatenate([built.keys, rng.integers(0, 2**63, 1_000, dtype=np.int64).astype(np.uint64)])
        assert np.array_equal(remembered.find(queries), built.find(queries))


def test_a_folder_others_can_write_to_is_not_used_and_a_new_one_is_the_users_alone(tmp_path: Path) -> None:
    path = qrels_file(tmp_path)
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)  # as /tmp is: anyone could leave made-up qrels there
    reader = Reader(path)
    for _ in range(2):
        assert ParsedCache(shared, settled_seconds=0.0).read(path, OPTIONS, reader)[1] is None
    assert reader.calls == 2 and not list(shared.iterdir())
    mine = tmp_path / "mine" / "cache"
    ParsedCache(mine, settled_seconds=0.0).read(path, OPTIONS, reader)
    assert mine.stat().st_mode & 0o077 == 0 and len(list(mine.iterdir())) == 1


def test_text_that_is_not_utf8_comes_back_as_it_was(tmp_path: Path) -> None:
    """A warning naming a file whose name is not UTF-8 (os.fsdecode's surrogates) is kept too."""
    path, cache = qrels_file(tmp_path), ParsedCache(tmp_path / "cache", settled_seconds=0.0)
    table = read_qrels(path, strict=False, content_hash=False).table
    warnings = ("q\udce9.csv:2: a judgment given twice",)
    cache.read(path, OPTIONS, lambda: ParsedFile(table, "", "t\udce9", warnings))
    kept = cache.read(path, OPTIONS, lambda: pytest.fail("read again"))[0]
    assert (kept.warnings, kept.tag) == (warnings, "t\udce9")


@pytest.mark.skipif(os.getuid() != 0, reason="giving a file to another user takes root")
def test_a_kept_file_that_is_not_the_users_is_not_used(tmp_path: Path) -> None:
    path, cache = qrels_file(tmp_path), ParsedCache(tmp_path / "cache", settled_seconds=0.0)
    reader = Reader(path)
    cache.read(path, OPTIONS, reader)
    (entry,) = (tmp_path / "cache").glob("qrels-*.arrow")
    os.chown(entry, 54321, 54321)
    cache.read(path, OPTIONS, reader)
    assert reader.calls == 2
    (entry,) = (tmp_path / "cache").glob("qrels-*.arrow")
    assert entry.stat().st_uid == os.getuid()  # kept afresh, as the user's


def test_lookups_that_do_not_fit_the_qrels_are_not_remembered() -> None:
    from evalstore.metrics import preparation

    qrels = pa.table({"topic": ["1", "1", "2"], "iteration": ["0"] * 3, "doc": ["a", "b", "a"], "relevance": [1, 0, 2]})
    good = preparation.qrels_lookups(qrels)
    again = pa.table({name: qrels[name].combine_chunks() for name in qrels.column_names})
    damaged = [
        {name: array for name, array in good.items() if name != "pair_slot"},
        {**good, "pair_slot": good["pair_slot"].slice(1)},  # not a power of two
        {**good, "judgment_code": pa.array([0, 0, 7])},  # a topic code past the topics
        {**good, "doc_hash": good["doc_hash"].slice(1)},  # a judgment short
        {**good, "pair_slot": pa.array(np.full(len(good["pair_slot"]), 99))},  # slots past the keys
        {**good, "topics": pa.array([1, 2])},
    ]
    for lookups in damaged:
        assert not preparation.remember_qrels_lookups(again, lookups)
        assert preparation._column_key(again["doc"]) != preparation._last_judged[0][1]
    assert preparation.remember_qrels_lookups(again, good)
    assert preparation._column_key(again["doc"]) == preparation._last_judged[0][1]


def test_where_the_cache_is(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for off in ("off", "OFF", "0", "false", "no", ""):
        monkeypatch.setenv("EVALSTORE_CACHE_DIR", off)
        assert cache_dir() is None
    monkeypatch.setenv("EVALSTORE_CACHE_DIR", str(tmp_path))
    assert cache_dir() == tmp_path
    monkeypatch.delenv("EVALSTORE_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "xdg" / "evalstore"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_dir() == tmp_path / "home" / ".cache" / "evalstore"

    def no_home() -> Path:
        raise RuntimeError("Could not determine home directory.")

    monkeypatch.setattr(Path, "home", no_home)  # no $HOME, and a uid without a passwd entry
    assert cache_dir() is None


def trec_eval_text(*args: str) -> str:
    import contextlib

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        trec_eval(list(args))
    return out.getvalue()


def test_trec_eval_keeps_settled_qrels_and_prints_the_same(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The command's output with the qrels kept equals its output with the cache off (which the
    differential tests hold to trec_eval's); the kept copy is what the later commands used."""
    qrels, run = tmp_path / "qrels.test", shared_path("trec_eval_test", "results.test")
    qrels.write_bytes(shared_path("trec_eval_test", "qrels.test").read_bytes())
    args = ("-q", "-m", "all_trec", str(qrels), str(run))
    monkeypatch.setenv("EVALSTORE_CACHE_DIR", "off")
    expected = trec_eval_text(*args)
    monkeypatch.setenv("EVALSTORE_CACHE_DIR", str(tmp_path / "cache"))
    assert trec_eval_text(*args) == expected
    assert not (tmp_path / "cache").exists()  # written just now: not kept
    monkeypatch.setattr("evalstore.io.parsed_cache.SETTLED_SECONDS", 0.0)
    assert trec_eval_text(*args) == expected
    (entry,) = (tmp_path / "cache").glob("qrels-*.arrow")
    with monkeypatch.context() as patched:
        patched.setattr("evalstore.trec_eval.one_run.read_qrels", lambda *a, **k: pytest.fail("read the file"))
        assert trec_eval_text(*args) == expected
        assert trec_eval_text(*args[:-1], str(run), str(run)) == expected * 2  # several runs: kept too
    assert [entry] == list((tmp_path / "cache").glob("qrels-*.arrow"))
