"""Public pages while anonymous clients flood the sign-in: their latency and the server's memory.

Each sign-in checks a password with argon2 (64 MiB, 4 lanes at the default cost). Before the
server bounded how many it checks at once, 16 clients signing in made public pages 20-30 times
slower and took +1 GB. This starts `evalstore serve` (one process, as deployed, on 127.0.0.1, a
SQLite store made here), measures a public page's latency alone, then again while ``--clients``
clients sign in as fast as they are answered (made-up names: no back-off; the per-address limit
raised, as a botnet's many addresses would), and samples the server's resident memory.

    python scripts/bench_sign_in.py [--clients 16] [--seconds 10] [--checkout DIR]

``--checkout DIR`` serves another checkout's code (its evalstore/ first on PYTHONPATH), to measure
before and after with the same script.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

# appended, not inserted: with --checkout, PYTHONPATH's evalstore (that checkout's) comes first
sys.path.append(str(Path(__file__).resolve().parents[1]))
from tests.helpers.servers import free_port  # noqa: E402 (the checkout's folder is on the path from here)

EVALSTORE = str(Path(sys.executable).parent / "evalstore")
PAGE = "/tasks/bench"


def prepare(url: str, env: dict[str, str]) -> None:
    qrels = Path(tempfile.mkdtemp()) / "qrels.txt"
    qrels.write_text("".join(f"{t} 0 d{d} {d % 2}\n" for t in range(1, 51) for d in range(20)))
    for args in (
        ["db", "upgrade"],
        ["qrels", "import", str(qrels), "--name", "bench"],
        ["users", "add", "olga", "--role", "organiser"],
        ["tasks", "create", "bench", "--qrels", "bench", "--owner", "olga"],
    ):
        subprocess.run([EVALSTORE, *args], env=env, check=True, capture_output=True)


def rss_mib(pid: int) -> float:
    """The resident memory of the process and its children (uvicorn's reloader-free server is one)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


async def page_latencies(base: str, seconds: float) -> list[float]:
    out = []
    async with httpx.AsyncClient(base_url=base, timeout=60) as client:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            started = time.perf_counter()
            response = await client.get(PAGE)
            assert response.status_code == 200, response.status_code
            out.append(time.perf_counter() - started)
            await asyncio.sleep(0.05)
    return out


async def flood(base: str, clients: int, stop: asyncio.Event, statuses: dict[int, int]) -> None:
    async def one() -> None:
        async with httpx.AsyncClient(base_url=base, timeout=60) as client:
            while not stop.is_set():
                name = f"nobody{random.randrange(10**9)}"
                response = await client.post("/api/v1/sessions", json={"name": name, "password": "guess guess"})
                statuses[response.status_code] = statuses.get(response.status_code, 0) + 1
                if response.status_code in (429, 503):
                    await asyncio.sleep(float(response.headers.get("retry-after", "1")))

    await asyncio.gather(*(one() for _ in range(clients)))


async def under_flood(base: str, pid: int, args: argparse.Namespace) -> tuple[list[float], float, dict[int, int]]:
    stop, statuses, peak = asyncio.Event(), {}, [0.0]

    async def sample() -> None:
        while not stop.is_set():
            peak[0] = max(peak[0], rss_mib(pid))
            await asyncio.sleep(0.1)

    attack = asyncio.gather(flood(base, args.clients, stop, statuses), sample())
    await asyncio.sleep(1.0)  # the flood under way
    latencies = await page_latencies(base, args.seconds)
    stop.set()
    await attack
    return latencies, peak[0], statuses


def summary(latencies: list[float]) -> str:
    ordered = sorted(latencies)
    p95 = ordered[int(0.95 * (len(ordered) - 1))]
    return f"median {statistics.median(ordered) * 1000:.0f} ms, p95 {p95 * 1000:.0f} ms ({len(ordered)} pages)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--checkout", help="serve this checkout's code instead of the installed one")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="bench-sign-in-"))
    env = {
        **os.environ,
        "EVALSTORE_DATABASE_URL": f"sqlite:///{folder / 'evalstore.db'}",
        "EVALSTORE_MLFLOW": "off",
        "EVALSTORE_WRITES_PER_MINUTE": "1000000",  # many addresses' worth: the flood is not rate-limited
    }
    if args.checkout:
        env["PYTHONPATH"] = str(Path(args.checkout).resolve())
    prepare(env["EVALSTORE_DATABASE_URL"], env)
    port = free_port()
    server = subprocess.Popen(
        [EVALSTORE, "serve", "--port", str(port), "--workers", "1", "--no-worker"],
        env=env,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{base}/api/v1/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    raise SystemExit("the server did not start within 60 s") from None
                time.sleep(0.2)
        alone = asyncio.run(page_latencies(base, args.seconds))
        rss_alone = rss_mib(server.pid)
        flooded, peak, statuses = asyncio.run(under_flood(base, server.pid, args))
    finally:
        server.terminate()
        server.wait(timeout=30)
    print(f"{PAGE} alone: {summary(alone)}; server RSS {rss_alone:.0f} MiB")
    print(f"{PAGE} while {args.clients} clients sign in: {summary(flooded)}; server RSS peak {peak:.0f} MiB")
    print(f"sign-in answers: {dict(sorted(statuses.items()))}")


if __name__ == "__main__":
    main()
