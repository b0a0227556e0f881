"""A differential fuzzer of `evalstore trec-eval` against the trec_eval 10.0 program, and of
``evalstore.evaluate``'s in-memory path against its file path (issue #40).

Generated inputs (hypothesis) reach the edges the golden files do not: flag sets with long
options and C-number option values, parameter syntaxes (``P.1e1``, ``P.5abc``, pairs, empty and
malformed parameters), comment, blank, indented and duplicate lines, number spellings (``1_000``,
``0x3``, ``+.5``, Arabic-Indic digits), separators and encodings (no-break spaces, Latin-1
bytes), on both backends. Each case ends in one of a few outcomes (:func:`trec_eval_outcome`):
the same output and a zero exit status, both refusing, or a difference the decisions table lists
(docs/conformance.md), told apart by evalstore's message; anything else fails. Used by
tests/differential/test_fuzz_conformance.py (a bounded number of examples) and
scripts/fuzz_conformance.py (longer, printing the count of each outcome).
"""

from __future__ import annotations

import contextlib
import io
import math
import re
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from hypothesis import strategies as st

TOPICS = ["1", "2", "10", "q7"]
# docnos C splits as one field and Python's str.split() would not (a no-break space, an
# ideographic space), a '#' inside, non-ASCII letters
DOCS = ["d1", "d2", "d3", "d10", "a", "b", "x#1", "é1", "a\u00a0b", "c\u3000d", "Z"]
# spellings of a score: what trec_eval's atof reads is what evalstore must read
SCORE_TEXTS = ["1", "2", "2", "0.5", "-1", "3", "+2", ".5", "5.", "1e0", "2E-1", "-0", "007", "1.25", "4"]
ODD_SCORE_TEXTS = ["1_000", "3abc", "0x1p1", "1.5.2", "\u0663", "nan", "1e999", "0x10"]
# spellings of a relevance level (atol)
REL_TEXTS = ["0", "1", "1", "2", "+1", "01", "1.9", "2e1", "0x3", "-1", "3"]
MEASURES = [
    "map",
    "P.5",
    "P.1e1",
    "P.5abc",
    "P.2,1",
    "recall.3",
    "ndcg",
    "ndcg.1=3,2=5",
    "rbp.p=0.5",
    "iprec_at_recall.2",
    "yaap",
    "num_ret",
    "num_rel",
    "recip_rank",
    "success.1,2",
    "Rprec_mult.0.5",
    "set_F.2",
    "relstring.3",
    "utility.1,-1,0,0",
    "official",
    "all_trec",
    "dcg",
    "ideal_dcg.1=2",
    "bpref",
    "num_q",
    "runid",
    "ndcg_cut.2,4",
    "map_cut.1e1",
    "P.abc,3",
    "iprec_at_recall.0.5x",
]
ODD_MEASURES = ["P.5,5", "ndcg.1=3,1=5", "ndcg.1=3,,2=4", "ndcg.", "rbp.0.5", "iprec_at_recall.0.5,0.5", "rbp.p=nan"]
SEPARATORS = [" ", " ", "\t", "  ", " \t"]

# evalstore refuses, trec_eval prints: each a row of docs/conformance.md's table of deliberate differences
DOCUMENTED_REFUSALS = {
    "no leading number read as 0": re.compile(r"trec_eval's ato[fl] would read it as 0"),
    "scores must be finite": re.compile(r"is not a finite number; scores must be finite"),
    "not UTF-8": re.compile(r"bytes that are not UTF-8"),
    "two gains for one level": re.compile(r"two gains; trec_eval 10.0 then mixes them"),
    "shared gain parameters": re.compile(r"shares one gain parameter set"),
    "non-finite parameters": re.compile(r"is not a finite number; trec_eval computes with it"),
    "debugging trace": re.compile(r"trec_eval prints a debugging trace"),
}
MISSING_TOPIC = "documented: a qrels topic missing from the run is skipped with a warning"


@dataclass(frozen=True)
class Case:
    qrels: bytes
    run: bytes
    flags: tuple[str, ...]
    backend: str


def _line(fields: list[str], separator: str, indent: str = "") -> str:
    return indent + separator.join(fields)


