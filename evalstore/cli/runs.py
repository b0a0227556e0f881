"""`evalstore runs`: register, list, show, export and delete system runs."""

from collections.abc import Callable
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, BinaryIO

import typer

from evalstore.cli._context import state
from evalstore.cli._errors import usage_conflict
from evalstore.cli._output import OutputFormat, info, render, render_record, warn, write_output
from evalstore.cli._progress import storing

if TYPE_CHECKING:
    from sqlalchemy import Engine

    from evalstore.services.store import Registered

app = typer.Typer(help="Register and manage system runs.", no_args_is_help=True)

LIST_COLUMNS = ["name", "system", "tag", "rows", "topics", "created_at"]


class InputFormat(StrEnum):
    trec = "trec"
    csv = "csv"
    tsv = "tsv"
    parquet = "parquet"


def parse_meta(values: list[str]) -> dict[str, str]:
    meta: dict[str, str] = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise typer.BadParameter(f"'{item}' is not KEY=VALUE", param_hint="--meta")
        meta[key] = value
    return meta


@app.command()
def register(
    ctx: typer.Context,
    paths: Annotated[
        list[Path],
        typer.Argument(
            help="TREC runs (qid Q0 docno rank score tag; .gz too), CSV, TSV or Parquet: "
            "one file or many (RUN_DIR/*.gz)."
        ),
    ],
    name: Annotated[
        str | None,
        typer.Option(
            "--name",
            help="Name of the run in the store (one file; default: from "
            "the file name, or the run tag with --name-from tag).",
        ),
    ] = None,
    name_from: Annotated[
        str,
        typer.Option(
            "--name-from",
            help="Without --name: file (input.bm25.gz -> bm25) or tag (the run tag in the file's last column).",
        ),
    ] = "file",
    system: Annotated[str | None, typer.Option("--system", help="The system that produced the run.")] = None,
    meta: Annotated[list[str], typer.Option("--meta", help="Metadata KEY=VALUE (repeatable).")] = [],
    description: Annotated[str | None, typer.Option("--description")] = None,
    replace: Annotated[bool, typer.Option("--replace", help="Replace a run of this name with other content.")] = False,
    fmt: Annotated[
        InputFormat | None, typer.Option("--format", help="Input format (default: from the file name).")
    ] = None,
    server: Annotated[
        str | None,
        typer.Option(
            "--server",
            envvar="EVALSTORE_SERVER",
            help="Submit to an evalstore server (http://HOST:PORT) instead of the database; needs --task and --token.",
        ),
    ] = None,
    token: Annotated[
        str | None, typer.Option("--token", envvar="EVALSTORE_TOKEN", help="Your API token (with --server).")
    ] = None,
    task: Annotated[
        str | None,
        typer.Option(
            "--task",
            help="With --server: the shared task to submit to (without "
            "it, an admin's token stores the run outside any task).",
        ),
    ] = None,
    run_type: Annotated[str, typer.Option("--run-type", help="With --server: automatic or manual.")] = "automatic",
    backend: Annotated[
        str,
        typer.Option(
            "--backend",
            help="local (default): the file is read into memory; duckdb: "
            "a run larger than memory (one file) is parsed, checked and ranked by DuckDB and "
            "stored batch by batch.",
        ),
    ] = "local",
    memory_limit: Annotated[
        str, typer.Option("--memory-limit", help="--backend duckdb: DuckDB's memory limit.")
    ] = "2GB",
) -> None:
    """Validate run files and store them, each whole or not at all. With several files every one
    is validated before any is stored: a bad file stores nothing and each bad file is named.
    With --server: send one file over HTTP; the server validates and stores it the same way (with
    --task, as the team's submission, its evaluation queued)."""
    from evalstore.services import store

    if server is not None or task is not None:
        _submit(
            ctx, paths, name=name, server=server, token=token, task=task, run_type=run_type, description=description
        )
        return
    if name is not None and len(paths) > 1:
        raise usage_conflict(
            ctx,
            f"--name names one run; {len(paths)} files were given (their names come from "
            "the file names, or the run tags with --name-from tag).",
        )
    metadata = parse_meta(meta)
    engine = state(ctx).engine()
    if backend != "local":
        if len(paths) > 1:
            raise usage_conflict(ctx, f"--backend {backend} registers one file at a time; {len(paths)} were given.")
        _register_out_of_core(
            engine,
            paths[0],
            name=name or store.name_from_file(paths[0]),
            system=system,
            metadata=metadata,
            description=description,
            replace=replace,
            backend=backend,
            memory_limit=memory_limit,
        )
        return

    def register_all(
        on_file: Callable[[int, str], None] | None, rows: Callable[[int], None] | None
    ) -> list[store.Registered]:
        return store.register_runs(
            engine,
            paths,
            names=[name] if name is not None else None,
            name_from=name_from,
            system=system,
            metadata=metadata,
            description=description,
            replace=replace,
            fmt=fmt.value if fmt else None,
            on_file=on_file,
            progress=rows,
        )

    for result in storing(paths, register_all):
        _report(result)


