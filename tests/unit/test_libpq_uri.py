"""A database URL reaches ADBC (libpq) as libpq reads URIs: percent-encoded, never form-encoded
(SQLAlchemy renders a space as '+', which libpq keeps as a plus)."""

from __future__ import annotations

from sqlalchemy.engine import make_url

from evalstore.db.arrow_reads import libpq_uri


def test_query_values_keep_their_spaces_and_the_driver_name_goes() -> None:
    url = make_url("postgresql+psycopg://me:p%40ss@db:5433/evals?options=-c%20statement_timeout%3D5s&sslmode=require")
    assert libpq_uri(url) == "postgresql://me:p%40ss@db:5433/evals?options=-c%20statement_timeout%3D5s&sslmode=require"
    assert libpq_uri(make_url("postgresql+psycopg://me@db/evals")) == "postgresql://me@db/evals"
