"""`evalstore nuggets ...`: nugget banks, and the assignments that judge answers by them."""

import json
from pathlib import Path
from typing import Annotated

import typer

from evalstore.cli._context import state
from evalstore.cli._errors import usage_conflict
from evalstore.cli._output import OutputFormat, info, render, render_record

app = typer.Typer(no_args_is_help=True, help="Nugget banks and nugget assignments (TREC RAG).")


@app.command("import")
def import_nuggets(
    ctx: typer.Context,
    path: Path,
    name: Annotated[str, typer.Option("--name", help="Name of the nugget bank.")],
    run_alias: Annotated[
        list[str],
        typer.Option(
            "--run-alias",
            help="FILE_RUN=REGISTERED: store the labels of the file's run FILE_RUN for the registered "
            "answer run REGISTERED (repeatable).",
        ),
    ] = [],
    assessor: Annotated[
        str,
        typer.Option("--assessor", help="Whose assignments the file holds: human, or judge:NAME (a judge's output)."),
    ] = "human",
    fmt: Annotated[OutputFormat, typer.Option("--format")] = OutputFormat.table,
) -> None:
    """Import a nugget bank (JSONL: qid, query, nuggets [{text, importance: vital|okay}]) or one
    of NIST's assignment files, which also bring their human assignments (support,
    partial_support, not_support). An assessed run is matched to a registered answer run by
    --run-alias, else by name, else by its answer text (word for word, one match only); a run
    matching none is registered from the assessed answer text. Each match is printed."""
    from evalstore.services import answers

    aliases: dict[str, str] = {}
    for given in run_alias:
        assessed, equals, registered = given.partition("=")
        if not equals or not assessed.strip() or not registered.strip():
            raise usage_conflict(ctx, f"--run-alias takes FILE_RUN=REGISTERED, not '{given}'.")
        aliases[assessed.strip()] = registered.strip()
    imported = answers.import_nuggets(state(ctx).engine(), path, name=name, run_aliases=aliases, assessor=assessor)
    what = "imported" if imported.created else "found"
    info(f"{what} nugget bank '{name}': {imported.nuggets} nuggets on {imported.topics} topics")
    if imported.assignments:
        info(f"stored {imported.assignments} {imported.assessor} assignments")
    render(
        [{"assessed run": m.assessed, "stored for": m.stored, "matched by": m.how} for m in imported.runs],
        ["assessed run", "stored for", "matched by"],
        fmt,
        title=f"runs assessed in {path.name}",
    )


