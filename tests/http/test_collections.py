"""A lab's collections: a qrels set's page lists every run evaluated against it, in a task or not,
with the leaderboard, run and compare pages a task has; admins see every collection, an organiser
those of their tasks, and nobody else one that a hidden, unreleased task of another uses."""

from __future__ import annotations

import re

from fastapi.testclient import TestClient

from evalstore.services import orchestration, store, tasks
from tests.factories import SAMPLE
from tests.http.conftest import World, client_for, run_text


def lab_run(world: World, name: str = "lab-bm25", *, measures: list[str] | None = None) -> None:
    """A run registered and evaluated outside any task (what a lab does from the CLI)."""
    path = world.tmp / f"{name}.txt"
    path.write_text(run_text(tag=name, shift=3))
    store.register_run(world.engine, path, name=name, system="bm25", description="BM25, k1 0.9")
    orchestration.evaluate_runs(world.engine, qrels_name="sample", run_names=[name], measures=measures)


def board_runs(html: str) -> list[str]:
    return re.findall(r"<tr>\s*<td>\d+</td>\s*<td class=\"run\">(?:<a href=\"[^\"]*\">)?([^<]+)", html)


def test_a_collection_lists_every_run_evaluated_on_its_qrels(world: World, client: TestClient) -> None:
    lab_run(world)
    page = client.get("/collections/sample", headers=world.headers("admin"))
    assert page.status_code == 200
    assert sorted(board_runs(page.text)) == ["lab-bm25", "red-open", "red-secret"]
    assert 'href="/collections/sample/runs/lab-bm25"' in page.text
    assert 'action="/collections/sample/compare"' in page.text
    assert 'td class="tier"' in page.text  # tiers, as on a task's board
    listing = client.get("/collections", headers=world.headers("admin"))
    assert 'href="/collections/sample"' in listing.text and ">3</td>" in listing.text  # runs evaluated


def test_a_lab_runs_page_and_a_comparison_on_the_collection(world: World, client: TestClient) -> None:
    lab_run(world)
    run = client.get("/collections/sample/runs/lab-bm25", headers=world.headers("admin"))
    assert run.status_code == 200
    assert "BM25, k1 0.9" in run.text and "<dt>System</dt><dd>bm25</dd>" in run.text
    assert "median of the collection&#39;s 3 runs" in run.text
    assert 'href="/collections/sample/compare?run=lab-bm25"' in run.text
    compared = client.get(
        "/collections/sample/compare?run=lab-bm25&run=red-open&measure=AP", headers=world.headers("admin")
    )
    assert compared.status_code == 200 and "Where they disagree most" in compared.text
    download = client.get("/collections/sample/leaderboard.csv", headers=world.headers("owner"))
    assert download.status_code == 200 and "lab-bm25" in download.text


def test_the_measure_picker_offers_only_measures_some_run_has(world: World, client: TestClient) -> None:
    page = client.get("/collections/sample", headers=world.headers("admin"))
    offered = re.findall(r'<input type="checkbox" name="measure" value="([^"]+)"', page.text)
    assert offered == sorted(set(offered), key=offered.index)  # no duplicates
    assert set(offered) <= set(tasks.collection_measures(world.engine, "sample"))
    assert "num_ret" not in offered and offered


def test_a_run_lacking_a_measure_shown_is_named_under_the_board(world: World, client: TestClient) -> None:
    lab_run(world, "lab-ap-only", measures=["AP"])
    default = client.get("/collections/sample", headers=world.headers("admin")).text
    assert "lab-ap-only" in board_runs(default)  # the default columns: what every run has
    page = client.get("/collections/sample?measure=AP&measure=P@10", headers=world.headers("admin"))
    assert page.status_code == 200
    assert "lab-ap-only" not in board_runs(page.text) and "red-open" in board_runs(page.text)
    assert "run &#39;lab-ap-only&#39; has no P@10 evaluated with" in page.text


