"""evalstore's settings: every environment variable it reads, declared once in :data:`VARIABLES`
with what it accepts, its default and what it does (the manual's settings reference is generated
from it), read through one object, :class:`Settings`, that an application context carries.

No other module reads the environment: they ask this one. A value is read when asked, not once at
start-up, so an operator's or a test's change shows in a running server or worker; a bad value
raises :class:`SettingsError` naming the variable and what it accepts, and every entry point
checks them all at start (:func:`check_environment`), so a typo stops a server before it serves.

Our own small declaration rather than pydantic-settings: `evalstore trec-eval` is measured
against trec_eval's whole run (~0.13 s), and importing pydantic costs ~60 ms of it; the variables
are flat strings that a parser per kind reads in a few lines.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any


class SettingsError(ValueError):
    """An environment variable's value that its parser refuses. This module sits below the
    exception tree (:mod:`evalstore.errors`): its callers say it in their own terms."""

    def __init__(self, variable: Variable, value: str) -> None:
        self.variable = variable
        self.value = value
        default = "" if variable.default is None else f" ({variable.default})"
        super().__init__(f"{variable.name}={value!r} is not {variable.accepts}; unset it for the default{default}.")


@dataclass(frozen=True)
class Variable:
    name: str
    accepts: str  # what a value may be, in words, after "is not"
    default: str | None  # as a user would write it; None: unset means "none"
    description: str
    parse: Callable[[str], Any]
    group: str  # the settings reference's sections


def _number(kind: type, low: float, high: float) -> Callable[[str], Any]:
    def parse(text: str) -> Any:
        value = kind(text)  # ValueError for what is not a number
        if not low <= value <= high:
            raise ValueError(text)
        return value

    return parse


def _flag(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("1", "on", "true", "yes"):
        return True
    if lowered in ("0", "off", "false", "no"):
        return False
    raise ValueError(text)


def _text(text: str) -> str:
    return text


def _password_cost(text: str) -> tuple[int, int, int]:
    parts = text.split(",")
    if len(parts) != 3 or not all(p.strip().isascii() and p.strip().isdigit() for p in parts):
        raise ValueError(text)
    time_cost, memory, lanes = (int(p) for p in parts)
    if not (1 <= time_cost <= 100 and 1 <= lanes <= 64 and 8 * lanes <= memory <= 4 * 1024 * 1024):
        raise ValueError(text)
    return time_cost, memory, lanes


def _log_level(text: str) -> str:
    level = text.strip().upper()
    if level not in ("DEBUG", "INFO", "WARNING", "ERROR"):
        raise ValueError(text)
    return level


def _cache_dir(text: str) -> Path | None:
    return None if text.strip().lower() in ("off", "0", "false", "no", "none", "") else Path(text)


_SECONDS = "a number of seconds from {} to {}"
VARIABLES: Mapping[str, Variable] = {
    v.name: v
    for v in (
        # the store
        Variable(
            "EVALSTORE_HOME",
            "a folder",
            "~/.evalstore",
            "Where the embedded default keeps its SQLite store, MLflow store and logs.",
            Path,
            "Store",
        ),
        Variable(
            "EVALSTORE_DATABASE_URL",
            "a SQLAlchemy database URL",
            "sqlite:///$EVALSTORE_HOME/evalstore.db",
            "The store: a SQLite file or PostgreSQL (`postgresql+psycopg://user@host/db`).",
            _text,
            "Store",
        ),
        Variable(
            "EVALSTORE_SQLITE_BUSY_SECONDS",
            _SECONDS.format(0.1, 3600),
            "15",
            "How long a SQLite writer waits for the write lock another holds before it says who waits for what.",
            _number(float, 0.1, 3600),
            "Store",
        ),
        Variable(
            "EVALSTORE_RETRY_LONGEST_SECONDS",
            _SECONDS.format(1, 600),
            "30",
            "The longest pause of a worker waiting for its database to come back (the pauses double up to it).",
            _number(float, 1, 600),
            "Store",
        ),
        # MLflow
        Variable(
            "MLFLOW_TRACKING_URI",
            "an MLflow tracking URI",
            "sqlite:///$EVALSTORE_HOME/mlflow.db",
            "Where evaluations are delivered: a SQLite store (MLflow's file store is refused) or a tracking server.",
            _text,
            "MLflow",
        ),
        Variable(
            "EVALSTORE_MLFLOW",
            "on or off",
            "on",
            "off: nothing is delivered to MLflow; results stay pending for a later `evalstore mlflow sync`.",
            _flag,
            "MLflow",
        ),
        Variable(
            "EVALSTORE_MLFLOW_EXPERIMENT",
            "a name, where {qrels} stands for the qrels set's",
            "evalstore/{qrels}",
            "The MLflow experiment of each qrels set's evaluations.",
            _text,
            "MLflow",
        ),
        Variable(
            "EVALSTORE_MLFLOW_LEASE",
            _SECONDS.format(1, 3600),
            "15",
            "How long a deliverer's claim on a delivery lasts unless renewed: a dead deliverer's work is taken "
            "over after it.",
            _number(float, 1, 3600),
            "MLflow",
        ),
        Variable(
            "EVALSTORE_MLFLOW_BACKOFF",
            _SECONDS.format(1, 3600),
            "60",
            "The longest wait between a deliverer's attempts while MLflow fails (it doubles from 1 s).",
            _number(float, 1, 3600),
            "MLflow",
        ),
        # workers
        Variable(
            "EVALSTORE_BATCH_JOBS",
            "a whole number from 1 to 10000",
            "16",
            "The most queued ranking jobs on one qrels a worker claims and computes in one pass "
            "(`worker --batch-jobs`).",
            _number(int, 1, 10000),
            "Workers",
        ),
        Variable(
            "EVALSTORE_BATCH_ROWS",
            "a whole number from 1 to 100000000",
            "500000",
            "The most stored run rows in one batch (`worker --batch-rows`).",
            _number(int, 1, 100_000_000),
            "Workers",
        ),
        Variable(
            "EVALSTORE_WORKER_NICE",
            "a whole number from 0 to 19",
            "10",
            "How far a worker process lowers its CPU priority (`worker --nice`, as nice(1) does): on a host it "
            "shares with `evalstore serve`, uploads and pages get the cores first, evaluations what is left.",
            _number(int, 0, 19),
            "Workers",
        ),
        Variable(
            "EVALSTORE_LOG_LEVEL",
            "DEBUG, INFO, WARNING or ERROR",
            "INFO",
            "How much the worker, the server and `mlflow sync` log on stderr.",
            _log_level,
            "Workers",
        ),
        # files
        Variable(
            "EVALSTORE_CACHE_DIR",
            "a folder, or off",
            "$XDG_CACHE_HOME/evalstore (~/.cache/evalstore)",
            "Where `trec-eval` keeps the qrels it has read for the next command; off keeps nothing.",
            _cache_dir,
            "Files",
        ),
        # the HTTP service
        Variable(
            "EVALSTORE_MAX_UPLOAD_MB",
            "a number of MiB from 1 to 65536",
            "256",
            "The largest request body the service takes (an upload, as sent).",
            _number(float, 1, 65536),
            "Service",
        ),
        Variable(
            "EVALSTORE_MAX_INFLATED_MB",
            "a number of MiB from 1 to 1048576",
            "1024",
            "The most a gzipped upload may inflate to (413 past it, found while streaming).",
            _number(float, 1, 1_048_576),
            "Service",
        ),
        Variable(
            "EVALSTORE_PUBLIC_LEADERBOARDS",
            "on or off",
            "on",
            "off: nobody without a token or a session sees any page or board.",
            _flag,
            "Service",
        ),
        Variable(
            "EVALSTORE_WRITES_PER_MINUTE",
            "a whole number from 1 to 1000000",
            "60",
            "Writes per user (and sign-ins per address) a minute, in each server process.",
            _number(int, 1, 1_000_000),
            "Service",
        ),
        Variable(
            "EVALSTORE_SECURE_COOKIES",
            "on or off",
            "on",
            "off only for plain-HTTP development on this machine: the session cookie is then not marked Secure.",
            _flag,
            "Service",
        ),
        Variable(
            "EVALSTORE_DB_POOL_SIZE",
            "a whole number from 1 to 1000",
            "20",
            "PostgreSQL connections per server process (mind max_connections across servers and workers).",
            _number(int, 1, 1000),
            "Service",
        ),
        Variable(
            "EVALSTORE_MAX_TOKEN_DAYS",
            "a number of days from 0.01 to 36500",
            "365",
            "The longest life of a token made over the API.",
            _number(float, 0.01, 36500),
            "Service",
        ),
        Variable(
            "EVALSTORE_INVITE_DAYS",
            "a number of days from 0.01 to 365",
            "7",
            "How long an invite link an admin makes stays usable (it is single-use).",
            _number(float, 0.01, 365),
            "Service",
        ),
        Variable(
            "EVALSTORE_OPEN_SIGN_UP",
            "on or off",
            "off",
            "on: anyone may ask for an account at /sign-up; it signs in once an admin approves it "
            "(with a role and team) on the people page.",
            _flag,
            "Service",
        ),
        Variable(
            "EVALSTORE_RESET_HOURS",
            "a number of hours from 0.1 to 720",
            "24",
            "How long a password-reset link an admin makes stays usable (it is single-use).",
            _number(float, 0.1, 720),
            "Service",
        ),
        Variable(
            "EVALSTORE_TOKENS_PER_HOUR",
            "a whole number from 1 to 100000",
            "20",
            "How many tokens a user may make an hour.",
            _number(int, 1, 100_000),
            "Service",
        ),
        Variable(
            "EVALSTORE_FORWARDED_ALLOW_IPS",
            "a comma-separated list of addresses",
            "",
            "The proxies whose X-Forwarded-For and X-Forwarded-Proto are believed (a TLS proxy in front).",
            _text,
            "Service",
        ),
        Variable(
            "EVALSTORE_REQUEST_SECONDS",
            _SECONDS.format(1, 86400),
            "120",
            "A request's time budget: past it the client gets 503.",
            _number(float, 1, 86400),
            "Service",
        ),
        Variable(
            "EVALSTORE_RUNS_PER_DAY",
            "a whole number from 1 to 100000",
            None,
            "Each team's runs per task in 24 hours, where a task sets no daily cap of its own (none by default).",
            _number(int, 1, 100_000),
            "Service",
        ),
        Variable(
            "EVALSTORE_MISSING_TOPICS_WARN",
            "a share from 0 to 1",
            "0.5",
            "A submitted run more of whose topics than this share the task's qrels do not judge is stored with a "
            "warning (most likely made for another collection).",
            _number(float, 0, 1),
            "Service",
        ),
        Variable(
            "EVALSTORE_REFUSE_NO_SHARED_TOPIC",
            "on or off",
            "on",
            "on: a run sharing no topic with the qrels is refused when submitted and skipped by "
            "`evaluate --all-runs`; off scores it 0 on every topic.",
            _flag,
            "Service",
        ),
        Variable(
            "EVALSTORE_UPLOAD_SLOTS",
            "a whole number from 1 to 64",
            "2",
            "Run files one process validates and stores at once (a task's submissions); more wait their turn "
            "(first come, first served), as many uploads at once each cost more CPU and all finish late.",
            _number(int, 1, 64),
            "Service",
        ),
        Variable(
            "EVALSTORE_PASSWORD_CHECKS",
            "a whole number from 1 to 64",
            "2",
            "argon2 password checks one process runs at once (each takes its cost's memory and threads); past "
            "them a sign-in is refused at once (503 with Retry-After).",
            _number(int, 1, 64),
            "Service",
        ),
        Variable(
            "EVALSTORE_PASSWORD_COST",
            "TIME,MEMORY_KIB,LANES (e.g. 3,65536,4; TIME 1-100, LANES 1-64, MEMORY_KIB from 8 x LANES to 4194304)",
            "3,65536,4",
            "argon2id's cost for the passwords set from then on (RFC 9106's second choice by default); each hash "
            "keeps its own, so a change locks nobody out.",
            _password_cost,
            "Service",
        ),
    )
}


def value(name: str, environ: Mapping[str, str] | None = None) -> Any:
    """The variable's value as its parser reads it, None when unset and without a default that
    parses (a default written for people, like ``~/.evalstore``, is worked out by its caller)."""
    variable = VARIABLES[name]
    text = (os.environ if environ is None else environ).get(name)
    if text is None or text == "":
        return None
    try:
        return variable.parse(text)
    except (ValueError, TypeError):
        raise SettingsError(variable, text) from None


def check_environment(environ: Mapping[str, str] | None = None) -> list[SettingsError]:
    """Every set variable that its parser refuses: what an entry point checks at start."""
    problems = []
    for name in VARIABLES:
        try:
            value(name, environ)
        except SettingsError as bad:
            problems.append(bad)
    return problems


def secret(name: str) -> str | None:
    """The value of an environment variable a user named to hold a secret (a judge's API key):
    read when used, never stored."""
    return os.environ.get(name) or None


def child_environment(defaults: Mapping[str, str] | None = None, /, **overrides: str) -> dict[str, str]:
    """The environment a process this one starts gets: this one's, with ``defaults`` where it
    sets none of them, and ``overrides``."""
    return {**(defaults or {}), **os.environ, **overrides}


def terminal_columns() -> int:
    """``$COLUMNS`` as a shell sets it, else 0 (the caller asks the terminal)."""
    try:
        return int(os.environ.get("COLUMNS", "0"))
    except ValueError:
        return 0


def pass_on(name: str, text: str) -> None:
    """Set ``name`` for the processes this one starts from now on (the server's processes read
    their settings from the environment they inherit)."""
    os.environ[name] = text


def limit_blas_threads() -> None:
    """One BLAS thread, before numpy is imported (the ``evalstore`` command's first step; the
    processes it starts inherit it): evalstore multiplies only small matrices, and OpenBLAS
    otherwise starts a thread per core at numpy's import that spins after each product, taking
    CPU from the other processes on the machine. The user's own setting wins."""
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def xdg_cache_home() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")


DATABASE_URL_ENV = "EVALSTORE_DATABASE_URL"
HOME_ENV = "EVALSTORE_HOME"
MLFLOW_TRACKING_URI_ENV = "MLFLOW_TRACKING_URI"
MLFLOW_EXPERIMENT_ENV = "EVALSTORE_MLFLOW_EXPERIMENT"
MLFLOW_ENABLED_ENV = "EVALSTORE_MLFLOW"
PASSWORD_COST_ENV = "EVALSTORE_PASSWORD_COST"
PASSWORD_CHECKS_ENV = "EVALSTORE_PASSWORD_CHECKS"
SQLITE_BUSY_SECONDS_ENV = "EVALSTORE_SQLITE_BUSY_SECONDS"
RETRY_LONGEST_ENV = "EVALSTORE_RETRY_LONGEST_SECONDS"
MLFLOW_LEASE_ENV = "EVALSTORE_MLFLOW_LEASE"
MLFLOW_BACKOFF_ENV = "EVALSTORE_MLFLOW_BACKOFF"
# a deliverer renews its claim every third of the lease; the longest wait between its attempts while
# MLflow fails (it doubles from 1 s)
DEFAULT_MLFLOW_LEASE = 15.0
DEFAULT_MLFLOW_BACKOFF = 60.0
# argon2id's cost for passwords: RFC 9106's second recommended choice (3 passes over 64 MiB, 4
# lanes), ~50 ms on a server core, 100-200 ms on a small shared one
DEFAULT_PASSWORD_COST = (3, 65536, 4)


def data_home() -> Path:
    """The folder of the embedded default store (``$EVALSTORE_HOME`` or ``~/.evalstore``)."""
    home = value(HOME_ENV)
    return home if home is not None else Path.home() / ".evalstore"


def default_database_url() -> str:
    """``$EVALSTORE_DATABASE_URL``, else a SQLite file in :func:`data_home`."""
    return value(DATABASE_URL_ENV) or _sqlite_in_home("evalstore.db")


def _sqlite_in_home(filename: str) -> str:
    home = data_home()
    home.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{home / filename}"


def mlflow_tracking_uri() -> str:
    """``$MLFLOW_TRACKING_URI``, else a SQLite file beside evalstore's own (a separate database:
    MLflow 3 refuses the old ``./mlruns`` file store by default)."""
    return value(MLFLOW_TRACKING_URI_ENV) or _sqlite_in_home("mlflow.db")


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
    return (value(MLFLOW_EXPERIMENT_ENV) or "evalstore/{qrels}").replace("{qrels}", qrels_name)


def mlflow_enabled() -> bool:
    """``EVALSTORE_MLFLOW=off`` leaves results pending for a later ``evalstore mlflow sync``."""
    enabled = value(MLFLOW_ENABLED_ENV)
    return True if enabled is None else bool(enabled)


def limit_mlflow_http_retries() -> None:
    """MLflow's HTTP client retries 7 times with exponential back-off by default (minutes against
    a dead server); a deliverer should put the delivery back to pending quickly and carry on.
    Called before MLflow is first used; the user's own settings win."""
    for key, setting in (
        ("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "2"),
        ("MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR", "1"),
        ("MLFLOW_HTTP_REQUEST_TIMEOUT", "30"),
    ):
        os.environ.setdefault(key, setting)


def password_cost() -> tuple[int, int, int]:
    """argon2id's (time cost, memory in KiB, lanes) for the passwords set from now on:
    ``$EVALSTORE_PASSWORD_COST`` as ``TIME,MEMORY_KIB,LANES``, else RFC 9106's second choice.
    Each hash records its own cost, so a change never locks anyone out: passwords set before keep
    theirs until they are set again. A bad value raises SettingsError (a ValueError)."""
    cost = value(PASSWORD_COST_ENV)
    return DEFAULT_PASSWORD_COST if cost is None else cost


def _or(name: str, default: Any) -> Any:
    found = value(name)
    return default if found is None else found


def invite_days() -> float:
    return float(_or("EVALSTORE_INVITE_DAYS", 7.0))


def reset_hours() -> float:
    return float(_or("EVALSTORE_RESET_HOURS", 24.0))


def password_checks() -> int:
    return int(_or("EVALSTORE_PASSWORD_CHECKS", 2))


def upload_slots() -> int:
    return int(_or("EVALSTORE_UPLOAD_SLOTS", 2))


def sqlite_busy_seconds() -> float:
    return float(_or("EVALSTORE_SQLITE_BUSY_SECONDS", 15.0))


def retry_longest_seconds() -> float:
    return float(_or("EVALSTORE_RETRY_LONGEST_SECONDS", 30.0))


def mlflow_lease_seconds() -> float:
    return float(_or("EVALSTORE_MLFLOW_LEASE", DEFAULT_MLFLOW_LEASE))


def mlflow_backoff_seconds() -> float:
    return float(_or("EVALSTORE_MLFLOW_BACKOFF", DEFAULT_MLFLOW_BACKOFF))


def batch_jobs(default: int) -> int:
    return int(_or("EVALSTORE_BATCH_JOBS", default))


def batch_rows(default: int) -> int:
    return int(_or("EVALSTORE_BATCH_ROWS", default))


def log_level() -> str:
    return str(_or("EVALSTORE_LOG_LEVEL", "INFO"))


def cache_dir() -> Path | None:
    """Where `trec-eval` keeps parsed qrels: ``$EVALSTORE_CACHE_DIR`` (None for off), else
    ``$XDG_CACHE_HOME/evalstore``."""
    if os.environ.get("EVALSTORE_CACHE_DIR") is not None:
        chosen: Path | None = VARIABLES["EVALSTORE_CACHE_DIR"].parse(os.environ["EVALSTORE_CACHE_DIR"])
        return chosen
    return xdg_cache_home() / "evalstore"


MISSING_TOPICS_WARN_ENV = "EVALSTORE_MISSING_TOPICS_WARN"
REFUSE_NO_SHARED_TOPIC_ENV = "EVALSTORE_REFUSE_NO_SHARED_TOPIC"
# a run most of whose topics the qrels do not judge was most likely made for another collection:
# its mean is taken over the qrels' topics and reads as a poor system, not as a wrong file
DEFAULT_MISSING_TOPICS_WARN = 0.5


def missing_topics_warn() -> float:
    """The share of a submitted run's topics missing from the task's qrels above which the
    submission is accepted with a warning."""
    return float(_or(MISSING_TOPICS_WARN_ENV, DEFAULT_MISSING_TOPICS_WARN))


def refuse_no_shared_topic() -> bool:
    """Whether a run sharing no topic with the qrels is refused (submitted to a task) and skipped
    (``evaluate --all-runs``) rather than scored 0 on every topic."""
    return bool(_or(REFUSE_NO_SHARED_TOPIC_ENV, True))


class Settings:
    """The settings as one object, which an application context carries
    (:attr:`evalstore.services.context.AppContext.settings`). Each is read from the environment
    when asked: an operator's or a test's change shows in a running server or worker."""

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
    def sqlite_busy_seconds(self) -> float:
        return sqlite_busy_seconds()

    @property
    def retry_longest_seconds(self) -> float:
        return retry_longest_seconds()

    @property
    def mlflow_lease_seconds(self) -> float:
        return mlflow_lease_seconds()

    @property
    def mlflow_backoff_seconds(self) -> float:
        return mlflow_backoff_seconds()

    @property
    def log_level(self) -> str:
        return log_level()

    @property
    def invite_days(self) -> float:
        return invite_days()

    @property
    def reset_hours(self) -> float:
        return reset_hours()

    @property
    def password_checks(self) -> int:
        return password_checks()

    @property
    def upload_slots(self) -> int:
        return upload_slots()

    @property
    def missing_topics_warn(self) -> float:
        return missing_topics_warn()

    @property
    def refuse_no_shared_topic(self) -> bool:
        return refuse_no_shared_topic()
