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


@contextmanager
def file_progress(files: int) -> Iterator[Callable[[int, str], None]]:
    """One bar over a batch of files: ``on_file(i, name)`` as the i-th starts (shown for 2 or more)."""
    progress = Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
        console=stderr, transient=True, disable=files < 2 or not stderr.is_terminal,
    )
    task = progress.add_task("storing", total=files)

    def on_file(index: int, name: str) -> None:
        progress.update(task, completed=index, description=f"storing {name}")

    with progress:
        yield on_file
        progress.update(task, completed=files)
