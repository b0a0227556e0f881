"""`qrels build --from ensemble:A,B,C --rule majority|mean|median`: the members' grades combined
document by document (checked against counts made here from the stored labels), the members and
their configurations in the version's sources, and the version compared like any other."""

from __future__ import annotations

import json
import statistics
from collections import Counter

import pytest
from sqlalchemy import Engine, select
from typer.testing import CliRunner

from evalstore.cli import app
from evalstore.db.models import Judge, JudgeLabel
from evalstore.db.session import read_only
from evalstore.errors import InvalidParameterError
from evalstore.services import store
from evalstore.services.judges import compare, registry, running, versions
from tests.judges.fake_llm import Script


def _members(world: Engine, endpoint: str, script: Script) -> dict[str, dict[tuple[str, str], int]]:
    for name, vary in (("a", False), ("b", True), ("c", True)):
        registry.add_judge(world, name, endpoint=endpoint, model=f"model-{name}", max_concurrency=1)
        script.vary = vary
        running.run_judge(world, name, pool_name="p")
    with read_only(world) as session:
        rows = session.execute(
            select(Judge.name, JudgeLabel.topic, JudgeLabel.doc, JudgeLabel.relevance).join(
                Judge, Judge.id == JudgeLabel.judge_id
            )
        ).all()
    found: dict[str, dict[tuple[str, str], int]] = {}
    for name, topic, doc, relevance in rows:
        found.setdefault(name, {})[(topic, doc)] = relevance
    return found


def _expected(members: dict[str, dict[tuple[str, str], int]], rule: str) -> dict[tuple[str, str], int]:
    out = {}
    for key in members["a"]:
        grades = [members[m][key] for m in ("a", "b", "c")]
        if rule == "majority":
            counts = Counter(grades)
            top = max(counts.values())
            out[key] = min(g for g, c in counts.items() if c == top)
        elif rule == "mean":
            out[key] = int(sum(grades) / 3 + 0.5)
        else:
            out[key] = int(statistics.median(grades) + 0.5)
    return out


@pytest.mark.parametrize("rule", ["majority", "mean", "median"])
def test_an_ensemble_combines_its_members_grades(world: Engine, endpoint: str, script: Script, rule: str) -> None:
    members = _members(world, endpoint, script)
    assert members["a"] != members["b"]  # the members disagree somewhere
    built = versions.build_version(world, "ens", pool_name="p", source="ensemble:a,b,c", rule=rule)
    assert built.source == "ensemble:a,b,c" and built.sources["rule"] == rule
    assert [m["judge"] for m in built.sources["members"]] == ["a", "b", "c"]
    assert built.counts == {"ensemble": 9, "by_all_members": 9, "unjudged": 0}
    _, table = store.qrels_rows(world, "ens")
    got = {(t, d): r for t, d, r in zip(*(table[c].to_pylist() for c in ("topic", "doc", "relevance")), strict=True)}
    assert got == _expected(members, rule)
    report = compare.compare(world, "human", "ens", measures=["AP"])
    assert report["qrels"]["second"] == "ens@v1" and report["labels"]["items"] == 7


def test_the_command_and_its_refusals(world: Engine, endpoint: str, script: Script) -> None:
    _members(world, endpoint, script)
    with pytest.raises(InvalidParameterError, match="An ensemble is of two or more different judges"):
        versions.build_version(world, "ens", pool_name="p", source="ensemble:a,a")
    with pytest.raises(InvalidParameterError, match="An ensemble's rule is majority, mean, median; not 'vote'."):
        versions.build_version(world, "ens", pool_name="p", source="ensemble:a,b", rule="vote")
    url = world.url.render_as_string(hide_password=False)
    built = CliRunner().invoke(
        app,
        [
            "--database-url",
            url,
            "qrels",
            "build",
            "ens",
            "--pool",
            "p",
            "--from",
            "ensemble:a,b,c",
            "--rule",
            "mean",
            "--format",
            "json",
        ],
    )
    assert built.exit_code == 0, built.output
    assert json.loads(built.stdout)[0]["sources"]["rule"] == "mean"
    with read_only(world) as session:  # circularity: a run declaring any member's model is marked
        from evalstore.services.tasks.judge_made import judge_models

        assert judge_models(session, "ens@v1") == {"model-a", "model-b", "model-c"}
