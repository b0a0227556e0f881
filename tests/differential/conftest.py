"""The reference programs themselves: trec_eval 10.0 and ndeval, built from ../shared/tools.

``EVALSTORE_TREC_EVAL`` and ``EVALSTORE_NDEVAL`` name binaries to use instead. Without either, the differential tests skip with the reason; under CI (``CI=true``)
a missing ../shared/tools or a failed build fails them instead, so CI cannot pass vacuously.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
from pathlib import Path

import pytest

# ranx, the reference of *fusion_against_ranx.py, runs its kernels as the Python they are written
# in, not compiled by numba: the tests' runs are small (hand-made ones, three topics of real ones),
# where numba compiling each kernel and typed container in each process (and again in a new
# checkout's .venv, which numba's cache does not know) cost 20x the CPU of interpreting them
# (docs/benchmarks.md). The algorithm and its float64 arithmetic are ranx's own either way. Set before numba is
# imported (it reads this once); NUMBA_DISABLE_JIT=0 compiles them as ranx's users run them.
os.environ.setdefault("NUMBA_DISABLE_JIT", "1")

TOOLS = Path(__file__).resolve().parents[2].parent / "shared" / "tools"
BINARY_ENV = "EVALSTORE_TREC_EVAL"
NDEVAL_ENV = "EVALSTORE_NDEVAL"


@pytest.fixture(scope="session")
def trec_eval_binary(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _reference_program("trec_eval", BINARY_ENV, tmp_path_factory)


@pytest.fixture(scope="session")
def ndeval_binary(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _reference_program("ndeval", NDEVAL_ENV, tmp_path_factory)


def _reference_program(name: str, env: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    given = os.environ.get(env)
    if given:
        if not os.access(given, os.X_OK):
            pytest.fail(f"{env}={given} is not an executable file")
        return Path(given)
    build = TOOLS / "build"
    if not build.exists():
        if os.environ.get("CI") == "true":  # a clone without ../shared must not pass with skips
            pytest.fail(f"{name} cannot be built under CI: {build} not found (set {env} to a binary)")
        pytest.skip(f"{name} cannot be built here: {build} not found (set {env} to a binary)")
    # one build serves both programs and every xdist worker: the workers' temporary folders share
    # a parent, and the first worker to get there builds while the others wait on the lock
    base = tmp_path_factory.getbasetemp()
    out = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "reference-tools"
    binary = out / name
    out.mkdir(parents=True, exist_ok=True)
    with open(out.parent / "reference-tools.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = None
        if not os.access(binary, os.X_OK):
            done = subprocess.run(["bash", str(build), str(out)], capture_output=True, text=True, check=False)
    if done is not None:
        if done.returncode != 0 or not os.access(binary, os.X_OK):
            reason = f"building {name} with {build} failed: {done.stderr.strip()[-500:]}"
            if os.environ.get("CI") == "true":
                pytest.fail(reason)
            pytest.skip(reason)
    return binary
