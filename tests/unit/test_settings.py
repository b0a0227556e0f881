"""evalstore's settings: every variable declared once (evalstore.config.VARIABLES), read by no other
module, refused at start with its name and what it accepts."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from evalstore import config
from tests.conftest import Cli

ROOT = Path(__file__).resolve().parents[2]
SOURCES = sorted((ROOT / "evalstore").rglob("*.py"))


def test_no_module_but_the_settings_reads_the_environment() -> None:
    readers = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in SOURCES
        if path != ROOT / "evalstore" / "config.py"
        for number, line in enumerate(path.read_text().splitlines(), start=1)
        if re.search(r"\bos\.environ\b|\bos\.getenv\b|\bgetenv\(", line)
    ]
    assert readers == []


def test_every_variable_named_in_the_code_is_declared() -> None:
    named = {name for path in SOURCES for name in re.findall(r"\bEVALSTORE_[A-Z_]+\b", path.read_text())}
    # the client's options, read by typer from the command line's environment: not settings of a process
    named -= {"EVALSTORE_SERVER", "EVALSTORE_TOKEN"}
    # a prefix: the family of variables an operator sets for judges' keys (EVALSTORE_JUDGE_KEY_...),
    # each named by its judge, not a setting of the process
    named = {name for name in named if not name.endswith("_")}
    assert sorted(named - set(config.VARIABLES)) == []
    for variable in config.VARIABLES.values():
        assert variable.description.endswith(".") and variable.accepts and variable.group


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        (
            "EVALSTORE_MLFLOW_LEASE",
            "soon",
            "EVALSTORE_MLFLOW_LEASE='soon' is not a number of seconds from 1 to 3600; unset it for the default (15).",
        ),
        ("EVALSTORE_MLFLOW", "maybe", "EVALSTORE_MLFLOW='maybe' is not on or off; unset it for the default (on)."),
        (
            "EVALSTORE_RUNS_PER_DAY",
            "0",
            "EVALSTORE_RUNS_PER_DAY='0' is not a whole number from 1 to 100000; unset it for the default.",
        ),
        (
            "EVALSTORE_LOG_LEVEL",
            "loud",
            "EVALSTORE_LOG_LEVEL='loud' is not DEBUG, INFO, WARNING or ERROR; unset it for the default (INFO).",
        ),
    ],
)
def test_a_bad_value_stops_every_command_with_its_name(
    cli: Cli, monkeypatch: pytest.MonkeyPatch, name: str, value: str, message: str
) -> None:
    monkeypatch.setenv(name, value)
    result = cli("runs", "list")
    assert result.exit_code == 1
    assert result.stderr == f"Error: {message}\n"


def test_values_are_read_when_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = config.Settings()
    monkeypatch.setenv("EVALSTORE_MLFLOW", "off")
    assert settings.mlflow_enabled is False
    monkeypatch.setenv("EVALSTORE_MLFLOW", "on")
    assert settings.mlflow_enabled is True
    monkeypatch.setenv("EVALSTORE_SQLITE_BUSY_SECONDS", "2.5")
    assert settings.sqlite_busy_seconds == 2.5
    monkeypatch.delenv("EVALSTORE_SQLITE_BUSY_SECONDS")
    assert settings.sqlite_busy_seconds == 15.0


def test_a_child_gets_the_defaults_its_parent_does_not_set_and_the_overrides(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVALSTORE_TEST_MINE", "mine")
    monkeypatch.delenv("EVALSTORE_TEST_UNSET", raising=False)
    child = config.child_environment(
        {"EVALSTORE_TEST_MINE": "default", "EVALSTORE_TEST_UNSET": "default"}, EVALSTORE_TEST_FORCED="forced"
    )
    assert (child["EVALSTORE_TEST_MINE"], child["EVALSTORE_TEST_UNSET"], child["EVALSTORE_TEST_FORCED"]) == (
        "mine",
        "default",
        "forced",
    )
