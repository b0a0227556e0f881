#!/usr/bin/env python3
"""Page times (docs/benchmarks.md, "Pages"): how long each kind of page takes on the first request
after the server starts (cold) and once it has answered it (warm), for each role.

Two tasks, each in a store of its own, evaluated by `evalstore worker --until-empty` (with the
code under test, so whatever that code prepares before anyone asks is prepared):

- robust03: the 17 TREC 2003 Robust runs (100 topics) from ../shared/data/robust03;
- synthetic: 100 generated runs x 250 topics (100 documents each, 20 teams).

Pages: the leaderboard API and page (default measures, and a measure the board does not show by
default), a run's page, a comparison of two runs (and of ten on the generated task; and of two on
a measure off the board and by Wilcoxon's test, which are tested on the request), the same pages
of the task's collection (its qrels, as an admin or the task's organiser sees it), the task's
health report (organiser; robust03 only unless --health-synthetic). Roles: no credentials, a
participant (the first runs' team), the task's organiser. Each (page, role) is timed in a server
started for it (`evalstore serve --no-worker`, SQLite or --postgres): the first request is the
cold figure, the median of the next three the warm one; a round does every (page, role) of every
dataset.

With --against CHECKOUT (e.g. `git worktree add /tmp/before c2be7e7`), both checkouts' code
alternate round by round (each its own store, prepared by its own code; this script run with
PYTHONPATH at the code); medians over --rounds, with the spread.

    python scripts/bench_pages.py [--postgres postgresql+psycopg://postgres@127.0.0.1:5432/test]
        [--against CHECKOUT] [--rounds 3] [--only robust03,synthetic] [--pages leaderboard,run]
        [--health-synthetic] [--cpu] [--roles organiser]

--pages keeps the pages whose name holds one of its words (each (page, role) starts a server: on a
loaded machine a round of every page takes long).

--cpu adds the server process's CPU time (user + system, from /proc/PID/stat, threads included)
spent on each request, beside the wall time: on a loaded machine a request waits for the CPU,
and its wall time says more about the other processes than about the page.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from _scratch import scratch_postgres, servers_helper  # scripts/_scratch.py

servers = servers_helper()

HERE = Path(__file__).resolve().parents[1]
ROBUST = HERE.parent / "shared" / "data" / "robust03"
DATASETS = ("robust03", "synthetic")
ROLES = ("anonymous", "participant", "organiser")
OTHER_MEASURE = "P@20"  # evaluated (all_trec), not on a board by default


def prepare(url: str, folder: Path, dataset: str) -> dict[str, Any]:
    """The store of one dataset: its qrels, a task 'bench' owned by 'owner', the runs submitted by
    their teams' members, every job done by a worker of the code under test; the tokens."""
    from evalstore.db.engine import make_engine, upgrade
    from evalstore.services import access, store, tasks

    engine = make_engine(url)
    upgrade(engine)
    if dataset == "robust03":
        store.import_qrels(engine, ROBUST / "robust03_qrels.txt", name="qrels")
        runs = sorted((ROBUST / "runs").glob("input.*.gz"))
        names = [p.name.removeprefix("input.").removesuffix(".gz") for p in runs]
    else:
        rng = random.Random(7)
        with (folder / "qrels").open("w") as out:
            for topic in range(1, 251):
                for doc in range(100):
                    out.write(f"{topic} 0 d{doc * 3} {rng.choice((0, 0, 0, 1, 2))}\n")
        store.import_qrels(engine, folder / "qrels", name="qrels")
        runs, names = [], []
        for index in range(100):
            path = folder / f"run{index}.txt"
            with path.open("w") as out:
                for topic in range(1, 251):
                    docs = rng.sample(range(300), 100)
                    out.writelines(
                        f"{topic} Q0 d{doc} {rank} {1000 - rank + rng.random():.4f} run{index}\n"
                        for rank, doc in enumerate(docs, start=1)
                    )
            runs.append(path)
            names.append(f"run{index}")
    access.add_user(engine, "owner", role="organiser")
    tasks.create_task(engine, "bench", qrels_name="qrels", owner="owner")
    teams = 20 if dataset == "synthetic" else 5
    for team in range(teams):
        access.add_user(engine, f"member{team}", role="participant", team=f"team{team}")
    tokens = {
        "participant": access.create_token(engine, "member0", expires_days=30).token,
        "organiser": access.create_token(engine, "owner", expires_days=30).token,
    }
    members = {
        team: access.authenticate(engine, access.create_token(engine, f"member{team}").token) for team in range(teams)
    }
    for index, (path, name) in enumerate(zip(runs, names, strict=True)):
        tasks.submit_run(engine, members[index % teams], "bench", path, name=name)
    engine.dispose()
    env = {**os.environ, "EVALSTORE_DATABASE_URL": url, "EVALSTORE_MLFLOW": "off"}
    started = time.perf_counter()
    # run from the scratch folder: `-m` puts the working directory first on the path, and a
    # checkout's own folder would give its code instead of the code under test
    subprocess.run([sys.executable, "-m", "evalstore", "worker", "--until-empty"], env=env, cwd=folder, check=True)
    worked = time.perf_counter() - started
    return {"tokens": tokens, "runs": names[:2], "worker_seconds": worked}