@app.command("assign")
def assign(
    ctx: typer.Context,
    bank: str,
    judge: Annotated[str, typer.Option("--judge", help="The LLM judge that assigns ('evalstore judges add').")],
    runs: Annotated[list[str], typer.Option("--runs", help="Answer run to assess (repeatable).")] = [],
    all_answers: Annotated[
        bool, typer.Option("--all-answers", help="Assess every answer run that answers a topic of the bank.")
    ] = False,
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
    """Have an LLM judge assign the bank's nuggets to the runs' answers: support, partial_support
    or not_support per (run, topic, nugget), stored as assignments by judge:NAME beside people's
    (resumable: what the judge assigned is reused; run again to retry what failed). Then
    'evaluate --nuggets BANK --assessor judge:NAME' scores on them, and 'nuggets compare BANK
    --assignments human --assignments judge:NAME' sets them against people's."""
    from evalstore.cli._progress import row_progress
    from evalstore.services.judges import nugget_assignment
    from evalstore.services.plain import plain

    if bool(runs) == all_answers:
        raise usage_conflict(ctx, "Give --runs RUN (repeatable) or --all-answers, one of the two.")
    if dry_run:
        estimate = nugget_assignment.estimate_assignment(
            state(ctx).engine(), bank, judge_name=judge, runs=None if all_answers else runs, topics=topics or None
        )
        render_record(plain(estimate), fmt, title=f"judge {judge} on nugget bank {bank}: estimate (nothing sent)")
        if estimate.estimate.cost_usd is None:
            info("the judge declares no prices: no money estimated (judges add --replace --price-in --price-out)")
        return
    with row_progress(f"assigning nuggets of {bank}") as advance:
        done = [0]

        def step(asked: int, _total: int) -> None:
            advance(asked - done[0])
            done[0] = asked

        result = nugget_assignment.assign_nuggets(
            state(ctx).engine(),
            bank,
            judge_name=judge,
            runs=None if all_answers else runs,
            topics=topics or None,
            max_cost=max_cost,
            progress=step,
        )
    whole = result.as_dict()
    row = {k: v for k, v in whole.items() if k not in ("failed", "labels", "skipped")} | {
        "labels": json.dumps(result.labels),
        "failed": len(result.failed),
        "skipped": len(result.skipped),
    }
    render_record(row if fmt is not OutputFormat.json else whole, fmt, title=f"judge {judge} on nugget bank {bank}")
    for item in result.failed:
        info(f"not assigned: run {item['run']}, topic {item['topic']}, nugget {item['nugget']}: {item['reason']}")
    if result.failed:
        info(f"{len(result.failed)} assignments failed (nothing stored for them); run again to ask again.")
    if result.skipped:
        first = result.skipped[0]
        info(
            f"the budget of {max_cost:g} USD was reached: {len(result.skipped)} assignments were not sent (first: "
            f"run {first['run']}, topic {first['topic']}, nugget {first['nugget']}); run again to go on."
        )


@app.command("create")
def create(
    ctx: typer.Context,
    bank: str,
    judge: Annotated[str, typer.Option("--judge", help="The LLM judge that drafts ('evalstore judges add').")],
    topics: Annotated[list[str], typer.Option("--topics", help="A topic to draft nuggets for (repeatable).")] = [],
    from_runs: Annotated[
        list[str],
        typer.Option("--from-runs", help="An answer run whose answers the nuggets are drawn from (repeatable)."),
    ] = [],
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Estimate the calls, tokens, money and time; send nothing.")
    ] = False,
    max_cost: Annotated[
        float | None,
        typer.Option("--max-cost", help="Stop sending at this many US dollars (the judge's prices); the rest waits."),
    ] = None,
    fmt: Annotated[OutputFormat, typer.Option("--format")] = OutputFormat.table,
) -> None:
    """Have an LLM judge draft a nugget bank for the topics from the runs' answers (the nuggetizer's
    rules: 1 to 12 words each, at most 30 per topic, each vital or okay). The bank is stored as the
    judge's draft: review it, then 'evalstore nuggets accept BANK' before scoring on it."""
    from evalstore.services.judges import nugget_drafts
    from evalstore.services.plain import plain

    if not topics or not from_runs:
        raise usage_conflict(ctx, "Give --topics T (repeatable) and --from-runs RUN (repeatable).")
    if dry_run:
        estimate = nugget_drafts.estimate_bank(
            state(ctx).engine(), bank, judge_name=judge, topics=topics, runs=from_runs
        )
        render_record(plain(estimate), fmt, title=f"judge {judge} drafting nugget bank {bank}: estimate (nothing sent)")
        if estimate.estimate.cost_usd is None:
            info("the judge declares no prices: no money estimated (judges add --replace --price-in --price-out)")
        return
    result = nugget_drafts.create_bank(
        state(ctx).engine(), bank, judge_name=judge, topics=topics, runs=from_runs, max_cost=max_cost
    )
    whole = result.as_dict()
    row = {k: v for k, v in whole.items() if k not in ("failed", "rejected")} | {
        "rejected": len(result.rejected),
        "failed": len(result.failed),
    }
    render_record(row if fmt is not OutputFormat.json else whole, fmt, title=f"nugget bank {bank} drafted by {judge}")
    for item in result.rejected:
        info(f"rejected: topic {item['topic']}: '{item['text']}': {item['reason']}")
    for item in result.failed:
        info(f"no nuggets drafted for topic {item['topic']}: {item['reason']}")
    if result.topics:
        info(f"'{bank}' is a draft: review its nuggets, then 'evalstore nuggets accept {bank}' to score on it.")
    else:
        info("nothing stored: no topic got a valid nugget.")


@app.command("accept")
def accept(
    ctx: typer.Context,
    bank: str,
    reviewed: Annotated[
        bool,
        typer.Option(
            "--reviewed",
            help="You reviewed the whole draft elsewhere (its file, say): the nuggets not reviewed on the bank's "
            "page are recorded as reviewed from the command line.",
        ),
    ] = False,
) -> None:
    """Accept a nugget bank an LLM judge drafted, once a person has reviewed it: it is scored on from now on.
    Every nugget must have been accepted, edited or rejected on the bank's page, or pass --reviewed."""
    from evalstore.services import answers

    try:
        accepted = answers.accept_bank(state(ctx).engine(), bank, reviewed_as_a_whole=reviewed)
    except answers.UnreviewedDraft as refused:
        info(
            f"{refused.unreviewed} nuggets of bank '{bank}' are not reviewed yet: accept, edit or reject each on "
            f"the bank's page, or, if you reviewed the whole draft elsewhere, 'evalstore nuggets accept {bank} "
            "--reviewed'."
        )
        raise typer.Exit(1) from None
    info(f"accepted nugget bank '{bank}' (drafted by {accepted.drafted_by})")


@app.command("list")
def list_banks(ctx: typer.Context, fmt: Annotated[OutputFormat, typer.Option("--format")] = OutputFormat.table) -> None:
    """List the nugget banks."""
    from evalstore.services import answers

    rows = [
        {"name": b.name, "topics": b.topics, "nuggets": b.nuggets, "assessed runs": b.assessed_runs, "source": b.source}
        for b in answers.list_banks(state(ctx).engine())
    ]
    render(rows, ["name", "topics", "nuggets", "assessed runs", "source"], fmt, title="nugget banks")


