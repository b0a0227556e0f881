"""`evalstore judges ...` (LLM assessors, their labels and pairwise preferences), `qrels build |
versions` (qrels versions) and `judgments compare | provenance | preferences` (two sets of
judgments side by side; who made each label; a judge's preferences as ratings)."""

import json
import sys
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from evalstore.cli._context import state
from evalstore.cli._output import OutputFormat, info, render, render_record
from evalstore.cli._progress import step_progress

if TYPE_CHECKING:  # at run time the commands import the services themselves, as they run
    from evalstore.services.judges.compare import AgreementReport

app = typer.Typer(no_args_is_help=True, help="LLM assessors: define them, let them judge a pool, probe them.")


class Structured(StrEnum):
    auto = "auto"
    json_schema = "json_schema"
    json_object = "json_object"
    none = "none"


class CompareFormat(StrEnum):
    table = "table"
    json = "json"


@app.command("add")
def add(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument()],
    endpoint: Annotated[
        str,
        typer.Option(
            "--endpoint",
            help="An OpenAI-compatible API, e.g. http://127.0.0.1:8000/v1 (llama.cpp, vLLM, Ollama, OpenAI, Azure).",
        ),
    ],
    model: Annotated[str, typer.Option("--model")],
    api_key_env: Annotated[
        str | None,
        typer.Option("--api-key-env", help="The environment variable holding the key (the key is never stored)."),
    ] = None,
    prompt: Annotated[
        str, typer.Option("--prompt", help="umbrela, or a template file with {query} and {passage}.")
    ] = "umbrela",
    scale: Annotated[str, typer.Option("--scale")] = "0-3",
    temperature: Annotated[float, typer.Option("--temperature")] = 0.0,
    seed: Annotated[
        int | None, typer.Option("--seed", help="Sent to the endpoint and recorded with every label.")
    ] = None,
    max_concurrency: Annotated[int, typer.Option("--max-concurrency", help="Requests in flight at once.")] = 4,
    structured: Annotated[
        Structured,
        typer.Option(
            "--structured",
            help="Constrained output: json_schema "
            "(OpenAI, vLLM), json_object with a schema (llama-cpp-python), none (the "
            "prompt's answer format is parsed); auto tries them in that order.",
        ),
    ] = Structured.auto,
    max_tokens: Annotated[int, typer.Option("--max-tokens")] = 200,
    timeout: Annotated[float, typer.Option("--timeout", help="Seconds per request.")] = 60.0,
    price_in: Annotated[
        float | None, typer.Option("--price-in", help="US dollars per million input tokens (the cost ledger).")
    ] = None,
    price_out: Annotated[
        float | None, typer.Option("--price-out", help="US dollars per million output tokens (the cost ledger).")
    ] = None,
    replace: Annotated[bool, typer.Option("--replace", help="Change an existing judge (its labels are kept).")] = False,
    fmt: Annotated[OutputFormat, typer.Option("--format")] = OutputFormat.table,
) -> None:
    """Define an LLM judge."""
    from evalstore.services.judges import registry
    from evalstore.services.plain import plain

    judge = registry.add_judge(
        state(ctx).engine(),
        name,
        endpoint=endpoint,
        model=model,
        api_key_env=api_key_env,
        prompt=prompt,
        scale=scale,
        temperature=temperature,
        seed=seed,
        max_concurrency=max_concurrency,
        structured=structured.value,
        max_tokens=max_tokens,
        timeout=timeout,
        price_in=price_in,
        price_out=price_out,
        replace=replace,
    )
    render_record(_flat(plain(judge)), fmt, title=f"judge {name}")


def _flat(judge: dict[str, Any]) -> dict[str, Any]:
    return {k: (json.dumps(v) if isinstance(v, dict | list) else v) for k, v in judge.items()}