def test_a_collection_is_for_admins_and_the_organisers_of_its_tasks(world: World, client: TestClient) -> None:
    statuses = {
        caller: client.get("/collections/sample", headers=world.headers(caller), follow_redirects=False).status_code
        for caller in ("admin", "owner", "organiser", "red", "viewer")
    }
    assert statuses == {"admin": 200, "owner": 200, "organiser": 404, "red": 403, "viewer": 403}
    for caller, linked in (("admin", True), ("owner", True), ("red", False), ("viewer", False)):
        home = client.get("/", headers=world.headers(caller)).text
        assert ('href="/collections"' in home) is linked, caller
    assert "No collection you may see yet" in client.get("/collections", headers=world.headers("organiser")).text


def test_another_organisers_hidden_task_keeps_the_qrels_collection_from_you(world: World) -> None:
    """The organiser's public task and the owner's hidden one share qrels (an admin set them up):
    until the hidden task is released, its scores must not be had through the collection."""
    store.import_qrels(world.engine, SAMPLE / "qrels.test", name="shared")
    tasks.create_task(world.engine, "public-one", qrels_name="shared", owner="organiser")
    tasks.create_task(world.engine, "hidden-one", qrels_name="shared", owner="owner", hidden=True)
    world.submit("hidden-one", "red-hidden")
    with client_for(world.engine) as client:
        for path in (
            "/collections/shared",
            "/collections/shared/runs/red-hidden",
            "/collections/shared/leaderboard.csv",
        ):
            response = client.get(path, headers=world.headers("organiser"))
            assert response.status_code == 404, path
            assert "No collection named &#39;shared&#39; that you may see." in response.text
        assert "shared" not in client.get("/collections", headers=world.headers("organiser")).text
        assert client.get("/collections/shared", headers=world.headers("owner")).status_code == 200
        tasks.release_task(world.engine, "hidden-one")
        page = client.get("/collections/shared", headers=world.headers("organiser"))
        assert page.status_code == 200 and "red-hidden" in page.text
        # released, the run is listed, but its page stays its team's and its organiser's
        assert 'href="/collections/shared/runs/red-hidden"' not in page.text
        assert client.get("/collections/shared/runs/red-hidden", headers=world.headers("organiser")).status_code == 404
        assert client.get("/collections/shared/runs/red-hidden", headers=world.headers("owner")).status_code == 200
        refused = client.get(
            "/collections/shared/compare?run=red-hidden&run=red-hidden2", headers=world.headers("organiser")
        )
        assert refused.status_code == 404


def test_another_organisers_split_task_keeps_the_qrels_collection_from_you_until_released(world: World) -> None:
    """A public task with a public/private split shows its private topics' values to nobody but its
    organiser before its release: the collection over its qrels must not show them either."""
    store.import_qrels(world.engine, SAMPLE / "qrels.test", name="shared")
    tasks.create_task(world.engine, "public-one", qrels_name="shared", owner="organiser")
    tasks.create_task(world.engine, "split-one", qrels_name="shared", owner="owner", private_fraction=0.5, split_seed=3)
    world.submit("split-one", "red-split")
    with client_for(world.engine) as client:
        assert client.get("/collections/shared", headers=world.headers("organiser")).status_code == 404
        assert client.get("/collections/shared", headers=world.headers("owner")).status_code == 200
        tasks.release_task(world.engine, "split-one")
        assert client.get("/collections/shared", headers=world.headers("organiser")).status_code == 200


def test_a_collection_without_runs_says_so(world: World, client: TestClient) -> None:
    store.import_qrels(world.engine, SAMPLE / "qrels.test", name="fresh")
    page = client.get("/collections/fresh", headers=world.headers("admin"))
    assert page.status_code == 200 and "No run has finished evaluating yet." in page.text
    assert client.get("/collections/nothing", headers=world.headers("admin")).status_code == 404
