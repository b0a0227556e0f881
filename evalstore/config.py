"""Where evalstore keeps its data, read from the environment once."""

from __future__ import annotations

import os
from pathlib import Path

DATABASE_URL_ENV = "EVALSTORE_DATABASE_URL"
HOME_ENV = "EVALSTORE_HOME"


def data_home() -> Path:
    """The folder of the embedded default store (``$EVALSTORE_HOME`` or ``~/.evalstore``)."""
    return Path(os.environ.get(HOME_ENV) or Path.home() / ".evalstore")


def default_database_url() -> str:
    """``$EVALSTORE_DATABASE_URL``, else a SQLite file in :func:`data_home`."""
    url = os.environ.get(DATABASE_URL_ENV)
    if url:
        return url
    home = data_home()
    home.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{home / 'evalstore.db'}"