@app.command("list")
def list_(ctx: typer.Context, fmt: Annotated[OutputFormat, typer.Option("--format")] = OutputFormat.table) -> None:
    """Every judge with its model and how many labels it has made under its configuration."""
    from evalstore.services.judges import registry
    from evalstore.services.plain import plain

    rows = [
        plain(j) | {"pools": ", ".join(j.labels), "labelled": sum(v.labels for v in j.labels.values())}
        for j in registry.list_judges(state(ctx).engine())
    ]
    render(
        rows, ["name", "model", "endpoint", "prompt", "temperature", "seed", "pools", "labelled"], fmt, title="judges"
    )


@app.command("show")
def show(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument()],
    fmt: Annotated[OutputFormat, typer.Option("--format")] = OutputFormat.table,
) -> None:
    """A judge's configuration, labels per pool and probe results."""
    from evalstore.services.judges import registry
    from evalstore.services.plain import plain

    judge = plain(registry.show_judge(state(ctx).engine(), name))
    render_record(judge if fmt is OutputFormat.json else _flat(judge), fmt, title=f"judge {name}")


@app.command("run")
def run(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument()],
    pool: Annotated[str, typer.Option("--pool")],
    topics: Annotated[list[str] | None, typer.Option("--topics", help="Judge these topics only (repeat).")] = None,
    limit: Annotated[int | None, typer.Option("--limit", help="Judge at most this many documents now.")] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Estimate the calls, tokens, money and time; send nothing.")
    ] = False,
    max_cost: Annotated[
        float | None,
        typer.Option("--max-cost", help="Stop sending at this many US dollars (the judge's prices); the rest waits."),
    ] = None,
    repeats: Annotated[
        int,
        typer.Option("--repeats", help="Ask each document this many times; the repeats give self-consistency."),
    ] = 1,
    fmt: Annotated[OutputFormat, typer.Option("--format")] = OutputFormat.table,
) -> None:
    """Judge the pool's documents this judge has not rated yet (resumable: run it again to go on)."""
    from evalstore.services.judges import running
    from evalstore.services.plain import plain

    if dry_run:
        estimate = running.estimate_run(state(ctx).engine(), name, pool_name=pool, topics=topics or None, limit=limit)
        render_record(plain(estimate), fmt, title=f"judge {name} on {pool}: estimate (nothing sent)")
        if estimate.estimate.cost_usd is None:
            info("the judge declares no prices: no money estimated (judges add --replace --price-in --price-out)")
        return
    with step_progress(f"judging {pool}") as advance:
        result = running.run_judge(
            state(ctx).engine(),
            name,
            pool_name=pool,
            topics=topics or None,
            limit=limit,
            max_cost=max_cost,
            repeats=repeats,
            progress=advance,
        )
    whole = result.as_dict()
    row = {k: v for k, v in whole.items() if k not in ("failed", "skipped")} | {
        "reasons": json.dumps(result.reasons),
        "self_consistency": json.dumps(result.self_consistency),
        "failed": len(result.failed),
        "skipped": len(result.skipped),
    }
    render_record(row if fmt is not OutputFormat.json else whole, fmt, title=f"judge {name} on {pool}")
    for item in result.failed:
        info(f"unrateable: topic {item['topic']}, document {item['doc']}: {item['reason']}")
    if result.unrateable:
        info(f"{result.unrateable} documents are unrateable (stored with the reason; run again to ask again).")
    if result.skipped:
        info(
            f"the budget of {max_cost:g} USD was reached: {len(result.skipped)} documents were not sent "
            f"(first: topic {result.skipped[0]['topic']}, document {result.skipped[0]['doc']}); run again to go on."
        )


