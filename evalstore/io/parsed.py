"""What every reader of runs and qrels returns (:class:`ParsedFile`, its fixed columns and types), and
the checks and finishing steps the TREC text and table readers share: stored ranges, duplicate
judgments and documents, repeated qrels lines.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import pyarrow as pa

from evalstore import _kernels as pc
from evalstore.errors import InputFormatError
from evalstore.io.hashing import has_repeated_pair, pair_hashes

Kind = Literal["run", "qrels"]


RUN_LAYOUT = "qid Q0 docno rank score tag"


QRELS_LAYOUT = "qid iter docno rel"


TREC_NAMES = {
    "run": ["topic", "q0", "doc", "rank", "score", "tag"],
    "qrels": ["topic", "iteration", "doc", "relevance"],
}


# The stored integer columns' ranges (run_rows.rank INTEGER, judgments.relevance SMALLINT, in
# both databases): a value outside is bad input, refused with its line like any other.
STORED_RANGE = {"rank": (-(2**31), 2**31 - 1), "relevance": (-(2**15), 2**15 - 1)}


def out_of_range(label: str, text: object) -> str:
    low, high = STORED_RANGE[label]
    return f"{label} '{text}' is out of range; it must be between {low} and {high}"


def in_range(label: str, value: int) -> bool:
    low, high = STORED_RANGE[label]
    return low <= value <= high


RUN_SCHEMA = pa.schema([("topic", pa.string()), ("doc", pa.string()), ("rank", pa.int64()), ("score", pa.float64())])


QRELS_SCHEMA = pa.schema(
    [
        ("topic", pa.string()),
        ("iteration", pa.string()),
        ("doc", pa.string()),
        ("relevance", pa.int64()),
    ]
)


@dataclass(frozen=True)
class ParsedFile:
    """A validated run or qrels file."""

    table: pa.Table
    content_hash: str  # sha256 of the decompressed bytes (TREC) or of the file (tables)
    tag: str | None  # TREC run tag of the last line, as trec_eval reports it
    warnings: tuple[str, ...] = ()

    @property
    def topic_count(self) -> int:
        return int(pc.count_distinct(self.table["topic"]).as_py()) if self.table.num_rows else 0


def duplicate_docno_error(path: str | Path, topic: str, doc: str) -> InputFormatError:
    """The refusal of a docno twice in a topic of a TREC run file, at its second line, naming the
    first (the file is read again, line by line: an error path only)."""
    import gzip  # gzip (~1 ms to import) where a compressed file is read, not at every start-up

    places: list[int] = []
    with gzip.open(path, "rb") if is_gzip_file(Path(path)) else open(path, "rb") as handle:
        for number, raw in enumerate(handle, start=1):
            fields = raw.split()
            if (
                len(fields) >= 6
                and not fields[0].startswith(b"#")
                and fields[0].decode("utf-8", "replace") == topic
                and fields[2].decode("utf-8", "replace") == doc
            ):
                places.append(number)
                if len(places) == 2:
                    break
    problem = (
        f"docno '{doc}' appears twice in topic '{topic}'"
        + (f" (first at line {places[0]})" if places else "")
        + "; trec_eval refuses duplicate documents, so remove one of them"
    )
    return InputFormatError(str(path), places[1] if len(places) == 2 else None, problem)


def is_gzip_file(path: Path) -> bool:
    """Whether a file (not a folder) begins with gzip's magic bytes."""
    if path.is_dir():
        return False
    with path.open("rb") as handle:
        return handle.read(2) == b"\x1f\x8b"


def has_duplicate_docs(
    table: pa.Table, topic_codes: np.ndarray | None = None, doc_keys: np.ndarray | None = None
) -> bool:
    """Whether a (topic, doc) pair *may* repeat in a run table; re-read with check_duplicates=True
    to get the exact error (a 64-bit hash collision then passes). ``topic_codes``: the topics as
    integer codes, ``doc_keys`` the docnos' hashes, when the caller has them."""
    return has_repeated_pair(table["topic"], table["doc"], topic_codes, doc_keys)


def sha256_hex(data: bytes) -> str:
    import hashlib  # ~3 ms of start-up (OpenSSL), which evaluating a file never needs

    return hashlib.sha256(data).hexdigest()


def read_bytes(path: Path) -> bytes:
    with path.open("rb") as handle:
        data = handle.read()
    if data[:2] == b"\x1f\x8b":
        import gzip

        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as exc:
            raise InputFormatError(
                str(path), None, f"the file looks gzip-compressed but cannot be read ({exc})"
            ) from None
    return data


def fast_checks_pass(table: pa.Table, kind: Kind, check_duplicates: bool = True, strict: bool = True) -> bool:
    if table.num_rows == 0:
        return False
    if kind == "run":
        score = table["score"].to_numpy()
        if not np.isfinite(score).all():
            return False
    label = "rank" if kind == "run" else "relevance"
    extremes = pc.min_max(table[label])
    if strict and not (in_range(label, extremes["min"].as_py()) and in_range(label, extremes["max"].as_py())):
        return False
    return not (check_duplicates and has_duplicate_pairs(table, kind, identical_too=not strict))