@st.composite
def cases(draw: st.DrawFn) -> Case:
    topics = draw(st.lists(st.sampled_from(TOPICS), min_size=1, max_size=3, unique=True))
    qrels_lines: list[str] = []
    for topic in topics:
        docs = draw(st.lists(st.sampled_from(DOCS), min_size=1, max_size=5, unique=True))
        for i, doc in enumerate(docs):
            # the first judgment of a topic is plainly >= 0 (a topic with only negative judgments
            # makes trec_eval fail where evalstore scores it: a difference of an earlier pass)
            rel = "1" if i == 0 else draw(st.sampled_from(REL_TEXTS))
            qrels_lines.append(
                _line(
                    [topic, "0", doc, rel], draw(st.sampled_from(SEPARATORS)), draw(st.sampled_from(["", "", "", " "]))
                )
            )
            if draw(st.integers(0, 60)) == 0:
                qrels_lines.append(draw(st.sampled_from(["# a comment", "", "  # indented", "\t"])))
            if draw(st.integers(0, 80)) == 0:
                qrels_lines.append(qrels_lines[-1])  # a repeated judgment
    if draw(st.integers(0, 10)) == 0:
        qrels_lines.insert(0, "# judged by assessors")
    run_lines: list[str] = []
    run_topics = topics if draw(st.integers(0, 5)) else [*topics[:-1], draw(st.sampled_from(TOPICS))]
    for topic in run_topics:
        docs = draw(st.lists(st.sampled_from(DOCS), min_size=1, max_size=6, unique=draw(st.integers(0, 15)) > 0))
        for rank, doc in enumerate(docs, start=1):
            odd = draw(st.integers(0, 40)) == 0
            fields = [
                topic,
                "Q0",
                doc,
                str(rank),
                draw(st.sampled_from(ODD_SCORE_TEXTS if odd else SCORE_TEXTS)),
                "tag",
            ]
            if draw(st.integers(0, 15)) == 0:
                fields.append(draw(st.sampled_from(["extra", "# comment x"])))
            run_lines.append(
                _line(fields, draw(st.sampled_from(SEPARATORS)), draw(st.sampled_from(["", "", "", "", " ", "\t"])))
            )
            if draw(st.integers(0, 25)) == 0:
                run_lines.append(draw(st.sampled_from(["# a comment", "", "   # indented comment", "  "])))
    end = draw(st.sampled_from(["\n", "\n", "\r\n", ""]))
    qrels = ("\n".join(qrels_lines) + "\n").replace("\n", "\r\n" if end == "\r\n" else "\n")
    run = "\n".join(run_lines) + end
    encoding = draw(st.sampled_from(["utf-8"] * 19 + ["latin-1"]))
    flags: list[str] = []
    for flag in draw(
        st.lists(
            st.sampled_from(["-q", "-c", "-n", "-J", "--nosummary", "-o", "--complete_rel_info_wanted"]),
            max_size=3,
            unique=True,
        )
    ):
        flags.append(flag)
    if draw(st.booleans()):
        flags += [draw(st.sampled_from(["-l", "--level_for_rel"])), draw(st.sampled_from(["0", "1", "2", "1.5", "2x"]))]
    if draw(st.integers(0, 3)) == 0:
        flags += ["-M", draw(st.sampled_from(["1", "2", "3.7", "0"]))]
    if draw(st.integers(0, 8)) == 0:
        flags += ["-D", draw(st.sampled_from(["0", "0." + topics[0], "1." + topics[0], "2"]))]
    specs = draw(st.lists(st.sampled_from(MEASURES), min_size=0, max_size=3))
    if draw(st.integers(0, 12)) == 0:
        specs.append(draw(st.sampled_from(ODD_MEASURES)))
    for spec in specs:
        flags += [f"--measure={spec}"] if draw(st.integers(0, 4)) == 0 else ["-m", spec]
    return Case(
        qrels.encode(encoding, errors="replace"),
        run.encode(encoding, errors="replace"),
        tuple(flags),
        draw(st.sampled_from(["local", "local", "duckdb"])),
    )


@dataclass(frozen=True)
class Result:
    code: int
    stdout: str
    stderr: str


def run_evalstore(args: list[str]) -> Result:
    """`evalstore trec-eval ARGS` in this process, as the entry point runs it (exit 1 on an
    evalstore error, argparse's 2 on a usage error)."""
    from evalstore.errors import EvalstoreError, InputFormatError
    from evalstore.trec_eval.command_line import run

    out, err = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            run(args, warn=lambda message: err.write(f"warning: {message}\n"))
        except EvalstoreError as error:  # as evalstore._entry prints it
            err.write((str(error) if isinstance(error, InputFormatError) else f"Error: {error}") + "\n")
            code = 1
        except SystemExit as stop:
            code = stop.code if isinstance(stop.code, int) else 1
    return Result(code, out.getvalue(), err.getvalue())