@app.command("probe")
def probe(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument()],
    collection: Annotated[str, typer.Option("--collection")],
    qrels: Annotated[str, typer.Option("--qrels")],
    topic_set: Annotated[
        str | None, typer.Option("--topic-set", help="The topic statements (default: the only one).")
    ] = None,
    topics: Annotated[list[str] | None, typer.Option("--topics")] = None,
    limit: Annotated[int, typer.Option("--limit", help="Documents to probe with (each judged three times).")] = 20,
    seed: Annotated[int, typer.Option("--seed", help="Draws the documents.")] = 0,
    fmt: Annotated[CompareFormat, typer.Option("--format")] = CompareFormat.table,
) -> None:
    """How many labels rise when the query's words, an instruction, or a quoted final score are
    inserted into documents."""
    from evalstore.services.judges import probe as probing
    from evalstore.services.plain import plain

    with step_progress("probing") as advance:
        probed = probing.probe(
            state(ctx).engine(),
            name,
            collection=collection,
            qrels_name=qrels,
            topic_set=topic_set,
            topics=topics or None,
            limit=limit,
            seed=seed,
            progress=advance,
        )
    result = plain(probed)
    if fmt is CompareFormat.json:
        sys.stdout.write(json.dumps(result, indent=2) + "\n")
        return
    render(
        [{"attack": attack, **result[attack]} for attack in probing.ATTACKS],
        ["attack", "compared", "rose", "same", "fell", "share_rose", "mean_change", "unrateable"],
        OutputFormat.table,
        title=f"probe of {name}: {result['documents']} documents",
    )


class PreferenceKind(StrEnum):
    ranking = "ranking"
    answers = "answers"


def _names(values: list[str] | None) -> list[str]:
    """Names given repeated or separated by commas (--runs A,B --runs C)."""
    return [n.strip() for v in values or [] for n in v.split(",") if n.strip()]


@app.command("prefer")
def prefer(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument()],
    runs: Annotated[list[str], typer.Option("--runs", help="The runs to compare: A,B,C or repeated (2 to 20).")],
    kind: Annotated[
        PreferenceKind,
        typer.Option("--kind", help="ranking: the runs' top documents; answers: answer runs' answers."),
    ] = PreferenceKind.ranking,
    top_k: Annotated[int, typer.Option("--top-k", help="A ranking's top documents the judge reads (1-20).")] = 10,
    collection: Annotated[str | None, typer.Option("--collection", help="The documents' texts (rankings).")] = None,
    topic_set: Annotated[
        str | None, typer.Option("--topic-set", help="The topic statements (rankings; default: the only one).")
    ] = None,
    topics: Annotated[list[str] | None, typer.Option("--topics", help="These topics only (repeat).")] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Estimate the calls, tokens, money and time; send nothing.")
    ] = False,
    max_cost: Annotated[
        float | None,
        typer.Option("--max-cost", help="Stop sending at this many US dollars (the judge's prices); the rest waits."),
    ] = None,
    fmt: Annotated[OutputFormat, typer.Option("--format")] = OutputFormat.table,
) -> None:
    """Ask the judge which of two runs serves each topic better, for every pair of the runs, in
    both orders (resumable: run it again to go on)."""
    from evalstore.services.judges import preferences
    from evalstore.services.plain import plain

    arguments: dict[str, Any] = {
        "kind": kind.value,
        "depth": top_k,
        "topics": topics or None,
        "collection": collection,
        "topic_set": topic_set,
    }
    if kind is PreferenceKind.ranking and collection is None:
        raise typer.BadParameter("name the collection whose texts the judge reads", param_hint="--collection")
    chosen = _names(runs)
    if dry_run:
        estimate = preferences.estimate_preferences(state(ctx).engine(), name, chosen, **arguments)
        figures = plain(estimate)
        shown = figures if fmt is OutputFormat.json else figures | {"runs": ", ".join(estimate.runs)}
        render_record(shown, fmt, title=f"judge {name}: preferences estimate (nothing sent)")
        if estimate.estimate.cost_usd is None:
            info("the judge declares no prices: no money estimated (judges add --replace --price-in --price-out)")
        return
    with step_progress("comparing") as advance:
        result = preferences.prefer(state(ctx).engine(), name, chosen, max_cost=max_cost, progress=advance, **arguments)
    whole = result.as_dict()
    row = {k: v for k, v in whole.items() if k not in ("failed", "skipped")} | {
        "runs": ", ".join(result.runs),
        "failed": len(result.failed),
        "skipped": len(result.skipped),
    }
    render_record(whole if fmt is OutputFormat.json else row, fmt, title=f"judge {name}: preferences")
    for item in result.failed:
        info(f"unanswered: topic {item['topic']}, {item['first']} then {item['second']}: {item['reason']}")
    for item in result.skipped:
        info(f"skipped: topic {item['topic']}, {item['first']} then {item['second']}: {item['reason']}")
    if result.failed or result.skipped:
        info("run again to ask what was not answered")


