"""`evalstore pool ...`: TREC-style judging pools, built from stored runs."""

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from evalstore.cli._context import state
from evalstore.cli._errors import usage_conflict
from evalstore.cli._output import OutputFormat, ReportFormat, info, render, render_record

app = typer.Typer(no_args_is_help=True, help="Build judging pools, export them to assessors, make qrels.")


def _topics(text: str | None) -> list[str] | None:
    if text is None:
        return None
    path = Path(text)
    if path.is_file():  # a file of topic ids, one per line
        return [line.split()[0] for line in path.read_text().splitlines() if line.strip()]
    return [t.strip() for t in text.split(",") if t.strip()]


@app.command("build")
def build(
    ctx: typer.Context,
    name: Annotated[str, typer.Option("--name", help="Name of the new pool.")],
    run: Annotated[list[str], typer.Option("--run", help="Contributing run (repeatable).")] = [],
    all_runs: Annotated[bool, typer.Option("--all-runs", help="Every registered run contributes.")] = False,
    topics: Annotated[
        str | None, typer.Option("--topics", help="Comma-separated topic ids, or a file of them.")
    ] = None,
    strategy: Annotated[str, typer.Option("--strategy", help="depth | rrf | rbp | mtf | bandit.")] = "depth",
    depth: Annotated[
        int | None,
        typer.Option(
            "--depth",
            min=1,
            help="Top K of each run (depth: default 100; other strategies: candidates, default whole runs).",
        ),
    ] = None,
    budget: Annotated[
        int | None,
        typer.Option("--budget", min=1, help="Documents to judge per topic (required for rrf, rbp, mtf, bandit)."),
    ] = None,
    seed: Annotated[
        int | None, typer.Option("--seed", help="Seed of Thompson sampling (default: drawn, recorded).")
    ] = None,
    rbp_p: Annotated[float, typer.Option("--rbp-p", help="Persistence p of the rbp strategy's weights.")] = 0.8,
    policy: Annotated[str, typer.Option("--policy", help="Bandit policy: maxmean | thompson.")] = "maxmean",
    replace: Annotated[
        bool, typer.Option("--replace", help="Rebuild an existing pool (its judgments are dropped).")
    ] = False,
    fmt: Annotated[OutputFormat, typer.Option("--format")] = OutputFormat.table,
) -> None:
    """Build a pool from stored runs, read in trec_eval order (score, then docno, descending).

    mtf and bandit adapt to judgments; on a new pool (no judgments yet) they give the order
    before any feedback. 'evalstore pool simulate' replays them against known qrels."""
    from evalstore.services import pools

    if bool(run) == all_runs:
        raise usage_conflict(ctx, "Name runs with --run NAME (repeatable) or pass --all-runs, not both.")
    summary = pools.build_pool(
        state(ctx).engine(),
        name=name,
        run_names=None if all_runs else run,
        strategy=strategy,
        depth=depth,
        budget=budget,
        topics=_topics(topics),
        seed=seed,
        rbp_p=rbp_p,
        bandit_policy=policy,
        replace=replace,
    )
    info(f"pool '{name}': {summary.documents} documents over {summary.topics} topics from {len(summary.runs)} runs")
    render_record(summary.as_dict(), fmt, title=f"pool {name}")


@app.command("list")
def list_pools(ctx: typer.Context, fmt: Annotated[OutputFormat, typer.Option("--format")] = OutputFormat.table) -> None:
    """Every pool with its size and judgments."""
    from evalstore.services import pools

    rows = [
        p.as_dict() | {"runs": len(p.runs), "assessors": ", ".join(p.assessors)}
        for p in pools.list_pools(state(ctx).engine())
    ]
    render(rows, ["name", "strategy", "runs", "topics", "documents", "judged", "assessors"], fmt, title="pools")


@app.command("show")
def show(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument()],
    fmt: Annotated[OutputFormat, typer.Option("--format")] = OutputFormat.table,
) -> None:
    """A pool's settings, size and judgments so far."""
    from evalstore.services import pools

    render_record(pools.show_pool(state(ctx).engine(), name).as_dict(), fmt, title=f"pool {name}")


@app.command("stats")
def stats(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument()],
    k: Annotated[int, typer.Option("-k", min=1, help="Depth of the judged@k coverage per run.")] = 10,
    fmt: Annotated[ReportFormat, typer.Option("--format")] = ReportFormat.table,
) -> None:
    """Size, judged and relevant per topic; contributed and unique documents and judged@k per run."""
    from evalstore.services import pools
    from evalstore.services.plain import plain

    result = pools.pool_stats(state(ctx).engine(), name, k=k)
    per_topic, per_run = plain(result.per_topic), plain(result.per_run)
    if fmt is ReportFormat.json:
        sys.stdout.write(json.dumps({"topics": per_topic, "runs": per_run}, indent=2) + "\n")
        return
    render(per_run, ["run", "contributed", "unique", f"judged@{k}"], fmt, title=f"pool {name}: runs")
    if fmt is not ReportFormat.csv:
        render(per_topic, ["topic", "documents", "judged", "relevant"], fmt, title=f"pool {name}: topics")


