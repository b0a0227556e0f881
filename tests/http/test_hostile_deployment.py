"""docker/compose.yaml publishes no service holding scores without authentication: the
database and MLflow hold every result (hidden tasks' included), the HTTP service checks tokens."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]


def _command(service: dict[str, Any]) -> list[str]:
    command = service.get("command") or []
    return command.split() if isinstance(command, str) else [str(part) for part in command]


def holds_scores(service: dict[str, Any]) -> bool:
    image = str(service.get("image", ""))
    return "postgres" in image or "mlflow" in image or "mlflow" in _command(service)[:1]


def authenticates(service: dict[str, Any]) -> bool:
    command = _command(service)
    if "mlflow" in command[:1]:
        pairs = zip(command, command[1:], strict=False)
        return "--app-name=basic-auth" in command or ("--app-name", "basic-auth") in pairs
    if "postgres" in str(service.get("image", "")):
        environment = service.get("environment") or {}
        return environment.get("POSTGRES_HOST_AUTH_METHOD", "scram-sha-256") != "trust"
    return False


def unauthenticated_publications(compose: dict[str, Any]) -> list[str]:
    return [
        name
        for name, service in compose["services"].items()
        if holds_scores(service) and service.get("ports") and not authenticates(service)
    ]


def test_compose_publishes_no_score_holding_service_without_authentication() -> None:
    compose = yaml.safe_load((ROOT / "docker" / "compose.yaml").read_text())
    assert unauthenticated_publications(compose) == []
    assert "ports" not in compose["services"]["mlflow"]
    # the workers still reach it by its service name on the compose network
    assert compose["services"]["worker"]["environment"]["MLFLOW_TRACKING_URI"] == "http://mlflow:5000"


def test_the_check_catches_an_open_mlflow_and_accepts_basic_auth() -> None:
    """The check itself can fail: today's (before issue 36) compose file published MLflow open."""
    compose = yaml.safe_load((ROOT / "docker" / "compose.yaml").read_text())
    compose["services"]["mlflow"]["ports"] = ["5000:5000"]
    assert unauthenticated_publications(compose) == ["mlflow"]
    compose["services"]["mlflow"]["command"] = [*compose["services"]["mlflow"]["command"], "--app-name=basic-auth"]
    assert unauthenticated_publications(compose) == []
    compose["services"]["postgres"]["ports"] = ["5432:5432"]
    compose["services"]["postgres"]["environment"]["POSTGRES_HOST_AUTH_METHOD"] = "trust"
    assert unauthenticated_publications(compose) == ["postgres"]