# --- qrels build | versions ---------------------------------------------------------------------


def qrels_build(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="The lineage; its versions are stored as qrels NAME@v1, NAME@v2, ...")],
    pool: Annotated[str, typer.Option("--pool")],
    source: Annotated[
        str,
        typer.Option(
            "--from",
            help="human, judge:NAME, hybrid[:NAME] (human labels where there are, the judge's elsewhere), "
            "or ensemble:A,B,... (judges combined by --rule).",
        ),
    ] = "human",
    rule: Annotated[
        str, typer.Option("--rule", help="An ensemble's grade: majority (ties to the lowest), mean or median.")
    ] = "majority",
    fmt: Annotated[OutputFormat, typer.Option("--format")] = OutputFormat.table,
) -> None:
    """Build an immutable, content-hashed qrels version from a pool's labels; the tasks on this
    lineage move to it and their runs are queued for re-evaluation."""
    from evalstore.services.judges import versions
    from evalstore.services.plain import plain

    built = versions.build_version(state(ctx).engine(), name, pool_name=pool, source=source, rule=rule)
    if not built.created:
        info(f"{built.qrels} has this content already; no new version.")
    for queued in built.queued:
        info(f"queued run '{queued.run}' of task '{queued.task}' on {built.qrels} (job {queued.job})")
    for task, moved in built.moved.items():
        info(
            f"task '{task}' moved from {moved.previous} to {built.qrels}; once its runs are evaluated, "
            f"'evalstore judgments compare --qrels {moved.previous} --qrels {built.qrels}' shows what changed"
        )
    whole = plain(built)
    brief = {k: v for k, v in whole.items() if k not in ("queued", "moved")}
    shown = whole if fmt is OutputFormat.json else _flat(brief)
    render_record(shown, fmt, title=f"qrels {built.qrels}")


def qrels_versions(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument()],
    fmt: Annotated[OutputFormat, typer.Option("--format")] = OutputFormat.table,
) -> None:
    """A lineage of qrels versions: pool, sources, counts, hash and parent of each."""
    from evalstore.services.judges import versions
    from evalstore.services.plain import plain

    rows = [
        plain(v)
        | {
            "hash": v.content_hash[:12],
            "counts": json.dumps(v.counts),
            # a table shows the judge's probe as a line; JSON and CSV give its figures
            "probe": v.probe_text or "-"
            if fmt is OutputFormat.table
            else (v.probe if fmt is OutputFormat.json else json.dumps(v.probe)),
        }
        for v in versions.list_versions(state(ctx).engine(), name)
    ]
    render(
        rows,
        ["version", "qrels", "pool", "from", "counts", "hash", "parent", "created_at", "probe"],
        fmt,
        title=f"versions of {name}",
    )


# --- judgments compare | provenance -------------------------------------------------------------


