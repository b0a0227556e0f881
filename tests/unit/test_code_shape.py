"""No function in evalstore has a body over 80 lines unless it says why.

A long function is split into the steps a reader would name. Where one really is one thing (a
parser's table of options, a dispatcher) its docstring says so with "Long because ...", or, for a
typer command whose docstring is its ``--help`` text, a ``# long because ...`` comment stands just
above its decorators. The body is counted from its first statement after the docstring to its last
line: the signature (a typer command's long ``Annotated`` parameter list) and the docstring are
what a reader is told, not code to follow.
"""

from __future__ import annotations

import ast
from pathlib import Path

import evalstore

ROOT = Path(evalstore.__file__).parent
MOST_LINES = 80
REASON = "long because"

Function = ast.FunctionDef | ast.AsyncFunctionDef


def _body_lines(node: Function) -> int:
    code = node.body[1:] if ast.get_docstring(node) is not None and len(node.body) > 1 else node.body
    end = node.end_lineno or node.lineno
    return end - code[0].lineno + 1


def _says_why(node: Function, lines: list[str]) -> bool:
    docstring = ast.get_docstring(node) or ""
    if REASON in docstring.lower():
        return True
    first = min([node.lineno, *(decorator.lineno for decorator in node.decorator_list)])
    above = first - 2  # the line just above the def or its first decorator, 0-based
    while above >= 0 and lines[above].strip().startswith("#"):
        if REASON in lines[above].lower():
            return True
        above -= 1
    return False


def long_functions(source: str, name: str) -> list[str]:
    """``name:line function (N lines)`` for each function in ``source`` too long without a reason."""
    lines = source.splitlines()
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        length = _body_lines(node)
        if length > MOST_LINES and not _says_why(node, lines):
            found.append(f"{name}:{node.lineno} {node.name} ({length} lines)")
    return found


def test_no_function_is_over_80_lines_without_a_reason() -> None:
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        found += long_functions(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT.parent)))
    assert found == []


def _function(body_lines: int, docstring: str = "", above: str = "", decorator: bool = False) -> str:
    head = [above] if above else []
    head += ["@decorator"] if decorator else []
    head += ["def f(", "    a: int,", ") -> None:"]
    body = [f'    """{docstring}"""'] if docstring else []
    body += ["    x = 1"] * (body_lines - len(body))
    return "\n".join(["import os", "", *head, *body, ""])


def test_the_check_counts_the_body_not_the_signature() -> None:
    assert long_functions(_function(80), "m.py") == []
    assert long_functions(_function(81), "m.py") == ["m.py:3 f (81 lines)"]
    assert long_functions(_function(81, docstring="Parses."), "m.py") == []  # 80 lines of code
    assert long_functions(_function(82, docstring="Parses."), "m.py") == ["m.py:3 f (81 lines)"]


def test_a_reason_in_the_docstring_or_a_comment_above_lets_it_be_long() -> None:
    assert long_functions(_function(83, docstring="Long because it is a table."), "m.py") == []
    assert long_functions(_function(81, above="# long because its options are a table"), "m.py") == []
    assert long_functions(_function(81, above="# long because of options", decorator=True), "m.py") == []
    assert long_functions(_function(81, above="# a comment that gives no reason"), "m.py") != []


def test_a_nested_function_is_counted_on_its_own() -> None:
    inner = "\n".join(["    def g() -> None:", *["        y = 2"] * 81])
    source = "def f() -> None:\n" + inner + "\n"
    assert [entry.split(" ")[1] for entry in long_functions(source, "m.py")] == ["f", "g"]
