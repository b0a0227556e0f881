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


def test_the_command_and_its_spawned_workers_collect_garbage_in_larger_steps(tmp_path: Any) -> None:
    """evalstore._entry raises the collector's first threshold (0.1 s of each worker's start): in
    the `evalstore` process, and in a `worker --concurrency N` child, which multiprocessing spawns
    and which imports the command's entry module, not main()."""
    import subprocess
    import sys

    script = tmp_path / "entry.py"  # as the console script is: it imports the entry, then calls it
    script.write_text(
        "import gc, multiprocessing, sys\n"
        "from evalstore._entry import main\n"
        "def child(queue):\n"
        "    queue.put(gc.get_threshold())\n"
        "if __name__ == '__main__':\n"
        "    context = multiprocessing.get_context('spawn')\n"
        "    queue = context.Queue()\n"
        "    process = context.Process(target=child, args=(queue,))\n"
        "    process.start()\n"
        "    print(gc.get_threshold(), queue.get(timeout=60))\n"
        "    process.join()\n"
    )
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.split() == ["(50000,", "10,", "10)", "(50000,", "10,", "10)"]
