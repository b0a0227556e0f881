"""`evalstore trec-eval [flags] QRELS RUN [RUN ...]`: many runs against one qrels in one command.

Each run's output is what ``trec_eval [flags] QRELS RUN`` prints for it, the runs' outputs one
after another in the order given, so the output equals a shell loop over trec_eval byte for byte.
What a loop pays once a run is paid once here: the process start-up (numpy, pyarrow, the measures'
registry), reading and indexing the qrels, and the measures' fixed costs, as the rankings of runs of
one depth are stacked and every measure's kernel runs once for all of them
(:mod:`evalstore.metrics.stacked`), in bounded batches of runs.

``--jobs N`` shares the runs among N worker processes forked after the qrels are read (each run
to worker ``index % N``, so the outputs come back nearly in order); their outputs are written in
the order given as they arrive.

Errors: the outputs of the runs before a failing run are written, then its error is raised (as
the loop ``for r in RUNS; do trec_eval QRELS $r || break; done`` stops). Warnings on stderr name
the run they are about.

The -R qrels_jg, prefs and qrels_prefs formats and ``--backend duckdb`` evaluate the runs one after
another with the one-run code (:func:`evalstore.trec_eval.one_run.run_trec_eval`), each reading the
judgments again; ``--jobs`` shares them among processes all the same.
"""

from __future__ import annotations

import io
import os
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO, cast

import numpy as np
import pyarrow as pa

from evalstore.errors import EvalstoreError, EvaluationError, InputFormatError, Remedy
from evalstore.io.formats import ParsedFile, is_gzip_file
from evalstore.metrics import compute, prepare_run_file, read_run_to_evaluate
from evalstore.metrics.preparation import PrepareOptions, Ranking
from evalstore.metrics.registry import Measure
from evalstore.metrics.stacked import STACK_CELLS, compute_stacked
from evalstore.metrics.trec_names import expand, parse_trec_specs
from evalstore.trec_eval.one_run import keep_stand_in_values, read_qrels_to_evaluate, run_trec_eval, summary_value
from evalstore.trec_eval.output import render_lines
from evalstore.trec_eval.zscores import read_zscores, standardize

if TYPE_CHECKING:
    from concurrent.futures import Future, ThreadPoolExecutor
    from multiprocessing.connection import Connection

# the flags the stacked evaluation understands, with the values under which it applies; any other
# flag or value (a judgments format, the duckdb backend, a flag added to run_trec_eval later)
# makes the runs go through run_trec_eval one by one
_STACKED_FLAGS: dict[str, Callable[[Any], bool]] = {
    "measures": lambda _: True,
    "per_query": lambda _: True,
    "complete": lambda _: True,
    "no_summary": lambda _: True,
    "judged_only": lambda _: True,
    "relevance_level": lambda _: True,
    "max_docs": lambda _: True,
    "collection_size": lambda _: True,
    "zscores_path": lambda _: True,
    "rel_format": lambda value: value == "qrels",
    "backend": lambda value: value == "local",
    "duckdb_settings": lambda value: value is None,
}


# a campaign's next run file, up to this size, is read on a thread while the one before is ranked:
# pyarrow parses without the GIL, so on two cores the two overlap (robust03's 17 runs: 0.65 ->
# 0.60-0.61 s); a larger one is read when its turn comes, so that two large runs are not held at
# once. (One run read beside its qrels gained nothing measurable: the two reads contend.)
READ_AHEAD_BYTES = 1 << 26
# a gzipped run counts as this many times its size on disk (TREC runs inflate ~5-8x)
GZIP_INFLATION = 8


def _read_ahead(pool: ThreadPoolExecutor, path: str) -> Future[ParsedFile] | None:
    """``path`` read to be evaluated on ``pool``'s thread, when it is a file of at most
    :data:`READ_AHEAD_BYTES` (anything else is read, and refused, when its turn comes)."""
    try:
        if not os.path.isfile(path):
            return None
        inflation = GZIP_INFLATION if is_gzip_file(Path(path)) else 1
        small = os.stat(path).st_size * inflation <= READ_AHEAD_BYTES
    except OSError:
        return None
    return pool.submit(read_run_to_evaluate, path) if small else None


def run_trec_eval_runs(
    qrels_path: str, run_paths: Sequence[str], *, out: TextIO, warn: Callable[[str], None], jobs: int = 1, **flags: Any
) -> None:
    """trec_eval's output for each of ``run_paths`` against ``qrels_path``, written to ``out`` in
    their order; ``flags`` are :func:`~evalstore.trec_eval.run_trec_eval`'s. One run goes to
    run_trec_eval as it is."""
    if len(run_paths) == 1:
        run_trec_eval(qrels_path, run_paths[0], out=out, warn=warn, **flags)
        return
    stacked = all(name in _STACKED_FLAGS and _STACKED_FLAGS[name](value) for name, value in flags.items())
    campaign: _Campaign = _Stacked.read(qrels_path, **flags) if stacked else _OneByOne(qrels_path, flags)
    for path, outcome in zip(run_paths, _outcomes(campaign, list(run_paths), jobs), strict=True):
        for message in outcome.warnings:
            warn(f"{path}: {message}")
        if outcome.error is not None:
            raise outcome.error.rebuilt()
        out.write(outcome.text)


