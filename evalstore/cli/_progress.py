"""A progress bar on stderr for bulk loads (shown only on a terminal, for large inputs)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from evalstore.cli._output import stderr

LARGE = 500_000


@contextmanager
def row_progress(description: str) -> Iterator[Callable[[int], None]]:
    progress = Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
        console=stderr, transient=True, disable=not stderr.is_terminal,
    )
    task = progress.add_task(description, total=None)
    with progress:
        yield lambda rows: progress.advance(task, rows)