def trec_eval_outcome(case: Case, binary: Path) -> str:
    """How `evalstore trec-eval` and trec_eval 10.0 compare on ``case``: an outcome name, or
    AssertionError where they differ in a way the decisions table does not list."""
    with tempfile.TemporaryDirectory(prefix="evalstore-fuzz-") as folder:
        qrels, run = Path(folder, "qrels"), Path(folder, "run")
        qrels.write_bytes(case.qrels)
        run.write_bytes(case.run)
        args = [*case.flags, str(qrels), str(run)]
        theirs = subprocess.run([str(binary), *args], capture_output=True, timeout=60, check=False)
        backend = ["--backend", "duckdb"] if case.backend == "duckdb" else []
        ours = run_evalstore([*backend, *args])
    their_out = theirs.stdout.decode("utf-8", errors="replace")
    context = (
        f"{case!r}\ntrec_eval exit {theirs.returncode}: {theirs.stderr[-300:]!r}\n{their_out[-500:]}\n"
        f"evalstore exit {ours.code}: {ours.stderr[-300:]!r}\n{ours.stdout[-500:]}"
    )
    if theirs.returncode == 0 and ours.code == 0:
        assert ours.stdout == their_out, context
        return "same output, exit 0"
    if theirs.returncode != 0 and ours.code != 0:
        return "both refuse"
    if theirs.returncode == 4 and b"not found in qrels" in theirs.stderr and ours.code == 0:
        assert "has no results in the run; skipped" in ours.stderr, context
        return MISSING_TOPIC
    if theirs.returncode == 0:
        for name, pattern in DOCUMENTED_REFUSALS.items():
            if pattern.search(ours.stderr):
                return f"documented: {name}"
    raise AssertionError("an undocumented difference\n" + context)


# --- the API: in-memory input against the same rows in files --------------------------------------

API_MEASURES = ["AP", "P@2", "nDCG@5", "RR", "Judged@3", "NumRet"]


@dataclass(frozen=True)
class ApiCase:
    qrels: tuple[tuple[str, str, int], ...]
    run: tuple[tuple[str, str, float], ...]
    max_docs: int | None


@st.composite
def api_cases(draw: st.DrawFn) -> ApiCase:
    qrels = draw(
        st.lists(
            st.tuples(st.sampled_from(TOPICS[:3]), st.sampled_from(["d1", "d2", "d3", "a"]), st.integers(0, 3)),
            min_size=1,
            max_size=8,
        )
    )
    run = draw(
        st.lists(
            st.tuples(
                st.sampled_from(TOPICS[:3]),
                st.sampled_from(["d1", "d2", "d3", "a", "b"]),
                st.sampled_from([1.0, 2.0, 0.5, -1.0, 3.25, float("nan")]),
            ),
            min_size=1,
            max_size=10,
        )
    )
    return ApiCase(tuple(qrels), tuple(run), draw(st.sampled_from([None, None, 1, 2])))


def api_outcome(case: ApiCase) -> str:
    """evaluate() on files and on DataFrames of the same rows: the same values, or the same
    refusal (the problem as the file reader words it, 'row N' where a file says 'line N')."""
    import pandas as pd

    from evalstore import evaluate
    from evalstore.errors import EvalstoreError

    def attempt(qrels: object, run: object) -> tuple[str, object]:
        try:
            result = evaluate(qrels, run, API_MEASURES, max_docs=case.max_docs)  # type: ignore[arg-type]
        except EvalstoreError as error:
            problem = re.sub(r"^[^:]*(:\d+)?: (row \d+: )?", "", str(error))
            return "refused", problem.replace(" at row ", " at line ")
        return "evaluated", dict(result.aggregates.items())

    with tempfile.TemporaryDirectory(prefix="evalstore-fuzz-") as folder:
        qrels_path, run_path = Path(folder, "qrels"), Path(folder, "run")
        qrels_path.write_text("".join(f"{t} 0 {d} {r}\n" for t, d, r in case.qrels))
        run_path.write_text("".join(f"{t} Q0 {d} {i} {s!r} x\n" for i, (t, d, s) in enumerate(case.run, start=1)))
        from_files = attempt(qrels_path, run_path)
    frames = attempt(
        pd.DataFrame(list(case.qrels), columns=["query_id", "doc_id", "relevance"]),
        pd.DataFrame(list(case.run), columns=["query_id", "doc_id", "score"]),
    )
    assert frames[0] == from_files[0], (case, from_files, frames)
    if frames[0] == "evaluated":
        assert frames[1] == from_files[1], (case, from_files, frames)
        return "API: same values"
    if frames[1] != from_files[1]:
        # a file is read line by line and refused at its first faulty line; a frame column by
        # column: with faults of two kinds each may name another (each is refused either way)
        faults = [
            any(math.isnan(score) for _, _, score in case.run),
            len({(t, d) for t, d, _ in case.run}) < len(case.run),
            len({(t, d) for t, d, _ in case.qrels}) < len(case.qrels),
        ]
        assert sum(faults) >= 2, (case, from_files, frames)
        return "API: both refuse (another of two faults named first)"
    return "API: same refusal"
