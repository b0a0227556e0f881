"""The server's settings, from the environment (a deployment sets them; clients never see them)."""

from __future__ import annotations

import os
from dataclasses import dataclass

from evalstore.config import (
    DATABASE_URL_ENV,
    default_database_url,
    missing_topics_warn,
    password_checks,
    password_cost,
)
from evalstore.errors import InvalidParameterError

MAX_UPLOAD_ENV = "EVALSTORE_MAX_UPLOAD_MB"
PUBLIC_LEADERBOARDS_ENV = "EVALSTORE_PUBLIC_LEADERBOARDS"
WRITES_PER_MINUTE_ENV = "EVALSTORE_WRITES_PER_MINUTE"
SECURE_COOKIES_ENV = "EVALSTORE_SECURE_COOKIES"
DB_POOL_ENV = "EVALSTORE_DB_POOL_SIZE"
MAX_TOKEN_DAYS_ENV = "EVALSTORE_MAX_TOKEN_DAYS"
TOKENS_PER_HOUR_ENV = "EVALSTORE_TOKENS_PER_HOUR"
FORWARDED_ALLOW_IPS_ENV = "EVALSTORE_FORWARDED_ALLOW_IPS"
MAX_INFLATED_ENV = "EVALSTORE_MAX_INFLATED_MB"
REQUEST_SECONDS_ENV = "EVALSTORE_REQUEST_SECONDS"
RUNS_PER_DAY_ENV = "EVALSTORE_RUNS_PER_DAY"


def _flag(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    return default if value is None else value.strip().lower() not in ("0", "off", "false", "no")


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

    @classmethod
    def from_env(cls) -> ServerSettings:
        try:  # a bad $EVALSTORE_PASSWORD_COST, _CHECKS or _MISSING_TOPICS_WARN stops the server at
            password_cost()  # start, not at a sign-in or a submission
            password_checks()
            missing_topics_warn()
        except ValueError as bad:
            raise InvalidParameterError(str(bad)) from None
        return cls(
            database_url=os.environ.get(DATABASE_URL_ENV) or default_database_url(),
            max_upload_bytes=int(float(os.environ.get(MAX_UPLOAD_ENV, "256")) * 2**20),
            public_leaderboards=_flag(PUBLIC_LEADERBOARDS_ENV, True),
            writes_per_minute=int(os.environ.get(WRITES_PER_MINUTE_ENV, "60")),
            secure_cookies=_flag(SECURE_COOKIES_ENV, True),
            db_pool_size=int(os.environ.get(DB_POOL_ENV, "20")),
            max_token_days=float(os.environ.get(MAX_TOKEN_DAYS_ENV, "365")),
            tokens_per_hour=int(os.environ.get(TOKENS_PER_HOUR_ENV, "20")),
            forwarded_allow_ips=os.environ.get(FORWARDED_ALLOW_IPS_ENV, ""),
            max_inflated_bytes=int(float(os.environ.get(MAX_INFLATED_ENV, "1024")) * 2**20),
            request_seconds=float(os.environ.get(REQUEST_SECONDS_ENV, "120")),
            runs_per_day=int(os.environ[RUNS_PER_DAY_ENV]) if os.environ.get(RUNS_PER_DAY_ENV) else None,
        )
