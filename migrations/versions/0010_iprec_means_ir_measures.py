"""IPrec@x means what ir_measures means: stored values of trec_eval 10.0's IPrec are named so

Until 0009, ``IPrec@x`` made the recall level x a count of relevant documents as trec_eval 10.0
does (``lround(x*R)``); it now counts as ir_measures' ``IPrec@x`` does (through pytrec_eval,
trec_eval 9.x: ``(long)(x*R + 0.9)``), and trec_eval 10.0's is ``IPrec(rounding=trec_eval10)@x``,
which trec_eval's name ``iprec_at_recall_x`` still means. Stored ``IPrec`` values are renamed so in
the evaluations' measure lists, ``aggregate_results`` and ``query_results`` (values untouched). The
downgrade names them back, and refuses while values of the new default are stored: the older
schema has no name for them. MLflow runs logged earlier keep their metric keys.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-24 05:00:00
"""

import json
import re
from collections.abc import Callable, Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_evaluations = sa.table(
    "evaluations", sa.column("id", sa.Integer), sa.column("measures", sa.Text), sa.column("options", sa.JSON)
)
_TEN = "rounding=trec_eval10"
_IPREC = re.compile(r"IPrec(?:\((?P<params>[^)]*)\))?(?P<at>@.*)?")


def _params(match: re.Match[str]) -> list[str]:
    return [p for p in (match["params"] or "").split(",") if p]


def _old_to_new(name: str) -> str | None:
    match = _IPREC.fullmatch(name)
    if not match:
        return None
    params = sorted([*_params(match), _TEN])  # canonical names sort their parameters
    return f"IPrec({','.join(params)}){match['at'] or ''}"


def _new_to_old(name: str) -> str | None:
    match = _IPREC.fullmatch(name)
    if not match:
        return None
    params = _params(match)
    if _TEN not in params:
        raise RuntimeError(
            f"cannot downgrade below 0010 while '{name}' (ir_measures' interpolated precision) is stored: the "
            "older schema has no name for it; delete the evaluations that hold it first"
        )
    rest = [p for p in params if p != _TEN]
    return f"IPrec{'(' + ','.join(rest) + ')' if rest else ''}{match['at'] or ''}"


def _rename(rename: Callable[[str], str | None]) -> None:
    bind = op.get_bind()
    for evaluation_id, measures, options in bind.execute(sa.select(_evaluations)).all():
        names = json.loads(measures) if measures else []
        mapping = {name: new for name in names if (new := rename(name)) is not None}
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