def judgments_compare(
    ctx: typer.Context,
    qrels: Annotated[
        list[str],
        typer.Option(
            "--qrels",
            help="Twice: the reference (e.g. human) first, then the other. A lineage's name means its newest version.",
        ),
    ],
    measures: Annotated[list[str] | None, typer.Option("--measure", help="Repeat (default: nDCG@10 and AP).")] = None,
    runs: Annotated[
        list[str] | None,
        typer.Option("--run", "--runs", help="Stored runs as the systems (repeat; default: every stored run)."),
    ] = None,
    run_files: Annotated[
        list[Path] | None,
        typer.Option("--run-file", help="A run file as a system, named by its file (repeat); nothing is stored."),
    ] = None,
    runs_dir: Annotated[
        Path | None, typer.Option("--runs-dir", help="Every file in this folder is a run file (as --run-file).")
    ] = None,
    relevant_from: Annotated[
        int, typer.Option("--relevant-from", help="The grade from which a label is relevant, for the set figures.")
    ] = 1,
    top_k: Annotated[int, typer.Option("--top-k", help="tau@k and swaps are over the reference's top k systems.")] = 5,
    test: Annotated[str, typer.Option("--test", help="t, wilcoxon or sign.")] = "t",
    correction: Annotated[
        str, typer.Option("--correction", help="Of the p-values over all pairs: holm, bonferroni, bh, ..., none.")
    ] = "holm",
    alpha: Annotated[float, typer.Option("--alpha")] = 0.05,
    confidence: Annotated[
        float, typer.Option("--confidence", help="Of the prediction-powered intervals (B an LLM's, A people's).")
    ] = 0.95,
    fmt: Annotated[CompareFormat, typer.Option("--format")] = CompareFormat.table,
) -> None:
    """How far two qrels agree: labels (kappa, weighted kappa, Krippendorff's alpha, confusion,
    over-labelling, the relevant sets' precision, recall, F1, Jaccard and kappa), system order
    (Kendall's tau-b, Spearman, Pearson, tau-AP, tau_AP_b, tau@k, mean per-topic tau, swaps) and
    significance decisions (kept, reversed, lost); and each system's prediction-powered mean and
    interval (B's scores on every topic it judges, corrected by A's on the topics both judge)."""
    from evalstore.services.judges import compare

    if len(qrels) != 2:
        raise typer.BadParameter(f"give --qrels twice (A then B); got {len(qrels)}", param_hint="--qrels")
    files = list(run_files or [])
    if runs_dir is not None:
        if not runs_dir.is_dir():
            raise typer.BadParameter(f"{runs_dir} is not a folder", param_hint="--runs-dir")
        files += sorted(p for p in runs_dir.iterdir() if p.is_file() and not p.name.startswith("."))
    for path in files:
        if not path.is_file():
            raise typer.BadParameter(f"{path} is not a file", param_hint="--run-file")
    report = compare.compare(
        state(ctx).engine(),
        qrels[0],
        qrels[1],
        measures=measures or None,
        runs=runs or None,
        run_files=files or None,
        top_k=top_k,
        test=test,
        alpha=alpha,
        correction=correction,
        relevant_from=relevant_from,
        confidence=confidence,
    )
    if fmt is CompareFormat.json:
        sys.stdout.write(json.dumps(report, indent=2, default=str) + "\n")
        return
    _compare_tables(report)


def _number(value: Any) -> str:
    return "-" if value is None else f"{value:.4f}" if isinstance(value, float) else str(value)


