"""`evalstore qrels`: import, list, show, export and delete relevance judgments."""

from collections.abc import Callable
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from evalstore.cli._context import state
from evalstore.cli._errors import usage_conflict
from evalstore.cli._output import OutputFormat, info, render, render_record, warn, write_output
from evalstore.cli._progress import storing
from evalstore.cli.runs import InputFormat

app = typer.Typer(
    help="Import and manage judgments: relevance (qrels), subtopic and preference judgments.", no_args_is_help=True
)

LIST_COLUMNS = ["name", "kind", "rows", "topics", "created_at", "description"]


class JudgmentKind(StrEnum):
    relevance = "relevance"
    subtopics = "subtopics"
    preferences = "preferences"


@app.command("import")
def import_(
    ctx: typer.Context,
    paths: Annotated[
        list[Path],
        typer.Argument(help="TREC qrels (qid iter docno rel; .gz too), CSV, TSV or Parquet: one file or many."),
    ],
    name: Annotated[
        str | None,
        typer.Option(
            "--name",
            help="Name of the qrels in the store (one file; default: from the file name, "
            "qrels.dl19.txt -> qrels.dl19).",
        ),
    ] = None,
    description: Annotated[str | None, typer.Option("--description")] = None,
    replace: Annotated[bool, typer.Option("--replace", help="Replace qrels of this name with other content.")] = False,
    fmt: Annotated[
        InputFormat | None, typer.Option("--format", help="Input format (default: from the file name).")
    ] = None,
    kind: Annotated[
        JudgmentKind,
        typer.Option(
            "--kind",
            help="relevance: qrels (qid iter docno rel). subtopics: diversity qrels (qid subtopic docno judgment), "
            "for alpha_nDCG, ERR_IA and the other ndeval measures. preferences: trec_eval's -R prefs lines "
            "(qid jg jsg docno level) or a qrels file whose second column is the judgment group, for prefs_*.",
        ),
    ] = JudgmentKind.relevance,
) -> None:
    """Validate judgments files and store them, each whole or not at all; with several files every
    one is validated before any is stored."""
    from evalstore.services import store

    if name is not None and len(paths) > 1:
        raise usage_conflict(
            ctx,
            f"--name names one set of judgments; {len(paths)} files were given (their names come from the file names).",
        )
    engine = state(ctx).engine()

    def import_all(
        on_file: Callable[[int, str], None] | None, rows: Callable[[int], None] | None
    ) -> list[store.Registered]:
        return store.import_many_qrels(
            engine,
            paths,
            names=[name] if name is not None else None,
            description=description,
            replace=replace,
            fmt=fmt.value if fmt else None,
            kind=kind.value,
            progress=rows,
            on_file=on_file,
        )

    for result in storing(paths, import_all):
        for message in result.warnings:
            warn(message)
        s = result.summary
        if result.created:
            info(f"imported qrels '{s.name}': {s.rows} judgments, {s.topics} topics")
        else:
            info(f"qrels '{s.name}' are already imported with this content ({s.rows} judgments); nothing stored")


@app.command("list")
def list_(ctx: typer.Context, fmt: Annotated[OutputFormat, typer.Option("--format")] = OutputFormat.table) -> None:
    """List the imported qrels."""
    from evalstore.services import store

    rows = [s.as_dict() for s in store.list_qrels(state(ctx).engine())]
    render(rows, LIST_COLUMNS, fmt, title="qrels")


@app.command()
def show(
    ctx: typer.Context, name: str, fmt: Annotated[OutputFormat, typer.Option("--format")] = OutputFormat.table
) -> None:
    """Show one qrels set."""
    from evalstore.services import store

    render_record(store.show_qrels(state(ctx).engine(), name).as_dict(), fmt, title=name)


@app.command()
def delete(ctx: typer.Context, name: str) -> None:
    """Delete a qrels set and every evaluation against it."""
    from evalstore.services import store

    summary = store.delete_qrels(state(ctx).engine(), name)
    info(f"deleted qrels '{summary.name}' ({summary.rows} judgments)")


@app.command()
def export(
    ctx: typer.Context,
    name: str,
    output: Annotated[Path | None, typer.Option("--output", "-o", help="File to write (default: stdout).")] = None,
    fmt: Annotated[InputFormat, typer.Option("--format")] = InputFormat.trec,
) -> None:
    """Write qrels back out in their original order (TREC by default)."""
    from evalstore.io.writers import write_qrels
    from evalstore.services import store

    _, table = store.qrels_rows(state(ctx).engine(), name)
    write_output(output, lambda handle: write_qrels(table, handle, fmt.value))
