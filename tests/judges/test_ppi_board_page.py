"""The task's leaderboard page offers prediction-powered intervals on a hybrid version's board (a
judge's labels, people's on the topics they judged) and shows, when asked, the numbers `leaderboard
--ppi` gives; it offers nothing on other boards, says in words when the intervals cannot be
computed, and its GET writes nothing. On SQLite and PostgreSQL."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, select

from evalstore.db.models import Evaluation
from evalstore.db.session import read_only
from evalstore.services import access, pools, store, tasks
from evalstore.services.judges import ppi_board, registry, running, versions
from evalstore.services.orchestration import work_on
from tests.http.conftest import client_for
from tests.judges.conftest import HUMAN, run_text

# people judged topics 1 and 2 completely (every pooled document), topic 3 in part
PEOPLE = "1 0 d1 3\n1 0 d2 1\n1 0 d7 0\n2 0 d3 2\n2 0 d4 0\n2 0 d7 0\n3 0 d5 3\n"


def build_hybrid(
    engine: Engine, tmp_path: Path, endpoint: str, *, people: str = PEOPLE, owner: str = "owner", split: bool = False
) -> None:
    """Pool 'p' labelled by judge 'fake' and by assessor ann (``people``); task 'task' (``owner``)
    with runs good, fair and poor evaluated on 'human', then moved to the hybrid version human@v1
    and evaluated on it (``split``: a third of its topics kept private); task 'plain' on a copy of the human qrels, 'copy', with copies of good and fair."""
    registry.add_judge(engine, "fake", endpoint=endpoint, model="fake-model")
    running.run_judge(engine, "fake", pool_name="p")
    (tmp_path / "people.txt").write_text(people)
    pools.import_judgments(engine, tmp_path / "people.txt", pool_name="p", assessor="ann")
    private = {"private_fraction": 1 / 3, "split_seed": 11} if split else {}
    tasks.create_task(engine, "task", qrels_name="human", owner=owner, measures=["AP", "nDCG@10"], **private)
    attached = tasks.attach_runs(engine, "task", ["good", "fair", "poor"])
    (tmp_path / "copy.txt").write_text(HUMAN)
    store.import_qrels(engine, tmp_path / "copy.txt", name="copy")
    tasks.create_task(engine, "plain", qrels_name="copy", owner=owner, measures=["AP"])
    for name in ("good", "fair"):
        (tmp_path / f"{name}2.txt").write_text(run_text(name))
        store.register_run(engine, tmp_path / f"{name}2.txt", name=f"{name}2")
    attached += tasks.attach_runs(engine, "plain", ["good2", "fair2"])
    work_on(engine, [a.job for a in attached], mlflow=False)
    built = versions.build_version(engine, "human", pool_name="p", source="hybrid:fake")
    work_on(engine, [q.job for q in built.queued], mlflow=False)


@pytest.fixture
def site(world: Engine, endpoint: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Engine]:
    monkeypatch.setattr(tasks.boards, "BOARD_FRESHNESS", 0.0)
    access.add_user(world, "owner", role="organiser")
    access.add_user(world, "viewer", role="viewer")
    build_hybrid(world, tmp_path, endpoint)
    yield world


def _headers(engine: Engine, user: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {access.create_token(engine, user, expires_days=1).token}"}


def _writes(engine: Engine) -> list[tuple[object, ...]]:
    """Every evaluation with its state (a queued one is an evaluation waiting)."""
    with read_only(engine) as session:
        return [tuple(row) for row in session.execute(select(Evaluation.id, Evaluation.state).order_by(Evaluation.id))]


def test_a_hybrid_board_offers_and_shows_the_commands_intervals(site: Engine) -> None:
    headers = _headers(site, "viewer")
    with client_for(site) as client:
        page = client.get("/tasks/task", headers=headers)
        assert page.status_code == 200
        assert '<h2 id="ppi-heading">Prediction-powered intervals</h2>' in page.text
        assert '<a href="?sort=AP&amp;ppi=1#ppi">Show them on AP</a>' in page.text
        assert 'id="ppi-board"' not in page.text  # computed only when asked

        before = _writes(site)
        shown = client.get("/tasks/task?measure=AP&measure=nDCG%4010&ppi=1", headers=headers)
        assert shown.status_code == 200
        assert _writes(site) == before  # the GET stored nothing
        expected = ppi_board.ppi_board(site, "human@v1", measure="AP", runs=["good", "fair", "poor"])
        table = shown.text[shown.text.index('id="ppi-board"') :]
        table = table[: table.index("</table>")]
        rows = re.findall(r"<tr>\s*<td>(\d+)</td>\s*<td class=\"run\">(\w+)</td>(.*?)</tr>", table, re.S)
        assert [run for _, run, _ in rows] == [r.run for r in expected.rows]
        for (_, _, cells), row in zip(rows, expected.rows, strict=True):
            numbers = re.findall(r"[-+]?\d+\.\d+", cells)
            assert numbers[:5] == [
                f"{row.llm_mean:.4f}",
                f"{row.correction:+.4f}",
                f"{row.mean:.4f}",
                f"{row.low:.3f}",
                f"{row.high:.3f}",
            ]
            assert f'<td class="tier">{row.tier}</td>' in cells
        assert "the judge's mean on 3 topics, corrected by people's labels on 2 topics" in table
        assert "1 topic people judged in part is left out of the correction" in shown.text
        assert '<a href="?measure=AP&amp;measure=nDCG%4010&amp;sort=AP">Hide this section</a>' in shown.text


def test_other_boards_offer_nothing_and_a_bad_switch_is_refused_in_words(site: Engine) -> None:
    with client_for(site) as client:
        page = client.get("/tasks/plain?ppi=1", headers=_headers(site, "viewer"))
        assert page.status_code == 200 and "Prediction-powered" not in page.text
        bad = client.get("/tasks/task?ppi=maybe", headers=_headers(site, "viewer"))
    assert bad.status_code == 422
    assert "The request is not valid: query.ppi: Input should be a valid boolean, unable to interpret input" in bad.text
    assert "Traceback" not in bad.text


def test_too_few_topics_judged_by_people_is_said_in_words(
    world: Engine, endpoint: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tasks.boards, "BOARD_FRESHNESS", 0.0)
    access.add_user(world, "viewer", role="viewer")
    access.add_user(world, "owner", role="organiser")
    build_hybrid(world, tmp_path, endpoint, people="1 0 d1 3\n1 0 d2 1\n1 0 d7 0\n")
    with client_for(world) as client:
        page = client.get("/tasks/task?ppi=1", headers=_headers(world, "viewer"))
    assert page.status_code == 200
    assert (
        '<p class="notice" role="status">&#39;human@v1&#39; has 1 topics judged completely by people among the '
        "judge&#39;s 3; prediction-powered intervals need 2 or more of each.</p>"
    ) in page.text


def test_a_split_tasks_public_board_offers_nothing_its_organiser_is_offered_them(
    world: Engine, endpoint: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The intervals are over every topic of the version: on a public board before the release they
    would move with the private topics' labels."""
    monkeypatch.setattr(tasks.boards, "BOARD_FRESHNESS", 0.0)
    access.add_user(world, "viewer", role="viewer")
    access.add_user(world, "owner", role="organiser")
    build_hybrid(world, tmp_path, endpoint, split=True)
    with client_for(world) as client:
        public = client.get("/tasks/task?ppi=1", headers=_headers(world, "viewer"))
        organiser = client.get("/tasks/task?ppi=1", headers=_headers(world, "owner"))
    assert public.status_code == 200 and "Prediction-powered" not in public.text
    assert organiser.status_code == 200 and 'id="ppi-board"' in organiser.text
