"""The server's settings, from the environment (a deployment sets them; clients never see them)."""

from __future__ import annotations

import os
from dataclasses import dataclass

from evalstore.config import DATABASE_URL_ENV, default_database_url

MAX_UPLOAD_ENV = "EVALSTORE_MAX_UPLOAD_MB"
PUBLIC_LEADERBOARDS_ENV = "EVALSTORE_PUBLIC_LEADERBOARDS"
WRITES_PER_MINUTE_ENV = "EVALSTORE_WRITES_PER_MINUTE"
SECURE_COOKIES_ENV = "EVALSTORE_SECURE_COOKIES"
DB_POOL_ENV = "EVALSTORE_DB_POOL_SIZE"


def _flag(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    return default if value is None else value.strip().lower() not in ("0", "off", "false", "no")


@dataclass(frozen=True)
class ServerSettings:
    database_url: str
    max_upload_bytes: int = 256 * 2**20
    public_leaderboards: bool = True  # False: nobody without a token sees anything
    writes_per_minute: int = 60  # per token (and per address for sign-ins), in each server process
    secure_cookies: bool = True  # False only for plain-HTTP development on localhost
    # PostgreSQL connections per server process: 20 served 50 clients' token-checked leaderboard
    # reads at p95 150 ms where SQLAlchemy's default 5 (+10) gave 290 ms (scripts/bench_server.py);
    # mind max_connections (100 by default) across server and worker processes
    db_pool_size: int = 20

    @classmethod
    def from_env(cls) -> ServerSettings:
        return cls(
            database_url=os.environ.get(DATABASE_URL_ENV) or default_database_url(),
            max_upload_bytes=int(float(os.environ.get(MAX_UPLOAD_ENV, "256")) * 2**20),
            public_leaderboards=_flag(PUBLIC_LEADERBOARDS_ENV, True),
            writes_per_minute=int(os.environ.get(WRITES_PER_MINUTE_ENV, "60")),
            secure_cookies=_flag(SECURE_COOKIES_ENV, True),
            db_pool_size=int(os.environ.get(DB_POOL_ENV, "20")),
        )
