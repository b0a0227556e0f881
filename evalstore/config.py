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
    return os.environ.get(DATABASE_URL_ENV) or _sqlite_in_home("evalstore.db")


def _sqlite_in_home(filename: str) -> str:
    home = data_home()
    home.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{home / filename}"


MLFLOW_TRACKING_URI_ENV = "MLFLOW_TRACKING_URI"
MLFLOW_EXPERIMENT_ENV = "EVALSTORE_MLFLOW_EXPERIMENT"
MLFLOW_ENABLED_ENV = "EVALSTORE_MLFLOW"


def mlflow_tracking_uri() -> str:
    """``$MLFLOW_TRACKING_URI``, else a SQLite file beside evalstore's own (a separate database:
    MLflow 3 refuses the old ``./mlruns`` file store by default)."""
    return os.environ.get(MLFLOW_TRACKING_URI_ENV) or _sqlite_in_home("mlflow.db")


def mlflow_artifact_root(tracking_uri: str) -> Path | None:
    """Where a new experiment's artifacts go: beside a local SQLite store's file (MLflow would
    otherwise use ./mlruns under whatever folder the worker was started in); a tracking server
    decides for itself (None)."""
    if tracking_uri.startswith("sqlite:///"):
        return Path(tracking_uri.removeprefix("sqlite:///")).parent / "mlartifacts"
    return None


def mlflow_experiment_name(qrels_name: str) -> str:
    """One MLflow experiment per qrels set: ``$EVALSTORE_MLFLOW_EXPERIMENT`` with ``{qrels}``
    replaced (default ``evalstore/{qrels}``)."""
    return os.environ.get(MLFLOW_EXPERIMENT_ENV, "evalstore/{qrels}").replace("{qrels}", qrels_name)


def mlflow_enabled() -> bool:
    """``EVALSTORE_MLFLOW=off`` leaves results pending for a later ``evalstore mlflow sync``."""
    return os.environ.get(MLFLOW_ENABLED_ENV, "on").lower() not in ("off", "0", "false", "no")


