"""The installed `evalstore` command itself, in its own process: it leaves without tearing the
interpreter down (os._exit), so check that what a user relies on at exit still happens: the
exit code, output flushed to a pipe, and writes committed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from tests.conftest import shared_path

EVALSTORE = str(Path(sys.executable).parent / "evalstore")


def _run(tmp_path: Path, *args: str, command: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    """``evalstore --database-url <the test's store> ARGS`` (or ``command`` as it is), in an
    environment of its own."""
    url = f"sqlite:///{tmp_path / 'console.db'}"
    return subprocess.run(
        list(command) or [EVALSTORE, "--database-url", url, *args],
        capture_output=True,
        text=True,
        check=False,
        env={"PATH": "/usr/bin:/bin", "EVALSTORE_HOME": str(tmp_path), "EVALSTORE_MLFLOW": "off"},
    )


def test_exit_codes_piped_output_and_committed_writes(tmp_path: Path) -> None:
    assert _run(tmp_path, "db", "upgrade").returncode == 0
    registered = _run(tmp_path, "runs", "register", str(shared_path("trec_eval_test", "results.test")), "--name", "std")
    assert registered.returncode == 0
    listed = _run(tmp_path, "runs", "list", "--format", "json")  # a pipe: block-buffered, flushed at exit
    assert listed.returncode == 0
    assert [run["name"] for run in json.loads(listed.stdout)] == ["std"]
    missing = _run(tmp_path, "runs", "show", "nope")
    assert missing.returncode == 1
    assert missing.stderr == "Error: No run named 'nope'. See 'evalstore runs list' for the registered runs.\n"
    usage = _run(tmp_path, "runs", "frobnicate")
    assert usage.returncode == 2 and "No such command 'frobnicate'" in usage.stderr


def test_a_process_a_test_leaves_running_is_killed_when_it_ends() -> None:
    """tests/conftest.py's clean-up after each test: a worker left by a failed test would poll
    on the cores for the rest of the run. What was running before the test is left alone."""
    from tests.conftest import processes_killed_at_the_end

    sleep = [sys.executable, "-c", "import time; time.sleep(600)"]
    kept = subprocess.Popen(sleep)
    try:
        with processes_killed_at_the_end():
            left = subprocess.Popen(sleep)
        assert left.returncode == -signal.SIGKILL  # killed, and waited for through its Popen
        assert kept.poll() is None
    finally:
        kept.kill()
        kept.wait()


def test_a_command_that_builds_no_table_does_not_import_pandas(tmp_path: Path) -> None:
    """pandas takes ~0.2 s to import: a command loads it only when it makes a table (pyarrow
    imports it at the first array it builds from Python objects, so no module of ours builds one
    at import)."""
    url = f"sqlite:///{tmp_path / 'console.db'}"
    assert _run(tmp_path, "db", "upgrade").returncode == 0
    probe = (
        "import atexit, sys\n"
        "atexit.register(lambda: sys.stderr.write(f'pandas imported: {\"pandas\" in sys.modules}\\n'))\n"
        f"sys.argv = ['evalstore', '--database-url', {url!r}, 'runs', 'list']\n"
        "from evalstore._entry import main\n"
        "main()\n"
    )
    listed = _run(tmp_path, command=(sys.executable, "-c", probe))
    assert (listed.returncode, listed.stderr.strip().splitlines()[-1]) == (0, "pandas imported: False"), listed.stderr


# Run as the `evalstore` command is, with the interpreter's exit replaced by a report of numpy's
# BLAS threads (threadpoolctl reads them from the loaded library) and of the variable a process the
# command starts inherits.
_BLAS_PROBE = """
import os, sys, threadpoolctl
from evalstore import _entry
def report(code):
    blas = [pool["num_threads"] for pool in threadpoolctl.threadpool_info() if pool["user_api"] == "blas"]
    print(blas, os.environ.get("OPENBLAS_NUM_THREADS"), file=sys.stderr, flush=True)
    os._exit(0)
_entry._exit_without_teardown = report
sys.argv = ["evalstore", *sys.argv[1:]]
_entry.main()
"""


def test_every_command_runs_numpy_with_one_blas_thread_and_passes_it_on(tmp_path: Path) -> None:
    """Not only `trec-eval`: a worker's pool and the server's processes evaluate side by side on
    the machine's cores, and OpenBLAS's own threads spun beside them after each small product."""
    sample = [str(shared_path("trec_eval_test", name)) for name in ("qrels.test", "results.test")]
    for args in (["measures", "--format", "json"], ["trec-eval", *sample]):
        probed = _run(tmp_path, command=(sys.executable, "-c", _BLAS_PROBE, *args))
        assert probed.stderr.splitlines()[-1] == "[1] 1", probed.stderr
    # the variable decides it: without it numpy starts a thread per core it may run on
    plain = _run(
        tmp_path,
        command=(
            sys.executable,
            "-c",
            "import numpy, threadpoolctl; print(threadpoolctl.threadpool_info()[0]['num_threads'])",
        ),
    )
    assert int(plain.stdout) == min(len(os.sched_getaffinity(0)), 64)  # 64: the threads OpenBLAS is built for
