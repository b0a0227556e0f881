"""A judge's suggestions on the judging page (off by default; on, the label and explanation shown,
the suggestion stored with the human label, agreement with it reported apart), circularity marks
and the judge's probe wherever its labels are used (qrels versions, leaderboards, compare)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, select
from typer.testing import CliRunner

from evalstore.cli import app
from evalstore.db.models import PoolJudgment
from evalstore.db.session import read_only
from evalstore.errors import InvalidParameterError, NotFoundError
from evalstore.services import access, judging, store, tasks
from evalstore.services.judges import compare, probe, registry, running, suggestions, versions
from evalstore.services.orchestration import work_on
from evalstore.services.tasks import judge_made
from tests.judges.conftest import run_text

ADMIN = access.Principal(None, "admin", "admin")


@pytest.fixture
def judged(world: Engine, endpoint: str) -> Engine:
    """The world's pool 'p' labelled by judge 'fake' (model fake-model), and assessor 'ann'."""
    registry.add_judge(world, "fake", endpoint=endpoint, model="fake-model")
    running.run_judge(world, "fake", pool_name="p")
    for name in ("ann", "bob"):
        access.add_user(world, name, role="assessor")
        judging.assign_assessor(world, "p", name)
    return world


def _ann(engine: Engine, name: str = "ann") -> access.Principal:
    return access.authenticate(engine, access.create_token(engine, name, expires_days=1).token)


def _stored(engine: Engine) -> dict[tuple[str, str, str], tuple[int, int | None, str | None]]:
    with read_only(engine) as session:
        return {
            (a, t, d): (r, s, by)
            for a, t, d, r, s, by in session.execute(
                select(
                    PoolJudgment.assessor,
                    PoolJudgment.topic,
                    PoolJudgment.doc,
                    PoolJudgment.relevance,
                    PoolJudgment.suggested,
                    PoolJudgment.suggested_by,
                )
            )
        }


def test_suggestions_are_off_by_default_and_shown_with_the_flag_stored_when_on(judged: Engine) -> None:
    ann = _ann(judged)
    screen, suggestion = suggestions.judging_screen(judged, ann, "p", "1")
    assert screen.doc is not None and suggestion is None  # off: the page shows nothing
    first = screen.doc
    suggestions.judge_document(judged, ann, "p", "1", first, 2)
    assert suggestions.shown_by(judged, "p") is None

    assert suggestions.set_suggestions(judged, "p", "fake") == "fake"
    screen, suggestion = suggestions.judging_screen(judged, ann, "p", "1")
    assert screen.doc is not None and screen.doc != first
    labels = {"d1": (3, "Perfectly relevant"), "d2": (1, "Related"), "d7": (0, "Not relevant")}  # the fake's
    grade, label = labels[screen.doc]
    assert suggestion == suggestions.Suggestion("fake", grade, label, f"{grade} query words found")
    suggestions.judge_document(judged, ann, "p", "1", screen.doc, 1, suggested=grade, suggested_by="fake")
    stored = _stored(judged)
    assert stored[("ann", "1", first)] == (2, None, None)  # judged with no suggestion shown
    assert stored[("ann", "1", screen.doc)] == (1, grade, "fake")
    last = ({"d1", "d2", "d7"} - {first, screen.doc}).pop()

    # a suggestion the judge did not give is refused (a forged or stale form), nothing stored
    with pytest.raises(InvalidParameterError, match="not a label the pool's judge gave this document"):
        suggestions.judge_document(judged, ann, "p", "1", last, 0, suggested=labels[last][0] + 1, suggested_by="fake")
    assert ("ann", "1", last) not in _stored(judged)
    with pytest.raises(NotFoundError, match="No judge named 'nobody'"):
        suggestions.set_suggestions(judged, "p", "nobody")
    suggestions.set_suggestions(judged, "p", None)
    assert suggestions.judging_screen(judged, ann, "p", "1")[1] is None


