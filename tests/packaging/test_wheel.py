"""The built wheel installs in a fresh virtualenv outside the checkout, with the versions of
uv.lock, and works there: `db upgrade` finds the migrations inside the wheel, `trec-eval` prints
trec_eval's output on the sample data the wheel ships, the version is the project's, and the
package says it is typed (py.typed). uv builds and installs (from its cache: ~10-30 s)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.packaging

GOLDEN = ROOT / "tests" / "data" / "trec_eval_test" / "out.test"


def _uv() -> str:
    found = shutil.which("uv") or str(Path(sys.executable).parent / "uv")
    if not Path(found).is_file():
        if os.environ.get("CI") == "true":
            pytest.fail("uv is missing under CI: scripts/_venv.sh installs it into the virtualenv")
        pytest.skip("uv is not installed (scripts/_venv.sh bootstraps it from PyPI)")
    return found


def _run(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"{' '.join(args)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return done


def test_the_wheel_installs_outside_the_checkout_and_runs(tmp_path: Path) -> None:
    uv = _uv()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EVALSTORE_", "VIRTUAL_ENV", "MLFLOW_", "UV_"))}
    env["EVALSTORE_HOME"] = str(tmp_path / "home")
    # the first command writes the fresh install's .pyc files and the next ones read them (pandas
    # and mlflow compiled from source in every process cost seconds each)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    work = tmp_path / "elsewhere"
    work.mkdir()

    _run([uv, "build", "--wheel", "--out-dir", str(tmp_path / "dist"), str(ROOT)], work, env)
    (wheel,) = (tmp_path / "dist").glob("evalstore-*.whl")
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert wheel.name == f"evalstore-{version}-py3-none-any.whl"
    names = zipfile.ZipFile(wheel).namelist()
    assert "evalstore/py.typed" in names
    assert any(n.startswith("evalstore/_migrations/versions/0001_") for n in names)
    assert "evalstore/sample_data/qrels.test" in names

    # the lock's versions, as scripts/_venv.sh and the Dockerfile install them (--frozen: the
    # lock's own freshness is scripts/_venv.sh's `uv sync --locked` to check)
    requirements = tmp_path / "requirements.txt"
    _run(
        [
            uv,
            "export",
            "--project",
            str(ROOT),
            "--frozen",
            "--no-dev",
            "--no-emit-project",
            "--no-hashes",
            "--format",
            "requirements-txt",
            "--output-file",
            str(requirements),
        ],
        work,
        env,
    )
    venv = tmp_path / "venv"
    _run([uv, "venv", "--quiet", "--python", sys.executable, str(venv)], work, env)
    python = venv / "bin" / "python"
    _run([uv, "pip", "install", "--quiet", "--python", str(python), "-r", str(requirements), str(wheel)], work, env)

    evalstore = str(venv / "bin" / "evalstore")
    assert _run([evalstore, "--version"], work, env).stdout == f"evalstore {version}\n"
    upgraded = _run([evalstore, "db", "upgrade"], work, env)
    assert " is at revision " in upgraded.stderr
    current, head = _run([evalstore, "db", "current"], work, env).stdout.splitlines()
    assert current.removeprefix("current: ") == head.removeprefix("head: ") != "none"
    assert (tmp_path / "home" / "evalstore.db").is_file()
    sample = _run(
        [
            str(python),
            "-c",
            "import evalstore, pathlib; print(pathlib.Path(evalstore.__file__).parent / 'sample_data')",
        ],
        work,
        env,
    ).stdout.strip()
    assert not sample.startswith(str(ROOT))  # the installed copy, not the checkout's
    out = _run([evalstore, "trec-eval", f"{sample}/qrels.test", f"{sample}/results.test"], work, env)
    assert out.stdout == GOLDEN.read_text()