@app.command("export")
def export(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument()],
    path: Annotated[Path, typer.Argument(help="Assessor sheet to write ('-' for stdout).")],
    fmt: Annotated[
        str,
        typer.Option(
            "--format", help="tsv | csv (topic, doc, empty relevance) | trec (qrels lines with relevance -1)."
        ),
    ] = "tsv",
    shuffle: Annotated[bool, typer.Option("--shuffle", help="Shuffle the documents within each topic.")] = False,
    seed: Annotated[int | None, typer.Option("--seed", help="Seed of --shuffle (default: drawn and printed).")] = None,
) -> None:
    """Write assessor sheets: one row per pooled document, in judging order or shuffled."""
    from evalstore.services import pools

    text, used = pools.export_pool(
        state(ctx).engine(), name, None if str(path) == "-" else path, fmt=fmt, shuffle=shuffle, seed=seed
    )
    if str(path) == "-":
        sys.stdout.write(text)
    else:
        info(f"{text.count(chr(10)) - (fmt != 'trec')} documents written to {path}")
    if used is not None and seed is None:
        info(f"shuffled with seed {used} (pass --seed {used} to reproduce)")


@app.command("next")
def next_batch(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument()],
    path: Annotated[Path, typer.Argument(help="Assessor sheet of the new documents ('-' for stdout).")],
    count: Annotated[int, typer.Option("--count", help="Documents to add per topic.")] = 10,
    fmt: Annotated[str, typer.Option("--format", help="tsv | csv | trec, as for 'pool export'.")] = "tsv",
    resolve: Annotated[
        str,
        typer.Option(
            "--resolve", help="How several assessors' labels become the feedback: majority | max | assessor:NAME."
        ),
    ] = "majority",
) -> None:
    """Add the next documents to judge, chosen with the judgments imported so far (the online loop
    of move-to-front and the bandit; the continuation of the order for rrf and rbp)."""
    from evalstore.services import pools

    batch = pools.next_batch(
        state(ctx).engine(), name, count=count, path=None if str(path) == "-" else path, fmt=fmt, resolve=resolve
    )
    if str(path) == "-":
        sys.stdout.write(batch.sheet)
    topics = batch.documents["topic"].nunique()
    info(
        f"{len(batch.documents)} documents added to pool '{name}' over {topics} topic{'s' * (topics != 1)} "
        f"(feedback: {batch.judged} judged, {batch.relevant} relevant)"
        + ("" if str(path) == "-" else f"; sheet written to {path}")
    )


@app.command("qrels")
def qrels(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument()],
    qrels_name: Annotated[str, typer.Option("--name", help="Name of the qrels to store.")],
    resolve: Annotated[
        str, typer.Option("--resolve", help="majority (ties: the higher label) | max | assessor:NAME.")
    ] = "majority",
    replace: Annotated[bool, typer.Option("--replace", help="Replace qrels of that name.")] = False,
) -> None:
    """Turn the pool's judgments into stored qrels; pooled documents nobody judged get relevance -1
    (trec_eval's 'pooled but unjudged')."""
    from evalstore.services import pools

    registered = pools.pool_qrels(state(ctx).engine(), name, qrels_name=qrels_name, resolve=resolve, replace=replace)
    summary = registered.summary
    verb = "stored" if registered.created else "unchanged (same content)"
    info(f"qrels '{summary.name}' {verb}: {summary.rows} judgments over {summary.topics} topics")


@app.command("reusability")
def reusability(
    ctx: typer.Context,
    qrels: Annotated[str, typer.Option("--qrels", help="Qrels made from the pool.")],
    pool: Annotated[str, typer.Option("--pool", help="The pool (its contributing runs are tested).")],
    measure: Annotated[list[str], typer.Option("--measure", help="Measure (repeatable).")] = ["AP", "P@10"],
    fmt: Annotated[ReportFormat, typer.Option("--format")] = ReportFormat.table,
) -> None:
    """Leave-one-run-out (Zobel 1998): each run scored without the documents only it contributed,
    with the change in score and in leaderboard rank."""
    from evalstore.metrics import resolve_measures
    from evalstore.services import pools

    rows = pools.reusability(state(ctx).engine(), qrels_name=qrels, pool_name=pool, measures=measure)
    columns = ["run", "unique_docs", "unique_relevant"]
    for name in (str(m) for m in resolve_measures(measure)):
        columns += [name, f"{name} without", f"{name} change", f"{name} rank", f"{name} rank without"]
    render(rows, columns, fmt, title=f"reusability of '{qrels}' (leave one run out)")