@dataclass(frozen=True)
class _Failure:
    """An evalstore error, in a form that crosses a process boundary (InputFormatError's
    constructor takes three arguments, so the exception itself does not unpickle)."""

    kind: type[EvalstoreError]
    message: str
    path: str | None = None
    line: int | None = None
    problem: str | None = None
    remedy: Remedy | None = None

    @classmethod
    def of(cls, error: EvalstoreError) -> _Failure:
        if isinstance(error, InputFormatError):
            return cls(InputFormatError, str(error), error.path, error.line, error.problem, error.remedy)
        return cls(type(error), str(error), remedy=error.remedy)

    def rebuilt(self) -> EvalstoreError:
        if self.kind is InputFormatError:
            return InputFormatError(self.path or "", self.line, self.problem or "", remedy=self.remedy)
        try:
            return self.kind(self.message, remedy=self.remedy)
        except TypeError:  # an error class with a constructor of its own
            return EvaluationError(self.message, remedy=self.remedy)


@dataclass
class _Outcome:
    """One run's output text, the warnings about it, or the error that stopped it."""

    text: str = ""
    warnings: list[str] = field(default_factory=list)
    error: _Failure | None = None


class _Campaign:
    def in_worker(self) -> None:
        """Set up for a worker process of ``--jobs`` (the processes are the parallelism)."""

    def outcomes(self, paths: Sequence[str]) -> Iterator[_Outcome]:
        """Each run's outcome, in order, stopping after the first error."""
        raise NotImplementedError


@dataclass
class _OneByOne(_Campaign):
    """The runs evaluated by run_trec_eval one after another (what stacking does not cover)."""

    qrels_path: str
    flags: dict[str, Any]

    def outcomes(self, paths: Sequence[str]) -> Iterator[_Outcome]:
        for path in paths:
            outcome = _Outcome()
            text = io.StringIO()
            try:
                run_trec_eval(self.qrels_path, path, out=text, warn=outcome.warnings.append, **self.flags)
            except EvalstoreError as error:
                outcome.error = _Failure.of(error)
            outcome.text = text.getvalue()
            yield outcome
            if outcome.error is not None:
                return


