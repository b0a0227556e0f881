"""The ``evalstore`` command's entry point.

``evalstore trec-eval ...`` goes straight to its own parser
(:mod:`evalstore.trec_eval.command_line`): evaluating a file then loads numpy, pyarrow and the
measures, not typer, pydantic, rich and the services. Everything else goes to the typer CLI
(:mod:`evalstore.cli`).
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import os
import sys
import types

# The cyclic garbage collector's first generation is collected every 50,000 allocations net, not
# Python's 700. Starting a command imports some 1,000-3,000 modules whose objects all survive, and
# at 700 the collector walked them again and again while they were imported: 0.1 s of the ~0.8 s
# of CPU an `evalstore worker` took to start (`trec-eval` imports too little to notice). At this
# module's import, not in main(): a `worker --concurrency N` child is spawned, and imports this module
# (the parent's __main__ does) before the worker's own modules. Long-running processes keep a
# working collector; cycles wait for 50,000 allocations instead of 700.
GEN0_THRESHOLD = 50_000


def tune_collector() -> None:
    gc.set_threshold(GEN0_THRESHOLD, 10, 10)


tune_collector()


def main() -> None:
    # One BLAS thread, set before numpy is imported and passed on to the processes a command starts
    # (a worker's pool, the server's processes): evalstore multiplies only small matrices (a job's
    # bootstrap draws by its topics), and OpenBLAS otherwise keeps a thread per core spinning after
    # each product, CPU taken from the other processes on the same cores for no gain
    # (docs/benchmarks.md, "MLflow delivery")
    from evalstore.config import limit_blas_threads

    limit_blas_threads()
    _tune_allocator()
    try:
        if sys.argv[1:2] == ["trec-eval"]:
            _trec_eval(sys.argv[2:])
        else:
            from evalstore.cli import main as cli

            cli()
    except SystemExit as stop:
        _exit_without_teardown(stop.code)
    _exit_without_teardown(0)


def _trec_eval(args: list[str]) -> None:
    _pyarrow_without_pandas()
    from evalstore.errors import EvalstoreError, InputFormatError
    from evalstore.trec_eval.command_line import run

    try:
        run(args)
    except EvalstoreError as error:
        # as the typer CLI prints them (evalstore.cli._errors): input errors like a compiler's
        said = error.on_the_command_line()
        sys.stderr.write((said if isinstance(error, InputFormatError) else f"Error: {said}") + "\n")
        raise SystemExit(1) from None


class _NoPandas:
    """A meta path finder (not subclassing importlib.abc's: importing that costs 10 ms) that
    refuses what pyarrow would import for nothing here: pandas (below) and cloudpickle, which
    pyarrow takes over the standard pickle if installed (MLflow brings it) and which costs ~6 ms;
    nothing in `trec-eval` pickles an Arrow object."""

    def find_spec(self, name: str, path: object = None, target: object = None) -> None:
        if name in ("pandas", "cloudpickle"):
            raise ImportError(f"trec-eval hands pyarrow no {name} objects")


class _MaskedArraysNotYetImported(types.ModuleType):
    """``numpy.ma`` until something uses it. pyarrow asks every numpy array it converts whether it
    is a ``numpy.ma.MaskedArray`` (and numpy 2's ``np.unique`` whether it ``is_masked``), and numpy
    imports ``numpy.ma`` on that first question: 8-10 ms
    of an ordinary `trec-eval`, which makes no masked array. No array can be one before numpy.ma is
    imported, so this stand-in's class matches nothing; any other use imports the real module,
    which then replaces the stand-in as ``numpy.ma`` (the import system sets the attribute)."""

    class MaskedArray:
        pass

    @staticmethod
    def is_masked(x: object) -> bool:
        """numpy 2's ``np.unique`` asks this of every array it is given (8-10 ms again): no array is
        masked before numpy.ma is imported."""
        return False

    def __getattr__(self, name: str) -> object:
        import importlib

        return getattr(importlib.import_module("numpy.ma"), name)


def _pyarrow_without_pandas() -> None:
    """pyarrow (26) imports pandas the first time it builds an array (to recognise pandas objects)
    and the first time it converts one to numpy (its converter's pandas constants): 0.15 s, a
    third of an ordinary `trec-eval`, which hands it no pandas object and wants no pandas result.
    Each probe is made once per process and its answer kept; here they find no pandas. Only
    pyarrow's recognition of pandas objects is lost (`Table.to_pandas` still imports pandas
    itself), and only in this process."""
    if "pandas" in sys.modules:
        return
    refuse = _NoPandas()
    sys.meta_path.insert(0, refuse)
    try:
        _import_numpy_without_docstrings()
        import numpy as np

        if "numpy.ma" not in sys.modules:
            np.ma = _MaskedArraysNotYetImported("numpy.ma")
        import pyarrow as pa

        pa.array(np.zeros(1, dtype=np.int8)).to_numpy()  # the probes: the shim's, and the C++ converter's
    finally:
        sys.meta_path.remove(refuse)


# numpy's modules that only attach docstrings to its compiled functions, methods and scalar types
# (numpy._core imports them last, for nothing else): 4-8 ms of numpy's import, a tenth of it
NUMPY_DOCSTRING_MODULES = ("numpy._core._add_newdocs", "numpy._core._add_newdocs_scalars")


def _import_numpy_without_docstrings() -> None:
    """Import numpy with empty stand-ins for :data:`NUMPY_DOCSTRING_MODULES`: `trec-eval` prints no
    numpy docstring. The stand-ins leave sys.modules once numpy is imported, so anything that
    imports those modules later (``help()``) runs them then, and the docstrings are there."""
    if "numpy" in sys.modules:
        return
    stand_ins = {name: types.ModuleType(name) for name in NUMPY_DOCSTRING_MODULES}
    sys.modules.update(stand_ins)
    try:
        import numpy  # noqa: F401
    finally:
        for name, stand_in in stand_ins.items():
            if sys.modules.get(name) is stand_in:
                del sys.modules[name]


def _tune_allocator() -> None:
    """Let glibc keep freed memory for reuse instead of returning every large block to the OS.

    The measures allocate many short-lived arrays of tens of MB; by default glibc maps each one
    afresh and the kernel zeroes it page by page, which on the benchmark VM made a 7M-element
    numpy operation ~10x slower than on reused memory (scripts/bench_metrics.py). A no-op off glibc.
    """
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return
    m_trim_threshold, m_mmap_threshold = -1, -3
    libc.mallopt(m_mmap_threshold, 2**30)
    libc.mallopt(m_trim_threshold, 2**31 - 1)


def _exit_without_teardown(code: int | str | None) -> None:
    """Leave without finalizing the interpreter. With MLflow, matplotlib and pandas loaded (some
    3,000 modules), tearing them down took 0.6-1.2 s after an `evaluate --wait` had finished its
    work. Nothing is lost by skipping it: every write is committed by then, the exit handlers
    still run (logging's flush, multiprocessing's join of worker children, our read connections'
    close), and the standard streams are flushed."""
    if isinstance(code, str):  # sys.exit("message"), as the interpreter would print it
        sys.stderr.write(f"{code}\n")
        code = 1
    atexit._run_exitfuncs()  # noqa: SLF001  (the handlers os._exit would skip)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe (`| head`) or stream
            stream.flush()
    os._exit(code or 0)
