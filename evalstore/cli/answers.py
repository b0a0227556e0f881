"""`evalstore answers ...`: generated answers with citations (TREC RAG answer files)."""

from pathlib import Path
from typing import Annotated

import typer

from evalstore.cli._context import state
from evalstore.cli._output import OutputFormat, info, render

app = typer.Typer(no_args_is_help=True, help="Generated answers with citations (TREC RAG).")


@app.command("register")
def register(
    ctx: typer.Context,
    path: Path,
    name: Annotated[
        str | None, typer.Option("--name", help="Name of the run (default: its run_id; a file of one run only).")
    ] = None,
    topics: Annotated[
        str | None,
        typer.Option("--topics", help="Stored topic set ('evalstore topics import'): refuse answers to other topics."),
    ] = None,
    fmt: Annotated[OutputFormat, typer.Option("--format")] = OutputFormat.table,
) -> None:
    """Register a TREC RAG answer file (JSONL, .gz too; the 2024 and 2025 layouts): one answer
    run per run_id, each with its references as a ranking run of the same name (rank = position
    in 'references'), so 'evaluate --qrels' evaluates them."""
    from evalstore.services import answers

    engine = state(ctx).engine()
    topic_set = answers.topic_ids(engine, topics) if topics is not None else None
    registered = answers.register_answers(engine, path, name=name, topics=topic_set)
    for run in registered:
        what = "registered" if run.created else "already registered"
        info(f"{what} answer run '{run.name}': {run.topics} topics, {run.sentences} sentences")
    render(
        [r.as_dict() for r in registered],
        ["name", "team", "layout", "topics", "sentences", "ranking_run"],
        fmt,
        title="answer runs",
    )


@app.command("list")
def list_answers(
    ctx: typer.Context, fmt: Annotated[OutputFormat, typer.Option("--format")] = OutputFormat.table
) -> None:
    """List the registered answer runs."""
    from evalstore.services import answers

    rows = [r.as_dict() for r in answers.list_answer_runs(state(ctx).engine())]
    render(
        rows, ["name", "team", "layout", "topics", "sentences", "ranking_run", "created_at"], fmt, title="answer runs"
    )


@app.command("show")
def show(
    ctx: typer.Context,
    run: str,
    topic: Annotated[str | None, typer.Option("--topic", help="Only this topic's answer.")] = None,
    fmt: Annotated[OutputFormat, typer.Option("--format")] = OutputFormat.table,
) -> None:
    """An answer run's answers sentence by sentence, each citation resolved to the reference
    (segment) it cites: [position] segment id."""
    from evalstore.services import answers

    shown = answers.show_answers(state(ctx).engine(), run, topic=topic)
    rows = [
        {
            "topic": answer.topic,
            "sentence": sentence.position + 1,
            "text": sentence.text,
            "citations": "; ".join(f"[{position}] {segment}" for position, segment in sentence.citations),
        }
        for answer in shown
        for sentence in answer.sentences
    ]
    render(rows, ["topic", "sentence", "text", "citations"], fmt, title=f"answers of '{run}'")
