"""docker/: no Docker engine runs here, so the compose file is checked by reading it (the
Dockerfile is linted by hadolint in scripts/test)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]


def test_compose_runs_postgres_mlflow_a_one_shot_upgrade_and_workers() -> None:
    compose = yaml.safe_load((ROOT / "docker" / "compose.yaml").read_text())
    services = compose["services"]
    assert {"postgres", "mlflow", "migrate", "worker"} <= set(services)

    migrate, worker = services["migrate"], services["worker"]
    assert migrate["command"] == ["db", "upgrade"] and migrate["restart"] == "no"
    assert migrate["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert worker["command"][0] == "worker"
    assert worker["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
    assert worker["depends_on"]["mlflow"]["condition"] == "service_healthy"
    assert worker["stop_signal"] == "SIGTERM" and worker["deploy"]["replicas"] >= 2

    # the workers and the upgrade use one database and one MLflow server, reachable by service name
    url = worker["environment"]["EVALSTORE_DATABASE_URL"]
    assert url == migrate["environment"]["EVALSTORE_DATABASE_URL"]
    assert re.fullmatch(
        r"postgresql\+psycopg://evalstore:\$\{POSTGRES_PASSWORD:-evalstore\}@postgres:5432/evalstore", url
    )
    assert worker["environment"]["MLFLOW_TRACKING_URI"] == "http://mlflow:5000"
    assert any(arg.startswith("--allowed-hosts=") and "mlflow:5000" in arg for arg in services["mlflow"]["command"])

    build = worker["build"]
    assert (ROOT / "docker" / build["context"] / build["dockerfile"]).resolve() == ROOT / "docker" / "Dockerfile"


def test_mlflow_server_image_matches_the_client_pin() -> None:
    compose = yaml.safe_load((ROOT / "docker" / "compose.yaml").read_text())
    server = re.fullmatch(r"ghcr\.io/mlflow/mlflow:v(\d+)\.(\d+)\.\d+", compose["services"]["mlflow"]["image"])
    assert server is not None
    dependencies = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    [pin] = [d for d in dependencies if d.startswith("mlflow-skinny")]
    assert f">={server[1]}.{server[2]},<{server[1]}.{int(server[2]) + 1}" in pin


def test_compose_serves_the_http_api_after_the_upgrade_on_the_shared_database() -> None:
    compose = yaml.safe_load((ROOT / "docker" / "compose.yaml").read_text())
    web, worker = compose["services"]["web"], compose["services"]["worker"]
    assert web["command"][:3] == ["serve", "--host", "0.0.0.0"]
    port = web["command"][web["command"].index("--port") + 1]
    assert web["ports"] == [f"{port}:{port}"]
    assert f"localhost:{port}/api/v1/health" in " ".join(web["healthcheck"]["test"])
    assert web["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
    assert web["environment"]["EVALSTORE_DATABASE_URL"] == worker["environment"]["EVALSTORE_DATABASE_URL"]
