#!/usr/bin/env python3
"""Load figures of the HTTP service (docs/benchmarks.md, "The HTTP service").

1. leaderboard: a task with 100 evaluated runs (50 topics); 50 concurrent clients read its
   leaderboard over and over for --seconds; latency percentiles and requests per second, without
   credentials (a public board) and with a participant's token.
2. submissions: 20 DL-sized runs (43 topics x 1,000 documents, 5 teams) posted at once; the time
   until the last one is accepted (validated, stored, its evaluation queued), and each one's.
3. throughput: --submissions DL-sized runs (200) posted to one task, 8 at a time, through `evalstore
   serve` and evaluated by 2 worker processes (`evalstore worker --concurrency 2`) with MLflow on;
   jobs per minute from the first post until every evaluation is stored and logged to MLflow. Once
   with the workers batching (their default) and once one job at a time (--batch-jobs 1), each on
   a fresh store; every run's stored values must be the same both times, bit for bit. With
   --against CHECKOUT, the default pass only, this checkout's code and CHECKOUT's (an older commit,
   e.g. `git worktree add /tmp/old c5c2f6e`) alternating over --rounds rounds, each a process of
   this script with PYTHONPATH at its code (CHECKOUT's workers are started without --batch-jobs
   when they do not take it); medians. Each pass also says (on stderr) the CPU time the server's
   processes and the workers' took while its clock ran, the deliverers beside them included.

The server is `evalstore serve --workers W` in its own process, as deployed; the clients run in
this process (asyncio + httpx) on the same 2-core machine, so they take CPU from the server too.

    python scripts/bench_server.py [--postgres postgresql+psycopg://postgres@127.0.0.1:5432/test]
        [--server-workers 2] [--clients 50] [--seconds 20] [--runs 100] [--submissions 200]
        [--only leaderboard,submissions,throughput] [--against CHECKOUT --rounds 3]

Without --postgres the store is a SQLite file; with it, a scratch database it creates and drops.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
from _scratch import scratch_postgres, servers_helper  # scripts/_scratch.py

servers = servers_helper()

EVALSTORE = str(Path(sys.executable).parent / "evalstore")


def write_qrels(path: Path, topics: int, rng: random.Random) -> None:
    with path.open("w") as out:
        for topic in range(1, topics + 1):
            for doc in range(200):
                out.write(f"{topic} 0 d{doc} {rng.choice((0, 0, 0, 1, 2))}\n")


def write_run(path: Path, topics: int, depth: int, rng: random.Random, tag: str) -> None:
    with path.open("w") as out:
        for topic in range(1, topics + 1):
            docs = rng.sample(range(depth * 2), depth)
            for rank, doc in enumerate(docs, start=1):
                out.write(f"{topic} Q0 d{doc} {rank} {1000 - rank + rng.random():.4f} {tag}\n")


def cli(url: str, *args: str, stdin: str | None = None) -> str:
    env = {**os.environ, "EVALSTORE_DATABASE_URL": url, "EVALSTORE_MLFLOW": "off"}
    done = subprocess.run([EVALSTORE, *args], env=env, input=stdin, capture_output=True, text=True, check=False)
    if done.returncode:
        raise SystemExit(f"evalstore {' '.join(args)} failed:\n{done.stderr}")
    return done.stdout.strip()


def prepare(url: str, folder: Path, runs: int) -> dict[str, str]:
    """A task 'bench' holding ``runs`` evaluated runs of 20 teams; tokens of one user per team."""
    from evalstore.db.engine import make_engine, upgrade
    from evalstore.services import access, tasks
    from evalstore.services.orchestration import work_on

    engine = make_engine(url)
    upgrade(engine)
    rng = random.Random(7)
    write_qrels(folder / "qrels", 50, rng)
    cli(url, "qrels", "import", str(folder / "qrels"), "--name", "bench-qrels")
    # 43-topic DL-sized submissions go to their own task over their own qrels
    write_qrels(folder / "dl-qrels", 43, rng)
    cli(url, "qrels", "import", str(folder / "dl-qrels"), "--name", "dl-qrels")
    tasks.create_task(engine, "bench", qrels_name="bench-qrels", measures=["AP", "nDCG@10", "P@10", "RR", "Judged@10"])
    tasks.create_task(engine, "dl", qrels_name="dl-qrels", measures=["AP", "nDCG@10", "P@10", "RR", "Judged@10"])
    tokens = {}
    for team in range(20):
        access.add_user(engine, f"member{team}", role="participant", team=f"team{team}")
        tokens[f"team{team}"] = access.create_token(engine, f"member{team}").token
    job_ids = []
    for index in range(runs):
        path = folder / f"run{index}.txt"
        write_run(path, 50, 100, rng, f"run{index}")
        principal = access.authenticate(engine, tokens[f"team{index % 20}"])
        job_ids.append(tasks.submit_run(engine, principal, "bench", path, name=f"run{index}").job.evaluation_id)
    work_on(engine, job_ids, mlflow=False)
    engine.dispose()
    return tokens


def start_server(
    url: str, workers: int, *args: str, env: dict[str, str] | None = None
) -> tuple[subprocess.Popen[bytes], str]:
    env = {
        **(env or {**os.environ, "EVALSTORE_MLFLOW": "off"}),
        "EVALSTORE_DATABASE_URL": url,
        "EVALSTORE_WRITES_PER_MINUTE": "100000",
    }
    log = open(os.environ.get("BENCH_SERVER_LOG", os.devnull), "wb")
    return servers.start_server([EVALSTORE, "serve", "--workers", str(workers), *args], env, stderr=log)


async def read_load(base: str, clients: int, seconds: float, headers: dict[str, str]) -> tuple[list[float], int]:
    """``clients`` keep-alive connections, each asking for the leaderboard as soon as it has the
    last answer. Plain asyncio streams, not an HTTP library: the clients share the machine with
    the server, and a lighter client leaves it more of the CPU (httpx took ~1 ms a request)."""
    host, port = base.removeprefix("http://").split(":")
    lines = [
        "GET /api/v1/tasks/bench/leaderboard HTTP/1.1",
        f"Host: {host}",
        *(f"{key}: {value}" for key, value in headers.items()),
    ]
    request = ("\r\n".join(lines) + "\r\n\r\n").encode()
    latencies: list[float] = []
    errors = 0

    async def exchange(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        writer.write(request)
        status = await reader.readline()
        length = 0
        while (line := await reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.partition(b":")
            if name.lower() == b"content-length":
                length = int(value)
        body = await reader.readexactly(length)
        if not status:
            raise ConnectionError(f"the server closed a connection after {len(latencies)} answers")
        return status.split()[1] == b"200" and b'"rows":[{' in body

    # Each connection asks once before the clock starts (every server process has computed the
    # board; the cold figure is measured separately), then keeps asking: a connection left idle
    # while the others warm up would be closed by the server's keep-alive timeout (5 s).
    warmed = 0
    clock: list[float] = []  # [start, stop] once every connection has had its first answer

    async def one_client() -> None:
        nonlocal errors, warmed
        reader, writer = await asyncio.open_connection(host, int(port))
        await exchange(reader, writer)
        warmed += 1
        if warmed == clients:
            clock.extend([time.monotonic(), time.monotonic() + seconds])
        while not clock or time.monotonic() < clock[1]:
            started = time.perf_counter()
            counted = bool(clock)
            ok = await exchange(reader, writer)
            if counted:
                latencies.append(time.perf_counter() - started)
                errors += not ok
        writer.close()

    await asyncio.gather(*(one_client() for _ in range(clients)))
    return latencies, errors


def percentile(values: list[float], share: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[int(share * 100) - 1]


async def post_run(client: httpx.AsyncClient, name: str, content: bytes, token: str) -> httpx.Response:
    """``content`` submitted to task 'dl' as run ``name``, with ``token``."""
    return await client.post(
        "/api/v1/tasks/dl/runs",
        headers={"Authorization": f"Bearer {token}"},
        files={"file": (f"{name}.txt", content)},
        data={"name": name},
    )


async def submit_all(
    base: str, files: dict[str, tuple[str, bytes]], tokens: dict[str, str]
) -> tuple[float, list[float], list[int]]:
    async with httpx.AsyncClient(base_url=base, timeout=120) as client:

        async def one(name: str) -> tuple[float, int]:
            team, content = files[name]
            started = time.perf_counter()
            response = await post_run(client, name, content, tokens[team])
            return time.perf_counter() - started, response.status_code

        started = time.perf_counter()
        answers = await asyncio.gather(*(one(name) for name in files))
        return time.perf_counter() - started, [t for t, _ in answers], [s for _, s in answers]


def bench(url: str, label: str, args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        began = time.perf_counter()
        tokens = prepare(url, folder, args.runs)
        only = set(args.only)
        print(f"[{label}] prepared {args.runs} evaluated runs in {time.perf_counter() - began:.1f} s", file=sys.stderr)
        process, base = start_server(url, args.server_workers)
        try:
            started = time.perf_counter()
            assert httpx.get(f"{base}/api/v1/tasks/bench/leaderboard", timeout=120).status_code == 200
            print(
                f"{label} | leaderboard of {args.runs} runs, first request (computed, then cached until a result "
                f"changes) | {time.perf_counter() - started:.2f} s"
            )
            token = {"Authorization": f"Bearer {tokens['team0']}"}
            for who, headers in (("anonymous", {}), ("participant token", token)) if "leaderboard" in only else ():
                latencies, errors = asyncio.run(read_load(base, args.clients, args.seconds, headers))
                print(
                    f"{label} | leaderboard of {args.runs} runs, {args.clients} clients, {who} | "
                    f"{len(latencies) / args.seconds:.0f} req/s | p50 {percentile(latencies, 0.5) * 1000:.0f} ms | "
                    f"p95 {percentile(latencies, 0.95) * 1000:.0f} ms | p99 {percentile(latencies, 0.99) * 1000:.0f} "
                    f"ms | errors {errors}"
                )
            if "submissions" not in only:
                return
            rng = random.Random(11)
            files = {}
            for index in range(20):
                path = folder / f"dl{index}.txt"
                write_run(path, 43, 1000, rng, f"dl{index}")
                files[f"dl{index}"] = (f"team{index % 5}", path.read_bytes())
            total, each, statuses = asyncio.run(submit_all(base, files, tokens))
            accepted = sum(status == 201 for status in statuses)
            print(
                f"{label} | 20 concurrent DL-sized submissions (43 x 1,000 rows, 5 teams) | {accepted} accepted | "
                f"all in {total:.2f} s | each: median {statistics.median(each):.2f} s, max {max(each):.2f} s"
            )
        finally:
            process.terminate()
            process.wait(timeout=30)


THROUGHPUT_MEASURES: list[str] = []  # the task's default: evalstore's default measure set


def throughput(make_url: Callable[[], tuple[str, Callable[[], None]]], label: str, args: argparse.Namespace) -> None:
    """The throughput row, batching and one job at a time, and the check that both stored the
    same values."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        rng = random.Random(13)
        files = {}
        for index in range(args.submissions):
            path = folder / f"dl{index}.txt"
            write_run(path, 43, 1000, rng, f"dl{index}")
            files[f"dl{index}"] = (f"team{index % 5}", path.read_bytes())
        stored = {}
        passes = ((16, "batches of up to 16 jobs (the default)"), (1, "one job at a time"))
        for batch_jobs, what in passes[:1] if args.default_pass_only else passes:
            url, drop = make_url()
            try:
                seconds, stored[batch_jobs] = submitted_and_evaluated(
                    url, folder / f"b{batch_jobs}", files, batch_jobs, args
                )
            finally:
                drop()
            print(
                f"{label} | {args.submissions} DL-sized submissions (43 x 1,000 rows) to one task through `evalstore "
                f"serve`, 2 workers, MLflow on, {what} | {args.submissions / seconds * 60:.0f} jobs/min | "
                f"all stored and logged in {seconds:.1f} s"
            )
        if args.default_pass_only:
            return
        if stored[16] != stored[1]:
            differ = sorted(name for name in stored[1] if stored[16].get(name) != stored[1][name])
            raise SystemExit(f"{label}: batched results differ from one-at-a-time ones for {differ[:5]}")
        print(f"{label} | every submission's stored values batched = one at a time, bit for bit | yes")