LABEL_FIGURES = (
    ("items", "pairs judged in both"),
    ("observed", "observed agreement"),
    ("kappa", "Cohen's kappa"),
    ("weighted_kappa", "Cohen's kappa, linear weights"),
    ("quadratic_kappa", "Cohen's kappa, quadratic weights"),
    ("krippendorff_alpha", "Krippendorff's alpha (ordinal)"),
    ("krippendorff_alpha_nominal", "Krippendorff's alpha (nominal)"),
    ("mean_difference", "mean label difference (B - A)"),
    ("over_labelling", "over-labelling (share B above A)"),
    ("under_labelling", "under-labelling (share B below A)"),
)
SET_FIGURES = (
    ("relevant_first", "relevant under A"),
    ("relevant_second", "relevant under B"),
    ("relevant_both", "relevant under both"),
    ("precision", "precision of B's relevant set"),
    ("recall", "recall of A's relevant set"),
    ("f1", "F1"),
    ("jaccard", "Jaccard"),
    ("kappa", "Cohen's kappa (binary)"),
)
SYSTEM_FIGURES = (
    ("systems", "systems"),
    ("kendall_tau", "Kendall's tau-b"),
    ("spearman", "Spearman's rho"),
    ("pearson", "Pearson's r"),
    ("tau_ap", "tau-AP (A as reference)"),
    ("tau_ap_b", "tau_AP_b (ties, both directions)"),
    ("tau_at_k", "tau@k (A's top k)"),
    ("top_k", "k"),
    ("top_k_swaps", "swaps among A's top k"),
    ("per_topic_tau", "mean per-topic tau-b"),
    ("per_topic_topics", "topics in that mean"),
    ("per_topic_undefined", "topics with all systems tied"),
)
SIGNIFICANCE_FIGURES = (
    ("pairs", "system pairs"),
    ("significant_first", "significant under A"),
    ("significant_second", "significant under B"),
    ("preserved", "kept"),
    ("share_preserved", "share kept"),
    ("reversed", "reversed"),
    ("share_reversed", "share reversed"),
    ("lost", "lost"),
    ("share_lost", "share lost"),
    ("gained", "significant under B only"),
)


def _compare_tables(report: "AgreementReport") -> None:
    labels = report["labels"]
    docs = report["documents"]
    relevant = labels["relevant"]
    rows = [{"level": "labels", "statistic": title, "value": _number(labels[k])} for k, title in LABEL_FIGURES]
    rows += [
        {
            "level": f"relevant sets (grade >= {relevant['relevant_from']})",
            "statistic": title,
            "value": _number(relevant[k]),
        }
        for k, title in SET_FIGURES
    ]
    for measure, systems in report["systems"].items():
        rows += [
            {"level": f"systems ({measure})", "statistic": title, "value": _number(systems[k])}
            for k, title in SYSTEM_FIGURES
        ]
        significance = report["significance"][measure]
        level = (
            f"significance ({measure}, {significance['test']} test, {significance['correction']}, "
            f"alpha {significance['alpha']:g})"
        )
        rows += [
            {"level": level, "statistic": title, "value": _number(significance[k])} for k, title in SIGNIFICANCE_FIGURES
        ]
    resolved = report.get("qrels", {})
    first = resolved.get("first", report["first"])
    second = resolved.get("second", report["second"])
    render(
        rows,
        ["level", "statistic", "value"],
        OutputFormat.table,
        title=f"B = {second} against A = {first}: {docs['both']} documents judged in both, "
        f"{len(report['topics'])} topics",
    )
    names = [str(v) for v in labels["labels"]]
    confusion = [
        {"first \\ second": name, **{n: str(c) for n, c in zip(names, row, strict=True)}}
        for name, row in zip(names, labels["confusion"], strict=True)
    ]
    render(
        confusion, ["first \\ second", *names], OutputFormat.table, title="confusion (rows: A's label, columns: B's)"
    )
    render(
        [{k: _number(v) for k, v in t.items()} for t in labels["per_topic"]],
        ["topic", "items", "observed", "kappa", "mean_difference"],
        OutputFormat.table,
        title="per topic",
    )
    for measure, intervals in report.get("ppi", {}).items():
        any_run = next(iter(intervals.values()))
        render(
            [
                {"run": run, **{k: _number(v) for k, v in i.items()}}
                for run, i in sorted(intervals.items(), key=lambda item: -item[1]["mean"])
            ],
            ["run", "llm_mean", "correction", "mean", "low", "high", "half_width", "human_mean", "human_half_width"],
            OutputFormat.table,
            title=f"{measure}: prediction-powered means, {any_run['confidence']:.0%} intervals "
            f"(B on {any_run['llm_topics']} topics, corrected by A on {any_run['human_topics']})",
        )
    if report.get("ppi"):
        info(
            "the prediction-powered half-widths count the covariance of the topics both judge (they are "
            "among B's); --format json gives half_width_independent too, the formula for separate topics"
        )
    if report.get("note"):
        info(report["note"])
    for qrels, behind in report.get("judges", {}).items():
        info(f"labels of '{qrels}' are from {behind['from']} (model {behind['model']}); probe: {behind['probe_text']}")
    for qrels, runs in report["circular"].items():
        for run, models in runs.items():
            info(
                f"circularity: run '{run}' declares {', '.join(models)}, the model that made the labels of "
                f"'{qrels}'; its scores there favour it"
            )


