"""ERR@k means what ir_measures (gdeval) means: stored ERR values get the name of what they are

Until 0007, ERR normalised its stopping probabilities by the highest grade in the qrels; ERR now
takes ``max_grade`` 4 by default, as gdeval (and so ir_measures' ``ERR@20``) does. Values stored
under ``ERR`` or ``ERR@k`` are renamed ``ERR(max_grade=G)`` / ``ERR(max_grade=G)@k``, G being the
highest grade of their qrels (at least 1), in the evaluations' measure lists, ``aggregate_results``
and ``query_results``. Where G is 4 the old and new definitions agree and nothing changes. MLflow
runs logged earlier keep their metric keys. A renamed evaluation keeps its options hash, so asking
for the renamed measures again computes them afresh rather than reusing it.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-23 15:00:00
"""

import json
import re
from collections.abc import Callable, Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_GDEVAL_MAX_GRADE = 4
_evaluations = sa.table(
    "evaluations",
    sa.column("id", sa.Integer),
    sa.column("qrels_id", sa.Integer),
    sa.column("measures", sa.Text),
    sa.column("options", sa.JSON),
)


def _old_to_new(name: str, grade: int) -> str | None:
    plain = re.fullmatch(r"ERR(@\d+)?", name)
    if plain:
        return f"ERR(max_grade={grade}){plain[1] or ''}" if grade != _GDEVAL_MAX_GRADE else None
    gdeval = re.fullmatch(rf"ERR\(max_grade={_GDEVAL_MAX_GRADE}\)(@\d+)?", name)
    return f"ERR{gdeval[1] or ''}" if gdeval else None  # 4 is now the default: the canonical name omits it


def _new_to_old(name: str, grade: int) -> str | None:
    if grade == _GDEVAL_MAX_GRADE:
        return None
    own = re.fullmatch(rf"ERR\(max_grade={grade}\)(@\d+)?", name)
    if own:  # what the old code called plain ERR for these qrels
        return f"ERR{own[1] or ''}"
    plain = re.fullmatch(r"ERR(@\d+)?", name)  # computed since with 4: the old code needs it explicit
    return f"ERR(max_grade={_GDEVAL_MAX_GRADE}){plain[1] or ''}" if plain else None


def _rename(rename: Callable[[str, int], str | None]) -> None:
    bind = op.get_bind()
    grades: dict[int, int] = {}
    rows = bind.execute(sa.select(_evaluations).where(_evaluations.c.qrels_id.is_not(None))).all()
    for evaluation_id, qrels_id, measures, options in rows:
        names = json.loads(measures)
        if not any(name.startswith("ERR") for name in names):
            continue
        if qrels_id not in grades:
            top = bind.execute(
                sa.text("SELECT max(relevance) FROM judgments WHERE qrels_id = :q"), {"q": qrels_id}
            ).scalar()
            grades[qrels_id] = max(int(top or 0), 1)
        mapping = {name: new for name in names if (new := rename(name, grades[qrels_id])) is not None}
        if not mapping:
            continue
        options = dict(options or {})
        options["measures"] = [mapping.get(name, name) for name in options.get("measures", names)]
        bind.execute(
            _evaluations.update()
            .where(_evaluations.c.id == evaluation_id)
            .values(measures=json.dumps([mapping.get(name, name) for name in names]), options=options)
        )
        for old, new in mapping.items():
            for table in ("aggregate_results", "query_results"):
                bind.execute(
                    sa.text(f"UPDATE {table} SET measure = :new WHERE evaluation_id = :id AND measure = :old"),
                    {"new": new, "id": evaluation_id, "old": old},
                )


def upgrade() -> None:
    _rename(_old_to_new)


def downgrade() -> None:
    _rename(_new_to_old)
