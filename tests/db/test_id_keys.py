"""The keys over ids read from files, on PostgreSQL: a lookup by id is answered by the key's index
(the query's written-out key must be the index's word for word, or the planner reads the whole
table), and a long id's key is its digest."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import Engine, select, text

from evalstore.db.engine import make_engine
from evalstore.db.keys import id_in, id_key, same_id
from evalstore.db.models import Document, GoldLabel, Judgment, PoolEntry
from tests.conftest import Templates, migrated_copy

pytestmark = pytest.mark.postgres


@pytest.fixture
def engine(templates: Templates, tmp_path: Path) -> Engine:
    url = migrated_copy(templates, "postgres", tmp_path)
    built = make_engine(url)
    yield built  # type: ignore[misc]
    built.dispose()
    templates.drop(url)


def _plan(engine: Engine, statement: object) -> str:
    with engine.connect() as connection:
        connection.exec_driver_sql("SET enable_seqscan = off")  # an empty table: only a usable index is taken
        compiled = statement.compile(engine, compile_kwargs={"literal_binds": True})  # type: ignore[attr-defined]
        return "\n".join(row[0] for row in connection.exec_driver_sql(f"EXPLAIN {compiled}"))


@pytest.mark.parametrize(
    ("statement", "index"),
    [
        (select(Document.text).where(Document.collection_id == 1, same_id(Document.doc, "d1")), "uq_documents_key"),
        (
            select(Document.text).where(Document.collection_id == 1, id_in(Document.doc, ["d1", "x" * 300])),
            "uq_documents_key",
        ),
        (select(PoolEntry.doc).where(PoolEntry.pool_id == 1, same_id(PoolEntry.topic, "301")), "uq_pool_entries_key"),
        (
            select(GoldLabel.label).where(GoldLabel.label_set_id == 1, same_id(GoldLabel.item_id, "i")),
            "uq_gold_labels_key",
        ),
        (  # the compare page's grades of the documents it shows (repositories.grades_of)
            select(Judgment.relevance).where(
                Judgment.qrels_id == 1, id_in(Judgment.topic, ["301"]), id_in(Judgment.doc, ["d1", "x" * 300])
            ),
            "uq_judgments_key",
        ),
    ],
    ids=["same_id", "id_in", "a key's prefix", "an item", "judgments"],
)
def test_a_lookup_by_id_is_answered_by_the_key_s_index(engine: Engine, statement: object, index: str) -> None:
    plan = _plan(engine, statement)
    assert f"Index Scan using {index}" in plan or f"Bitmap Index Scan on {index}" in plan, plan


def test_a_long_id_s_key_is_its_digest_and_a_short_one_is_itself(engine: Engine) -> None:
    long_id = "x" * 300
    with engine.connect() as connection:
        keys = connection.execute(select(id_key(text("'d1'")), id_key(text(f"'{long_id}'")))).one()
        digest = connection.execute(text(f"SELECT encode(sha256(convert_to('{long_id}', 'UTF8')), 'hex')")).scalar()
    assert keys == ("d1", f"sha256:{digest}")