@dataclass
class _Stacked(_Campaign):
    """Runs against -R qrels judgments in memory: the qrels read once, each batch of runs ranked,
    then evaluated as one stacked ranking, then printed run by run as run_trec_eval prints one."""

    qrels: ParsedFile
    rows: list[tuple[str, str, Measure | None]]
    needed: list[Measure]
    options: PrepareOptions
    per_query: bool
    no_summary: bool
    relevance_level: int
    collection_size: int
    zscores_path: str | None
    zscores: dict[tuple[str, str], tuple[float, float]] | None = None
    batch_cells: int = STACK_CELLS
    threads: int | None = None  # compute's default (several for a large ranking)

    @classmethod
    def read(
        cls,
        qrels_path: str,
        *,
        measures: list[str],
        per_query: bool,
        complete: bool,
        no_summary: bool,
        judged_only: bool,
        relevance_level: int,
        max_docs: int | None,
        collection_size: int,
        zscores_path: str | None = None,
        **_: Any,
    ) -> _Stacked:
        requests = parse_trec_specs(measures or ["official"])  # the measures before the files, as one run
        rows = [(request.root, name, measure) for request in requests for name, measure in expand(request)]
        qrels = read_qrels_to_evaluate(qrels_path)
        return cls(
            qrels=qrels,
            rows=rows,
            needed=list(dict.fromkeys(m for _, _, m in rows if m is not None)),
            options=PrepareOptions(max_docs=max_docs, judged_only=judged_only, complete=complete),
            per_query=per_query,
            no_summary=no_summary,
            relevance_level=relevance_level,
            collection_size=collection_size,
            zscores_path=zscores_path,
        )

    def outcomes(self, paths: Sequence[str]) -> Iterator[_Outcome]:
        from concurrent.futures import ThreadPoolExecutor  # here: it imports logging (~4 ms of one run's start-up)

        with ThreadPoolExecutor(max_workers=1) as pool:
            yield from self._outcomes(paths, pool)

    def _outcomes(self, paths: Sequence[str], pool: ThreadPoolExecutor) -> Iterator[_Outcome]:
        batch: list[tuple[Ranking, str | None]] = []
        cells = 0
        ahead = _read_ahead(pool, paths[0]) if paths else None
        for index, path in enumerate(paths):
            mine, ahead = ahead, _read_ahead(pool, paths[index + 1]) if index + 1 < len(paths) else None
            try:
                rk, run = prepare_run_file(
                    self.qrels.table, path, self.options, mine.result() if mine is not None else None
                )
            except EvalstoreError as error:
                yield from self._evaluated(batch)
                yield _Outcome(error=_Failure.of(error))
                return
            batch.append((rk, run.tag))
            del run  # the ranking holds what the measures need
            cells += rk.n * max(rk.depth, 1)
            if cells >= self.batch_cells:
                done = self._evaluated(batch)
                yield from done
                if done and done[-1].error is not None:  # nothing after an error
                    return
                batch, cells = [], 0
        yield from self._evaluated(batch)

    def in_worker(self) -> None:
        self.threads = 1

    def _evaluated(self, batch: list[tuple[Ranking, str | None]]) -> list[_Outcome]:
        """The batch's outcomes, up to the first error."""
        if not batch:
            return []
        pa.default_memory_pool().release_unused()  # the runs' parsed columns, before the kernels run
        rankings = [rk for rk, _ in batch]
        all_values = compute_stacked(
            compute,
            rankings,
            self.needed,
            relevance_level=self.relevance_level,
            collection_size=self.collection_size,
            threads=self.threads,
        )
        done = []
        for (rk, runid), values in zip(batch, all_values, strict=True):
            outcome = _Outcome()
            try:
                outcome.text = self._text(rk, runid, values, outcome.warnings)
            except EvalstoreError as error:
                outcome.error = _Failure.of(error)
            done.append(outcome)
            if outcome.error is not None:
                break
        return done

    def _text(self, rk: Ranking, runid: str | None, values: dict[Measure, np.ndarray], warnings: list[str]) -> str:
        """What run_trec_eval prints for this ranking (its -R qrels, local path, from the values on)."""
        for topic in rk.missing_topics if not self.options.complete else []:
            warnings.append(f"qrels topic {topic} has no results in the run; skipped (pass -c to score it as 0)")
        values = dict(values)
        keep_stand_in_values(self.rows, values, rk)
        if not rk.topics:
            raise EvaluationError("No queries with both results and relevance info; check that the topic ids match.")
        zscored = self.zscores_path is not None
        if self.zscores_path is not None:
            if self.zscores is None:  # read once, when first needed (as one run reads it)
                self.zscores = read_zscores(self.zscores_path)
            values = standardize(self.rows, rk.topics, values, self.zscores)
        return render_lines(
            self.rows,
            rk.topics,
            values.__getitem__,
            lambda m: summary_value(m, values[m], rk, zscored),
            runid,
            per_query=self.per_query,
            summary=not self.no_summary,
            zscores=zscored,
        )


def _outcomes(campaign: _Campaign, paths: list[str], jobs: int) -> Iterator[_Outcome]:
    """The runs' outcomes in order: in this process, or shared among ``jobs`` forked processes
    (run i to process i % jobs), read from them as they come and handed on in order."""
    jobs = min(jobs, len(paths))
    if jobs <= 1:
        yield from campaign.outcomes(paths)
        return
    import multiprocessing  # here: multiprocessing.connection costs ~5 ms of every other start-up
    from multiprocessing.connection import wait

    context = multiprocessing.get_context("fork")  # the children have the qrels (and the imports) as they are
    children = []
    for share in range(jobs):
        receive, send = context.Pipe(duplex=False)
        child = context.Process(target=_evaluate_share, args=(campaign, paths[share::jobs], send), daemon=True)
        child.start()
        send.close()
        children.append((child, receive))
    received: list[deque[_Outcome]] = [deque() for _ in children]
    open_pipes: dict[Any, int] = {receive: share for share, (_, receive) in enumerate(children)}
    try:
        for index in range(len(paths)):
            share = index % jobs
            while not received[share]:
                if children[share][1] not in open_pipes:
                    raise EvaluationError(
                        f"the process evaluating {paths[index]} stopped without a result "
                        "(its error is above); evaluate that run alone to see it"
                    )
                for pipe in wait(list(open_pipes)):
                    try:
                        received[open_pipes[pipe]].append(cast("Connection", pipe).recv())
                    except EOFError:
                        del open_pipes[pipe]
            outcome = received[share].popleft()
            yield outcome
            if outcome.error is not None:
                return
    finally:
        for child, receive in children:
            receive.close()
            if child.is_alive():
                child.terminate()
            child.join()


def _evaluate_share(campaign: _Campaign, paths: list[str], send: Connection) -> None:
    """A worker process: each of ``paths``' outcomes sent as it is ready, one kernel thread and
    one Arrow thread (the processes are the parallelism)."""
    pa.set_cpu_count(1)
    campaign.in_worker()
    try:
        for outcome in campaign.outcomes(paths):
            send.send(outcome)
    finally:
        send.close()
