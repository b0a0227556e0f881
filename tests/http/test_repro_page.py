"""The run page shows the run file's ir_metadata and what the run reproduces, with the figures;
a hidden task's run shows no figure before the release."""

from __future__ import annotations

from fastapi.testclient import TestClient

from evalstore.services import repro, store
from tests.db.test_ir_metadata import BLOCK
from tests.http.conftest import World, run_text


def test_the_run_page_shows_provenance_and_reproductions(world: World, client: TestClient) -> None:
    world.submit(
        "open",
        "red-again",
        text=BLOCK.replace("tag: bm25-rm3", "tag: <b>bm25</b>") + run_text(tag="red-again", shift=1),
    )
    world.submit("secret", "red-hidden", text=run_text(tag="red-hidden", shift=2))
    original = world.tmp / "original.txt"
    original.write_text(run_text(tag="orig"))
    store.register_run(world.engine, original, name="orig")
    found = repro.reproduce(world.engine, qrels="sample", original="orig", reproduced="red-again", measures=["AP"])
    repro.reproduce(world.engine, qrels="sample", original="orig", reproduced="red-hidden", measures=["AP"])
    page = client.get("/runs/red-again", headers=world.headers("red"))
    assert page.status_code == 200
    assert "How the run was made" in page.text and "implementation.source.lang" in page.text
    assert "<dd>pyterrier==0.10, numpy</dd>" in page.text
    assert "<dd>&lt;b&gt;bm25&lt;/b&gt;</dd>" in page.text and "<b>bm25" not in page.text  # escaped
    assert "Reproduces orig" in page.text and "(reproducibility)" in page.text
    assert f"{found.value('RMSE', 'AP'):.4f}" in page.text
    hidden = client.get("/runs/red-hidden", headers=world.headers("red"))
    assert hidden.status_code == 200 and "hidden until the organisers release the task" in hidden.text
    assert "Reproduces" not in hidden.text  # figures are scores: hidden with them
    plain = client.get("/runs/red-open", headers=world.headers("red"))
    assert "How the run was made" not in plain.text and "Reproduces" not in plain.text
