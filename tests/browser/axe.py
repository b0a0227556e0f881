"""axe-core (Deque's accessibility rules, from npm) run on a page a Playwright test has open:
``assert not axe_violations(page)`` fails on any serious or critical violation, naming each rule,
its help and the first elements it found.

axe-core is installed into tests/browser/node_modules (not committed) by ``npm install`` the first
time it is needed, at the version tests/browser/package.json pins; ``EVALSTORE_AXE_JS`` names an
axe.min.js to use instead (a machine without npm or the registry).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from functools import cache
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
AXE_JS = HERE / "node_modules" / "axe-core" / "axe.min.js"
SERIOUS = ("serious", "critical")


@cache
def axe_source() -> str:
    path = Path(os.environ.get("EVALSTORE_AXE_JS") or AXE_JS)
    if not path.exists() and path == AXE_JS:
        npm = shutil.which("npm")
        if npm is None:
            raise RuntimeError(
                "The accessibility check needs axe-core: install npm (apt-get install npm), or set "
                "EVALSTORE_AXE_JS to an axe.min.js."
            )
        subprocess.run(
            [npm, "install", "--no-save", "--no-package-lock", "--no-audit", "--no-fund"],
            cwd=HERE,
            check=True,
            timeout=300,
        )
    return path.read_text(encoding="utf-8")


def axe_violations(page: Any, impacts: tuple[str, ...] = SERIOUS) -> list[str]:
    """The violations of ``impacts`` on the page as it is now, one line each. The script is
    evaluated through the browser's debugging protocol, so a Content-Security-Policy that forbids
    inline scripts does not stop it."""
    if not page.evaluate("() => typeof window.axe !== 'undefined'"):
        page.evaluate(axe_source())
    violations = page.evaluate(
        "async () => (await window.axe.run(document, {resultTypes: ['violations']}))"
        ".violations.map(v => ({id: v.id, impact: v.impact, help: v.help,"
        " nodes: v.nodes.slice(0, 3).map(n => n.target.join(' '))}))"
    )
    return [
        f"{v['id']} ({v['impact']}): {v['help']}; at {', '.join(v['nodes'])}"
        for v in violations
        if v["impact"] in impacts
    ]