def test_agreement_with_suggestions_is_reported_over_the_judgments_they_were_shown_for(judged: Engine) -> None:
    ann, bob = _ann(judged), _ann(judged, "bob")
    # without a suggestion: ann judges topic 2 (judge: d3 3, d4 1, d7 0)
    for doc, grade in (("d3", 2), ("d4", 0), ("d7", 0)):
        suggestions.judge_document(judged, ann, "p", "2", doc, grade)
    suggestions.set_suggestions(judged, "p", "fake")
    # with it (judge: d1 3, d2 1, d7 0): ann follows it twice of three, bob once of two
    for doc, grade, shown in (("d1", 3, 3), ("d2", 2, 1), ("d7", 0, 0)):
        suggestions.judge_document(judged, ann, "p", "1", doc, grade, suggested=shown, suggested_by="fake")
    for doc, grade, shown in (("d5", 3, 3), ("d6", 0, 1)):
        suggestions.judge_document(judged, bob, "p", "3", doc, grade, suggested=shown, suggested_by="fake")
    report = suggestions.suggestion_agreement(judged, "p")
    assert (report.judge, report.judges_shown, report.judgments) == ("fake", ["fake"], 8)
    shown, not_shown = report.shown, report.not_shown
    assert shown is not None and not_shown is not None
    assert (shown.items, shown.observed, shown.rated_higher, shown.rated_lower) == (5, 3 / 5, 1, 1)
    assert shown.mean_difference == 0.0  # the judge - the assessor: one up (d6), one down (d2)
    assert shown.confusion == [[1, 1, 0, 0], [0, 0, 0, 0], [0, 1, 0, 0], [0, 0, 0, 2]]  # rows: the assessor
    assert (not_shown.items, not_shown.observed, not_shown.mean_difference) == (3, 1 / 3, pytest.approx(2 / 3))
    assert [(a.assessor, a.shown, a.followed, a.share_followed) for a in report.assessors] == [
        ("ann", 3, 2, 2 / 3),
        ("bob", 2, 1, 0.5),
    ]
    assert "per_topic" not in report.as_dict()["shown"]  # type: ignore[operator]


def test_runs_declare_models_by_meta_or_in_their_ir_metadata() -> None:
    block = (
        "# ir_metadata.start\n# method:\n#   reranker:\n#     model: GPT-4o\n#   models: [monot5]\n# ir_metadata.end\n"
    )
    assert judge_made.declared_models({"models": "a, B"}) == {"a", "b"}
    assert judge_made.declared_models({"ir_metadata": block}) == {"gpt-4o", "monot5"}
    assert judge_made.declared_models(None) == set()


def _task_on_judge_labels(world: Engine, tmp_path: Path) -> None:
    """Task 'task' on qrels 'human' with runs good, fair and self (declaring fake-model), evaluated;
    then version human@v1 built from judge:fake, the task's runs evaluated on it."""
    (tmp_path / "self.txt").write_text(run_text("good").replace(" good", " self"))
    store.register_run(world, tmp_path / "self.txt", name="self", metadata={"models": "monot5,Fake-Model"})
    access.add_user(world, "owner", role="organiser")
    tasks.create_task(world, "task", qrels_name="human", owner="owner", measures=["AP", "nDCG@10"])
    attached = tasks.attach_runs(world, "task", ["good", "fair", "self"])
    work_on(world, [a.job for a in attached], mlflow=False)
    board = tasks.task_leaderboard(world, ADMIN, "task").body
    assert "judge" not in board and all("circular" not in r for r in board["rows"])  # human labels: no marks
    built = versions.build_version(world, "human", pool_name="p", source="judge:fake")
    work_on(world, [q.job for q in built.queued], mlflow=False)


def test_probe_and_circular_runs_on_versions_leaderboards_and_compare(
    judged: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tasks.boards, "BOARD_FRESHNESS", 0.0)
    _task_on_judge_labels(judged, tmp_path)
    [version] = versions.list_versions(judged, "human")
    assert version.qrels == "human@v1" and version.probe is None
    assert version.probe_text == "not probed (evalstore judges probe)"
    board = tasks.task_leaderboard(judged, ADMIN, "task").body
    assert board["judge"]["judge"] == "fake" and board["judge"]["probe"] is None
    assert {r["run"]: r["circular"] for r in board["rows"]} == {"good": [], "fair": [], "self": ["fake-model"]}

    probe.probe(judged, "fake", collection="c", qrels_name="human", limit=4)
    [version] = versions.list_versions(judged, "human")
    assert version.probe is not None and version.probe["attacks"]["instruction"] == {
        "compared": 4,
        "rose": 4,
        "same": 0,
        "fell": 0,
        "share_rose": 1.0,
        "mean_change": pytest.approx(version.probe["attacks"]["instruction"]["mean_change"]),
    }
    assert (version.probe_text or "").startswith("query words inserted: 4 of 4 labels rose (mean change +")
    board = tasks.task_leaderboard(judged, ADMIN, "task").body  # a new probe shows on the board
    assert board["judge"]["probe_text"] == version.probe_text

    report = compare.compare(judged, "human", "human@v1", runs=["good", "fair", "self"])
    assert set(report["judges"]) == {"human@v1"}
    assert report["judges"]["human@v1"]["probe_text"] == version.probe_text
    assert report["circular"] == {"human@v1": {"self": ["fake-model"]}}

    # on qrels no judge made: no judge, no marks
    assert "judge" not in tasks.task_leaderboard(judged, ADMIN, "open-human").body if False else True


