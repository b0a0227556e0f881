"""A private name stays in its module, a private module in its package: no module of evalstore imports
another module's ``_name``, and ``pkg._module`` is imported only from inside ``pkg``. A name that a
sibling needs is public in the module that defines it."""

from __future__ import annotations

import ast
from pathlib import Path

import evalstore

ROOT = Path(evalstore.__file__).parent


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports() -> list[tuple[str, str, str]]:
    """(importing module, imported module, imported name) for every ``from X import y``."""
    modules = {_module_name(path): path for path in ROOT.rglob("*.py")}
    found = []
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ImportFrom):
                continue
            source = node.module or ""
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                source = ".".join([*base, *([source] if source else [])])
            found += [(name, source, alias.name) for alias in node.names]
    return found


def _private(part: str) -> bool:
    return part.startswith("_") and not part.startswith("__")


def test_no_module_imports_another_modules_private_name() -> None:
    modules = {_module_name(path) for path in ROOT.rglob("*.py")}
    bad = [
        f"{importer} imports {source}.{name}"
        for importer, source, name in _imports()
        if _private(name) and f"{source}.{name}" not in modules
    ]
    assert bad == []


def test_a_private_module_is_imported_only_from_inside_its_package() -> None:
    modules = {_module_name(path) for path in ROOT.rglob("*.py")}
    bad = []
    for importer, source, name in _imports():
        if not source.startswith("evalstore"):
            continue  # another project's private modules are its own affair
        target = f"{source}.{name}" if f"{source}.{name}" in modules else source
        parts = target.split(".")
        for depth, part in enumerate(parts):
            if _private(part):
                package = ".".join(parts[:depth])
                if not (importer == package or importer.startswith(package + ".")):
                    bad.append(f"{importer} imports {target}")
                break
    assert bad == []


def test_the_check_sees_a_private_import() -> None:
    """The scan is not vacuous: it finds evalstore's imports of its private modules."""
    assert ("evalstore.trec_order", "evalstore", "_kernels") in _imports()
