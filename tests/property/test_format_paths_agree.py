"""The fast (pyarrow) reader and the precise line-by-line reader must agree on every input:
same table when the file is good, same `path:line` message when it is not."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from evalstore.errors import InputFormatError
from evalstore.io import formats
from evalstore.io.parsed import empty_message, finish_table
from evalstore.io.trec_text import _first_trec_error

TOKEN = st.sampled_from(["1", "2", "10", "d1", "d2", "d#3", "Q0", "0", "-1", "2.5", "1e3", "nan", "x", "#"])
SEP = st.sampled_from([" ", "\t", "  ", " \t"])
END = st.sampled_from(["\n", "\r\n", " \n", "\n\n"])


@st.composite
def trec_text(draw: st.DrawFn, ncols: int) -> bytes:
    lines = []
    for _ in range(draw(st.integers(0, 6))):
        kind = draw(st.sampled_from(["good", "good", "good", "tokens", "comment"]))
        if kind == "comment":
            lines.append("# " + " ".join(draw(st.lists(TOKEN, max_size=6))))
            continue
        if kind == "good":
            fields = [
                draw(st.sampled_from(["1", "2"])),
                "Q0" if ncols == 6 else "0",
                draw(st.sampled_from(["d1", "d2", "d3", "d#4"])),
            ]
            fields += (
                [str(draw(st.integers(0, 3))), draw(st.sampled_from(["1.5", "-2", "0.25", "3"])), "t"]
                if ncols == 6
                else [str(draw(st.integers(-1, 3)))]
            )
        else:
            fields = draw(st.lists(TOKEN, min_size=ncols - 1, max_size=ncols + 1))
        lead = draw(st.sampled_from(["", "", " "]))
        lines.append(lead + "".join(f + draw(SEP) for f in fields[:-1]) + fields[-1] + draw(END).rstrip("\n"))
    return "\n".join(lines).encode() + draw(st.sampled_from([b"", b"\n"]))


def outcome(call, path: Path) -> tuple[str, object]:  # type: ignore[no-untyped-def]
    try:
        parsed = call(path)
    except InputFormatError as exc:
        return "error", str(exc)
    return "ok", parsed.table.to_pydict()


def reference(path: Path, data: bytes, kind: formats.Kind) -> tuple[str, object]:
    if not data.strip():
        return "error", str(InputFormatError(str(path), None, empty_message(kind)))
    error, table = _first_trec_error(str(path), data, kind, True)
    if error is not None:
        return "error", str(error)
    assert isinstance(table, pa.Table)
    return "ok", finish_table(table, kind, "", str(path)).table.to_pydict()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=trec_text(6))
@example(data=b"1  1 1 1 1")  # an empty Q0: five fields to trec_eval; the fast path once read six
def test_run_readers_agree(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "r.run"
    path.write_bytes(data)
    assert outcome(formats.read_run, path) == reference(path, data, "run")


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=trec_text(4))
@example(data=b"1 1  1")  # two spaces: the fast path once read an empty docno here
def test_qrels_readers_agree(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "q.qrels"
    path.write_bytes(data)
    assert outcome(formats.read_qrels, path) == reference(path, data, "qrels")


def lenient_reference(path: Path, data: bytes) -> tuple[str, object]:
    if not data.strip():
        return "error", str(InputFormatError(str(path), None, empty_message("run")))
    error, table = _first_trec_error(str(path), data, "run", False)
    if error is not None:
        return "error", str(error)
    assert isinstance(table, pa.Table)
    parsed = finish_table(table, "run", "", str(path))
    return "ok", (parsed.table.select(["topic", "doc", "score"]).to_pydict(), parsed.tag)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=trec_text(6))
@example(data=b"1 Q0 d1 1 1.5 t\n1 Q0 d2 x 0.5 t2\n")  # a rank trec_eval does not read; the last line's tag
@example(data=b"1 Q0 d1 1 1.5 t\n1\tQ0 d2 2 0.5 t\n")  # a tab in a space-separated file
@example(data=b"1 Q0 d1 1 1.5 t\r\n1 Q0 d2 2 0.5 t\r\n")  # Windows line ends
@example(data=b"1  1 1 1 1")  # an empty Q0
@example(data=b"1 Q0 d1 1 1.5 ")  # an empty tag, at the end of the file
@example(data=b" 1 Q0 d1 1 1.5 t\n")  # an empty field before the topic
@example(data=b"1 Q0 d1 1 1.5 t\n\n1 Q0 d2 2 0.5 t\n")  # a blank line
def test_the_streaming_evaluation_reader_agrees_with_the_precise_one(tmp_path: Path, data: bytes) -> None:
    """trec-eval's reader (lenient, nothing stored: the file is streamed when it is regular), its
    topics as strings or as dictionary codes (what metrics.evaluate reads)."""
    path = tmp_path / "r.run"
    path.write_bytes(data)
    for coded_topics in (False, True):
        assert streaming_outcome(path, coded_topics) == lenient_reference(path, data)


def streaming_outcome(path: Path, coded_topics: bool) -> tuple[str, object]:
    try:
        parsed = formats.read_run(path, strict=False, content_hash=False, coded_topics=coded_topics)
        return "ok", (parsed.table.select(["topic", "doc", "score"]).to_pydict(), parsed.tag)
    except InputFormatError as exc:
        return "error", str(exc)
