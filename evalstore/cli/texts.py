"""`evalstore topics ...` and `evalstore documents ...`: what assessors read when judging in the
browser (topic statements, documents' text)."""

from pathlib import Path
from typing import Annotated

import typer

from evalstore.cli._context import state
from evalstore.cli._output import OutputFormat, info, render

topics_app = typer.Typer(no_args_is_help=True, help="Topic statements (title, description, narrative).")
documents_app = typer.Typer(no_args_is_help=True, help="Documents' text, for judging pools in the browser.")


@topics_app.command("import")
def import_topics(
    ctx: typer.Context,
    path: Path,
    name: Annotated[str, typer.Option("--name", help="Name of the topic set.")],
    replace: Annotated[bool, typer.Option("--replace", help="Overwrite a topic set of that name.")] = False,
) -> None:
    """Import topics: a TREC topic file (<top> <num> <title> <desc> <narr>), JSONL
    ({"topic", "title", "description", "narrative"}) or TSV (id<TAB>title)."""
    from evalstore.services import collections

    summary = collections.import_topics(state(ctx).engine(), path, name=name, replace=replace)
    info(f"imported {summary.count} topics as '{name}'")


@topics_app.command("list")
def list_topics(
    ctx: typer.Context, fmt: Annotated[OutputFormat, typer.Option("--format")] = OutputFormat.table
) -> None:
    """List topic sets and collections."""
    from evalstore.services import collections

    rows = [s.as_dict() for s in collections.list_text_sets(state(ctx).engine())]
    render(rows, ["name", "kind", "count", "source"], fmt, title="topic sets and collections")


@documents_app.command("import")
def import_documents(
    ctx: typer.Context,
    path: Path,
    collection: Annotated[str, typer.Option("--collection", help="Name of the collection.")],
    append: Annotated[bool, typer.Option("--append", help="Add to an existing collection.")] = False,
) -> None:
    """Import documents: JSONL ({"doc_id", "title", "text"}) or TREC SGML (<DOC><DOCNO>...),
    .gz too. Only the documents your pools hold are needed."""
    from evalstore.services import collections

    summary = collections.import_documents(state(ctx).engine(), path, collection=collection, append=append)
    info(f"imported {summary.count} documents into '{collection}'")


@documents_app.command("delete")
def delete_collection(ctx: typer.Context, collection: str) -> None:
    """Delete a collection and its documents."""
    from evalstore.services import collections

    collections.delete_collection(state(ctx).engine(), collection)
    info(f"deleted collection '{collection}'")