def has_duplicate_pairs(table: pa.Table, kind: Kind, identical_too: bool = False) -> bool:
    """Whether a (topic, doc) pair occurs twice (qrels: with different relevance only, unless
    ``identical_too``: trec_eval refuses any repeated judgment)."""
    if kind == "run":
        # a hash match is a candidate only: the precise path confirms it (or finds a collision)
        return has_repeated_pair(table["topic"], table["doc"])
    if _pairs_increase(table):
        return False
    # pair hashes, not pyarrow's group_by: that loads pyarrow.acero, pyarrow.dataset and pandas
    # (0.2 s of an ordinary `trec-eval`); a hash match is a candidate, confirmed by the precise path
    keys = pair_hashes(table["topic"], table["doc"])
    order = np.argsort(keys, kind="stable")
    same = keys[order][1:] == keys[order][:-1]
    if not same.any():
        return False
    if identical_too:
        return True
    relevance = table["relevance"].to_numpy()[order]
    return bool((relevance[1:][same] != relevance[:-1][same]).any())


def repeated_judgment(doc: str, topic: str, first: int | str) -> str:
    first_at = f"line {first}" if isinstance(first, int) else first
    return (
        f"docno '{doc}' is judged twice in topic '{topic}' (first at {first_at}); trec_eval refuses "
        "a repeated judgment (duplicate docs), so remove one of them"
    )


def empty_message(kind: Kind) -> str:
    layout = RUN_LAYOUT if kind == "run" else QRELS_LAYOUT
    return f"the file has no {kind} lines; expected lines of the form '{layout}'"


def finish_table(table: pa.Table, kind: Kind, content_hash: str, path: str) -> ParsedFile:
    if kind == "run":
        tags = table["tag"]
        tag = str(tags[-1].as_py()) if len(tags) else None
        warnings: tuple[str, ...] = ()
        if len(distinct_values(tags)) > 1:
            warnings = (
                f"{path}: the run tag is not the same on every line; using '{tag}' from the last "
                "line, as trec_eval does",
            )
        return ParsedFile(table.select(["topic", "doc", "rank", "score"]), content_hash, tag, warnings)
    return dedupe_qrels(table.select(["topic", "iteration", "doc", "relevance"]), content_hash, path)


def distinct_values(column: pa.ChunkedArray) -> set[object]:
    values: set[object] = set()
    for chunk in column.chunks:
        unique = pc.unique(chunk)
        if pa.types.is_dictionary(unique.type):
            unique = pc.take(unique.dictionary, unique.indices)
        values.update(unique.to_pylist())
    return values


def _pairs_increase(table: pa.Table) -> bool:
    """Whether (topic, doc) strictly increases from row to row (byte order), so that no pair
    repeats: NIST writes qrels so, and comparing neighbours costs a tenth of hashing every pair."""
    if table.num_rows < 2:
        return True
    topic, doc = (table[name].combine_chunks() for name in ("topic", "doc"))
    before, after = slice(0, table.num_rows - 1), slice(1, table.num_rows)
    topic_before, topic_after = topic[before], topic[after]
    increasing = pc.or_(
        pc.less(topic_before, topic_after),
        pc.and_(pc.equal(topic_before, topic_after), pc.less(doc[before], doc[after])),
    )
    return bool(pc.all(increasing).as_py())


def dedupe_qrels(table: pa.Table, content_hash: str, path: str) -> ParsedFile:
    """Identical repeated judgments are kept once (conflicting ones were refused already). Rows
    whose (topic, doc) hash is shared are compared as strings: a hash collision keeps both."""
    if _pairs_increase(table):
        return ParsedFile(table, content_hash, None)
    keys = pair_hashes(table["topic"], table["doc"])
    order = np.argsort(keys, kind="stable")
    shared = np.flatnonzero(keys[order][1:] == keys[order][:-1])
    if not len(shared):
        return ParsedFile(table, content_hash, None)
    candidates = np.unique(np.concatenate([order[shared], order[shared + 1]]))
    taken = pa.array(candidates)
    seen: set[tuple[str, str]] = set()
    repeated = []
    topics, docs = pc.take(table["topic"], taken).to_pylist(), pc.take(table["doc"], taken).to_pylist()
    for row, topic, doc in zip(candidates, topics, docs, strict=True):  # in file order: the first of a pair is kept
        if (topic, doc) in seen:
            repeated.append(row)
        seen.add((topic, doc))
    if not repeated:
        return ParsedFile(table, content_hash, None)
    keep = np.setdiff1d(np.arange(table.num_rows), np.array(repeated))
    return ParsedFile(
        pc.take(table, pa.array(keep)),
        content_hash,
        None,
        (f"{path}: {len(repeated)} repeated identical judgments were kept once",),
    )
