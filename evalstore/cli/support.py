"""`evalstore support ...`: citation-support labels (does a sentence's first citation support it)."""

from pathlib import Path
from typing import Annotated

import typer

from evalstore.cli._context import state
from evalstore.cli._output import info

app = typer.Typer(no_args_is_help=True, help="Citation-support labels of answer runs (TREC RAG).")


@app.command("import")
def import_support(
    ctx: typer.Context,
    path: Path,
    assessor: Annotated[
        str, typer.Option("--assessor", help="Whose labels the file holds: human, or judge:NAME.")
    ] = "human",
) -> None:
    """Import citation-support labels: JSONL, one a line, {"run_id", "topic_id", "sentence"
    (numbered from 1, as 'answers show' prints it), "support": 2 (full) | 1 (partial) | 0 (none),
    "segment" (optional: the sentence's first citation)}. 'evaluate --nuggets' then adds
    support_precision and support_recall."""
    from evalstore.services import answers

    imported = answers.import_support(state(ctx).engine(), path, assessor=assessor)
    info(f"stored {imported.labels} {imported.assessor} citation-support labels of {imported.runs} answer runs")
