"""Diagnostics go to stderr, one line each; results stay alone on stdout."""

from __future__ import annotations

import logging

from evalstore.config import log_level


def configure_logging() -> None:
    level = log_level()
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    # MLflow announces its own database set-up and experiment creation at INFO on every start
    logging.getLogger("mlflow").setLevel(logging.WARNING)
    logging.getLogger("alembic").setLevel(logging.WARNING)
