"""MkDocs hooks (mkdocs.yml `hooks:`): the reference pages are generated at build time from the code,
so a command, measure or route added on any branch appears in the docs without anyone writing it.

- reference/cli.md: every command of the typer app (`evalstore.cli.app`), with its options;
- reference/settings.md: every environment variable (`evalstore.config.VARIABLES`);
- reference/measures.md: every measure family of the registry (`evalstore.metrics`), with its
  parameters, trec_eval and ir_measures names and where values differ;
- reference/http-api.md and reference/openapi.json: the service's OpenAPI (`create_app()`);
- changelog.md: CHANGELOG.md of the repository;

The generators are plain functions (`cli_reference()`, ...) that tests/unit/test_docs.py calls too.
"""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


# pages written on other branches: listed in the nav (under "More") when present in docs/
def _text(value: str | None) -> str:
    """Help text as Markdown: one paragraph per blank line, no stray markup."""
    if not value:
        return ""
    text = value.replace("\b", "").strip()
    text = text.replace("<", "&lt;").replace("*", r"\*")
    return re.sub(r"[ \t]*\n(?!\n)[ \t]*", " ", text)  # typer joins single newlines too


def _code(value: str) -> str:
    return "`` " + value + " ``" if "`" in value else "`" + value + "`"


# ---------------------------------------------------------------------------------------------
# CLI


def walk_commands() -> list[tuple[str, Any]]:
    """Every leaf command of the app as (its full name, the click command), in help order."""
    import typer.main

    from evalstore.cli import app

    out: list[tuple[str, Any]] = []

    def walk(prefix: str, group: Any) -> None:
        for name, cmd in group.commands.items():
            path = f"{prefix} {name}"
            if cmd.hidden:
                continue
            out.append((path, cmd))
            if _is_group(cmd):
                walk(path, cmd)

    walk("evalstore", typer.main.get_command(app))
    return out


def _is_group(cmd: Any) -> bool:
    # typer >= 0.2x runs on a click of its own (typer._click): go by what a group has
    return hasattr(cmd, "commands")


def _context(cmd: Any, path: str) -> Any:
    try:
        from typer._click.core import Context
    except ImportError:  # typer on the click package
        from click import Context
    return Context(cmd, info_name=path)


def _own_help(name: str) -> str | None:
    """`trec-eval` parses trec_eval's own options with argparse (evalstore/trec_eval/command_line.py): its help."""
    if name != "trec-eval":
        return None
    from evalstore.trec_eval import command_line

    return command_line.parser().format_help()


def _param_line(param: Any, ctx: Any) -> str:
    """One option or argument as `--help` shows it: its names and type, then the help with the
    default and environment variable typer appends."""
    record = param.get_help_record(ctx)
    if record is None:  # an argument typer gives no help line
        names, help_text = param.name.upper(), ""
    else:
        names, help_text = record
    kind = " (argument)" if param.param_type_name == "argument" else ""
    help_text = _text(help_text)
    return f"- {_code(names)}{kind}" + (f": {help_text}" if help_text else "")


def cli_reference() -> str:
    """reference/cli.md: every command and option, grouped by the panels of `evalstore --help`."""
    commands = walk_commands()
    lines = [
        "# Command-line reference",
        "",
        "Generated from the typer app (`evalstore.cli.app`) when the docs are built: every command with "
        "its options. `evalstore COMMAND --help` prints the same. Global options come before the command: "
        "`evalstore [--database-url URL] COMMAND ...`; `evalstore --version` prints the version.",
        "",
        "Exit codes: 0 success, 1 error (the message on stderr says what is wrong and what to do), "
        "2 usage error. Results go to stdout, diagnostics to stderr.",
        "",
    ]
    panels: dict[str, list[tuple[str, Any]]] = {}
    top = [(path, cmd) for path, cmd in commands if path.count(" ") == 1]
    for path, cmd in top:
        panels.setdefault(getattr(cmd, "rich_help_panel", None) or "Commands", []).append((path, cmd))
    lines += ["## Overview", ""]
    for panel, members in panels.items():
        names = ", ".join(f"[`{p.split(' ', 1)[1]}`](#{_anchor(p)})" for p, _ in members)
        lines.append(f"- **{panel}**: {names}")
    lines.append("")
    for panel, members in panels.items():
        lines += [f"## {panel}", ""]
        for top_path, _ in members:
            group = [(p, c) for p, c in commands if p == top_path or p.startswith(top_path + " ")]
            for path, cmd in group:
                level = "###" if path == top_path else "####"
                lines += [f"{level} {path} {{ #{_anchor(path)} }}", ""]
                if _is_group(cmd):
                    lines += [_text(cmd.help), ""]
                    subs = ", ".join(f"[`{n}`](#{_anchor(path + ' ' + n)})" for n in cmd.commands)
                    lines += [f"Subcommands: {subs}", ""]
                    continue
                ctx = _context(cmd, path)
                usage = " ".join(cmd.collect_usage_pieces(ctx))
                lines += ["```", f"{path} {usage}".rstrip(), "```", "", _text(cmd.help), ""]
                own = _own_help(path.split(" ", 1)[1])
                if own:
                    lines += ["```text", own.rstrip(), "```", ""]
                params = [p for p in cmd.params if p.name != "help" and not getattr(p, "hidden", False)]
                if params:
                    lines += [_param_line(p, ctx) for p in params]
                    lines.append("")
    return "\n".join(lines)


