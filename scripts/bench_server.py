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
   when they do not take it); medians.

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
import os
import random
import socket
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
from _scratch import scratch_postgres  # scripts/_scratch.py

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


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def start_server(
    url: str, workers: int, *args: str, env: dict[str, str] | None = None
) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    env = {
        **(env or {**os.environ, "EVALSTORE_MLFLOW": "off"}),
        "EVALSTORE_DATABASE_URL": url,
        "EVALSTORE_WRITES_PER_MINUTE": "100000",
    }
    process = subprocess.Popen(
        [EVALSTORE, "serve", "--port", str(port), "--workers", str(workers), *args],
        env=env,
        stderr=open(os.environ.get("BENCH_SERVER_LOG", os.devnull), "wb"),
    )
    base = f"http://127.0.0.1:{port}"
    # a shared, loaded machine can take minutes to start two server processes
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{base}/api/v1/health", timeout=1).status_code == 200:
                return process, base
        except httpx.TransportError:
            time.sleep(0.2)
    process.kill()
    raise SystemExit("the server did not start within 300 s")


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


async def submit_all(
    base: str, files: dict[str, tuple[str, bytes]], tokens: dict[str, str]
) -> tuple[float, list[float], list[int]]:
    async with httpx.AsyncClient(base_url=base, timeout=120) as client:

        async def one(name: str) -> tuple[float, int]:
            team, content = files[name]
            started = time.perf_counter()
            response = await client.post(
                "/api/v1/tasks/dl/runs",
                headers={"Authorization": f"Bearer {tokens[team]}"},
                files={"file": (f"{name}.txt", content)},
                data={"name": name},
            )
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

    from evalstore.db.engine import make_engine, upgrade
    from evalstore.services import access, jobs, tasks

    folder.mkdir()
    env = {
        **os.environ,
        "EVALSTORE_DATABASE_URL": url,
        "EVALSTORE_HOME": str(folder / "home"),
        "MLFLOW_TRACKING_URI": f"sqlite:///{folder / 'mlflow.db'}",
    }
    env.pop("EVALSTORE_MLFLOW", None)
    engine = make_engine(url)
    upgrade(engine)
    write_qrels(folder / "dl-qrels", 43, random.Random(7))
    cli(url, "qrels", "import", str(folder / "dl-qrels"), "--name", "dl-qrels")
    tasks.create_task(engine, "dl", qrels_name="dl-qrels", measures=THROUGHPUT_MEASURES)
    tokens = {}
    for team in range(5):
        access.add_user(engine, f"member{team}", role="participant", team=f"team{team}")
        tokens[f"team{team}"] = access.create_token(engine, f"member{team}").token
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
        started = time.perf_counter()
        all_evaluated(engine, base, files, tokens, len(warm))
        seconds = time.perf_counter() - started
    finally:
        workers.terminate()
        workers.wait(timeout=120)
        server.terminate()
        server.wait(timeout=30)
    values = stored_values(engine)
    engine.dispose()
    return seconds, values


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
            print(f"round {round_ + 1}: {label}: {rate:.0f} jobs/min", file=sys.stderr)
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
                response = await client.post(
                    "/api/v1/tasks/dl/runs",
                    headers={"Authorization": f"Bearer {tokens[team]}"},
                    files={"file": (f"{name}.txt", content)},
                    data={"name": name},
                )
            return response.status_code

        return list(await asyncio.gather(*(one(name) for name in files)))


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
        help="comma-separated: leaderboard, submissions, throughput (default: all)",
    )
    parser.add_argument("--against", metavar="CHECKOUT", help="the throughput row against the code of another checkout")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of --against")
    parser.add_argument("--default-pass-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
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
