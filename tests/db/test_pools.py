"""Pools in the store (SQLite and PostgreSQL): build, export, judgments (with their errors),
agreement, qrels, reusability; and the full cycle plus simulation on the real robust03 runs."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import Engine, func, select

from evalstore.db import repositories as repo
from evalstore.db.models import PoolJudgment
from evalstore.db.session import read_only
from evalstore.errors import ConflictError, EvaluationError, InputFormatError, InvalidParameterError, Remedy
from evalstore.services import pools, store
from evalstore.services.kinds.ranking import results
from evalstore.services.orchestration import evaluate_runs
from evalstore.services.pools import pool_runs, read_candidates
from evalstore.statistics import pooling
from tests.conftest import shared_path
from tests.db.test_compare import _qrels_text, _run_text


@pytest.fixture
def pooled(engine: Engine, write) -> Engine:  # type: ignore[no-untyped-def]
    store.import_qrels(engine, write("qrels", _qrels_text()), name="q")
    for seed, name in enumerate(["alpha", "beta", "gamma"]):
        store.register_run(engine, write(name, _run_text(seed, name)), name=name)
    pools.build_pool(engine, name="p", run_names=["alpha", "beta", "gamma"], depth=3, topics=["401", "402"])
    return engine


def _sheet(engine: Engine) -> list[dict[str, str]]:
    text, _ = pools.export_pool(engine, "p", None, fmt="tsv")
    return list(csv.DictReader(io.StringIO(text), delimiter="\t"))


def _judgment_count(engine: Engine) -> int:
    with read_only(engine) as session:
        return session.scalar(select(func.count()).select_from(PoolJudgment)) or 0


def test_build_show_export(pooled: Engine) -> None:
    summary = pools.show_pool(pooled, "p")
    assert summary.topics == 2 and summary.runs == ["alpha", "beta", "gamma"] and summary.judged == 0
    rows = _sheet(pooled)
    assert len(rows) == summary.documents and {r["topic"] for r in rows} == {"401", "402"}
    assert all(r["relevance"] == "" for r in rows)
    shuffled, seed = pools.export_pool(pooled, "p", None, fmt="csv", shuffle=True, seed=4)
    again, _ = pools.export_pool(pooled, "p", None, fmt="csv", shuffle=True, seed=4)
    assert (
        seed == 4
        and shuffled == again
        and sorted(shuffled.splitlines()) == sorted(pools.export_pool(pooled, "p", None, fmt="csv")[0].splitlines())
    )
    with pytest.raises(ConflictError) as taken:
        pools.build_pool(pooled, name="p", run_names=["alpha"], depth=3)
    assert str(taken.value) == "A pool named 'p' exists."
    assert taken.value.remedy == Remedy(
        cli="Pass --replace to rebuild it (its judgments go with it), or choose another --name.",
        web="Choose another name.",
    )
    with pytest.raises(InvalidParameterError) as no_budget:
        pools.build_pool(pooled, name="other", run_names=["alpha"], strategy="rrf")
    assert no_budget.value.on_the_command_line() == (
        "The rrf strategy orders the candidates, and judges as many per topic as its budget: none was given. "
        "Give --budget N (documents to judge per topic)."
    )


def test_judgments_errors_name_the_line_and_store_nothing(pooled: Engine, write) -> None:  # type: ignore[no-untyped-def]
    rows = _sheet(pooled)
    first, second = rows[0], rows[1]
    conflict = write(
        "conflict.tsv",
        f"topic\tdoc\trelevance\n{first['topic']}\t{first['doc']}\t1\n"
        f"{second['topic']}\t{second['doc']}\t0\n{first['topic']}\t{first['doc']}\t0\n",
    )
    with pytest.raises(InputFormatError) as raised:
        pools.import_judgments(pooled, conflict, pool_name="p", assessor="A")
    assert str(raised.value) == (
        f"{conflict}:4: topic {first['topic']} doc {first['doc']} is labelled 0 here and 1 at line 2; keep one label"
    )
    outside = write("outside.tsv", f"topic\tdoc\trelevance\n{first['topic']}\t{first['doc']}\t1\n401\tnowhere\t1\n")
    with pytest.raises(InputFormatError) as raised:
        pools.import_judgments(pooled, outside, pool_name="p", assessor="A")
    assert str(raised.value) == f"{outside}:3: topic 401 doc nowhere is not in pool 'p'"
    assert raised.value.on_the_command_line() == (
        f"{outside}:3: topic 401 doc nowhere is not in pool 'p'; pass --allow-outside-pool to keep it anyway"
    )
    blank = write("blank.tsv", f"topic\tdoc\trelevance\n{first['topic']}\t{first['doc']}\t\n")
    with pytest.raises(InputFormatError, match=r"blank.tsv:2: no relevance label"):
        pools.import_judgments(pooled, blank, pool_name="p", assessor="A")
    assert _judgment_count(pooled) == 0
    assert pools.import_judgments(pooled, outside, pool_name="p", assessor="A", allow_outside_pool=True) == 2
    assert _judgment_count(pooled) == 2


def test_agreement_qrels_and_reusability(pooled: Engine, write) -> None:  # type: ignore[no-untyped-def]
    rows = _sheet(pooled)
    labels_a = [int(r["doc"][1:]) % 3 == 0 for r in rows]  # the qrels' own relevant documents
    labels_b = [label if i % 4 else not label for i, label in enumerate(labels_a)]  # B flips every fourth
    for assessor, labels, skip in (("A", labels_a, 0), ("B", labels_b, 2)):
        text = "".join(
            f"{r['topic']} 0 {r['doc']} {int(label)}\n" for r, label in list(zip(rows, labels, strict=True))[skip:]
        )
        pools.import_judgments(pooled, write(f"{assessor}.qrels", text), pool_name="p", assessor=assessor)
    result = pools.pool_agreement(pooled, "p")
    assert result.assessors == ["A", "B"] and result.pairs[0].items == len(rows) - 2
    a = np.array(labels_a[2:], dtype=int)
    b = np.array(labels_b[2:], dtype=int)
    assert result.pairs[0].observed == pytest.approx((a == b).mean())
    assert result.items_all == len(rows) - 2 and result.krippendorff_alpha is not None

    pools.pool_qrels(pooled, "p", qrels_name="by-b", resolve="assessor:B")
    pools.pool_qrels(pooled, "p", qrels_name="by-max", resolve="max")
    evaluate_runs(pooled, qrels_name="by-b", run_names=["alpha"], measures=["AP", "Judged@10"])
    judged = results(pooled, qrels_name="by-b", run_name="alpha").frame["Judged@10"].astype(float)
    assert (judged < 1).all()  # B left two pooled documents unjudged (relevance -1), and depth 3 < 10
    with pytest.raises(InvalidParameterError, match=r"No judgments by assessor 'C' in this pool \(assessors: A, B\)"):
        pools.pool_qrels(pooled, "p", qrels_name="by-c", resolve="assessor:C")

    reuse = pools.reusability(pooled, qrels_name="by-max", pool_name="p", measures=["AP"])
    stats = {r.run: r for r in pools.pool_stats(pooled, "p").per_run}
    assert [r["run"] for r in reuse] == ["alpha", "beta", "gamma"]
    for row in reuse:
        assert row["unique_docs"] == stats[str(row["run"])].unique
        assert row["AP change"] <= 1e-12  # losing its own relevant documents never helps a run
        assert row["AP rank without"] >= row["AP rank"]


def test_next_batch_extends_the_pool_and_judgments_add_up(pooled: Engine, write) -> None:  # type: ignore[no-untyped-def]
    pools.build_pool(
        pooled, name="m", run_names=["alpha", "beta", "gamma"], strategy="mtf", budget=2, topics=["401", "402"]
    )
    first = pools.show_pool(pooled, "m")
    assert first.documents == 4
    sheet = pools.export_pool(pooled, "m", None, fmt="trec")[0]
    pools.import_judgments(pooled, write("j1", sheet.replace(" -1", " 1")), pool_name="m", assessor="a")
    batch = pools.next_batch(pooled, "m", count=3)
    assert len(batch.documents) == 6 and batch.judged == 4 and batch.relevant == 4
    assert batch.documents.groupby("topic")["judge_order"].apply(list).to_dict() == {"401": [3, 4, 5], "402": [3, 4, 5]}
    assert batch.sheet.splitlines()[0] == "topic\tdoc\trelevance" and len(batch.sheet.splitlines()) == 7
    with read_only(pooled) as session:
        added = pools.pool_entries(session, repo.get_pool(session, "m")).merge(batch.documents[["topic", "doc"]])
    assert len(added) == 6 and all(c and set(c) <= {"alpha", "beta", "gamma"} for c in added["contributors"])
    assert (added["best_rank"] >= 1).all()
    rows = [line.split("\t")[:2] for line in batch.sheet.splitlines()[1:]]
    # the second batch's labels join the first's (the assessor's earlier judgments stay)
    pools.import_judgments(pooled, write("j2", "".join(f"{t} 0 {d} 0\n" for t, d in rows)), pool_name="m", assessor="a")
    assert _judgment_count(pooled) == 10 and pools.show_pool(pooled, "m").documents == 10
    with pytest.raises(InvalidParameterError, match=r"^A batch adds at least 1 document per topic; not 0\.$"):
        pools.next_batch(pooled, "m", count=0)
    with pytest.raises(EvaluationError, match="Pool 'p' holds every document its runs offer \\(to depth 3\\)"):
        pools.next_batch(pooled, "p", count=1)


def test_majority_ties_go_to_the_higher_label() -> None:
    import pandas as pd

    judgments = pd.DataFrame(
        {"topic": ["1"] * 5, "doc": ["a", "a", "b", "b", "b"], "assessor": list("ABABC"), "relevance": [0, 2, 1, 1, 0]}
    )
    assert pools.resolve_labels(judgments, "majority").to_dict() == {("1", "a"): 2, ("1", "b"): 1}
    assert pools.resolve_labels(judgments, "max").to_dict() == {("1", "a"): 2, ("1", "b"): 1}


@pytest.mark.slow
def test_full_cycle_and_simulation_on_robust03(sqlite_engine: Engine, tmp_path: Path) -> None:
    """Pool, export, two assessors, agreement, qrels, evaluate, reusability, on real runs; and the
    adaptive orders find more relevant documents than depth-k for the same budget."""
    engine = sqlite_engine
    store.import_qrels(engine, shared_path("robust03", "robust03_qrels.txt"), name="robust03")
    names = [
        p.name.removeprefix("input.").removesuffix(".gz")
        for p in sorted(shared_path("robust03", "runs").glob("input.*.gz"))
    ]
    for name in names:
        store.register_run(engine, shared_path("robust03", "runs", f"input.{name}.gz"), name=name)

    topics = ["303", "307", "310", "314", "320"]
    summary = pools.build_pool(engine, name="r20", run_names=names[:6], depth=20, topics=topics)
    sheet = tmp_path / "sheet.tsv"
    pools.export_pool(engine, "r20", sheet, fmt="tsv", shuffle=True, seed=1)
    truth = {}
    for line in shared_path("robust03", "robust03_qrels.txt").read_text().splitlines():
        topic, _, doc, rel = line.split()
        truth[(topic, doc)] = int(rel)
    with sheet.open() as handle:
        rows = list(csv.DictReader(handle, delimiter="\t"))
    assert len(rows) == summary.documents
    rng = np.random.default_rng(0)
    for assessor, noise in (("nist", 0.0), ("second", 0.15)):
        filled = tmp_path / f"{assessor}.tsv"
        with filled.open("w") as handle:
            handle.write("topic\tdoc\trelevance\n")
            for row in rows:
                label = truth.get((row["topic"], row["doc"]), 0)
                if rng.random() < noise:
                    label = 1 - min(label, 1)
                handle.write(f"{row['topic']}\t{row['doc']}\t{label}\n")
        pools.import_judgments(engine, filled, pool_name="r20", assessor=assessor)
    agreement = pools.pool_agreement(engine, "r20")
    assert 0.4 < agreement.pairs[0].kappa < 0.95 and agreement.pairs[0].items == summary.documents
    pools.pool_qrels(engine, "r20", qrels_name="r20-nist", resolve="assessor:nist")
    evaluate_runs(engine, qrels_name="r20-nist", run_names=names[:6], measures=["AP", "P@10"])
    reuse = pools.reusability(engine, qrels_name="r20-nist", pool_name="r20", measures=["P@10"])
    assert len(reuse) == 6 and all(r["P@10 change"] <= 1e-12 for r in reuse)
    # P@10 within the depth-20 pool, judged by the true labels: the same as on the official qrels
    for name in names[:2]:
        ours = results(engine, qrels_name="r20-nist", run_name=name).frame["P@10"].astype(float)
        evaluate_runs(engine, qrels_name="robust03", run_names=[name], measures=["P@10"])
        official = results(engine, qrels_name="robust03", run_name=name).frame["P@10"].astype(float)
        assert ours.to_dict() == official.reindex(ours.index).to_dict()

    sim = pools.simulate(
        engine, qrels_name="robust03", run_names=None, strategies=["depth", "mtf", "bandit"], budgets=[50, 100]
    )
    for at in range(2):
        assert sim.found["mtf"][at] > sim.found["depth"][at]
        assert sim.found["bandit"][at] > sim.found["depth"][at]

    # the online loop: one judgment at a time, fed back through next_batch, picks exactly the
    # documents the simulation (which knows every label) picks
    online_topics = ["303", "320"]
    for strategy in ("mtf", "bandit"):
        pools.build_pool(engine, name=strategy, run_names=names[:6], strategy=strategy, budget=1, topics=online_topics)
        for step in range(12):
            text = pools.export_pool(engine, strategy, None, fmt="trec")[0]
            labelled = "".join(
                f"{t} 0 {d} {truth.get((t, d), 0)}\n" for t, _, d, _ in (line.split() for line in text.splitlines())
            )
            sheet_path = tmp_path / f"{strategy}{step}.txt"
            sheet_path.write_text(labelled)
            pools.import_judgments(engine, sheet_path, pool_name=strategy, assessor="nist")
            pools.next_batch(engine, strategy, count=1)
        online = pools.export_pool(engine, strategy, None, fmt="trec")[0].split()[2::4]
        with read_only(engine) as session:
            cands = read_candidates(session, pool_runs(session, names[:6]), None, online_topics)
        replay = pooling.judging_order(
            cands, pooling.PoolSettings(strategy, None, 13), oracle=lambda t, d: truth.get((t, d))
        )
        assert online == replay["doc"].tolist()


def test_disagreements_are_scored_by_the_ranking_they_change(pooled: Engine, write) -> None:  # type: ignore[no-untyped-def]
    """Each disagreement's swaps equal those of evaluating the whole runs on the two qrels that
    differ in its document only (the resolved labels elsewhere)."""
    from evalstore.metrics import evaluate

    rows = _sheet(pooled)
    labels_a = {(r["topic"], r["doc"]): int(int(r["doc"][1:]) % 3 == 0) for r in rows}
    flipped = [key for i, key in enumerate(labels_a) if i % 3 == 0]
    labels_b = {key: (1 - v if key in flipped else v) for key, v in labels_a.items()}
    for assessor, labels in (("A", labels_a), ("B", labels_b)):
        text = "".join(f"{t} 0 {d} {v}\n" for (t, d), v in labels.items())
        pools.import_judgments(pooled, write(f"{assessor}.qrels", text), pool_name="p", assessor=assessor)
    found, pairs = pools.disagreements(pooled, "p")
    assert pairs == 3 and {(d.topic, d.doc) for d in found} == set(flipped)
    assert all(a.swaps >= b.swaps for a, b in zip(found, found[1:], strict=False))
    assert any(d.swaps for d in found) and any(not d.swaps for d in found)  # both kinds are checked below
    with read_only(pooled) as session:
        runs = pools.read_runs(session, ["alpha", "beta", "gamma"])
    resolved = {key: max(labels_a[key], labels_b[key]) for key in labels_a}  # majority of two: the higher
    topics = sorted({t for t, _ in labels_a})
    for item in found:
        means = []
        for label in (min(item.labels.values()), max(item.labels.values())):
            qrels = {
                t: {d: (label if (t, d) == (item.topic, item.doc) else v) for (tt, d), v in resolved.items() if tt == t}
                for t in topics
            }
            runs_ap = []
            for table in runs.values():
                result = evaluate(qrels, table.select(["topic", "doc", "score"]), ["AP"], missing_topics="zero")
                per_topic = result.per_query.set_index("query_id")["value"]
                runs_ap.append(float(np.mean([per_topic.get(t, 0.0) for t in topics])))
            means.append(np.array(runs_ap))
        low, high = means
        swaps = int((np.sign(low[:, None] - low[None, :]) != np.sign(high[:, None] - high[None, :])).sum() // 2)
        assert item.swaps == swaps
        assert item.largest_change == pytest.approx(float(np.abs(high - low).max()))
