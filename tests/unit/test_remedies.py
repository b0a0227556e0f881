"""An error's fact and its remedy are given apart, and each edge words the remedy: the CLI names
the command, a page or the API names what to do in the browser, or tells someone who does not run
the service to ask their organiser. The services' messages name no command or option, so a page
never has to cut one out of them."""

from __future__ import annotations

import ast
import re
from collections import Counter
from pathlib import Path

import pytest

from evalstore.cli._errors import message_for
from evalstore.errors import (
    ConflictError,
    InputFormatError,
    InvalidParameterError,
    NotFoundError,
    Remedy,
    replace_or_rename,
    told,
)
from evalstore.services.access import ANONYMOUS, Principal
from evalstore.web.wording import ASK, for_reader, remedy_for

SOURCE = Path(__file__).resolve().parents[2] / "evalstore"
ADVICE = re.compile(r"['`(]evalstore [a-z]|(?<![\w-])--[a-z]")
# the calls whose string arguments are an error's message (``__init__``: an error class gives its
# own message to ``super().__init__``)
MESSAGE_TAKERS = {"get_named", "refuse_repeated", "__init__"}
# Modules only the command line reaches: their messages may name its options (a page never shows them)
COMMAND_LINE_ONLY = ("cli/", "backends/", "trec_eval/", "client.py")

PARTICIPANT = Principal(user_id=1, name="red", role="participant", team="red", via="session")
ORGANISER = Principal(user_id=2, name="olga", role="organiser", via="session")


def _strings(node: ast.AST) -> list[str]:
    """The string literals of ``node``, except a Remedy's (the CLI's words belong there)."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "Remedy":
        return []
    own = [node.value] if isinstance(node, ast.Constant) and isinstance(node.value, str) else []
    return own + [s for child in ast.iter_child_nodes(node) for s in _strings(child)]


def _modules() -> list[Path]:
    """Every module whose messages a page or the API may show: all but the command line's own."""
    paths = sorted(SOURCE.rglob("*.py"))
    return [p for p in paths if not p.relative_to(SOURCE).as_posix().startswith(COMMAND_LINE_ONLY)]


def _advising_messages() -> Counter[str]:
    found: Counter[str] = Counter()
    for path in _modules():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Raise) and node.exc is not None:
                message: ast.AST = node.exc
            elif isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", None)) in (
                MESSAGE_TAKERS
            ):
                message = node
            else:
                continue
            if any(ADVICE.search(text) for text in _strings(message)):
                found[path.relative_to(SOURCE).as_posix()] += 1
    return found


def _web_remedies() -> dict[str, list[str]]:
    """The string literals of every ``Remedy(web=...)``, by module."""
    found: dict[str, list[str]] = {}
    for path in sorted(SOURCE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "Remedy":
                for keyword in node.keywords:
                    if keyword.arg == "web":
                        found.setdefault(path.relative_to(SOURCE).as_posix(), []).extend(
                            n.value
                            for n in ast.walk(keyword.value)
                            if isinstance(n, ast.Constant) and isinstance(n.value, str)
                        )
    return found


def test_no_message_a_page_may_show_names_a_command_or_option_outside_its_remedy() -> None:
    """The pages show an error's fact as it is (evalstore.web.wording): a command or an option in
    a fact would reach a participant, who has no terminal on the server."""
    assert {"services/tasks/submissions.py", "web/pages.py", "errors.py"} <= {
        p.relative_to(SOURCE).as_posix() for p in _modules()
    }
    assert _advising_messages() == Counter()


def test_no_remedy_in_the_pages_words_names_a_command_or_option() -> None:
    found = _web_remedies()
    assert len(found) >= 3  # the scan sees them
    assert {module: [t for t in texts if ADVICE.search(t)] for module, texts in found.items()} == {
        module: [] for module in found
    }


def test_the_scan_sees_advice_in_a_message_and_not_in_a_remedy() -> None:
    tree = ast.parse(
        "raise NotFoundError(f\"No run named '{x}'. See 'evalstore runs list'.\")\n"
        "raise NotFoundError(f\"No run named '{x}'.\", remedy=Remedy(cli=\"See 'evalstore runs list'.\"))\n"
    )
    first, second = (node.exc for node in tree.body if isinstance(node, ast.Raise) and node.exc is not None)
    assert [bool(ADVICE.search(" ".join(_strings(n)))) for n in (first, second)] == [True, False]


def test_the_fact_is_the_message_and_the_cli_says_the_remedy_after_it() -> None:
    error = NotFoundError("No run named 'x'.", remedy=Remedy(cli="See 'evalstore runs list'."))
    assert str(error) == "No run named 'x'."
    assert message_for(error) == "Error: No run named 'x'. See 'evalstore runs list'."
    assert message_for(NotFoundError("No job 3.")) == "Error: No job 3."


@pytest.mark.parametrize(
    ("fact", "remedy", "said"),
    [
        ("No job 3.", None, "No job 3."),
        ("No job 3.", "See 'evalstore jobs list'.", "No job 3. See 'evalstore jobs list'."),
        ("r.csv: no run tag", "use --name-from file", "r.csv: no run tag; use --name-from file"),
        ("r.xlsx: unknown format", "(or name it with --format)", "r.xlsx: unknown format (or name it with --format)"),
        ("r.csv: no run tag", ASK, f"r.csv: no run tag. {ASK}"),
        ("a:1: bad\na:2: bad", "Fix them.", "a:1: bad\na:2: bad\nFix them."),
    ],
)
def test_a_remedy_follows_its_fact(fact: str, remedy: str | None, said: str) -> None:
    assert told(fact, remedy) == said


def test_an_input_error_keeps_its_path_line_form_with_the_remedy_after() -> None:
    error = InputFormatError(
        "r.csv", None, "no run tag to name the run after", remedy=Remedy(cli="use --name-from file")
    )
    assert str(error) == "r.csv: no run tag to name the run after"
    assert message_for(error) == "r.csv: no run tag to name the run after; use --name-from file"
    assert for_reader(error, PARTICIPANT) == f"r.csv: no run tag to name the run after. {ASK}"


def test_pages_word_the_remedy_for_their_reader() -> None:
    only_the_cli = InvalidParameterError(
        "Unknown measure 'x'.", remedy=Remedy(cli="Run 'evalstore measures' for the list.")
    )
    assert for_reader(only_the_cli, PARTICIPANT) == f"Unknown measure 'x'. {ASK}"
    assert for_reader(only_the_cli, ANONYMOUS) == f"Unknown measure 'x'. {ASK}"
    assert for_reader(only_the_cli, ORGANISER) == "Unknown measure 'x'. Run 'evalstore measures' for the list."
    taken = ConflictError("A run named 'x' already exists with different content.", remedy=replace_or_rename())
    assert (
        for_reader(taken, PARTICIPANT)
        == for_reader(taken, ORGANISER)
        == ("A run named 'x' already exists with different content. Choose another name.")
    )
    assert message_for(taken) == (
        "Error: A run named 'x' already exists with different content. "
        "Pass --replace to replace it, or choose another --name."
    )
    assert remedy_for(NotFoundError("No job 3."), PARTICIPANT) is None
