"""Citation-support labels imported from a file: whether each sentence's first citation supports
it (2 fully, 1 partly, 0 not), as people (or a judge) said.

JSONL, one label a line: ``{"run_id", "topic_id", "sentence", "support": 2 | 1 | 0, "segment"}``,
``sentence`` numbered from 1 as ``answers show`` prints it, ``segment`` (optional) the cited
segment, which must be the sentence's first citation. A sentence labelled again replaces its label
by the same assessor. Refused at ``path:line``, nothing stored: an unknown run, topic or sentence,
a sentence that cites nothing, another segment, a label given twice in the file.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import Engine, delete, insert, select
from sqlalchemy.orm import Session

from evalstore.db.models import AnswerCitation, AnswerReference, AnswerRun, CitationSupport
from evalstore.db.session import unit_of_work
from evalstore.errors import InputFormatError, InvalidParameterError
from evalstore.io.answers import MAX_RUN_ID_CHARS, MAX_TOPIC_CHARS, bounded_lines, identifier, json_object
from evalstore.io.limits import Bounds

# a label is a short line: a megabyte of one is not a label
_BOUNDS = Bounds(max_inflated=256 * 2**20, max_line=64 * 2**10, max_field=64 * 2**10)


@dataclass(frozen=True)
class ImportedSupport:
    labels: int
    runs: int
    assessor: str


def import_support(engine: Engine, path: Path, *, assessor: str = "human") -> ImportedSupport:
    """Store a file's citation-support labels under ``assessor`` in one unit of work."""
    if assessor != "human" and not (assessor.startswith("judge:") and 6 < len(assessor) <= 200):
        raise InvalidParameterError(f"An assessor is human or judge:NAME, not '{assessor[:60]}'.")
    shown = str(path)
    rows: list[dict[str, object]] = []
    seen: dict[tuple[str, str, int], int] = {}
    with unit_of_work(engine) as session:
        runs: dict[str, int] = {}
        firsts: dict[tuple[int, str], dict[int, str]] = {}
        for number, line in bounded_lines(path, _BOUNDS, shown):
            record = json_object(shown, number, line)
            run = identifier(shown, number, record.get("run_id"), "run_id", MAX_RUN_ID_CHARS, spaces_refused=False)
            topic = identifier(shown, number, record.get("topic_id"), "topic_id", MAX_TOPIC_CHARS)
            sentence, label = record.get("sentence"), record.get("support")
            if isinstance(sentence, bool) or not isinstance(sentence, int) or sentence < 1:
                raise InputFormatError(shown, number, "'sentence' must be the sentence's number, from 1")
            if label not in (0, 1, 2) or isinstance(label, bool):
                raise InputFormatError(shown, number, "'support' must be 2 (full), 1 (partial) or 0 (none)")
            if (run, topic, sentence) in seen:
                raise InputFormatError(
                    shown,
                    number,
                    f"sentence {sentence} of run {run} on topic {topic} is labelled twice "
                    f"(also at line {seen[run, topic, sentence]})",
                )
            seen[run, topic, sentence] = number
            if run not in runs:
                found = session.scalar(select(AnswerRun.id).where(AnswerRun.name == run))
                if found is None:
                    raise InputFormatError(shown, number, f"no answer run named {run}; register its answers first")
                runs[run] = found
            key = (runs[run], topic)
            if key not in firsts:
                firsts[key] = _first_citations(session, runs[run], topic)
            segment = firsts[key].get(sentence - 1)
            if segment is None:
                raise InputFormatError(
                    shown,
                    number,
                    f"sentence {sentence} of run {run} on topic {topic} does not exist or cites nothing; "
                    "only a sentence's first citation is judged",
                )
            given = record.get("segment")
            if given is not None and given != segment:
                raise InputFormatError(
                    shown,
                    number,
                    f"sentence {sentence} of run {run} on topic {topic} first cites {segment}, not {str(given)[:80]}",
                )
            rows.append(
                {
                    "answer_run_id": runs[run],
                    "topic": topic,
                    "sentence": sentence - 1,
                    "assessor": assessor,
                    "segment": segment,
                    "label": label,
                    "source": shown,  # the file imported, as a nugget assignment's
                }
            )
        if not rows:
            raise InputFormatError(shown, None, "the file holds no labels")
        for row in rows:
            session.execute(
                delete(CitationSupport).where(
                    CitationSupport.answer_run_id == row["answer_run_id"],
                    CitationSupport.topic == row["topic"],
                    CitationSupport.sentence == row["sentence"],
                    CitationSupport.assessor == assessor,
                )
            )
        session.execute(insert(CitationSupport), rows)
    return ImportedSupport(len(rows), len(runs), assessor)


def _first_citations(session: Session, answer_run_id: int, topic: str) -> dict[int, str]:
    """The segment each sentence of the run's answer on ``topic`` cites first, by sentence (from 0)."""
    return dict(
        session.execute(
            select(AnswerCitation.sentence, AnswerReference.segment)
            .join(
                AnswerReference,
                (AnswerReference.answer_run_id == AnswerCitation.answer_run_id)
                & (AnswerReference.topic == AnswerCitation.topic)
                & (AnswerReference.position == AnswerCitation.reference),
            )
            .where(
                AnswerCitation.answer_run_id == answer_run_id,
                AnswerCitation.topic == topic,
                AnswerCitation.position == 0,
            )
        ).all()
    )