@app.command("compare")
def compare(
    ctx: typer.Context,
    bank: str,
    assignments: Annotated[
        list[str],
        typer.Option(
            "--assignments",
            help="An assessor: human, human:NAME (a person on the nugget page) or judge:NAME; "
            "give two, the reference first.",
        ),
    ],
    measure: Annotated[str, typer.Option("--measure", help="The measure that orders the runs.")] = "W",
    top_k: Annotated[int, typer.Option("--top-k", min=2, help="Swaps counted among the reference's top k runs.")] = 5,
    fmt: Annotated[OutputFormat, typer.Option("--format")] = OutputFormat.table,
) -> None:
    """How far two assessors' nugget assignments agree: on the labels (kappa, linear and
    quadratic weighted kappa, Krippendorff's alpha; not_support < partial_support < support) and
    on the order of the answer runs (Kendall's tau, tau-AP of the measure's means over the topics
    both assessed in full)."""
    from evalstore.services import answers
    from evalstore.services.plain import plain

    if len(assignments) != 2:
        raise usage_conflict(ctx, "Give --assignments twice: the reference (e.g. human), then the other (judge:NAME).")
    report = answers.compare_assignments(
        state(ctx).engine(), bank, assignments[0], assignments[1], measure=measure, top_k=top_k
    )
    if fmt is OutputFormat.json:
        typer.echo(json.dumps(plain(report), indent=2, default=str))
        return
    labels = plain(report.labels)
    rows = [
        {"level": "labels", "items": labels["items"], "agreement": "observed", "value": labels["observed"]},
        {"level": "labels", "items": labels["items"], "agreement": "Cohen's kappa", "value": labels["kappa"]},
        {
            "level": "labels",
            "items": labels["items"],
            "agreement": "weighted kappa (linear)",
            "value": labels["weighted_kappa"],
        },
        {
            "level": "labels",
            "items": labels["items"],
            "agreement": "weighted kappa (quadratic)",
            "value": labels["quadratic_kappa"],
        },
        {
            "level": "labels",
            "items": labels["items"],
            "agreement": "Krippendorff's alpha",
            "value": labels["krippendorff_alpha"],
        },
    ]
    systems = None if report.systems is None else plain(report.systems)
    if systems is not None:
        rows += [
            {
                "level": f"runs by {report.measure}",
                "items": systems["systems"],
                "agreement": "Kendall's tau",
                "value": systems["kendall_tau"],
            },
            {
                "level": f"runs by {report.measure}",
                "items": systems["systems"],
                "agreement": "tau-AP",
                "value": systems["tau_ap"],
            },
        ]
    render(
        rows,
        ["level", "items", "agreement", "value"],
        fmt,
        title=f"{report.second} against {report.first} on '{bank}'",
    )
    if report.note is not None:
        info(report.note)


@app.command("configure")
def configure(
    ctx: typer.Context,
    bank: str,
    organiser: Annotated[
        str | None, typer.Option("--organiser", help="The organiser who edits the bank in the browser.")
    ] = None,
    collection: Annotated[
        str | None,
        typer.Option("--collection", help="The cited segments' texts ('documents import'), for the support page."),
    ] = None,
    double_share: Annotated[
        float | None,
        typer.Option(
            "--double-share",
            min=0.0,
            max=1.0,
            help="Give each topic to its first assessor, and show this share of its answers, blind, to "
            "every other assessor (for agreement).",
        ),
    ] = None,
    seed: Annotated[
        int | None, typer.Option("--seed", help="Seed of the sample assessed twice (default: drawn, recorded).")
    ] = None,
    fmt: Annotated[OutputFormat, typer.Option("--format")] = OutputFormat.table,
) -> None:
    """Set how a bank is assessed in the browser: its organiser (who edits it and reviews a judge's
    draft of it), the segments' texts the support page shows, and the share assessed twice."""
    from evalstore.services import assessing

    settings = assessing.configure_bank(
        state(ctx).engine(), bank, organiser=organiser, collection=collection, double_share=double_share, seed=seed
    )
    render_record(
        {
            "bank": settings.bank,
            "organiser": settings.organiser,
            "collection": settings.collection,
            "double_share": settings.double_share,
            "double_seed": settings.double_seed,
            "assessors": ", ".join(settings.assessors),
        },
        fmt,
        title=f"nugget bank '{bank}'",
    )


@app.command("assessors")
def assessors(
    ctx: typer.Context,
    bank: str,
    assessor: Annotated[list[str], typer.Option("--assessor", help="An assessor user (repeatable).")],
) -> None:
    """Let assessors assess answers by the bank in the browser (the nugget and support pages);
    their labels are stored as human:NAME."""
    from evalstore.services import assessing

    for user in assessor:
        assessing.assign_bank_assessor(state(ctx).engine(), bank, user)
        info(f"assessor '{user}' assesses answers by nugget bank '{bank}'")
