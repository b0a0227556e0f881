"""`evalstore trec-eval` as people run it: the installed command, whose entry point goes straight to
the command's own parser (evalstore._entry), without the typer CLI and without pandas."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.golden.test_trec_eval_golden import CASES, DATA_OPTIONS, SAME_AS, suite_file

EVALSTORE = str(Path(sys.executable).parent / "evalstore")


def command(*args: str, python_options: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *python_options, "-m", "evalstore", "trec-eval", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize(
    "case",
    [
        "out.test.aq",
        "out.test.aqcM",
        "out.test.aql",
        "out.test.meas_params",
        "out.test.qrels_jg",
        "out.test.aqZ",
        "out.test.prefs",
        "out.test.qrels_prefs",
    ],
)
def test_the_command_matches_trec_eval_byte_for_byte(case: str) -> None:
    *options, qrels, run = CASES[case]
    options = [str(suite_file(o)) if o in DATA_OPTIONS else o for o in options]
    result = command(*options, str(suite_file(qrels)), str(suite_file(run)), python_options=("-X", "importtime"))
    assert result.returncode == 0, result.stderr
    assert result.stdout == suite_file(SAME_AS.get(case, case)).read_text()
    # the engine calls Arrow's kernels through evalstore._kernels: pyarrow.compute's wrappers cost
    # 25-30 ms to build, a tenth of an ordinary run
    assert not re.search(r"\| +pyarrow\.compute\n", result.stderr)


def test_errors_and_usage_errors_exit_as_the_cli_does() -> None:
    unknown = command("-m", "ndcg_cutt.10", str(suite_file("qrels.test")), str(suite_file("results.test")))
    assert (unknown.returncode, unknown.stderr) == (
        1,
        "Error: Unknown measure 'ndcg_cutt'. Did you mean 'ndcg_cut'? Run 'evalstore measures --trec' for the list.\n",
    )
    missing = command(str(suite_file("qrels.test")), "no/such/run")
    assert (missing.returncode, missing.stderr) == (1, "no/such/run: no such file; check the path\n")
    usage = command("-M", "-3", "a", "b")
    assert usage.returncode == 2
    assert usage.stderr.endswith(
        "argument -M/--Max_retrieved_per_topic: -3 is not a count of documents (0 or more); "
        "trec_eval 10.0 crashes on a negative -M\n"
    )
    assert usage.stderr.startswith("usage: evalstore trec-eval [-h] [-q] [-c] [-n] [-J]")


def test_help_lists_trec_evals_options_both_ways() -> None:
    direct = command("--help")
    through_cli = subprocess.run(
        [EVALSTORE, "--database-url", "sqlite://", "trec-eval", "--help"], capture_output=True, text=True, timeout=120
    )
    assert direct.returncode == through_cli.returncode == 0
    assert direct.stdout == through_cli.stdout
    assert re.search(
        r"\n  -M N, --Max_retrieved_per_topic N\n +Keep only the top N documents per topic\.\n", direct.stdout
    )
    assert re.search(r"\n  -v, --version +Print trec_eval's version line and exit\.\n", direct.stdout)
    assert re.search(r"\n  --backend \{local,duckdb\}\s+local \(default\)", direct.stdout)


def test_evaluating_a_file_loads_no_cli_framework_no_database_no_pandas_and_no_cloudpickle() -> None:
    result = command(
        "-q",
        "-m",
        "all_trec",
        str(suite_file("qrels.test")),
        str(suite_file("results.test")),
        python_options=("-X", "importtime"),
    )
    assert result.returncode == 0
    loaded = {}
    for line in result.stderr.splitlines():
        if line.startswith("import time:") and line.split("|")[1].strip().isdigit():
            _, cumulative, name = line.split("|")
            loaded[name.strip()] = int(cumulative)
    assert not {
        "typer",
        "click",
        "rich",
        "pydantic",
        "sqlalchemy",
        "mlflow",
        "matplotlib",
        "scipy",
        "pyarrow.dataset",
        "pyarrow.compute",
        "numpy.ma",
        "hashlib",  # OpenSSL's start-up: no content hash, and docnos hashed in numpy
        # families registered when one of their names is looked up (metrics.registry.LAZY_FAMILIES)
        "evalstore.metrics.cwl",
        "evalstore.metrics.diversity",
        "evalstore.metrics.ordering",
        "evalstore.metrics.preferences",
        # the other judgment kinds and the table readers (and their upload limits): a TREC run and qrels need none
        "evalstore.io.judgment_kinds",
        "evalstore.io.tables",
        "evalstore.io.limits",
        "gzip",
        # numpy's docstrings (evalstore._entry.NUMPY_DOCSTRING_MODULES)
        "numpy._core._add_newdocs",
        "numpy._core._add_newdocs_scalars",
    } & set(loaded)
    assert loaded.get("pandas", 0) < 1000  # the refused probe (evalstore._entry) takes microseconds
    assert loaded.get("cloudpickle", 0) < 1000


def test_masked_arrays_made_after_the_numpy_ma_stand_in_keep_their_mask() -> None:
    """evalstore._entry puts a stand-in where numpy.ma will be (pyarrow asks every array whether
    it is masked); a real use imports numpy.ma, and pyarrow then sees the mask."""
    probe = (
        "import sys; from evalstore import _entry; _entry._pyarrow_without_pandas(); "
        "import numpy as np, pyarrow as pa; assert 'numpy.ma' not in sys.modules; "
        "assert pa.array(np.arange(3)).to_pylist() == [0, 1, 2]; "
        "masked = np.ma.masked_array([1, 2, 3], mask=[False, True, False]); "
        "print(pa.array(masked).to_pylist(), type(np.ma).__name__)"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert (result.returncode, result.stdout) == (0, "[1, None, 3] module\n"), result.stderr


def test_numpy_imported_without_its_docstrings_gets_them_when_their_module_is_imported() -> None:
    """evalstore._entry imports numpy with empty stand-ins for the modules that only attach
    docstrings; they leave sys.modules with the import, so a later import of them runs them."""
    probe = (
        "import sys; from evalstore import _entry; _entry._pyarrow_without_pandas(); "
        "import numpy as np; print(np.ndarray.sum.__doc__ is None, "
        "[n for n in _entry.NUMPY_DOCSTRING_MODULES if n in sys.modules]); "
        "import numpy._core._add_newdocs; print(np.ndarray.sum.__doc__.split('(')[0].strip())"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert (result.returncode, result.stdout) == (0, "True []\na.sum\n"), result.stderr
