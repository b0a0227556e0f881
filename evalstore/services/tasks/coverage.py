"""How many of a run's topics its qrels judge. A run sharing no topic with the qrels would score 0
on every topic (its mean is over the qrels' topics), and one most of whose topics are missing
was most likely made for another collection: both read as a poor system rather than a wrong file.
The first is refused (or skipped by a batch evaluation), the second accepted with a warning; the
server's settings (evalstore.config) say where."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from evalstore.config import Settings
from evalstore.errors import InvalidParameterError

EXAMPLES = 3  # topics named in a message, enough to recognise the other collection's ids


@dataclass(frozen=True)
class Coverage:
    """The run's topics, and those of them the qrels do not judge (sorted)."""

    topics: int
    missing: tuple[str, ...]

    @property
    def shared(self) -> int:
        return self.topics - len(self.missing)

    @property
    def missing_share(self) -> float:
        return len(self.missing) / self.topics if self.topics else 0.0


def coverage(run_topics: Iterable[str], qrels_topics: Iterable[str]) -> Coverage:
    run = set(run_topics)
    return Coverage(len(run), tuple(sorted(run - set(qrels_topics))))


def _examples(missing: tuple[str, ...]) -> str:
    shown = ", ".join(f"'{t}'" for t in missing[:EXAMPLES])
    return shown + (", ..." if len(missing) > EXAMPLES else "")


def shares_no_topic(found: Coverage) -> bool:
    return found.topics > 0 and found.shared == 0


def no_shared_topic_message(run: str, qrels: str, found: Coverage) -> str:
    return (
        f"Run '{run}' shares no topic with the qrels '{qrels}': none of its {found.topics} topics "
        f"({_examples(found.missing)}) is judged there, so it would score 0 on every topic. "
        "It was most likely made for another collection."
    )


def check(run: str, qrels: str, found: Coverage, settings: Settings) -> str | None:
    """Refuse a run sharing no topic with the qrels (unless the server scores such runs); the
    warning for one whose missing share passes the server's threshold; else None."""
    if shares_no_topic(found) and settings.refuse_no_shared_topic:
        raise InvalidParameterError(no_shared_topic_message(run, qrels, found))
    if found.missing and found.missing_share > settings.missing_topics_warn:
        return (
            f"{len(found.missing)} of the {found.topics} topics of run '{run}' "
            f"({found.missing_share:.0%}) are not in the qrels '{qrels}' ({_examples(found.missing)}): "
            "they are not scored, and the run's mean is over the qrels' topics."
        )
    return None