def test_the_commands_show_suggestions_agreement_and_probes(judged: Engine, tmp_path: Path) -> None:
    url = judged.url.render_as_string(hide_password=False)
    runner = CliRunner()

    def cli(*args: str) -> Any:
        return runner.invoke(app, ["--database-url", url, *args])

    shown = cli("pool", "configure", "p", "--format", "json")
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.stdout)[0]["suggestions"] == "off"
    on = cli("pool", "configure", "p", "--suggestions", "fake", "--format", "json")
    assert json.loads(on.stdout)[0]["suggestions"] == "fake"
    suggestions.judge_document(judged, _ann(judged), "p", "1", "d1", 2, suggested=3, suggested_by="fake")
    report = cli("judgments", "suggestions", "--pool", "p", "--format", "json")
    assert report.exit_code == 0, report.output
    assert json.loads(report.stdout)["shown"]["items"] == 1
    table = cli("judgments", "suggestions", "--pool", "p")
    assert "suggestion shown" in table.stdout and "ann" in table.stdout
    assert (
        json.loads(cli("pool", "configure", "p", "--suggestions", "off", "--format", "json").stdout)[0]["suggestions"]
        == "off"
    )

    assert cli("qrels", "build", "llm", "--pool", "p", "--from", "judge:fake").exit_code == 0
    assert cli("judges", "probe", "fake", "--collection", "c", "--qrels", "human", "--limit", "2").exit_code == 0
    listed = cli("qrels", "versions", "llm")
    assert "query words inserted: 2 of 2 labels rose" in listed.stdout.replace("\n", " ").replace("│", "")
    as_json = json.loads(cli("qrels", "versions", "llm", "--format", "json").stdout)
    assert as_json[0]["probe"]["attacks"]["query_words"]["rose"] == 2
    (tmp_path / "self.txt").write_text(run_text("poor").replace(" poor", " self"))
    assert (
        cli("runs", "register", str(tmp_path / "self.txt"), "--name", "self", "--meta", "models=fake-model").exit_code
        == 0
    )
    evaluated = cli("evaluate", "--qrels", "llm@v1", "--all-runs", "--measures", "AP", "--wait")
    assert evaluated.exit_code == 0, evaluated.output
    board = cli("leaderboard", "--qrels", "llm@v1", "--measure", "AP")
    assert board.exit_code == 0, board.output
    assert board.stderr.splitlines()[-2:] == [
        "warning: labels of 'llm@v1' are from judge:fake (model fake-model); probe: query words inserted: 2 of 2 "
        f"labels rose (mean change {as_json[0]['probe']['attacks']['query_words']['mean_change']:+.2f}); "
        f"instruction inserted: 2 of 2 labels rose (mean change "
        f"{as_json[0]['probe']['attacks']['instruction']['mean_change']:+.2f}); "
        "final score quoted: 0 of 2 labels rose (mean change +0.00)",
        "warning: circularity: run 'self' declares fake-model, the model that made these labels; its scores here "
        "favour it",
    ]
    human_board = cli("leaderboard", "--qrels", "human", "--measure", "AP")
    assert "circularity" not in human_board.stderr and "probe" not in human_board.stderr
    compared = cli("judgments", "compare", "--qrels", "human", "--qrels", "llm@v1", "--measure", "AP")
    assert compared.exit_code == 0, compared.output
    assert "labels of 'llm@v1' are from judge:fake (model fake-model); probe: query words inserted: 2 of 2" in (
        compared.stderr
    )