@app.command("simulate")
def simulate(
    ctx: typer.Context,
    qrels: Annotated[str, typer.Option("--qrels", help="Known qrels to replay against.")],
    run: Annotated[list[str], typer.Option("--run", help="Run (repeatable; default: every registered run).")] = [],
    strategy: Annotated[list[str], typer.Option("--strategy", help="Strategy (repeatable; default all).")] = list(
        ("depth", "rrf", "rbp", "mtf", "bandit")
    ),
    budget: Annotated[list[int], typer.Option("--budget", help="Judgments per topic to report (repeatable).")] = [
        10,
        50,
        100,
        200,
        500,
    ],
    depth: Annotated[
        int | None, typer.Option("--depth", min=1, help="Candidates: each run's top K (default all).")
    ] = None,
    policy: Annotated[str, typer.Option("--policy", help="Bandit policy: maxmean | thompson.")] = "maxmean",
    seed: Annotated[int | None, typer.Option("--seed")] = None,
    plot: Annotated[Path | None, typer.Option("--plot", help="Write relevant found vs judgments to this PNG.")] = None,
    fmt: Annotated[ReportFormat, typer.Option("--format")] = ReportFormat.table,
) -> None:
    """Replay pooling strategies against known qrels: relevant documents found per judgment spent."""
    from evalstore.services import pools

    sim = pools.simulate(
        state(ctx).engine(),
        qrels_name=qrels,
        run_names=run or None,
        strategies=strategy,
        budgets=budget,
        depth=depth,
        seed=seed,
        bandit_policy=policy,
    )
    rows = [
        {"budget per topic": b, "judgments": b * sim.topics, **{s: sim.found[s][i] for s in sim.strategies}}
        for i, b in enumerate(sim.budgets)
    ]
    if sim.seed is not None:
        info(f"seed {sim.seed}")
    render(
        rows,
        ["budget per topic", "judgments", *sim.strategies],
        fmt,
        title=f"relevant found in '{qrels}' ({sim.total_relevant} relevant, {sim.topics} topics)",
    )
    if plot is not None:
        pools.simulation_figure(sim, f"Pooling strategies replayed on {qrels}").savefig(plot)
        info(f"plot written to {plot}")


@app.command("assign")
def assign(
    ctx: typer.Context,
    name: str,
    assessor: Annotated[list[str], typer.Option("--assessor", help="An assessor user (repeatable).")],
) -> None:
    """Let assessors judge a pool over HTTP (their judgments land beside 'judgments import' ones)."""
    from evalstore.services import judging

    for user in assessor:
        judging.assign_assessor(state(ctx).engine(), name, user)
        info(f"assessor '{user}' judges pool '{name}'")


def _grades(texts: list[str]) -> dict[int, str] | None:
    if not texts:
        return None
    grades = {}
    for text in texts:
        value, equals, label = text.partition("=")
        if not equals or not value.strip().lstrip("-").isdigit() or not label.strip():
            raise typer.BadParameter(
                f"'{text}': give a grade as VALUE=LABEL, e.g. '0=Not relevant'.", param_hint="--grade"
            )
        grades[int(value)] = label.strip()
    return grades


@app.command("configure")
def configure(
    ctx: typer.Context,
    name: str,
    topics: Annotated[
        str | None, typer.Option("--topics", help="Topic statements assessors read ('topics import').")
    ] = None,
    collection: Annotated[
        str | None, typer.Option("--collection", help="Documents' text ('documents import').")
    ] = None,
    grade: Annotated[
        list[str],
        typer.Option(
            "--grade",
            help="A grade and its label, VALUE=LABEL (repeatable; "
            "default 0=Not relevant 1=Related 2=Highly relevant 3=Perfectly relevant).",
        ),
    ] = [],
    double_share: Annotated[
        float | None,
        typer.Option(
            "--double-share",
            min=0.0,
            max=1.0,
            help="Share each topic "
            "out to its first assessor, and show this share of it, blind, to "
            "every other assessor (for agreement).",
        ),
    ] = None,
    seed: Annotated[
        int | None, typer.Option("--seed", help="Seed of the double-judged sample (default: drawn, recorded).")
    ] = None,
    suggestions: Annotated[
        str | None,
        typer.Option(
            "--suggestions",
            help="JUDGE: show this judge's label and explanation beside each document as a suggestion "
            "(its agreement with the assessors is reported apart: 'judgments suggestions'); off: none (the default).",
        ),
    ] = None,
    fmt: Annotated[OutputFormat, typer.Option("--format")] = OutputFormat.table,
) -> None:
    """Set what the pool's assessors see in the browser: topic statements, documents, grades, a
    judge's suggestions."""
    from evalstore.services import judging
    from evalstore.services.judges import suggestions as suggesting

    settings = judging.configure_pool(
        state(ctx).engine(),
        name,
        topic_set=topics,
        collection=collection,
        grades=_grades(grade),
        double_share=double_share,
        seed=seed,
    )
    if suggestions is not None:
        suggesting.set_suggestions(state(ctx).engine(), name, None if suggestions == "off" else suggestions)
    shown = suggesting.shown_by(state(ctx).engine(), name)
    render_record(
        {
            **settings,
            "grades": ", ".join(f"{g}={label}" for g, label in settings["grades"].items()),
            "suggestions": shown or "off",
        },
        fmt,
        title=f"pool '{name}'",
    )
