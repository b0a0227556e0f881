"""The CLI's start-up: typer builds the command tree from each command's annotations at every
`evalstore` start. An annotation left as a string (``from __future__ import annotations`` in a
command module) is evaluated again there, each time: that was 0.25 s of every command."""

from __future__ import annotations

from typing import Any

import typer.main

from evalstore.cli import app


def _commands(command: Any) -> list[Any]:
    found = [command]
    for child in getattr(command, "commands", {}).values():
        found += _commands(child)
    return found


def test_every_commands_annotations_are_evaluated_at_import() -> None:
    callbacks = [c.callback for c in _commands(typer.main.get_command(app)) if c.callback is not None]
    assert len(callbacks) > 80
    as_text = sorted(
        f"{getattr(c, '__module__', '?')}.{getattr(c, '__qualname__', c)}: {name}"
        for c in callbacks
        for name, annotation in getattr(c, "__annotations__", {}).items()
        if isinstance(annotation, str)
    )
    assert as_text == [], "a command module has `from __future__ import annotations`: remove it"
