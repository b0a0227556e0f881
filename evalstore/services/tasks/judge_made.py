"""What a leaderboard, a qrels version and an agreement report say about labels a judge made:
which judge and model made them, the judge's stored probe result (how far inserted
query words, an inserted instruction and a quoted final score raised its labels), and the runs that declare that model
(circularity: Clarke & Dietz 2024; a run reranked by the judge's own LLM is favoured by its labels).

A run declares the models it used in its metadata: ``runs register --meta models=gpt-4o,monot5``
(names separated by commas), or any ``model``/``models`` key of its ir_metadata block (e.g.
``method: {reranker: {model: gpt-4o}}``). Names are compared without regard to case.

Here, below the judges package, because a task's leaderboard (tasks.boards) marks circular runs
and shows the probe, and the judges package builds on tasks.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, TypedDict

from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from evalstore.db.models import Judge, JudgeProbe, QrelsSet, QrelsVersion, Run
from evalstore.db.session import read_only
from evalstore.io.ir_metadata import METADATA_KEY as IR_METADATA
from evalstore.io.ir_metadata import parse_block

ATTACK_NAMES = {
    "query_words": "query words inserted",
    "instruction": "instruction inserted",
    "quoted_score": "final score quoted",
}


def _names(value: Any) -> set[str]:
    items = value if isinstance(value, list) else str(value or "").split(",")
    return {str(n).strip().lower() for n in items if str(n).strip() and not isinstance(n, dict | list)}


def _ir_models(data: Any) -> set[str]:
    """Every value under a ``model`` or ``models`` key, at any depth of an ir_metadata block."""
    found: set[str] = set()
    if isinstance(data, dict):
        for key, value in data.items():
            if str(key).lower() in ("model", "models") and not isinstance(value, dict):
                found |= _names(value)
            else:
                found |= _ir_models(value)
    elif isinstance(data, list):
        for item in data:
            found |= _ir_models(item)
    return found


def declared_models(metadata: dict[str, Any] | None) -> set[str]:
    """The models a run declares (lower-cased): its ``models`` metadata and its ir_metadata's."""
    stored = metadata or {}
    found = _names(stored.get("models"))
    block = stored.get(IR_METADATA)
    if isinstance(block, str):
        found |= _ir_models(parse_block(block).data)
    return found


def _version(session: Session, qrels_name: str) -> QrelsVersion | None:
    return session.scalar(
        select(QrelsVersion).join(QrelsSet, QrelsSet.id == QrelsVersion.qrels_id).where(QrelsSet.name == qrels_name)
    )


def judge_models(session: Session, qrels_name: str) -> set[str]:
    """The models whose labels are in the qrels (none for qrels that are not a judge-made version)."""
    version = _version(session, qrels_name)
    sources = version.sources if version is not None else {}
    models = [sources.get("model")] + [m.get("model") for m in sources.get("members") or [] if isinstance(m, dict)]
    return {str(model).lower() for model in models if model}  # an ensemble: every member's


class ProbeResult(TypedDict):
    """A judge's stored probe as boards, versions and reports send it (a TypedDict: it goes to
    JSON as built): where it was run, on how many documents, and per attack how many labels
    rose, stayed and fell."""

    collection: str
    qrels: str
    documents: int | None
    at: str
    attacks: dict[str, dict[str, Any]]


# The judge behind judge-made labels, as a board and a version show it; in the functional form,
# as the key "from" is a Python keyword.
JudgeBehind = TypedDict(
    "JudgeBehind",
    {
        "judge": str,
        "model": str | None,
        "from": str | None,
        "version": str,
        "probe": ProbeResult | None,
        "probe_text": str,
    },
)


def probe_result(session: Session, judge_name: str, config_hash: str | None) -> ProbeResult | None:
    """The judge's newest stored probe under the configuration that made the labels (a probe of
    another configuration says nothing about them), or None when it was never probed so."""
    row = session.execute(
        select(JudgeProbe.collection, JudgeProbe.qrels, JudgeProbe.result, JudgeProbe.created_at)
        .join(Judge, Judge.id == JudgeProbe.judge_id)
        .where(Judge.name == judge_name, JudgeProbe.config_hash == config_hash)
        .order_by(JudgeProbe.id.desc())
        .limit(1)
    ).first()
    if row is None:
        return None
    collection, qrels, result, at = row
    attacks = {
        attack: {k: result[attack].get(k) for k in ("compared", "rose", "same", "fell", "share_rose", "mean_change")}
        for attack in ATTACK_NAMES
        if isinstance(result.get(attack), dict)
    }
    return ProbeResult(
        collection=collection, qrels=qrels, documents=result.get("documents"), at=at.isoformat(), attacks=attacks
    )


def probe_text(probe: ProbeResult | None) -> str:
    """One line for a table or a page: per attack, how many labels rose and the mean change."""
    if probe is None:
        return "not probed (evalstore judges probe)"
    parts = []
    for attack, name in ATTACK_NAMES.items():
        shown = probe["attacks"].get(attack)
        if shown is None or not shown.get("compared"):
            continue
        change = shown.get("mean_change")
        parts.append(
            f"{name}: {shown['rose']} of {shown['compared']} labels rose"
            + ("" if change is None else f" (mean change {change:+.2f})")
        )
    return "; ".join(parts) or f"probed on {probe['documents']} documents, none rated"


def judge_behind(session: Session, qrels_name: str) -> JudgeBehind | None:
    """The judge behind a judge-made (or hybrid) qrels version: its name, model, the version's
    source, and its probe result; None for qrels no judge labelled."""
    version = _version(session, qrels_name)
    if version is None or not version.sources.get("judge"):
        return None
    sources = version.sources
    probe = probe_result(session, str(sources["judge"]), sources.get("judge_config"))
    return JudgeBehind(
        {
            "judge": sources["judge"],
            "model": sources.get("model"),
            "from": sources.get("from"),
            "version": f"{version.name}@v{version.version}",
            "probe": probe,
            "probe_text": probe_text(probe),
        }
    )


def circular_runs(session: Session, qrels_name: str, runs: Iterable[Run]) -> dict[str, list[str]]:
    """Run name -> the judge models of ``qrels_name`` it declares (only runs that declare one)."""
    models = judge_models(session, qrels_name)
    if not models:
        return {}
    found = {run.name: sorted(declared_models(run.metadata_) & models) for run in runs}
    return {name: shared for name, shared in found.items() if shared}


def circular_by_name(session: Session, qrels_name: str, run_names: Iterable[str]) -> dict[str, list[str]]:
    """:func:`circular_runs` of the runs named."""
    names = list(run_names)
    if not names or not judge_models(session, qrels_name):
        return {}
    return circular_runs(session, qrels_name, session.scalars(select(Run).where(Run.name.in_(names))))


def board_notes(engine: Engine, qrels_name: str, run_names: Iterable[str]) -> list[str]:
    """What `evalstore leaderboard --qrels` says on stderr under a board on judge-made labels: the
    judge with its probe, and each run that declares the judge's model."""
    with read_only(engine) as session:
        behind = judge_behind(session, qrels_name)
        if behind is None:
            return []
        circular = circular_by_name(session, qrels_name, run_names)
    notes = [
        f"labels of '{qrels_name}' are from {behind['from']} (model {behind['model']}); probe: {behind['probe_text']}"
    ]
    notes += [
        f"circularity: run '{run}' declares {', '.join(models)}, the model that made these labels; its scores "
        "here favour it"
        for run, models in circular.items()
    ]
    return notes
