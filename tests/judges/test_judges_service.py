"""Judges over a pool in the store (SQLite and PostgreSQL), against the fake endpoint: labels with
provenance, resuming, unrateable answers kept and asked again, human labels untouched; qrels
versions (human, judge, hybrid), their lineage, and the re-evaluation they queue."""

from __future__ import annotations

import pytest
from sqlalchemy import Engine, func, select

from evalstore.db import repositories as repo
from evalstore.db.models import Evaluation, JudgeLabel, PoolJudgment, QrelsVersion
from evalstore.db.session import read_only
from evalstore.errors import ConflictError, InvalidParameterError, NotFoundError, Remedy
from evalstore.services import pools, store, tasks
from evalstore.services.judges import provenance, registry, running, versions
from evalstore.services.plain import plain
from tests.judges.fake_llm import Script


def _labels(engine: Engine) -> dict[tuple[str, str], int | None]:
    with read_only(engine) as session:
        return {
            (t, d): r for t, d, r in session.execute(select(JudgeLabel.topic, JudgeLabel.doc, JudgeLabel.relevance))
        }


def test_a_judge_labels_a_pool_with_provenance_and_resumes(world: Engine, endpoint: str, script: Script) -> None:
    judge = registry.add_judge(world, "fake", endpoint=endpoint, model="fake-1", seed=3, max_concurrency=2)
    assert judge.prompt == "umbrela" and judge.labels == {} and len(judge.prompt_hash) == 64
    seen: list[tuple[int, int]] = []
    first = running.run_judge(world, "fake", pool_name="p", limit=4, progress=lambda d, t: seen.append((d, t)))
    assert (first.pooled, first.reused, first.judged, first.rated, first.unrateable) == (9, 0, 4, 4, 0)
    assert seen[-1] == (4, 4) and len(seen) == 4
    second = running.run_judge(world, "fake", pool_name="p")
    assert (second.reused, second.judged) == (4, 5)
    labels = _labels(world)
    assert labels[("1", "d1")] == 3 and labels[("1", "d2")] == 1 and labels[("2", "d3")] == 3
    assert labels[("3", "d7")] == 0
    again = running.run_judge(world, "fake", pool_name="p")
    assert (again.reused, again.judged) == (9, 0)
    assert len(script.requests) == 9  # nothing judged twice
    [row] = provenance.label_provenance(world, "p", topic="1", doc="d1")
    assert row.by == "judge" and row.who == "fake" and row.relevance == 3
    assert row.explanation == "3 query words found"
    assert row.raw_output == '{"relevance": 3, "explanation": "3 query words found"}'
    assert {
        k: row.provenance[k]
        for k in ("endpoint", "model", "prompt", "seed", "temperature", "scale", "answered_in", "attempts")
    } == {
        "endpoint": endpoint,
        "model": "fake-1",
        "prompt": "umbrela",
        "seed": 3,
        "temperature": 0.0,
        "scale": [0, 3],
        "answered_in": "json_schema",
        "attempts": 1,
    }
    assert row.provenance["prompt_hash"] == judge.prompt_hash
    assert registry.show_judge(world, "fake").labels == {"p": registry.PoolLabels(9, 0)}


def test_unrateable_answers_are_kept_with_the_reason_and_asked_again(
    world: Engine, endpoint: str, script: Script
) -> None:
    registry.add_judge(world, "fake", endpoint=endpoint, model="m", structured="none")
    script.garbled = {"hover", "dynamics"}  # d5 and d6
    result = running.run_judge(world, "fake", pool_name="p", topics=["3"])
    assert (result.judged, result.rated, result.unrateable) == (3, 1, 2)
    assert result.reasons == {"unparseable answer": 2}
    [row] = provenance.label_provenance(world, "p", doc="d5")
    assert (row.relevance, row.reason, row.raw_output) == (
        None,
        "unparseable answer: 'I cannot decide.'",
        "I cannot decide.",
    )
    script.garbled = set()
    result = running.run_judge(world, "fake", pool_name="p", topics=["3"])
    assert (result.reused, result.judged, result.rated) == (1, 2, 2)
    [row] = provenance.label_provenance(world, "p", doc="d5")
    assert (row.relevance, row.reason, row.provenance["attempts"]) == (3, None, 2)