def pages(dataset: str, runs: list[str], health: bool) -> dict[str, str]:
    first, second = runs
    out = {
        "leaderboard API": "/api/v1/tasks/bench/leaderboard",
        f"leaderboard API, {OTHER_MEASURE}": f"/api/v1/tasks/bench/leaderboard?measure={OTHER_MEASURE}",
        "leaderboard page": "/tasks/bench",
        f"leaderboard page, {OTHER_MEASURE}": f"/tasks/bench?measure={OTHER_MEASURE}",
        "run page": f"/runs/{first}",
        "compare page": f"/tasks/bench/compare?run={first}&run={second}&measure=AP",
        # tested on the request: a measure off the board, a test other than the stored t-test
        f"compare page, {OTHER_MEASURE}": f"/tasks/bench/compare?run={first}&run={second}&measure={OTHER_MEASURE}",
        "compare page, Wilcoxon": f"/tasks/bench/compare?run={first}&run={second}&measure=AP&test=wilcoxon",
        # the same pages of the task's collection (its qrels: every run evaluated on them, in a
        # task or not), which its organiser and admins see
        "collection page": "/collections/qrels",
        f"collection page, {OTHER_MEASURE}": f"/collections/qrels?measure={OTHER_MEASURE}",
        "collection run page": f"/collections/qrels/runs/{first}",
        "collection compare page": f"/collections/qrels/compare?run={first}&run={second}&measure=AP",
    }
    if dataset == "synthetic":
        ten = "&".join(f"run=run{i}" for i in range(10))
        out["compare page, ten runs"] = f"/tasks/bench/compare?{ten}&measure=AP"
    if health:
        out["health page"] = "/tasks/bench/health"
    return out


def start_server(url: str) -> tuple[subprocess.Popen[bytes], str]:
    env = {**os.environ, "EVALSTORE_DATABASE_URL": url, "EVALSTORE_MLFLOW": "off"}
    return servers.start_server(
        [sys.executable, "-m", "evalstore", "serve", "--no-worker"],
        env,
        cwd=tempfile.gettempdir(),  # not a checkout's folder (see prepare)
        stderr=open(os.environ.get("BENCH_SERVER_LOG", os.devnull), "wb"),
    )


TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """The process's CPU time so far, user + system, its threads included (/proc/PID/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime, stime: fields 14 and 15 of the line


def time_page(url: str, route: str, token: str | None) -> dict[str, Any]:
    """The status, the first request's seconds and the server's CPU seconds on it (cold), the
    medians of the next three (warm), in a new server."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    process, base = start_server(url)

    def timed(client: httpx.Client) -> tuple[int, float, float]:
        cpu = cpu_seconds(process.pid)
        started = time.perf_counter()
        status = client.get(route).status_code
        wall = time.perf_counter() - started
        return status, wall, cpu_seconds(process.pid) - cpu

    try:
        with httpx.Client(base_url=base, headers=headers, timeout=600) as client:
            client.get("/api/v1/health")  # the connection, not the page
            status, cold, cold_cpu = timed(client)
            warm = [timed(client) for _ in range(3)]
    finally:
        process.terminate()
        process.wait(timeout=60)
    return {
        "status": status,
        "cold": cold,
        "warm": statistics.median(w for _, w, _ in warm),
        "cold_cpu": cold_cpu,
        "warm_cpu": statistics.median(c for _, _, c in warm),
    }


def one_round(
    stores: dict[str, dict[str, Any]],
    health_synthetic: bool,
    kept: list[str] | None = None,
    roles: list[str] | None = None,
) -> list[dict[str, Any]]:
    """Every (dataset, page, role) once (of the pages named by a word of ``kept``): this process's
    code is the code under test."""
    rows = []
    for dataset, prepared in stores.items():
        health = dataset == "robust03" or health_synthetic
        for page, route in pages(dataset, prepared["runs"], health).items():
            if kept and not any(word in page for word in kept):
                continue
            for role in ("organiser",) if page == "health page" else roles or ROLES:
                timed = time_page(prepared["url"], route, prepared["tokens"].get(role))
                rows.append({"dataset": dataset, "page": page, "role": role, **timed})
                print(
                    f"{dataset} | {page} | {role} | {timed['status']} | {timed['cold']:.3f} | {timed['warm']:.3f}"
                    f" | CPU {timed['cold_cpu']:.3f} | {timed['warm_cpu']:.3f}",
                    file=sys.stderr,
                )
    return rows


