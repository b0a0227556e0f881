# Sourced by scripts/demo and scripts/test: make sure .venv exists with evalstore installed.
# uv (from PyPI) installs ~15x faster than pip, so we bootstrap it into the venv and use it;
# if it cannot be had we fall back to pip, which is slower but always there.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${EVALSTORE_VENV:-$ROOT/.venv}"
PY="${PYTHON:-python3}"
EXTRAS="${1:-}"
if [ ! -x "$VENV/bin/python" ]; then
    echo "creating virtualenv in $VENV" >&2
    "$PY" -m venv "$VENV"
fi
stamp="$VENV/.evalstore-installed$EXTRAS"
if [ ! -f "$stamp" ] || [ "$ROOT/pyproject.toml" -nt "$stamp" ]; then
    echo "installing evalstore$EXTRAS into $VENV" >&2
    if "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check uv >/dev/null 2>&1; then
        # --compile-bytecode: write .pyc at install time, so start-up does not recompile pandas &co
        # from source in every process when PYTHONDONTWRITEBYTECODE is set (it is on our machines)
        VIRTUAL_ENV="$VENV" "$VENV/bin/uv" pip install --quiet --compile-bytecode -e "$ROOT$EXTRAS" >&2
    else
        "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -e "$ROOT$EXTRAS" >&2
    fi
    touch "$stamp"
fi
export PATH="$VENV/bin:$PATH"