def test_a_changed_configuration_judges_afresh_and_keeps_the_old_labels(
    world: Engine, endpoint: str, script: Script
) -> None:
    registry.add_judge(world, "fake", endpoint=endpoint, model="m")
    running.run_judge(world, "fake", pool_name="p", topics=["1"])
    with pytest.raises(ConflictError, match=r"^A judge named 'fake' exists already\.$") as taken:
        registry.add_judge(world, "fake", endpoint=endpoint, model="m", temperature=0.5)
    assert taken.value.remedy == Remedy(
        cli="Pass --replace to change its configuration (its labels are kept), or choose another name.",
        web="Choose another name.",
    )
    registry.add_judge(world, "fake", endpoint=endpoint, model="m", temperature=0.5, replace=True)
    result = running.run_judge(world, "fake", pool_name="p", topics=["1"])
    assert (result.reused, result.judged) == (0, 3)
    with read_only(world) as session:
        assert session.scalar(select(func.count()).select_from(JudgeLabel)) == 6
    registry.add_judge(world, "fake", endpoint=endpoint, model="m", temperature=0.5, max_concurrency=1, replace=True)
    assert running.run_judge(world, "fake", pool_name="p", topics=["1"]).reused == 3  # concurrency decides nothing


def test_judge_definitions_are_checked(world: Engine, tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(InvalidParameterError, match="^A judge's endpoint is the http\\(s\\) URL"):
        registry.add_judge(world, "j", endpoint="ftp://x", model="m")
    with pytest.raises(InvalidParameterError) as caught:
        registry.add_judge(world, "j", endpoint="http://x", model="m", api_key_env="sk-123")
    assert str(caught.value) == (
        "A judge's key is read from an environment variable (the key itself is never stored); "
        "'sk-123' is not a variable's name."
    )
    assert caught.value.remedy == Remedy(
        cli="Name the variable with --api-key-env.", web="Give the variable's name as Key's variable."
    )
    with pytest.raises(InvalidParameterError, match="^A judge's grades are LOW-HIGH"):
        registry.add_judge(world, "j", endpoint="http://x", model="m", scale="3-0")
    (tmp_path / "bad.txt").write_text("Rate {query}.")
    with pytest.raises(InvalidParameterError) as caught:
        registry.add_judge(world, "j", endpoint="http://x", model="m", prompt=str(tmp_path / "bad.txt"))
    assert str(caught.value) == (
        f"{tmp_path / 'bad.txt'}:1: the template lacks {{passage}}; a template names where "
        "the query and the passage go."
    )
    registry.add_judge(world, "keyed", endpoint="http://127.0.0.1:9/v1", model="m", api_key_env="JUDGE_TEST_KEY")
    monkeypatch.delenv("JUDGE_TEST_KEY", raising=False)
    with pytest.raises(InvalidParameterError) as caught:
        running.run_judge(world, "keyed", pool_name="p")
    assert str(caught.value) == (
        "Judge 'keyed' reads its API key from $JUDGE_TEST_KEY, which is not set; export it and run again."
    )
    with pytest.raises(NotFoundError, match=r"^No judge named 'nope'\.$") as unknown:
        running.run_judge(world, "nope", pool_name="p")
    assert unknown.value.on_the_command_line() == (
        "No judge named 'nope'. Define one with 'evalstore judges add nope --endpoint URL --model MODEL'."
    )


def test_the_key_is_read_from_the_environment_and_never_stored(
    world: Engine, endpoint: str, script: Script, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JUDGE_TEST_KEY", "sekret-123")
    registry.add_judge(world, "keyed", endpoint=endpoint, model="m", api_key_env="JUDGE_TEST_KEY")
    running.run_judge(world, "keyed", pool_name="p", limit=1)
    assert script.headers[0]["authorization"] == "Bearer sekret-123"
    with world.connect() as connection:
        for table in ("judges", "judge_labels"):
            rows = connection.exec_driver_sql(f"SELECT * FROM {table}").all()
            assert rows and "sekret-123" not in repr(rows)


def test_a_pool_without_texts_is_refused(world: Engine, endpoint: str) -> None:
    pools.build_pool(world, name="bare", run_names=["good"], depth=1)
    registry.add_judge(world, "fake", endpoint=endpoint, model="m")
    with pytest.raises(InvalidParameterError) as caught:
        running.run_judge(world, "fake", pool_name="bare")
    assert str(caught.value) == "Pool 'bare' names no topic set or collection for its judges to read."
    assert caught.value.remedy == Remedy(
        cli="Run 'evalstore pool configure bare --topics TOPIC_SET --collection COLLECTION'.",
        web="Attach its topics and documents on its task's console.",
    )


def test_qrels_versions_human_judge_hybrid_and_lineage(world: Engine, endpoint: str, tmp_path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "ann.tsv").write_text("topic\tdoc\trelevance\n1\td1\t2\n1\td7\t0\n")
    pools.import_judgments(world, tmp_path / "ann.tsv", pool_name="p", assessor="ann")
    registry.add_judge(world, "fake", endpoint=endpoint, model="m")
    running.run_judge(world, "fake", pool_name="p", topics=["1", "2"])
    human = versions.build_version(world, "dl", pool_name="p", source="human")
    assert (human.version, human.qrels, human.created, human.parent) == (1, "dl@v1", True, None)
    assert human.counts == {"human": 2, "unjudged": 7}
    again = versions.build_version(world, "dl", pool_name="p", source="human")
    assert (again.version, again.created) == (1, False)
    hybrid = versions.build_version(world, "dl", pool_name="p", source="hybrid")
    assert (hybrid.version, hybrid.parent, hybrid.source) == (2, "dl@v1", "hybrid")
    assert hybrid.counts == {"human": 2, "judge": 4, "unjudged": 3}
    assert hybrid.sources["judge"] == "fake" and hybrid.sources["model"] == "m"
    _, table = store.qrels_rows(world, "dl@v2")
    rows = {(t, d): r for t, d, r in zip(*(table[c].to_pylist() for c in ("topic", "doc", "relevance")), strict=True)}
    assert rows[("1", "d1")] == 2  # the human label, not the judge's 3
    assert rows[("2", "d3")] == 3 and rows[("3", "d5")] == -1
    with read_only(world) as session:  # the human label is untouched
        assert session.scalar(select(PoolJudgment.relevance).where(PoolJudgment.doc == "d1")) == 2
    judge_only = versions.build_version(world, "llm", pool_name="p", source="judge:fake")
    assert judge_only.counts == {"judge": 6, "unjudged": 3}
    assert [v.version for v in versions.list_versions(world, "dl")] == [1, 2]
    with pytest.raises(NotFoundError) as caught:
        versions.list_versions(world, "nope")
    assert str(caught.value) == "No qrels versions named 'nope' (lineages: dl, llm)."
    assert caught.value.remedy == Remedy(cli="Build one with 'evalstore qrels build nope --pool POOL --from human'.")
    with pytest.raises(
        InvalidParameterError,
        match=r"^A version's labels are human, judge:NAME, hybrid, hybrid:NAME or ensemble:A,B,\.\.\.; not 'llm'\.$",
    ):
        versions.build_version(world, "dl", pool_name="p", source="llm")


def test_a_new_version_of_a_tasks_qrels_queues_its_runs(world: Engine, endpoint: str) -> None:
    tasks.create_task(world, "shared", qrels_name="human")
    tasks.attach_runs(world, "shared", ["good", "poor"])
    registry.add_judge(world, "fake", endpoint=endpoint, model="m")
    running.run_judge(world, "fake", pool_name="p")
    built = versions.build_version(world, "human", pool_name="p", source="judge:fake")
    assert [(q.task, q.run, q.state) for q in built.queued] == [
        ("shared", "good", "queued"),
        ("shared", "poor", "queued"),
    ]
    assert tasks.show_task(world, "shared").as_dict()["qrels"] == "human@v1"
    # what the new version does to the ranking is for the queued jobs to find: nothing is
    # evaluated beside them
    assert built.moved == {"shared": versions.MovedTask("human", ["good", "poor"])}
    assert plain(built)["moved"] == {"shared": {"from": "human", "runs": ["good", "poor"]}}  # as sent
    with read_only(world) as session:
        assert session.scalar(select(func.count()).select_from(Evaluation)) == 4


def test_a_version_and_its_qrels_are_stored_together_or_not_at_all(
    world: Engine, endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A failure after the version's qrels are added (here: while its tasks are re-pointed) leaves
    neither the qrels NAME@v1 nor the version's row behind."""
    tasks.create_task(world, "shared", qrels_name="human")
    registry.add_judge(world, "fake", endpoint=endpoint, model="m")
    running.run_judge(world, "fake", pool_name="p")

    def fail(*args: object) -> None:
        raise RuntimeError("the process died here")

    monkeypatch.setattr(versions, "_requeue", fail)
    with pytest.raises(RuntimeError, match="died"):
        versions.build_version(world, "human", pool_name="p", source="judge:fake")
    with read_only(world) as session:
        assert session.scalar(select(func.count()).select_from(QrelsVersion)) == 0
        assert repo.find_qrels(session, "human@v1") is None
    monkeypatch.undo()
    assert versions.build_version(world, "human", pool_name="p", source="judge:fake").qrels == "human@v1"