def worker_main(args: argparse.Namespace) -> None:
    """The internal modes, run with PYTHONPATH at the code under test."""
    if args.prepare:
        folder = Path(args.prepare)
        print(json.dumps(prepare(args.url, folder, args.dataset)))
    else:
        stores = json.loads(Path(args.round).read_text())
        print(json.dumps(one_round(stores, args.health_synthetic, _words(args.pages), _words(args.roles))))


def _words(text: str | None) -> list[str] | None:
    return [w for w in text.split(",") if w] if text else None


def run_code(code: str, *args: str) -> Any:
    done = subprocess.run(
        [sys.executable, __file__, *args],
        env={**os.environ, "PYTHONPATH": code},
        stdout=subprocess.PIPE,
        text=True,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def spread(values: list[float]) -> str:
    median = statistics.median(values)
    unit = 1000.0
    if len(values) == 1:
        return f"{median * unit:.0f}"
    return f"{median * unit:.0f} ({min(values) * unit:.0f}-{max(values) * unit:.0f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--postgres", metavar="URL", help="a PostgreSQL server (scratch databases made and dropped)")
    parser.add_argument("--against", metavar="CHECKOUT", help="another checkout's code, alternating round by round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", default=",".join(DATASETS), help="robust03,synthetic")
    parser.add_argument("--health-synthetic", action="store_true", help="the health page of the 100 x 250 task too")
    parser.add_argument("--pages", help="only the pages whose name holds one of these words: leaderboard,run")
    parser.add_argument("--cpu", action="store_true", help="the server's CPU time per request too")
    parser.add_argument("--roles", help="only these roles: anonymous,participant,organiser")
    parser.add_argument("--prepare", help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--dataset", help=argparse.SUPPRESS)
    parser.add_argument("--round", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.prepare or args.round:
        worker_main(args)
        return
    codes = {"this checkout": str(HERE)}
    if args.against:
        codes[args.against] = str(Path(args.against).resolve())
    datasets = [d for d in args.only.split(",") if d]
    drops = []
    with tempfile.TemporaryDirectory(prefix="bench-pages-") as scratch:
        try:
            stores: dict[str, dict[str, dict[str, Any]]] = {}
            for label, code in codes.items():
                stores[label] = {}
                for dataset in datasets:
                    folder = Path(scratch) / f"{len(stores)}-{dataset}"
                    folder.mkdir()
                    if args.postgres:
                        url, drop = scratch_postgres(args.postgres)
                        drops.append(drop)
                    else:
                        url = f"sqlite:///{folder / 'evalstore.db'}"
                    made = run_code(code, "--prepare", str(folder), "--url", url, "--dataset", dataset)
                    stores[label][dataset] = {**made, "url": url}
                    print(f"{label}: {dataset} prepared, worker {made['worker_seconds']:.1f} s", file=sys.stderr)
            results: dict[str, list[dict[str, Any]]] = {label: [] for label in codes}
            for round_ in range(args.rounds):
                order = list(codes.items()) if round_ % 2 == 0 else list(reversed(codes.items()))
                for label, code in order:
                    plan = Path(scratch) / f"round-{label.replace('/', '_')}.json"
                    plan.write_text(json.dumps(stores[label]))
                    extra = ["--health-synthetic"] if args.health_synthetic else []
                    extra += ["--pages", args.pages] if args.pages else []
                    extra += ["--roles", args.roles] if args.roles else []
                    results[label] += run_code(code, "--round", str(plan), *extra)
                    print(f"round {round_ + 1}: {label} done", file=sys.stderr)
        finally:
            for drop in drops:
                drop()
    report(results, "PostgreSQL" if args.postgres else "SQLite", cpu=args.cpu)


def report(results: dict[str, list[dict[str, Any]]], database: str, *, cpu: bool = False) -> None:
    labels = list(results)
    keys: list[tuple[str, str, str]] = []
    for row in results[labels[0]]:
        key = (row["dataset"], row["page"], row["role"])
        if key not in keys:
            keys.append(key)
    header = ["dataset", "page", "role", "status"]
    for label in labels:
        header += [f"cold ms, {label}", f"warm ms, {label}"]
        if cpu:
            header += [f"cold CPU ms, {label}", f"warm CPU ms, {label}"]
    print(f"{database}; medians over rounds (min-max); load average {os.getloadavg()[0]:.1f}")
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for key in keys:
        cells = list(key)
        statuses = set()
        timed = []
        for label in labels:
            mine = [r for r in results[label] if (r["dataset"], r["page"], r["role"]) == key]
            statuses.update(r["status"] for r in mine)
            timed += [spread([r["cold"] for r in mine]), spread([r["warm"] for r in mine])]
            if cpu:
                timed += [spread([r["cold_cpu"] for r in mine]), spread([r["warm_cpu"] for r in mine])]
        cells.append("/".join(str(s) for s in sorted(statuses)))
        print("| " + " | ".join(cells + timed) + " |")


if __name__ == "__main__":
    main()
