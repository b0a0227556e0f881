"""The server's settings, as evalstore's settings (:mod:`evalstore.config`) give them (a deployment
sets them; clients never see them)."""

from __future__ import annotations

from dataclasses import dataclass

from evalstore import config
from evalstore.errors import InvalidParameterError


@dataclass(frozen=True)
class ServerSettings:
    database_url: str
    max_upload_bytes: int = 256 * 2**20
    public_leaderboards: bool = True  # False: nobody without a token sees anything
    writes_per_minute: int = 60  # per user (and per address for sign-ins), in each server process
    secure_cookies: bool = True  # False only for plain-HTTP development on localhost
    # PostgreSQL connections per server process: 20 served 50 clients' token-checked leaderboard
    # reads at p95 150 ms where SQLAlchemy's default 5 (+10) gave 290 ms (scripts/bench_server.py);
    # mind max_connections (100 by default) across server and worker processes
    db_pool_size: int = 20
    # the longest life of a token made over the API (never-expiring ones only from the admin CLI,
    # 'evalstore tokens create --never-expires'), and how many a user may make an hour: tokens are
    # free, and each one must not be a new quota of anything
    max_token_days: float = 365.0
    tokens_per_hour: int = 20
    # the addresses whose X-Forwarded-For / X-Forwarded-Proto are believed (a TLS proxy in front):
    # none by default, so a client cannot choose the address its sign-in limit is counted on
    forwarded_allow_ips: str = ""
    # a request body larger than this is read only when its credentials are valid (a token, or the
    # session cookie with its CSRF token in a header or the query): forms before sign-in are small
    max_body_before_sign_in: int = 64 * 2**10
    # a .gz upload inflates to at most this many bytes (413 past it, found while streaming)
    max_inflated_bytes: int = 1024 * 2**20
    # a request's time budget: past it the client gets 503 (the work in a thread is not killed,
    # its transaction ends when it does)
    request_seconds: float = 120.0
    # each team's runs per task in 24 hours (None: no daily cap; a task's own quota still holds)
    runs_per_day: int | None = None
    # anyone may ask for an account at /sign-up, to be approved by an admin (off: invites only)
    open_sign_up: bool = False

    @classmethod
    def from_env(cls) -> ServerSettings:
        """The settings now; a bad value of any of evalstore's variables (not only the server's)
        stops the server at start, with the variable's name and what it accepts."""
        problems = config.check_environment()
        if problems:
            raise InvalidParameterError(" ".join(str(p) for p in problems))

        def setting(name: str, default: object) -> object:
            found = config.value(name)
            return default if found is None else found

        return cls(
            database_url=config.default_database_url(),
            max_upload_bytes=int(float(setting("EVALSTORE_MAX_UPLOAD_MB", 256)) * 2**20),  # type: ignore[arg-type]
            public_leaderboards=bool(setting("EVALSTORE_PUBLIC_LEADERBOARDS", True)),
            writes_per_minute=int(setting("EVALSTORE_WRITES_PER_MINUTE", 60)),  # type: ignore[call-overload]
            secure_cookies=bool(setting("EVALSTORE_SECURE_COOKIES", True)),
            db_pool_size=int(setting("EVALSTORE_DB_POOL_SIZE", 20)),  # type: ignore[call-overload]
            max_token_days=float(setting("EVALSTORE_MAX_TOKEN_DAYS", 365.0)),  # type: ignore[arg-type]
            tokens_per_hour=int(setting("EVALSTORE_TOKENS_PER_HOUR", 20)),  # type: ignore[call-overload]
            forwarded_allow_ips=str(setting("EVALSTORE_FORWARDED_ALLOW_IPS", "")),
            max_inflated_bytes=int(float(setting("EVALSTORE_MAX_INFLATED_MB", 1024)) * 2**20),  # type: ignore[arg-type]
            request_seconds=float(setting("EVALSTORE_REQUEST_SECONDS", 120.0)),  # type: ignore[arg-type]
            runs_per_day=config.value("EVALSTORE_RUNS_PER_DAY"),
            open_sign_up=bool(setting("EVALSTORE_OPEN_SIGN_UP", False)),
        )