def _anchor(path: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", path.lower()).strip("-")


# ---------------------------------------------------------------------------------------------
# Measures


def settings_reference() -> str:
    """reference/settings.md: every environment variable evalstore reads (`evalstore.config.VARIABLES`)."""
    from evalstore.config import VARIABLES

    lines = [
        "# Settings",
        "",
        "Every environment variable evalstore reads, generated from its one declaration "
        "(`evalstore.config.VARIABLES`). A value is read when it is used, so a running server or worker "
        "sees a change; a value that is not what the variable accepts stops every command, `serve` and "
        "`worker` at start with the variable's name and what it accepts, e.g. "
        "`Error: EVALSTORE_MLFLOW='maybe' is not on or off; unset it for the default (on).`",
    ]
    groups: dict[str, list[Any]] = {}
    for variable in VARIABLES.values():
        groups.setdefault(variable.group, []).append(variable)
    for group, variables in groups.items():
        lines += ["", f"## {group}", "", "| variable | accepts | default | what it does |", "|---|---|---|---|"]
        for v in variables:
            default = "none" if v.default is None else (f"`{v.default}`" if v.default else "empty")
            cells = [f"`{v.name}`", v.accepts, default, v.description]
            lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
    return "\n".join(lines) + "\n"


def measure_reference() -> str:
    """reference/measures.md: every family of the registry (ranking, classifier, clustering, answers)."""
    from evalstore.metrics import list_measures, prediction_measures
    from evalstore.metrics.peers import PEERS
    from evalstore.metrics.registry import REQUIRED

    def show(value: object) -> str:
        return "required" if value is REQUIRED else ("the evaluation's" if value is None else str(value))

    lines = [
        "# Measure reference",
        "",
        "Generated from the registry (`evalstore.metrics`) when the docs are built; `evalstore measures` "
        "prints the same. Names, aliases and the rule for spelling a measure are in [Measures](../measures.md). "
        "**Peers** says what trec_eval 10.0 and ir_measures 0.4 call the family and whether their values "
        "are the same; where they differ, it says how and which name gives which definition.",
        "",
        "## Ranking measures",
        "",
    ]
    families = list_measures()
    lines.append("| family | judgments | summary | trec_eval names |")
    lines.append("|---|---|---|---|")
    for fam in families:
        trec_names = ", ".join(f"`{t.name}`" for t in fam.trec) or ""
        lines.append(
            f"| [`{fam.name}`](#{_anchor('m-' + fam.name)}) | {fam.judgments} | {fam.summary} | {trec_names} |"
        )
    lines.append("")
    for fam in families:
        lines += [f"### {fam.name} {{ #{_anchor('m-' + fam.name)} }}", ""]
        lines += [_text(" ".join(fam.description.split())) or "(no definition given)", ""]
        if fam.aliases:
            lines.append("- **Aliases**: " + ", ".join(_code(a) for a in fam.aliases))
        if fam.params:
            params = "; ".join(
                f"`{name}` = {show(p.default)}" + (f" ({_text(p.doc)})" if p.doc else "")
                for name, p in fam.params.items()
            )
            lines.append(f"- **Parameters**: {params}")
        lines.append(
            f"- **Judgments**: {fam.judgments}; **summary over topics**: {fam.summary}; "
            f"**better**: {'higher' if fam.higher_is_better else 'lower'}"
        )
        if fam.trec:
            lines.append(
                "- **trec_eval**: "
                + ", ".join(f"`{t.name}`" + (" (-R prefs)" if t.mode == "prefs" else "") for t in fam.trec)
            )
        lines.append(f"- **Peers**: {_text(PEERS.get(fam.name, 'not stated'))}")
        if fam.reference:
            lines.append(f"- **Reference**: {_text(fam.reference)}")
        lines.append("")
    judged_on = {"classifier": "gold labels (`evaluate --labels`)", "clustering": "gold labels (`evaluate --labels`)"}
    judged_on["answers"] = "a nugget bank's assignments and citation-support labels (`evaluate --nuggets`)"
    for kind in ("classifier", "clustering", "answers"):
        lines += [
            f"## {kind.capitalize()} measures",
            "",
            f"Evaluated on {judged_on[kind]}; `evalstore measures --kind {kind}` prints this table.",
            "",
            "| name | better | shown by default | definition | reference |",
            "|---|---|---|---|---|",
        ]
        for fam in prediction_measures(kind):
            cells = [
                f"`{fam.name}`",
                "higher" if fam.higher_is_better else "lower",
                "yes" if fam.headline else "",
                _text(fam.description),
                _text(fam.reference),
            ]
            lines.append("| " + " | ".join(c.replace("|", r"\|") for c in cells) + " |")
        lines.append("")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# HTTP API


def openapi_schema() -> dict[str, Any]:
    """The service's OpenAPI document, from `create_app()` on a scratch SQLite store at head."""
    from evalstore.db import engine as db_engine
    from evalstore.web.app import create_app
    from evalstore.web.settings import ServerSettings

    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{tmp}/openapi.db"
        engine = db_engine.make_engine(url)
        try:
            db_engine.upgrade(engine, "head")
        finally:
            engine.dispose()
        app = create_app(ServerSettings(database_url=url))
        schema = app.openapi()
        app.state.server.engine.dispose()
    return schema


def http_reference(schema: dict[str, Any]) -> str:
    lines = [
        "# HTTP API reference",
        "",
        f"Generated from the service's OpenAPI document ({schema.get('info', {}).get('title', '')} "
        f"{schema.get('info', {}).get('version', '')}) when the docs are built. A running server serves "
        "it at `/api/v1/openapi.json` and an explorer at `/api/v1/docs`; the document is also "
        "[here](openapi.json). Roles, tokens and what each role may do: [The service](../service/index.md).",
        "",
        _text(schema.get("info", {}).get("description", "")),
        "",
    ]
    by_tag: dict[str, list[tuple[str, str, dict[str, Any]]]] = {}
    for path, methods in schema.get("paths", {}).items():
        for method, op in methods.items():
            if method not in ("get", "post", "put", "patch", "delete"):
                continue
            tag = (op.get("tags") or [path.split("/")[3] if path.count("/") >= 3 else "other"])[0]
            by_tag.setdefault(tag, []).append((path, method, op))
    for tag, ops in by_tag.items():
        lines += [f"## {tag}", ""]
        for path, method, op in ops:
            lines += [f"### `{method.upper()} {path}`", ""]
            summary = op.get("summary") or ""
            if summary:
                lines += [f"**{_text(summary)}**", ""]
            if op.get("description"):
                lines += [_text(op["description"]), ""]
            params = op.get("parameters", [])
            if params:
                lines += ["| parameter | in | required | type |", "|---|---|---|---|"]
                for p in params:
                    schema_of = p.get("schema", {})
                    kind = (
                        schema_of.get("type")
                        or _ref_name(schema_of)
                        or ", ".join(x.get("type", _ref_name(x)) or "" for x in schema_of.get("anyOf", []))
                    )
                    lines.append(
                        f"| `{p['name']}` | {p.get('in', '')} | {'yes' if p.get('required') else 'no'} | {kind} |"
                    )
                lines.append("")
            body = op.get("requestBody", {}).get("content", {})
            if body:
                lines.append(
                    "Request body: "
                    + ", ".join(
                        f"`{ctype}`"
                        + (f" ({_ref_name(c.get('schema', {}))})" if _ref_name(c.get("schema", {})) else "")
                        for ctype, c in body.items()
                    )
                )
                lines.append("")
            responses = op.get("responses", {})
            if responses:
                lines.append(
                    "Responses: "
                    + ", ".join(f"{code} {_text(r.get('description', ''))}" for code, r in responses.items())
                )
                lines.append("")
    schemas = schema.get("components", {}).get("schemas", {})
    if schemas:
        lines += ["## Schemas", ""]
        for name, spec in schemas.items():
            props = spec.get("properties", {})
            fields = ", ".join(f"`{k}`" + ("*" if k in spec.get("required", []) else "") for k in props)
            lines.append(f"- **{name}**: {fields}" if fields else f"- **{name}**")
        lines += ["", "(\\* required)", ""]
    return "\n".join(lines)


def _ref_name(schema: dict[str, Any]) -> str:
    ref = schema.get("$ref", "")
    return ref.rsplit("/", 1)[-1] if ref else ""


# ---------------------------------------------------------------------------------------------
# MkDocs events


def on_files(files: Any, config: Any) -> Any:
    from mkdocs.structure.files import File

    schema = openapi_schema()
    # CHANGELOG.md links to the manual from the repository's root (docs/...), as GitHub shows it; the
    # site's changelog page sits beside the manual's pages
    changelog = re.sub(r"\]\(docs/", "](", (ROOT / "CHANGELOG.md").read_text(encoding="utf-8"))
    generated = {
        "reference/cli.md": cli_reference(),
        "reference/measures.md": measure_reference(),
        "reference/settings.md": settings_reference(),
        "reference/http-api.md": http_reference(schema),
        "reference/openapi.json": json.dumps(schema, indent=2),
        "changelog.md": changelog,
    }
    for src_uri, content in generated.items():
        files.append(File.generated(config, src_uri, content=content))
    return files