def _report(result: "Registered") -> None:
    for message in result.warnings:
        warn(message)
    s = result.summary
    if result.created:
        info(f"registered run '{s.name}': {s.rows} rows, {s.topics} topics")
    else:
        info(f"run '{s.name}' is already registered with this content ({s.rows} rows); nothing stored")


def _register_out_of_core(
    engine: "Engine",
    path: Path,
    *,
    name: str,
    system: str | None,
    metadata: dict[str, str],
    description: str | None,
    replace: bool,
    backend: str,
    memory_limit: str,
) -> None:
    from evalstore.backends.duckdb_engine import DuckDBSettings
    from evalstore.services import store

    _report(
        store.register_run(
            engine,
            path,
            name=name,
            system=system,
            metadata=metadata,
            description=description,
            replace=replace,
            backend=backend,
            duckdb_settings=DuckDBSettings(memory_limit),
        )
    )


@app.command("list")
def list_(
    ctx: typer.Context,
    meta: Annotated[
        list[str],
        typer.Option(
            "--meta",
            help="Only runs with this metadata KEY=VALUE (repeatable): a "
            "--meta pair, or a dotted key of the run file's ir_metadata block "
            "(platform.software.libraries=pyterrier).",
        ),
    ] = [],
    fmt: Annotated[OutputFormat, typer.Option("--format")] = OutputFormat.table,
) -> None:
    """List the registered runs."""
    from evalstore.services import store

    rows = [s.as_dict() for s in store.list_runs(state(ctx).engine(), meta=parse_meta(meta))]
    render(rows, LIST_COLUMNS, fmt, title="runs")


@app.command()
def show(
    ctx: typer.Context, name: str, fmt: Annotated[OutputFormat, typer.Option("--format")] = OutputFormat.table
) -> None:
    """Show one run."""
    from evalstore.services import store

    render_record(store.show_run(state(ctx).engine(), name).as_dict(), fmt, title=name)


@app.command()
def delete(ctx: typer.Context, name: str) -> None:
    """Delete a run and everything computed from it."""
    from evalstore.services import store

    summary = store.delete_run(state(ctx).engine(), name)
    info(f"deleted run '{summary.name}' ({summary.rows} rows)")


@app.command()
def export(
    ctx: typer.Context,
    name: str,
    output: Annotated[Path | None, typer.Option("--output", "-o", help="File to write (default: stdout).")] = None,
    fmt: Annotated[InputFormat, typer.Option("--format")] = InputFormat.trec,
) -> None:
    """Write a run back out, rows in their original order (TREC by default), after the file's
    ir_metadata block when it had one (TREC only)."""
    from evalstore.io.ir_metadata import METADATA_KEY as IR_METADATA
    from evalstore.io.writers import write_run
    from evalstore.services import store

    summary, table = store.run_rows(state(ctx).engine(), name)
    tag = summary.details.get("tag") or summary.name
    block = summary.details["metadata"].get(IR_METADATA) if fmt is InputFormat.trec else None

    def write(handle: BinaryIO) -> None:
        if isinstance(block, str):  # the file's ir_metadata block, as it was (a TREC run: comment lines)
            handle.write(block.encode("utf-8"))
        write_run(table, handle, fmt.value, tag=tag)

    write_output(output, write)


def _submit(
    ctx: typer.Context,
    paths: list[Path],
    *,
    name: str | None,
    server: str | None,
    token: str | None,
    task: str | None,
    run_type: str,
    description: str | None,
) -> None:
    from evalstore.client import Client
    from evalstore.services.store import name_from_file

    missing = [option for option, value in (("--server", server), ("--token", token)) if not value]
    if missing:
        raise usage_conflict(
            ctx,
            f"Sending a run to a server needs --server and --token; {missing[0]} is missing "
            "(--token may come from $EVALSTORE_TOKEN).",
        )
    if len(paths) != 1:
        raise usage_conflict(ctx, f"A run goes to a server one file at a time; {len(paths)} were given.")
    assert server is not None and token is not None
    name = name or name_from_file(paths[0])
    with Client(server, token) as client:
        if task is None:
            stored = client.register_run(paths[0], name=name, description=description)
            info(
                f"registered run '{stored['run']}' on {server.rstrip('/')}: {stored['rows']} rows, "
                f"{stored['topics']} topics"
            )
            return
        answer = client.submit_run(task, paths[0], name=name, run_type=run_type, description=description)
    for message in answer["warnings"]:
        warn(message)
    info(
        f"submitted run '{answer['run']}' to task '{answer['task']}' for team '{answer['team']}': "
        f"{answer['rows']} rows, {answer['topics']} topics; evaluation job {answer['job']['id']} is "
        f"{answer['job']['state']} ({server.rstrip('/')}{answer['job']['url']})"
    )


