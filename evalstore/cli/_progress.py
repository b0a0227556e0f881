"""A progress bar on stderr for bulk loads (shown only on a terminal)."""

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from evalstore.cli._output import stderr

T = TypeVar("T")


def _bar(*, disable: bool) -> Progress:
    """A bar on stderr that goes when it is done: what it does, the bar, done of total, time left."""
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=stderr,
        transient=True,
        disable=disable,
    )


@contextmanager
def row_progress(description: str) -> Iterator[Callable[[int], None]]:
    progress = _bar(disable=not stderr.is_terminal)
    task = progress.add_task(description, total=None)
    with progress:
        yield lambda rows: progress.advance(task, rows)


@contextmanager
def step_progress(description: str) -> Iterator[Callable[[int, int], None]]:
    """A bar over steps whose total is known as they go: ``advance(done, total)``."""
    progress = _bar(disable=not stderr.is_terminal)
    task = progress.add_task(description, total=None)
    with progress:
        yield lambda done, total: progress.update(task, completed=done, total=total)


@contextmanager
def file_progress(files: int) -> Iterator[Callable[[int, str], None]]:
    """One bar over a batch of files: ``on_file(i, name)`` as the i-th starts (shown for 2 or more)."""
    progress = _bar(disable=files < 2 or not stderr.is_terminal)
    task = progress.add_task("storing", total=files)

    def on_file(index: int, name: str) -> None:
        progress.update(task, completed=index, description=f"storing {name}")

    with progress:
        yield on_file
        progress.update(task, completed=files)


def storing(
    paths: Sequence[Path], store: Callable[[Callable[[int, str], None] | None, Callable[[int], None] | None], list[T]]
) -> list[T]:
    """Run ``store(on_file, rows)`` under one bar (rich shows one live display at a time): the
    rows of a single (large) file, or the files of a batch."""
    if len(paths) == 1:
        with row_progress(f"storing {paths[0].name}") as rows:
            return store(None, rows)
    with file_progress(len(paths)) as on_file:
        return store(on_file, None)