def judgments_provenance(
    ctx: typer.Context,
    pool: Annotated[str, typer.Option("--pool")],
    topic: Annotated[str | None, typer.Option("--topic")] = None,
    doc: Annotated[str | None, typer.Option("--doc")] = None,
    judge: Annotated[str | None, typer.Option("--judge", help="This judge's labels only.")] = None,
    fmt: Annotated[OutputFormat, typer.Option("--format")] = OutputFormat.table,
) -> None:
    """Every label of a pool's documents with who made it, when, and how (a judge's configuration,
    raw answer and explanation; the reason when unrateable)."""
    from evalstore.services.judges import provenance
    from evalstore.services.plain import plain

    rows = plain(provenance.label_provenance(state(ctx).engine(), pool, topic=topic, doc=doc, judge=judge))
    if fmt is OutputFormat.table:
        rows = [
            r | {"model": r["provenance"].get("model"), "prompt_hash": (r["provenance"].get("prompt_hash") or "")[:12]}
            for r in rows
        ]
    render(
        rows,
        ["topic", "doc", "by", "who", "relevance", "reason", "model", "prompt_hash", "at", "explanation"]
        if fmt is OutputFormat.table
        else ["topic", "doc", "by", "who", "relevance", "reason", "at", "explanation", "raw_output", "provenance"],
        fmt,
        title=f"labels of pool {pool}",
    )


def judgments_suggestions(
    ctx: typer.Context,
    pool: Annotated[str, typer.Option("--pool")],
    fmt: Annotated[CompareFormat, typer.Option("--format")] = CompareFormat.table,
) -> None:
    """Assessors' labels against the judge's suggestions the judging page showed them, over those
    judgments only; beside it, against the same judge where no suggestion was shown."""
    from evalstore.services.judges import suggestions
    from evalstore.services.plain import plain

    report = plain(suggestions.suggestion_agreement(state(ctx).engine(), pool))
    if fmt is CompareFormat.json:
        sys.stdout.write(json.dumps(report, indent=2, default=str) + "\n")
        return
    keys = ("items", "observed", "kappa", "weighted_kappa", "krippendorff_alpha", "mean_difference")
    rows = [
        {"judgments": title, **{k: _number(part[k]) if part else "-" for k in keys}}
        for title, part in (("suggestion shown", report["shown"]), ("not shown", report["not_shown"]))
    ]
    render(
        rows,
        ["judgments", *keys],
        OutputFormat.table,
        title=f"pool {pool}: assessors against judge {report['judge'] or '-'}",
    )
    render(
        [{k: _number(v) for k, v in a.items()} for a in report["assessors"]],
        ["assessor", "shown", "followed", "share_followed"],
        OutputFormat.table,
        title="per assessor: suggestions shown and followed",
    )