@app.command()
def combine(
    ctx: typer.Context,
    splits: Annotated[str, typer.Option("--splits", help="A k-fold, leave-one-out or holdout split of the topics.")],
    fold: Annotated[
        list[str],
        typer.Option(
            "--fold", help="FOLD=RUN: the run trained without that fold's test topics (repeatable, one per fold)."
        ),
    ],
    name: Annotated[str, typer.Option("--name", help="Name of the cross-validated run.")],
) -> None:
    """Store a cross-validated run: each topic's ranking from the run of the fold that tested it.
    A topic tested by two of the folds, or by none, is refused."""
    from evalstore.services import splits as service

    folds: dict[int, str] = {}
    for text in fold:
        number, equals, run = text.partition("=")
        if not equals or not number.strip().isdigit() or not run.strip():
            raise typer.BadParameter(f"'{text}': give a fold as FOLD=RUN, e.g. '1=bm25-fold1'.", param_hint="--fold")
        if int(number) in folds:
            raise typer.BadParameter(f"fold {number} is given twice.", param_hint="--fold")
        folds[int(number)] = run.strip()
    registered = service.combine_runs(state(ctx).engine(), splits=splits, folds=folds, name=name)
    info(
        f"registered run '{name}': {registered.summary.rows} rows, {registered.summary.topics} topics from "
        f"{len(folds)} folds of split '{splits}'"
    )


def _numbers(text: str | None, option: str) -> list[float] | None:
    """``w1,w2,...`` as numbers; a word that is not one is named (one line, exit 1, as the
    library's refusals of a weight's count or sign)."""
    from evalstore.errors import InvalidParameterError

    if text is None:
        return None
    values = []
    for word in text.split(","):
        try:
            values.append(float(word))
        except ValueError:
            raise InvalidParameterError(
                f"{option}: '{word.strip()}' is not a number; give one number per run, separated by commas."
            ) from None
    return values


