"""`evalstore pool ...` and `evalstore judgments ...` as a user types them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest


@pytest.fixture
def cli(synthetic_cli):  # type: ignore[no-untyped-def]
    return synthetic_cli(["alpha", "beta"])


def test_pool_cycle_from_the_command_line(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    built = cli("pool", "build", "--name", "p", "--all-runs", "--depth", "2", "--topics", "401,402")
    assert built.exit_code == 0, built.stderr
    assert built.stderr.startswith("pool 'p': ") and "over 2 topics from 2 runs" in built.stderr
    sheet = cli("pool", "export", "p", "-", "--format", "trec")
    lines = sheet.stdout.splitlines()
    assert sheet.exit_code == 0 and all(line.endswith(" -1") for line in lines)
    judged = tmp_path / "a.qrels"
    judged.write_text("".join(line.rsplit(" ", 1)[0] + " 1\n" for line in lines))
    imported = cli("judgments", "import", str(judged), "--pool", "p", "--assessor", "A")
    assert imported.exit_code == 0 and imported.stderr == f"{len(lines)} judgments by 'A' stored for pool 'p'\n"
    alone = cli("judgments", "agreement", "--pool", "p")
    assert alone.exit_code == 1
    assert alone.stderr == (
        "Error: Pool 'p' has judgments from fewer than two assessors. Import another assessor's "
        "with 'evalstore judgments import PATH --pool p --assessor NAME'.\n"
    )
    stats = json.loads(cli("pool", "stats", "p", "--format", "json").stdout)
    assert {r["run"] for r in stats["runs"]} == {"alpha", "beta"}
    assert all(t["judged"] == t["documents"] == t["relevant"] for t in stats["topics"])
    made = cli("pool", "qrels", "p", "--name", "pq")
    assert made.exit_code == 0 and made.stderr == f"qrels 'pq' stored: {len(lines)} judgments over 2 topics\n"
    missing = cli("pool", "show", "nope")
    assert missing.exit_code == 1 and missing.stderr.startswith("Error: No pool named 'nope'.")


def test_pool_simulate_table_and_plot(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    plot = tmp_path / "sim.png"
    shown = cli(
        "pool", "simulate", "--qrels", "q", "--budget", "2", "--budget", "4", "--format", "csv", "--plot", str(plot)
    )
    assert shown.exit_code == 0, shown.stderr
    header, *rows = shown.stdout.splitlines()
    assert header == "budget per topic,judgments,depth,rrf,rbp,mtf,bandit"
    assert [r.split(",")[:2] for r in rows] == [["2", "16"], ["4", "32"]]
    assert plot.read_bytes()[:4] == b"\x89PNG"
    wrong = cli("pool", "simulate", "--qrels", "q", "--strategy", "random")
    assert wrong.exit_code == 1
    assert wrong.stderr == (
        "Error: The pooling strategies are depth, rrf, rbp, mtf, bandit; not 'random'. Choose them with --strategy.\n"
    )


def test_pool_next_adds_documents_and_writes_their_sheet(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    assert (
        cli(
            "pool", "build", "--name", "m", "--all-runs", "--strategy", "bandit", "--budget", "1", "--topics", "401"
        ).exit_code
        == 0
    )
    sheet = tmp_path / "next.tsv"
    added = cli("pool", "next", "m", str(sheet), "--count", "2")
    assert added.exit_code == 0, added.stderr
    assert added.stderr == (
        f"2 documents added to pool 'm' over 1 topic (feedback: 0 judged, 0 relevant); sheet written to {sheet}\n"
    )
    header, *rows = sheet.read_text().splitlines()
    assert header == "topic\tdoc\trelevance" and len(rows) == 2 and all(r.startswith("401\t") for r in rows)
    assert json.loads(cli("pool", "show", "m", "--format", "json").stdout)[0]["documents"] == 3
    zero = cli("pool", "next", "m", "-", "--count", "0")
    assert zero.exit_code == 1
    assert zero.stderr == "Error: A batch adds at least 1 document per topic; not 0. Give --count 1 or more.\n"