def judgments_preferences(
    ctx: typer.Context,
    judge: Annotated[str, typer.Argument(help="The judge whose pairwise preferences to read.")],
    kind: Annotated[PreferenceKind, typer.Option("--kind")] = PreferenceKind.ranking,
    top_k: Annotated[int, typer.Option("--top-k", help="As `judges prefer` was given (rankings).")] = 10,
    runs: Annotated[list[str] | None, typer.Option("--runs", help="These runs only: A,B,C or repeated.")] = None,
    topics: Annotated[list[str] | None, typer.Option("--topics", help="These topics only (repeat).")] = None,
    bootstrap: Annotated[
        int, typer.Option("--bootstrap", help="Samples of topics drawn for the ratings' intervals.")
    ] = 1000,
    seed: Annotated[int, typer.Option("--seed", help="Draws the bootstrap samples (recorded in the output).")] = 0,
    confidence: Annotated[float, typer.Option("--confidence")] = 0.95,
    fmt: Annotated[OutputFormat, typer.Option("--format")] = OutputFormat.table,
) -> None:
    """A judge's pairwise preferences as Bradley-Terry ratings with bootstrap intervals over
    topics, and how often each run beats each other one (ties: the judge said so, or its two
    orders disagreed); with the judge's position-bias rate."""
    from evalstore.services.judges import preferences

    report = preferences.preference_report(
        state(ctx).engine(),
        judge,
        kind=kind.value,
        depth=top_k,
        runs=_names(runs) or None,
        topics=topics or None,
        samples=bootstrap,
        seed=seed,
        confidence=confidence,
    )
    if fmt is OutputFormat.json:
        sys.stdout.write(json.dumps(report.as_dict(), indent=2) + "\n")
        return
    rates = {(p.row, p.column): p for p in report.table}
    rows = []
    for rank, r in enumerate(report.ratings, start=1):
        row: dict[str, Any] = {
            "rank": rank,
            "run": r.run,
            "rating": _number(r.rating),
            "low": _number(r.low),
            "high": _number(r.high),
            "wins": r.wins,
            "ties": r.ties,
            "losses": r.losses,
        }
        for other in report.runs:
            rate = rates.get((r.run, other))
            if fmt is OutputFormat.csv:
                row[other] = "" if rate is None else f"{rate.share:.4f}"
            else:
                row[other] = "-" if rate is None else f"{rate.share:.2f} ({rate.wins}/{rate.ties}/{rate.losses})"
        rows.append(row)
    what = f"top {report.depth} rankings" if report.kind == "ranking" else "answers"
    render(
        rows,
        ["rank", "run", "rating", "low", "high", "wins", "ties", "losses", *report.runs],
        fmt,
        title=f"judge {report.judge}: {what} preferred, {report.compared} pairs on {report.topics} topics; "
        f"Bradley-Terry ratings, {report.confidence:.0%} bootstrap intervals ({report.samples} samples, "
        f"seed {report.seed}); row beats column: share (wins/ties/losses)",
    )
    if fmt is OutputFormat.table:
        bias = "-" if report.position_bias_rate is None else f"{report.position_bias_rate:.1%}"
        first = "-" if report.first_chosen_rate is None else f"{report.first_chosen_rate:.1%}"
        info(
            f"position bias: {report.position_biased} of {report.compared} pairs ({bias}) got the same position "
            f"both times; the first shown was chosen in {first} of the answers that chose; "
            f"{report.inconsistent} pairs judged differently in the two orders count as ties, "
            f"{report.stated_ties} were called equal both times; {report.incomplete} pairs with one order "
            "unanswered are left out"
        )


def register(
    root: typer.Typer, qrels_app: typer.Typer, judgments_app: typer.Typer, *, panel: str | None = None
) -> None:
    """Add these commands to the root app (in its help's ``panel``) and the `qrels` and
    `judgments` apps."""
    root.add_typer(app, name="judges", rich_help_panel=panel)
    qrels_app.command("build")(qrels_build)
    qrels_app.command("versions")(qrels_versions)
    judgments_app.command("compare")(judgments_compare)
    judgments_app.command("provenance")(judgments_provenance)
    judgments_app.command("suggestions")(judgments_suggestions)
    judgments_app.command("preferences")(judgments_preferences)