@app.command()
def fuse(
    ctx: typer.Context,
    runs: Annotated[
        list[str],
        typer.Argument(
            help="The stored runs to fuse (two or more); with --files, run files.", show_default=False, metavar="RUN"
        ),
    ],
    method: Annotated[
        str,
        typer.Option(
            "--method",
            help="rrf, combsum, combmnz, combmax, combmin, combmed, combanz, combgmnz, isr, log_isr, logn_isr, "
            "rbc, wsum, wmnz, mixed, bordafuse, w_bordafuse, condorcet, w_condorcet; trained on judgments "
            "(--train-qrels or --split): probfuse, segfuse, slidefuse, bayesfuse, mapfuse or posfuse (ranx's names "
            "too: sum, mnz, ...).",
        ),
    ],
    name: Annotated[str | None, typer.Option("--name", help="Name of the fused run in the store.")] = None,
    norm: Annotated[
        str,
        typer.Option(
            "--norm",
            help="Each run's scores normalised per topic first: min-max, min-max-inverted, max, sum, zmuv, "
            "rank, borda or none.",
        ),
    ] = "min-max",
    weights: Annotated[
        str | None,
        typer.Option(
            "--weights",
            help="w1,w2,...: one weight per run (wsum, wmnz, mixed, w_bordafuse, w_condorcet; default 1 each).",
        ),
    ] = None,
    k: Annotated[float | None, typer.Option("--k", help="rrf's k (default 60).")] = None,
    phi: Annotated[float | None, typer.Option("--phi", help="rbc's persistence, between 0 and 1.")] = None,
    gamma: Annotated[float | None, typer.Option("--gamma", help="combgmnz's exponent.")] = None,
    sigma: Annotated[float | None, typer.Option("--sigma", help="logn_isr's sigma (default 0.01).")] = None,
    n_segments: Annotated[
        int | None, typer.Option("--n-segments", help="probfuse's number of segments per topic.")
    ] = None,
    w: Annotated[int | None, typer.Option("--w", help="slidefuse's window: w positions each side.")] = None,
    train_qrels: Annotated[
        str | None,
        typer.Option("--train-qrels", help="A trained method's training judgments: stored qrels by name."),
    ] = None,
    train_qrels_file: Annotated[
        Path | None,
        typer.Option("--train-qrels-file", help="With --files: a trained method's training judgments, a qrels file."),
    ] = None,
    depth: Annotated[
        int | None,
        typer.Option("--depth", help="Documents kept per topic, the best fused first (default 1000; 0: all, as ranx)."),
    ] = 1000,
    optimize: Annotated[
        str | None,
        typer.Option(
            "--optimize",
            help="Choose the weights (rrf: k) that give the best mean of this measure on --split's training topics.",
        ),
    ] = None,
    split: Annotated[
        str | None,
        typer.Option("--split", help="With --optimize or a trained method: the split of the topics to train on."),
    ] = None,
    fold: Annotated[
        int | None,
        typer.Option(
            "--fold", help="With --optimize: the split's fold whose training topics are used (a holdout split has one)."
        ),
    ] = None,
    step: Annotated[float, typer.Option("--step", help="With --optimize: the weights' grid step (ranx's).")] = 0.1,
    files: Annotated[bool, typer.Option("--files", help="RUN... are run files, fused into --out (no store).")] = False,
    out: Annotated[Path | None, typer.Option("--out", help="With --files: the fused TREC run file to write.")] = None,
    description: Annotated[str | None, typer.Option("--description")] = None,
    replace: Annotated[bool, typer.Option("--replace", help="Replace a run of this name with other content.")] = False,
) -> None:
    """Fuse runs into one (ranx's fusion methods and normalisations, with ranx's values) and store
    it with its provenance (runs show NAME). With --files, fuse run files into a TREC run file."""
    from evalstore.fusion import METHODS, method_named
    from evalstore.services import fusion

    given = (("k", k), ("phi", phi), ("gamma", gamma), ("sigma", sigma), ("n_segments", n_segments), ("w", w))
    params: dict[str, float] = {key: value for key, value in given if value is not None}
    recipe = fusion.Recipe(method, norm, _numbers(weights, "--weights"), params, depth or None)
    if depth is not None and depth < 0:
        raise typer.BadParameter(f"{depth} documents per topic; give 1 or more, or 0 for all.", param_hint="--depth")
    trained = method_named(method).trained
    if trained and optimize is None:
        training = "--train-qrels-file QRELS" if files else "--train-qrels QRELS or --split SPLIT"
        if (train_qrels_file if files else train_qrels or split) is None:
            raise usage_conflict(ctx, f"{method_named(method).name} is trained on judgments; give {training}.")
        if train_qrels is not None and split is not None:
            raise usage_conflict(ctx, "Train on --train-qrels or on --split, not both.")
    elif not trained and (train_qrels is not None or train_qrels_file is not None):
        names = ", ".join(m.name for m in METHODS.values() if m.trained)
        raise usage_conflict(ctx, f"--train-qrels trains one of {names}; {method} is not trained.")
    if optimize is None and not trained and (split is not None or fold is not None):
        raise usage_conflict(ctx, "--split and --fold choose the weights with --optimize MEASURE; give it too.")
    if optimize is not None and split is None:
        raise usage_conflict(ctx, "--optimize chooses the weights on a split's training topics; give --split SPLIT.")
    if files:
        if out is None:
            raise usage_conflict(ctx, "--files writes the fused run to a file; give --out FILE.")
        if optimize is not None:
            raise usage_conflict(
                ctx, "--optimize needs the store's splits and qrels; fuse stored runs instead of --files."
            )
        if split is not None or train_qrels is not None:
            raise usage_conflict(
                ctx, "With --files a trained method learns from a qrels file; give --train-qrels-file."
            )
        made = fusion.fuse_files(
            [Path(r) for r in runs], recipe, out=out, tag=name or out.stem, train_qrels=train_qrels_file
        )
        for message in made.warnings:
            warn(message)
        info(f"wrote {made.rows} rows, {made.topics} topics to {made.path}")
        return
    if name is None:
        raise usage_conflict(ctx, "Name the fused run with --name (or fuse files with --files --out FILE).")
    if out is not None:
        raise usage_conflict(ctx, "--out is for --files; a fused stored run is exported with 'evalstore runs export'.")
    if train_qrels_file is not None:
        raise usage_conflict(ctx, "--train-qrels-file is for --files; train stored runs with --train-qrels QRELS.")
    result = fusion.fuse_runs(
        state(ctx).engine(),
        runs,
        recipe,
        name=name,
        optimise_for=optimize,
        split=split,
        fold=fold,
        step=step,
        description=description,
        replace=replace,
        train_qrels=train_qrels,
    )
    for message in result.warnings:
        warn(message)
    if result.optimised is not None:
        o = result.optimised
        info(
            f"chose {o.chosen()}: {o.measure} {o.value:.4f} on the {o.topics} "
            f"training topics of split '{o.split}' fold {o.fold} (seed {o.seed}), best of {o.trials} weightings"
        )
    _report(result.registered)