def submitted_and_evaluated(
    url: str, folder: Path, files: dict[str, tuple[str, bytes]], batch_jobs: int, args: argparse.Namespace
) -> tuple[float, dict[str, Any]]:
    """Seconds from the first post until every submission is evaluated and logged to MLflow, and
    each run's stored values (measure -> per-topic values' bytes, and the aggregates)."""

    from evalstore.services import jobs

    folder.mkdir()
    env = {
        **os.environ,
        "EVALSTORE_DATABASE_URL": url,
        "EVALSTORE_HOME": str(folder / "home"),
        "MLFLOW_TRACKING_URI": f"sqlite:///{folder / 'mlflow.db'}",
    }
    env.pop("EVALSTORE_MLFLOW", None)
    engine, tokens = dl_task(url, folder, 5)
    # MLflow's store made before the clock, as a deployment has it
    subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from mlflow import MlflowClient; MlflowClient(sys.argv[1]).search_experiments()",
            env["MLFLOW_TRACKING_URI"],
        ],
        env=env,
        check=True,
        stderr=subprocess.DEVNULL,
    )
    server, base = start_server(url, args.server_workers, "--no-worker", env=env)
    log = os.environ.get("BENCH_SERVER_LOG")
    workers = subprocess.Popen(
        [EVALSTORE, "worker", "--concurrency", "2", "--poll-interval", "0.2", *_batch_option(batch_jobs, env)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=open(f"{log}.workers{batch_jobs}" if log else os.devnull, "wb"),
    )
    try:
        deadline = time.monotonic() + 300
        while len(jobs.live_workers(engine, within=timedelta(minutes=1))) < 2:  # running, as deployed
            if time.monotonic() > deadline:
                raise SystemExit("the 2 workers did not start within 5 minutes")
            time.sleep(0.2)
        # two warm-up submissions first, one a worker: a running service has its imports (MLflow,
        # matplotlib: ~10 s on a loaded machine) behind it
        warm = {f"warm{i}": (team, content.replace(b"dl", b"warm")) for i, (team, content) in enumerate(files.values())}
        warm = dict(list(warm.items())[:2])
        all_evaluated(engine, base, warm, tokens, 0)
        cpu_before = process_tree_cpu(server.pid), process_tree_cpu(workers.pid)
        started = time.perf_counter()
        all_evaluated(engine, base, files, tokens, len(warm))
        seconds = time.perf_counter() - started
        cpu_after = process_tree_cpu(server.pid), process_tree_cpu(workers.pid)
        print(
            f"CPU while the clock ran: server {cpu_after[0] - cpu_before[0]:.1f} s, "
            f"workers {cpu_after[1] - cpu_before[1]:.1f} s",
            file=sys.stderr,
        )
    finally:
        try:
            stop_workers(workers)
        finally:
            server.terminate()
            server.wait(timeout=30)
    values = stored_values(engine)
    engine.dispose()
    return seconds, values


def stop_workers(workers: subprocess.Popen[bytes]) -> None:
    """Stop the workers once the clock has stopped. An idle worker finishes the chore in hand
    first (the boards' tiers and paired tests of every measure: minutes on a loaded machine), so
    after a few seconds a second signal stops it at once, as it would an operator's."""
    workers.terminate()
    try:
        workers.wait(timeout=10)
    except subprocess.TimeoutExpired:
        workers.terminate()
        workers.wait(timeout=120)


def dl_task(url: str, folder: Path, teams: int) -> tuple[Any, dict[str, str]]:
    """A fresh store at ``url`` with task 'dl' over 43-topic qrels, and a participant's token for
    each of ``teams`` teams (team0, team1, ...)."""
    from evalstore.db.engine import make_engine, upgrade
    from evalstore.services import access, tasks

    engine = make_engine(url)
    upgrade(engine)
    write_qrels(folder / "dl-qrels", 43, random.Random(7))
    cli(url, "qrels", "import", str(folder / "dl-qrels"), "--name", "dl-qrels")
    tasks.create_task(engine, "dl", qrels_name="dl-qrels", measures=THROUGHPUT_MEASURES)
    tokens = {}
    for team in range(teams):
        access.add_user(engine, f"member{team}", role="participant", team=f"team{team}")
        tokens[f"team{team}"] = access.create_token(engine, f"member{team}").token
    return engine, tokens


def _batch_option(batch_jobs: int, env: dict[str, str]) -> list[str]:
    """``--batch-jobs N``, unless the worker of the code under test predates it (--against)."""
    usage = subprocess.run([EVALSTORE, "worker", "--help"], env=env, capture_output=True, text=True, check=True)
    return ["--batch-jobs", str(batch_jobs)] if "--batch-jobs" in usage.stdout else []


def against(checkout: str, args: argparse.Namespace) -> None:
    """The throughput row's default pass, this checkout's code and ``checkout``'s alternating."""
    codes = {"this checkout": str(Path(__file__).resolve().parents[1]), checkout: str(Path(checkout).resolve())}
    rates: dict[str, list[float]] = {label: [] for label in codes}
    for round_ in range(args.rounds):
        for label, code in codes.items() if round_ % 2 == 0 else reversed(codes.items()):
            done = subprocess.run(
                [sys.executable, __file__, "--only", "throughput", "--default-pass-only"]
                + ["--submissions", str(args.submissions)],
                env={**os.environ, "PYTHONPATH": code},
                capture_output=True,
                text=True,
                check=True,
            )
            rate = float(done.stdout.split(" jobs/min")[0].rsplit("| ", 1)[1])
            rates[label].append(rate)
            cpu = done.stderr[done.stderr.rindex("CPU while the clock ran") :].splitlines()[0]
            print(f"round {round_ + 1}: {label}: {rate:.0f} jobs/min; {cpu}", file=sys.stderr)
    for label, values in rates.items():
        print(
            f"SQLite | {args.submissions} DL-sized submissions, `evalstore serve`, 2 workers, MLflow on | {label} | "
            f"median {statistics.median(values):.0f} jobs/min ({', '.join(f'{v:.0f}' for v in values)})"
        )
    mine, theirs = (statistics.median(v) for v in rates.values())
    print(f"SQLite | this checkout against {checkout} | {mine / theirs:.2f}x the jobs per minute")


def all_evaluated(
    engine: Any, base: str, files: dict[str, tuple[str, bytes]], tokens: dict[str, str], before: int
) -> None:
    """Post ``files`` (8 at a time) and wait until they are evaluated and logged to MLflow, beside
    the ``before`` evaluations done already."""
    from sqlalchemy import select

    from evalstore.db.models import Evaluation
    from evalstore.db.session import read_only

    statuses = asyncio.run(submit_some(base, files, tokens, at_once=8))
    if any(status != 201 for status in statuses):
        raise SystemExit(f"submissions refused: {sorted(set(statuses))}")
    deadline = time.monotonic() + 300 + 5 * len(files)  # a loaded machine: minutes for the first imports
    while True:
        with read_only(engine) as session:
            states = session.execute(select(Evaluation.state, Evaluation.mlflow_state)).all()
        if len(states) == before + len(files) and all(s == "done" and logged == "logged" for s, logged in states):
            return
        if any(state == "failed" for state, _ in states):
            raise SystemExit("an evaluation failed; run with BENCH_SERVER_LOG=path to see the workers' log")
        if time.monotonic() > deadline:
            raise SystemExit(f"not all evaluated and logged in time: {sorted(set(states))}")
        time.sleep(0.1)


def stored_values(engine: Any) -> dict[str, Any]:
    """Each run's stored results: its topics, each measure's per-topic values as bytes (texts as
    they are) and its aggregates."""
    from sqlalchemy import select

    from evalstore.db.models import AggregateResult, Evaluation, EvaluationQueries, QueryValues, Run
    from evalstore.db.session import read_only

    found: dict[str, Any] = {}
    with read_only(engine) as session:
        for evaluation_id, name in session.execute(
            select(Evaluation.id, Run.name).join(Run, Run.id == Evaluation.run_id)
        ):
            found[name] = (
                session.scalar(
                    select(EvaluationQueries.query_ids).where(EvaluationQueries.evaluation_id == evaluation_id)
                ),
                sorted(
                    session.execute(
                        select(QueryValues.measure, QueryValues.numbers, QueryValues.texts).where(
                            QueryValues.evaluation_id == evaluation_id
                        )
                    )
                ),
                sorted(
                    session.execute(
                        select(AggregateResult.measure, AggregateResult.value, AggregateResult.text_value).where(
                            AggregateResult.evaluation_id == evaluation_id
                        )
                    ),
                    key=lambda row: row[0],
                ),
            )
    return found


async def submit_some(
    base: str, files: dict[str, tuple[str, bytes]], tokens: dict[str, str], at_once: int
) -> list[int]:
    """Post every file, ``at_once`` at a time (participants submitting over a day, compressed)."""
    limit = asyncio.Semaphore(at_once)
    async with httpx.AsyncClient(base_url=base, timeout=300) as client:

        async def one(name: str) -> int:
            team, content = files[name]
            async with limit:
                response = await post_run(client, name, content, tokens[team])
            return response.status_code

        return list(await asyncio.gather(*(one(name) for name in files)))


# where an upload's time goes, as its Server-Timing header gives it (web/api.py), in order
BURST_PARTS = ("receive", "slot", "parse", "stage", "judged", "turn", "write")


def burst(args: argparse.Namespace) -> dict[str, Any]:
    """One round of the burst: a fresh SQLite store and task, `evalstore serve` with
    --server-workers processes and 2 worker processes (`worker --concurrency 2`, MLflow off), warmed
    by 4 submissions; then --burst-clients clients each post one DL-sized run at once. Each
    upload's time and Server-Timing parts, the time from its 201 until its evaluation is stored,
    and the server processes' CPU from the first post to the last answer.
    With ``args.paused_workers`` the workers are stopped (SIGSTOP) until the last 201: the uploads
    without the evaluations competing for the cores."""
    from sqlalchemy import select

    from evalstore.db.models import Evaluation, Run
    from evalstore.db.session import read_only
    from evalstore.services import jobs

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        url = f"sqlite:///{folder / 'burst.db'}"
        env = {**os.environ, "EVALSTORE_DATABASE_URL": url, "EVALSTORE_HOME": str(folder / "home")}
        env["EVALSTORE_MLFLOW"] = "off"
        env["EVALSTORE_REQUEST_SECONDS"] = "900"  # a loaded shared machine: slow answers, not 503s
        engine, tokens = dl_task(url, folder, 10)
        rng = random.Random(17)
        files = {}
        for index in range(args.burst_clients + 4):
            path = folder / f"run{index}.txt"
            write_run(path, 43, 1000, rng, f"run{index}")
            files[f"burst{index}" if index >= 4 else f"warm{index}"] = (f"team{index % 10}", path.read_bytes())
        warm = {name: files.pop(name) for name in list(files)[:4]}
        server, base = start_server(url, args.server_workers, "--no-worker", env=env)
        log = os.environ.get("BENCH_SERVER_LOG")
        workers = subprocess.Popen(
            [EVALSTORE, "worker", "--concurrency", "2", "--poll-interval", "0.2"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=open(f"{log}.burst-workers" if log else os.devnull, "wb"),
            start_new_session=True,  # its own process group: SIGSTOP reaches the worker processes it starts
        )
        try:
            deadline = time.monotonic() + 300
            while len(jobs.live_workers(engine, within=timedelta(minutes=1))) < 2:
                if time.monotonic() > deadline:
                    raise SystemExit("the 2 workers did not start within 5 minutes")
                time.sleep(0.2)
            # a running service has its imports behind it, in both server processes and the workers
            asyncio.run(post_burst(base, warm, tokens))
            evaluated_by(engine, len(warm), time.monotonic() + 300)
            if args.paused_workers:
                os.killpg(workers.pid, signal.SIGSTOP)
            cpu_before = process_tree_cpu(server.pid)
            uploads = asyncio.run(post_burst(base, files, tokens))
            server_cpu = process_tree_cpu(server.pid) - cpu_before
            if args.paused_workers:
                os.killpg(workers.pid, signal.SIGCONT)
            refused = sorted({status for _, _, status, _ in uploads.values() if status != 201})
            if refused:
                raise SystemExit(f"submissions refused: {refused}")
            evaluated_by(engine, len(warm) + len(files), time.monotonic() + 600)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(workers.pid, signal.SIGCONT)
            workers.terminate()
            workers.wait(timeout=120)
            server.terminate()
            server.wait(timeout=30)
        with read_only(engine) as session:
            times = {
                name: (jobs.as_utc(created), jobs.as_utc(started), jobs.as_utc(finished))
                for name, created, started, finished in session.execute(
                    select(Run.name, Evaluation.created_at, Evaluation.started_at, Evaluation.finished_at).join(
                        Run, Run.id == Evaluation.run_id
                    )
                )
            }
        engine.dispose()
    answered = {name: times[name][2].timestamp() - at for name, (_, at, _, _) in uploads.items()}
    return {
        "upload": [seconds for seconds, _, _, _ in uploads.values()],
        "evaluated": list(answered.values()),
        "queued": [(times[name][1] - times[name][0]).total_seconds() for name in uploads],
        "evaluating": [(times[name][2] - times[name][1]).total_seconds() for name in uploads],
        "parts": {
            part: [timing[part] for _, _, _, timing in uploads.values() if part in timing]
            for part in (*BURST_PARTS, "total")
        },
        "outside": [seconds - timing["total"] for seconds, _, _, timing in uploads.values() if "total" in timing],
        "server_cpu": server_cpu,
    }


def process_tree_cpu(pid: int) -> float:
    """CPU seconds (user + system) of process ``pid`` and its children (the server's worker
    processes), from Linux's /proc; 0 where there is none."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for entry in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = entry.read_text().rsplit(")", 1)[1].split()
        except OSError:  # the process ended meanwhile
            continue
        if entry.parent.name == str(pid) or fields[1] == str(pid):  # fields[1]: the parent's id
            total += (int(fields[11]) + int(fields[12])) / ticks
    return total


async def post_burst(
    base: str, files: dict[str, tuple[str, bytes]], tokens: dict[str, str]
) -> dict[str, tuple[float, float, int, dict[str, float]]]:
    """Every file posted at once, each by its own client: name -> (seconds, wall time of the
    answer, status, the Server-Timing parts in seconds)."""
    async with httpx.AsyncClient(base_url=base, timeout=300, limits=httpx.Limits(max_connections=len(files))) as client:

        async def one(name: str) -> tuple[float, float, int, dict[str, float]]:
            team, content = files[name]
            started = time.perf_counter()
            response = await post_run(client, name, content, tokens[team])
            seconds, at = time.perf_counter() - started, time.time()
            timing = {}
            for entry in response.headers.get("server-timing", "").split(","):
                part, _, duration = entry.strip().partition(";dur=")
                if duration:
                    timing[part] = float(duration) / 1000
            return seconds, at, response.status_code, timing

        answers = await asyncio.gather(*(one(name) for name in files))
        return dict(zip(files, answers, strict=True))


def evaluated_by(engine: Any, count: int, deadline: float) -> None:
    """Wait until ``count`` evaluations are done (a failed one ends the benchmark)."""
    from sqlalchemy import select

    from evalstore.db.models import Evaluation
    from evalstore.db.session import read_only

    while True:
        with read_only(engine) as session:
            states = session.scalars(select(Evaluation.state)).all()
        if len(states) == count and all(state == "done" for state in states):
            return
        if "failed" in states:
            raise SystemExit("an evaluation failed; run with BENCH_SERVER_LOG=path to see the workers' log")
        if time.monotonic() > deadline:
            raise SystemExit(f"not all evaluated in time: {sorted(set(states))}")
        time.sleep(0.05)


def burst_rows(label: str, figures: dict[str, Any], clients: int) -> None:
    """The burst's rows: upload and 201-to-evaluated percentiles, and each part's."""
    uploads, evaluated = figures["upload"], figures["evaluated"]
    print(
        f"{label} | {clients} clients, one DL-sized run each, at once | upload p50 {percentile(uploads, 0.5):.2f} s "
        f"| p95 {percentile(uploads, 0.95):.2f} s | max {max(uploads):.2f} s | 201 to evaluated: p50 "
        f"{percentile(evaluated, 0.5):.2f} s, p95 {percentile(evaluated, 0.95):.2f} s, max {max(evaluated):.2f} s"
        f" | server CPU {figures['server_cpu']:.2f} s"
    )
    parts = {**figures["parts"], "outside the handler": figures["outside"]}
    parts.update(queued=figures["queued"], evaluating=figures["evaluating"])
    for part, values in parts.items():
        if values:
            print(
                f"{label} | part: {part} | median {statistics.median(values):.3f} s | p95 "
                f"{percentile(values, 0.95):.3f} s | max {max(values):.3f} s"
            )


def burst_against(checkout: str, args: argparse.Namespace) -> None:
    """The burst, this checkout's code and ``checkout``'s alternating over --rounds rounds, each
    round a process of this script with PYTHONPATH at its code; medians of each round's figures."""
    codes = {"this checkout": str(Path(__file__).resolve().parents[1]), checkout: str(Path(checkout).resolve())}
    rounds: dict[str, list[dict[str, Any]]] = {label: [] for label in codes}
    for round_ in range(args.rounds):
        for label, code in codes.items() if round_ % 2 == 0 else reversed(codes.items()):
            done = subprocess.run(
                [sys.executable, __file__, "--only", "burst", "--json", "--burst-clients", str(args.burst_clients)]
                + (["--paused-workers"] if args.paused_workers else []),
                env={**os.environ, "PYTHONPATH": code},
                capture_output=True,
                text=True,
                check=False,
            )
            if done.returncode:
                raise SystemExit(f"round {round_ + 1} of {label} failed:\n{done.stderr[-2000:]}")
            figures = json.loads(done.stdout.splitlines()[-1])
            rounds[label].append(figures)
            print(
                f"round {round_ + 1}: {label}: upload p50 {percentile(figures['upload'], 0.5):.2f} s, p95 "
                f"{percentile(figures['upload'], 0.95):.2f} s; 201 to evaluated p95 "
                f"{percentile(figures['evaluated'], 0.95):.2f} s; server CPU {figures['server_cpu']:.2f} s",
                file=sys.stderr,
            )
    for label, figures in rounds.items():
        summary = []
        for what, key, share in (
            ("upload p50", "upload", 0.5),
            ("upload p95", "upload", 0.95),
            ("201 to evaluated p95", "evaluated", 0.95),
        ):
            each = [percentile(f[key], share) for f in figures]
            summary.append(f"{what} median {statistics.median(each):.2f} s ({', '.join(f'{v:.2f}' for v in each)})")
        each = [f["server_cpu"] for f in figures]
        summary.append(f"server CPU median {statistics.median(each):.2f} s ({', '.join(f'{v:.2f}' for v in each)})")
        print(f"SQLite | {args.burst_clients} clients' burst | {label} | " + " | ".join(summary))


def mlflow_hung(args: argparse.Namespace) -> None:
    """Jobs per minute of 2 worker processes (`worker --concurrency 2`) evaluating --jobs DL-sized
    runs with MLflow on, its tracking URI a local MLflow store (fine), a socket that accepts and
    never answers (hung) or a port nobody listens on (down). After an outage MLflow "comes back"
    as a working store given to `evalstore mlflow sync` (this environment has MLflow's client
    only, no `mlflow server` to restart on the port), timed until every result is delivered.
    Each case on a fresh SQLite store; 2 warm-up jobs first, off the clock."""
    for case in args.mlflow_cases:
        with tempfile.TemporaryDirectory() as tmp:
            mlflow_case(args, case, Path(tmp))


def job_states(engine: Any) -> list[tuple[str, str]]:
    """Each evaluation's state and MLflow state."""
    from sqlalchemy import select

    from evalstore.db.models import Evaluation
    from evalstore.db.session import read_only

    with read_only(engine) as session:
        return [(state, logged) for state, logged in session.execute(select(Evaluation.state, Evaluation.mlflow_state))]


def until_states(engine: Any, done: Callable[[list[tuple[str, str]]], bool], seconds: float) -> None:
    """Wait until ``done`` holds of :func:`job_states` (a failed evaluation ends the benchmark)."""
    deadline = time.monotonic() + seconds
    while not done(found := job_states(engine)):
        if any(state == "failed" for state, _ in found):
            raise SystemExit("an evaluation failed; run with BENCH_SERVER_LOG=path to see the workers' log")
        if time.monotonic() > deadline:
            raise SystemExit(f"not within {seconds:.0f} s: {sorted(set(found))}")
        time.sleep(0.1)


def mlflow_case(args: argparse.Namespace, case: str, folder: Path) -> None:
    """One case of :func:`mlflow_hung`."""
    from evalstore.db.engine import make_engine, upgrade
    from evalstore.services import jobs, store

    url = f"sqlite:///{folder / 'hung.db'}"
    engine = make_engine(url)
    upgrade(engine)
    rng = random.Random(19)
    write_qrels(folder / "dl-qrels", 43, rng)
    store.import_qrels(engine, folder / "dl-qrels", name="dl-qrels")
    for index in range(args.jobs + 2):
        write_run(folder / f"run{index}.txt", 43, 1000, rng, f"run{index}")
        store.register_run(engine, folder / f"run{index}.txt", name=f"run{index}")
    working = f"sqlite:///{folder / 'mlflow.db'}"
    hung = servers.HungMlflow() if case == "hung" else None
    if case == "down":
        uri = servers.refusing_uri()
    else:
        uri = hung.uri if hung is not None else working
    env = {
        **os.environ,
        "EVALSTORE_DATABASE_URL": url,
        "EVALSTORE_HOME": str(folder / "home"),
        "EVALSTORE_MLFLOW": "on",
        "MLFLOW_TRACKING_URI": uri,
        "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0",
        "MLFLOW_HTTP_REQUEST_TIMEOUT": "120",
    }
    # MLflow's store made before the clock, as a deployment has it
    subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from mlflow import MlflowClient; MlflowClient(sys.argv[1]).search_experiments()",
        ]
        + [working],
        env=env,
        check=True,
        stderr=subprocess.DEVNULL,
    )
    log = os.environ.get("BENCH_SERVER_LOG")
    workers = subprocess.Popen(
        [EVALSTORE, "worker", "--concurrency", "2", "--poll-interval", "0.2"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=open(f"{log}.mlflow-{case}" if log else os.devnull, "wb"),
    )
    try:
        options = jobs.EvaluationOptions()
        jobs.enqueue(engine, qrels_name="dl-qrels", run_names=["run0", "run1"], options=options)
        until_states(engine, lambda found: all(state == "done" for state, _ in found), 900)
        started = time.perf_counter()
        names = [f"run{index}" for index in range(2, args.jobs + 2)]
        jobs.enqueue(engine, qrels_name="dl-qrels", run_names=names, options=options)
        until_states(engine, lambda found: all(state == "done" for state, _ in found), 900)
        seconds = time.perf_counter() - started
        pending = sum(logged != "logged" for _, logged in job_states(engine))
        print(
            f"SQLite | {args.jobs} DL-sized jobs, 2 workers, MLflow {case} | {args.jobs / seconds * 60:.0f} jobs/min "
            f"({seconds:.1f} s) | not delivered when the last job was done: {pending} of {args.jobs + 2}",
            flush=True,
        )
    finally:
        workers.terminate()
        workers.wait(timeout=120)
        if hung is not None:
            hung.close()
    if case != "fine":
        back = time.perf_counter()
        # what the stopped worker's deliverer held is claimable once its lease (15 s) runs out
        while any(logged != "logged" for _, logged in job_states(engine)):
            subprocess.run(
                [EVALSTORE, "mlflow", "sync"],
                env={**env, "MLFLOW_TRACKING_URI": working},
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                check=False,
            )
            if time.perf_counter() - back > 900:
                raise SystemExit(f"not delivered within 900 s: {sorted(set(job_states(engine)))}")
        print(
            f"SQLite | MLflow {case}, then back | all {args.jobs + 2} delivered "
            f"{time.perf_counter() - back:.1f} s after (`mlflow sync`, a claim's 15 s lease included)",
            flush=True,
        )
    engine.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--postgres", help="run on PostgreSQL too (a scratch database on this server)")
    parser.add_argument("--server-workers", type=int, default=2)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--submissions", type=int, default=200, help="DL-sized submissions of the throughput row")
    parser.add_argument(
        "--only",
        type=lambda text: text.split(","),
        default=["leaderboard", "submissions", "throughput"],
        help="comma-separated: leaderboard, submissions, throughput, burst, mlflow-hung (default: the first three)",
    )
    parser.add_argument("--burst-clients", type=int, default=30, help="clients of the burst, one run each")
    parser.add_argument(
        "--paused-workers", action="store_true", help="burst: the workers stopped until the last upload's answer"
    )
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--jobs", type=int, default=40, help="mlflow-hung: DL-sized jobs per case")
    parser.add_argument(
        "--mlflow-cases",
        type=lambda text: text.split(","),
        default=["fine", "hung", "down"],
        help="mlflow-hung: comma-separated: fine, hung, down (default: all)",
    )
    parser.add_argument("--against", metavar="CHECKOUT", help="the throughput row against the code of another checkout")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of --against")
    parser.add_argument("--default-pass-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if "mlflow-hung" in args.only:
        mlflow_hung(args)
        return
    if "burst" in args.only:
        if args.against:
            burst_against(args.against, args)
        elif args.json:
            print(json.dumps(burst(args)))
        else:
            for round_ in range(args.rounds if "--rounds" in sys.argv else 1):
                burst_rows(f"SQLite, round {round_ + 1}", burst(args), args.burst_clients)
        return
    if args.against:
        against(args.against, args)
        return
    with tempfile.TemporaryDirectory() as tmp:
        if {"leaderboard", "submissions"} & set(args.only):
            bench(f"sqlite:///{tmp}/bench.db", "SQLite", args)
        if "throughput" in args.only:
            fresh = iter(range(1000))
            throughput(lambda: (f"sqlite:///{tmp}/throughput{next(fresh)}.db", lambda: None), "SQLite", args)
    if args.postgres:
        if {"leaderboard", "submissions"} & set(args.only):
            url, drop = scratch_postgres(args.postgres)
            try:
                bench(url, "PostgreSQL", args)
            finally:
                drop()
        if "throughput" in args.only:
            throughput(lambda: scratch_postgres(args.postgres), "PostgreSQL", args)


if __name__ == "__main__":
    main()
