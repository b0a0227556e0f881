"""`evalstore support ...`: citation-support labels (does a sentence's first citation support it)."""

import json
from pathlib import Path
from typing import Annotated

import typer

from evalstore.cli._context import state
from evalstore.cli._errors import usage_conflict
from evalstore.cli._output import OutputFormat, info, render_record

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


@app.command("assess")
def assess(
    ctx: typer.Context,
    judge: Annotated[str, typer.Option("--judge", help="The LLM judge that assesses ('evalstore judges add').")],
    collection: Annotated[
        str, typer.Option("--collection", help="The collection holding the cited segments' texts ('documents import').")
    ],
    runs: Annotated[list[str], typer.Option("--runs", help="Answer run to assess (repeatable).")] = [],
    topics: Annotated[list[str], typer.Option("--topics", help="Assess these topics only (repeatable).")] = [],
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Estimate the calls, tokens, money and time; send nothing.")
    ] = False,
    max_cost: Annotated[
        float | None,
        typer.Option("--max-cost", help="Stop sending at this many US dollars (the judge's prices); the rest waits."),
    ] = None,
    fmt: Annotated[OutputFormat, typer.Option("--format")] = OutputFormat.table,
) -> None:
    """Have an LLM judge say whether each cited sentence's first citation supports it: 2 (full),
    1 (partial) or 0 (none), against the cited segment's text; stored as citation-support labels by
    judge:NAME (resumable: what the judge labelled is reused). A segment the collection lacks is
    skipped and listed."""
    from evalstore.cli._progress import row_progress
    from evalstore.services.judges import citation_support
    from evalstore.services.plain import plain

    if not runs:
        raise usage_conflict(ctx, "Give --runs RUN (repeatable): the answer runs whose citations to assess.")
    if dry_run:
        estimate = citation_support.estimate_support(
            state(ctx).engine(), judge_name=judge, runs=runs, collection=collection, topics=topics or None
        )
        render_record(plain(estimate), fmt, title=f"judge {judge} on citations: estimate (nothing sent)")
        if estimate.estimate.cost_usd is None:
            info("the judge declares no prices: no money estimated (judges add --replace --price-in --price-out)")
        return
    with row_progress("assessing citations") as advance:
        done = [0]

        def step(asked: int, _total: int) -> None:
            advance(asked - done[0])
            done[0] = asked

        result = citation_support.assess_support(
            state(ctx).engine(),
            judge_name=judge,
            runs=runs,
            collection=collection,
            topics=topics or None,
            max_cost=max_cost,
            progress=step,
        )
    whole = result.as_dict()
    row = {k: v for k, v in whole.items() if k not in ("failed", "skipped", "labels")} | {
        "labels": json.dumps(result.labels),
        "skipped": len(result.skipped),
        "failed": len(result.failed),
    }
    render_record(row if fmt is not OutputFormat.json else whole, fmt, title=f"judge {judge} on citations")
    for item in result.skipped:
        info(f"skipped: run {item['run']}, topic {item['topic']}, sentence {item['sentence']}: {item['reason']}")
    for item in result.failed:
        info(f"not assessed: run {item['run']}, topic {item['topic']}, sentence {item['sentence']}: {item['reason']}")
    if result.skipped or result.failed:
        info(
            f"{len(result.skipped)} sentences skipped (no segment text, or over the budget), {len(result.failed)} "
            "failed; nothing stored for them. Run again to ask again."
        )
