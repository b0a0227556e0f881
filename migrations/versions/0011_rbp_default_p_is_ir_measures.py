"""RBP's default persistence is ir_measures' (p=0.8): stored RBP values get names saying their p

Until 0010 a plain ``RBP`` meant trec_eval's default p=0.9; it now means ir_measures' p=0.8 (and
trec_eval's name ``rbp`` still means 0.9). Canonical names leave defaults out, so stored ``RBP``
values are renamed ``RBP(p=0.9)`` and ``RBP(p=0.8)`` becomes ``RBP``, in the evaluations' measure
lists, ``aggregate_results`` and ``query_results`` (values untouched). The downgrade names them
back, and refuses while an ``RBP(rel=...)`` value (ir_measures' binary RBP, new here) is stored.
MLflow runs logged earlier keep their metric keys.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-24 05:00:00
"""

import json
import re
from collections.abc import Callable, Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_evaluations = sa.table(
    "evaluations", sa.column("id", sa.Integer), sa.column("measures", sa.Text), sa.column("options", sa.JSON)
)
_RBP = re.compile(r"RBP(?:\((?P<params>.*)\))?")


def _split(params: str | None) -> dict[str, str]:
    """name=value pairs of a canonical name; a gains mapping ({1:3,2:9}) holds commas of its own."""
    pairs, depth, current = [], 0, ""
    for char in params or "":
        depth += char == "{"
        depth -= char == "}"
        if char == "," and depth == 0:
            pairs.append(current)
            current = ""
        else:
            current += char
    if current:
        pairs.append(current)
    return dict(pair.split("=", 1) for pair in pairs)


def _name(params: dict[str, str]) -> str:
    inner = ",".join(f"{key}={value}" for key, value in sorted(params.items()))
    return f"RBP({inner})" if inner else "RBP"


def _with_default(name: str, old_default: str, new_default: str) -> str | None:
    """The name of the same values once the default p is ``new_default`` instead of ``old_default``."""
    match = _RBP.fullmatch(name)
    if not match:
        return None
    params = _split(match["params"])
    if "p" not in params:
        params["p"] = old_default
    elif params["p"] == new_default:
        del params["p"]
    renamed = _name(params)
    return renamed if renamed != name else None


def _old_to_new(name: str) -> str | None:
    return _with_default(name, "0.9", "0.8")


def _new_to_old(name: str) -> str | None:
    match = _RBP.fullmatch(name)
    if match and "rel" in _split(match["params"]):
        raise RuntimeError(
            f"cannot downgrade below 0011 while '{name}' (ir_measures' binary RBP) is stored: the older schema has "
            "no name for it; delete the evaluations that hold it first"
        )
    return _with_default(name, "0.8", "0.9")


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
        # two steps, so that names swapping places (RBP <-> RBP(p=0.8)) never collide
        for step, old in enumerate(mapping):
            for table in ("aggregate_results", "query_results"):
                bind.execute(
                    sa.text(f"UPDATE {table} SET measure = :tmp WHERE evaluation_id = :id AND measure = :old"),
                    {"tmp": f"~renaming {step}~", "id": evaluation_id, "old": old},
                )
        for step, new in enumerate(mapping.values()):
            for table in ("aggregate_results", "query_results"):
                bind.execute(
                    sa.text(f"UPDATE {table} SET measure = :new WHERE evaluation_id = :id AND measure = :tmp"),
                    {"new": new, "id": evaluation_id, "tmp": f"~renaming {step}~"},
                )


def upgrade() -> None:
    _rename(_old_to_new)


def downgrade() -> None:
    _rename(_new_to_old)