def limit_mlflow_http_retries() -> None:
    """MLflow's HTTP client retries 7 times with exponential back-off by default (minutes against
    a dead server); a worker should put the logging back to pending quickly and carry on with its
    jobs. Called before MLflow is first used; the user's own settings win."""
    for key, value in (
        ("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "2"),
        ("MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR", "1"),
        ("MLFLOW_HTTP_REQUEST_TIMEOUT", "30"),
    ):
        os.environ.setdefault(key, value)


PASSWORD_COST_ENV = "EVALSTORE_PASSWORD_COST"
# argon2id's cost for passwords: RFC 9106's second recommended choice (3 passes over 64 MiB, 4
# lanes), ~50 ms on a server core, 100-200 ms on a small shared one
DEFAULT_PASSWORD_COST = (3, 65536, 4)


def password_cost() -> tuple[int, int, int]:
    """argon2id's (time cost, memory in KiB, lanes) for the passwords set from now on:
    ``$EVALSTORE_PASSWORD_COST`` as ``TIME,MEMORY_KIB,LANES``, else RFC 9106's second choice.
    Each hash records its own cost, so a change never locks anyone out: passwords set before keep
    theirs until they are set again. A bad value raises ValueError (this module sits below the
    exception tree: its callers say it in their own terms)."""
    value = os.environ.get(PASSWORD_COST_ENV)
    if not value:
        return DEFAULT_PASSWORD_COST
    parts = value.split(",")
    if len(parts) != 3 or not all(p.strip().isascii() and p.strip().isdigit() for p in parts):
        raise ValueError(
            f"{PASSWORD_COST_ENV}={value!r} is not TIME,MEMORY_KIB,LANES (e.g. 3,65536,4); unset it for the default."
        )
    time_cost, memory, lanes = (int(p) for p in parts)
    if not (1 <= time_cost <= 100 and 1 <= lanes <= 64 and 8 * lanes <= memory <= 4 * 1024 * 1024):
        raise ValueError(
            f"{PASSWORD_COST_ENV}={value!r} is out of range: TIME 1-100, LANES 1-64, "
            "MEMORY_KIB from 8 x LANES to 4194304 (4 GiB)."
        )
    return time_cost, memory, lanes


PASSWORD_CHECKS_ENV = "EVALSTORE_PASSWORD_CHECKS"
# argon2 passwords checked (or hashed) at once by one process: each takes its cost's memory (64 MiB
# by default) and its lanes' threads, so 16 anonymous sign-ins at once took +1 GB and made public
# pages 20-30 times slower; past this many, a sign-in is refused at once with a Retry-After
DEFAULT_PASSWORD_CHECKS = 2


def password_checks() -> int:
    """How many passwords one process checks at once: ``$EVALSTORE_PASSWORD_CHECKS`` (1-64), else
    2. A bad value raises ValueError."""
    value = os.environ.get(PASSWORD_CHECKS_ENV)
    if not value:
        return DEFAULT_PASSWORD_CHECKS
    if not (value.strip().isascii() and value.strip().isdigit() and 1 <= int(value) <= 64):
        raise ValueError(f"{PASSWORD_CHECKS_ENV}={value!r} is not a whole number from 1 to 64; unset it for 2.")
    return int(value)


MISSING_TOPICS_WARN_ENV = "EVALSTORE_MISSING_TOPICS_WARN"
REFUSE_NO_SHARED_TOPIC_ENV = "EVALSTORE_REFUSE_NO_SHARED_TOPIC"
# a run most of whose topics the qrels do not judge was most likely made for another collection:
# its mean is taken over the qrels' topics and reads as a poor system, not as a wrong file
DEFAULT_MISSING_TOPICS_WARN = 0.5


def missing_topics_warn() -> float:
    """The share of a submitted run's topics missing from the task's qrels above which the
    submission is accepted with a warning: ``$EVALSTORE_MISSING_TOPICS_WARN`` (0 to 1), else 0.5.
    A bad value raises ValueError."""
    value = os.environ.get(MISSING_TOPICS_WARN_ENV)
    if not value:
        return DEFAULT_MISSING_TOPICS_WARN
    try:
        share = float(value)
    except ValueError:
        share = -1.0
    if not 0 <= share <= 1:
        raise ValueError(f"{MISSING_TOPICS_WARN_ENV}={value!r} is not a share from 0 to 1; unset it for 0.5.")
    return share


def refuse_no_shared_topic() -> bool:
    """Whether a run sharing no topic with the qrels is refused (submitted to a task) and skipped
    (``evaluate --all-runs``) rather than scored 0 on every topic:
    ``EVALSTORE_REFUSE_NO_SHARED_TOPIC=off`` scores it; on by default."""
    return os.environ.get(REFUSE_NO_SHARED_TOPIC_ENV, "on").lower() not in ("off", "0", "false", "no")


class Settings:
    """The settings as one object, which an application context carries
    (:attr:`evalstore.services.context.AppContext.settings`). Each is read from the environment
    when asked, as the functions above read it: an operator's or a test's change shows in a
    running server or worker, as it did before the context carried them."""

    @property
    def data_home(self) -> Path:
        return data_home()

    @property
    def database_url(self) -> str:
        return default_database_url()

    @property
    def mlflow_enabled(self) -> bool:
        return mlflow_enabled()

    @property
    def mlflow_tracking_uri(self) -> str:
        return mlflow_tracking_uri()

    def mlflow_experiment_name(self, qrels_name: str) -> str:
        return mlflow_experiment_name(qrels_name)

    @property
    def password_checks(self) -> int:
        return password_checks()

    @property
    def missing_topics_warn(self) -> float:
        return missing_topics_warn()

    @property
    def refuse_no_shared_topic(self) -> bool:
        return refuse_no_shared_topic()
