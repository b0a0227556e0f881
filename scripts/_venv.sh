# Sourced by scripts/demo and scripts/test: make sure .venv exists with evalstore installed, at the
# versions uv.lock pins. uv comes from PyPI (bootstrapped into the venv with pip, which every Python
# has), then `uv sync --locked` installs the lock's versions and FAILS when uv.lock no longer matches
# pyproject.toml: run `uv lock` and commit uv.lock with the change that made it stale.
# Usage: source scripts/_venv.sh "[test,docs]"   (the extras, as pip spells them; "" for none)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${EVALSTORE_VENV:-$ROOT/.venv}"
PY="${PYTHON:-python3}"
EXTRAS="${1:-}"
UV_VERSION="0.13.9"  # the uv that wrote uv.lock; the Dockerfile pins the same
if [ ! -x "$VENV/bin/python" ]; then
    echo "creating virtualenv in $VENV" >&2
    "$PY" -m venv "$VENV"
fi
stamp="$VENV/.evalstore-installed$EXTRAS"
if [ ! -f "$stamp" ] || [ "$ROOT/pyproject.toml" -nt "$stamp" ] || [ "$ROOT/uv.lock" -nt "$stamp" ]; then
    echo "installing evalstore$EXTRAS into $VENV from uv.lock" >&2
    if [ ! -x "$VENV/bin/uv" ] || [ "$("$VENV/bin/uv" --version | cut -d' ' -f2)" != "$UV_VERSION" ]; then
        "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "uv==$UV_VERSION" >&2
    fi
    extra_args=()
    for extra in $(echo "$EXTRAS" | tr -d '[] ' | tr ',' ' '); do
        extra_args+=(--extra "$extra")
    done
    # --inexact: keep what the lock does not list (uv itself, another extra's packages);
    # --compile-bytecode: write .pyc at install time, so start-up does not recompile pandas &co
    # from source in every process when PYTHONDONTWRITEBYTECODE is set (it is on our machines).
    # scripts/test asks for none (EVALSTORE_LAZY_BYTECODE=1): it lets Python write the .pyc of what
    # its processes import, as they import it; compiling every installed module up front took 21 s
    # of a fresh clone's run (39 s of CPU), mostly for modules no test imports.
    # --offline first: the cache's packages, and above all the wheels it built from sdists
    # are used as they are; online, uv revalidates an sdist
    # whose HTTP cache entry has aged and builds it again. A machine whose cache lacks something
    # (a new one) falls back to the registry.
    compile_args=(--compile-bytecode)
    if [ "${EVALSTORE_LAZY_BYTECODE:-}" = "1" ]; then
        compile_args=()
    fi
    sync() {
        UV_PROJECT_ENVIRONMENT="$VENV" UV_PYTHON_DOWNLOADS=never "$VENV/bin/uv" sync --project "$ROOT" \
            --locked --inexact --quiet ${compile_args[@]+"${compile_args[@]}"} "$@" \
            ${extra_args[@]+"${extra_args[@]}"} >&2
    }
    if ! sync --offline 2>/dev/null; then
        echo "not everything is in uv's cache: installing from the registry" >&2
        sync
    fi
    touch "$stamp"
fi
export PATH="$VENV/bin:$PATH"
