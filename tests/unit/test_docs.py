"""The docs site: every command of the CLI and every measure family of the registry is in the
generated reference (scripts/mkdocs_hooks.py makes it when `mkdocs build` runs), the nav points at
pages that exist, pages other branches add appear only when present, and the README stays short."""

from __future__ import annotations

import importlib.util
import os
import re
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import typer.main
import yaml

from evalstore.cli import app
from evalstore.metrics import prediction_registry
from evalstore.metrics.registry import REGISTRY

ROOT = Path(__file__).resolve().parents[2]
GENERATED = {
    "reference/cli.md",
    "reference/measures.md",
    "reference/settings.md",
    "reference/http-api.md",
    "changelog.md",
}


@pytest.fixture(scope="module")
def hooks() -> ModuleType:
    spec = importlib.util.spec_from_file_location("mkdocs_hooks", ROOT / "scripts" / "mkdocs_hooks.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _commands() -> list[tuple[str, Any]]:
    """Every command, walked here independently of the hook's own walk (typer's own click: a group
    is what has sub-commands)."""
    found: list[tuple[str, Any]] = []

    def walk(prefix: str, command: Any) -> None:
        found.append((prefix, command))
        if hasattr(command, "commands"):
            for name, sub in command.commands.items():
                walk(f"{prefix} {name}", sub)

    walk("evalstore", typer.main.get_command(app))
    return found[1:]


def _section(text: str, heading: str) -> str:
    """The text under a heading `### evalstore runs register {...}`, to the next heading."""
    match = re.search(rf"^#+ {re.escape(heading)} \{{[^}}]*\}}\n(.*?)(?=^#+ |\Z)", text, re.M | re.S)
    assert match, f"no section for {heading!r} in the CLI reference"
    return match.group(1)


def test_every_command_and_option_is_in_the_cli_reference(hooks: ModuleType) -> None:
    text = hooks.cli_reference()
    commands = _commands()
    assert len(commands) > 80  # the walk found the sub-commands too, not only the nouns
    for path, command in commands:
        section = _section(text, path)
        for param in command.params:
            for opt in getattr(param, "opts", []):
                if opt.startswith("-") and opt != "--help":
                    assert re.search(rf"(?<![\w-]){re.escape(opt)}(?![\w-])", section), f"{path}: {opt} not documented"


def test_the_cli_reference_groups_commands_by_help_panel(hooks: ModuleType) -> None:
    text = hooks.cli_reference()
    root: Any = typer.main.get_command(app)
    panels = {getattr(cmd, "rich_help_panel", None) for cmd in root.commands.values()}
    unpanelled = sorted(name for name, cmd in root.commands.items() if getattr(cmd, "rich_help_panel", None) is None)
    assert unpanelled == [], "give these a panel: rich_help_panel= in evalstore/cli/__init__.py"
    for panel in panels:
        assert f"\n## {panel}\n" in text
    assert "- **Evaluate files**: [`trec-eval`](#evalstore-trec-eval)" in text
    # trec-eval parses its own (trec_eval's) options: the reference shows them
    assert "-m MEASURE" in _section(text, "evalstore trec-eval") or "-m " in _section(text, "evalstore trec-eval")


def test_every_measure_family_is_in_the_measure_reference(hooks: ModuleType) -> None:
    text = hooks.measure_reference()
    for name in REGISTRY:
        assert f"\n### {name} {{" in text, f"ranking family {name} missing"
    for name, family in prediction_registry().items():
        assert f"| `{name}` |" in text, f"{family.kind} measure {name} missing"
    # where peers differ the reference says so (peers.py), e.g. RBP's persistence and IPrec's rounding
    rbp = text[text.index("\n### RBP {") :]
    assert "trec_eval's name rbp means its default p=0.9" in rbp[: rbp.index("\n### ", 5)]


def test_the_generated_pages_are_added_to_the_build(hooks: ModuleType) -> None:
    """What `mkdocs build` gets from the hook: the references, the OpenAPI document of create_app()
    with every route, and the changelog."""
    if os.environ.get("CI") != "true":  # scripts/test installs the docs extra; under CI it must be there
        pytest.importorskip("mkdocs", reason="the docs extra is not installed: pip install -e '.[docs]'")
    from mkdocs.config import load_config
    from mkdocs.structure.files import Files

    config = load_config(str(ROOT / "mkdocs.yml"))
    files = config.plugins.on_files(Files([]), config=config)  # mkdocs.yml's hooks, as `mkdocs build` runs them
    contents: dict[str, Any] = {f.src_uri: f.content_string for f in files}
    assert GENERATED | {"reference/openapi.json"} <= set(contents)
    schema = hooks.openapi_schema()
    assert "/api/v1/tasks/{task}/runs" in schema["paths"]
    for path, methods in schema["paths"].items():
        for method in methods:
            assert f"### `{method.upper()} {path}`" in contents["reference/http-api.md"]
    assert "### Changed meaning" in contents["changelog.md"]


def test_the_nav_points_at_pages_that_exist() -> None:
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())

    def pages(nav: Any) -> list[str]:
        if isinstance(nav, str):
            return [nav]
        if isinstance(nav, list):
            return [p for item in nav for p in pages(item)]
        return [p for value in nav.values() for p in pages(value)]

    listed = pages(config["nav"])
    missing = [p for p in listed if p not in GENERATED and not (ROOT / "docs" / p).is_file()]
    assert missing == []
    assert {"reference/cli.md", "reference/measures.md", "reference/http-api.md"} <= set(listed)


def test_every_page_is_in_the_nav() -> None:
    """A page written but left out of mkdocs.yml's nav is found by search only: none is."""
    import yaml

    config = yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=yaml.BaseLoader)

    def pages(nav: object) -> list[str]:
        if isinstance(nav, str):
            return [nav]
        if isinstance(nav, list):
            return [p for item in nav for p in pages(item)]
        return [p for value in nav.values() for p in pages(value)] if isinstance(nav, dict) else []

    written = {str(p.relative_to(ROOT / "docs")) for p in (ROOT / "docs").rglob("*.md")} - set(GENERATED)
    assert sorted(written - set(pages(config["nav"]))) == []


def test_the_readme_is_short_and_opens_with_the_two_commands() -> None:
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 200
    opening = [line for line in lines[:12] if line.startswith("scripts/")]
    assert [line.split()[0] for line in opening] == ["scripts/demo", "scripts/test"]


def test_every_setting_is_in_the_settings_reference(hooks: ModuleType) -> None:
    from evalstore.config import VARIABLES

    text = hooks.settings_reference()
    for name, variable in VARIABLES.items():
        row = next(line for line in text.splitlines() if line.startswith(f"| `{name}` |"))
        assert variable.description in row
