"""compare and correlate on stored results (SQLite and PostgreSQL): on-demand evaluation, topic
alignment, corrections within the family, seeds, and agreement with scipy on real runs."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats
from sqlalchemy import Engine

from evalstore.errors import EvaluationError, InvalidParameterError, Remedy
from evalstore.services import comparisons, store
from evalstore.services.kinds.ranking import results
from evalstore.services.orchestration import evaluate_runs
from evalstore.statistics.significance import correct
from tests.conftest import shared_path
from tests.factories import SYNTHETIC_TOPICS, synthetic_qrels_text, synthetic_run_text

TOPICS = SYNTHETIC_TOPICS
_qrels_text = synthetic_qrels_text
_run_text = synthetic_run_text


@pytest.fixture
def synthetic(engine: Engine, write) -> Engine:  # type: ignore[no-untyped-def]
    store.import_qrels(engine, write("qrels", _qrels_text()), name="q")
    for seed, name in enumerate(["alpha", "beta", "gamma", "delta"]):
        store.register_run(engine, write(name, _run_text(seed, name)), name=name)
    store.register_run(engine, write("short", _run_text(9, "short", TOPICS[:-2])), name="short")
    return engine


def _per_topic(engine: Engine, run: str, measure: str) -> np.ndarray:
    return results(engine, qrels_name="q", run_name=run).frame[measure].astype(float).to_numpy()


def test_compare_evaluates_on_demand_and_matches_scipy(synthetic: Engine) -> None:
    comparison = comparisons.compare(
        synthetic,
        qrels_name="q",
        run_names=["alpha", "beta", "gamma"],
        measures=["AP", "P@5"],
        test="t",
        correction="holm",
    )
    assert [(p.measure, p.run, p.versus) for p in comparison.pairs] == [
        ("AP", "alpha", "beta"),
        ("AP", "alpha", "gamma"),
        ("AP", "beta", "gamma"),
        ("P@5", "alpha", "beta"),
        ("P@5", "alpha", "gamma"),
        ("P@5", "beta", "gamma"),
    ]
    assert comparison.settings.seed is None and comparison.settings.resamples is None
    assert comparison.notes == ["only 8 topics: with fewer than 10, intervals and p-values mean little"]
    for measure in ("AP", "P@5"):
        pairs = [p for p in comparison.pairs if p.measure == measure]
        expected = [
            stats.ttest_rel(_per_topic(synthetic, p.run, measure), _per_topic(synthetic, p.versus, measure))
            for p in pairs
        ]
        assert [p.p_value for p in pairs] == pytest.approx([e.pvalue for e in expected], rel=1e-9)
        assert [p.statistic for p in pairs] == pytest.approx([e.statistic for e in expected], rel=1e-9)
        # Holm within the measure's family of three pairs
        assert [p.p_corrected for p in pairs] == pytest.approx(
            list(correct(np.array([e.pvalue for e in expected]), "holm"))
        )
        for p in pairs:
            a, b = _per_topic(synthetic, p.run, measure), _per_topic(synthetic, p.versus, measure)
            assert p.difference == pytest.approx((a - b).mean())
            assert (p.wins, p.ties, p.losses) == (int((a > b).sum()), int((a == b).sum()), int((a < b).sum()))
            assert p.topics == len(TOPICS)
            assert p.significant == (p.p_corrected < 0.05)


def test_baseline_family_and_seeded_randomization(synthetic: Engine) -> None:
    def run(seed: int | None) -> comparisons.Comparison:
        return comparisons.compare(
            synthetic,
            qrels_name="q",
            run_names=["beta", "gamma", "delta"],
            measures=["AP"],
            baseline="alpha",
            test="randomization",
            resamples=2000,
            seed=seed,
            correction="bonferroni",
        )

    first, again, drawn = run(5), run(5), run(None)
    assert [(p.run, p.versus) for p in first.pairs] == [("beta", "alpha"), ("gamma", "alpha"), ("delta", "alpha")]
    assert first.settings.seed == 5 and first.settings.resamples == 2000
    assert [p.as_dict() for p in first.pairs] == [p.as_dict() for p in again.pairs]
    assert [p.p_corrected for p in first.pairs] == pytest.approx([min(1.0, 3 * p.p_value) for p in first.pairs])
    assert isinstance(drawn.settings.seed, int)  # drawn, recorded, reproducible
    replay = run(drawn.settings.seed)
    assert [p.p_value for p in replay.pairs] == [p.p_value for p in drawn.pairs]


def test_tukey_over_all_runs(synthetic: Engine) -> None:
    comparison = comparisons.compare(
        synthetic, qrels_name="q", run_names=["alpha", "beta", "gamma", "delta"], measures=["AP"], multi="tukey"
    )
    assert comparison.settings.correction == "tukey" and len(comparison.pairs) == 6
    assert all(p.p_value == p.p_corrected for p in comparison.pairs)
    randomized = comparisons.compare(
        synthetic,
        qrels_name="q",
        run_names=["alpha", "beta", "gamma", "delta"],
        measures=["AP"],
        multi="randomized-tukey",
        seed=1,
        resamples=3000,
    )
    assert randomized.settings.seed == 1
    # the two procedures answer the same question: their p-values agree roughly
    assert np.corrcoef([p.p_value for p in comparison.pairs], [p.p_value for p in randomized.pairs])[0, 1] > 0.9


def test_a_missing_topic_is_an_error_that_says_what_to_do(synthetic: Engine) -> None:
    evaluate_runs(synthetic, qrels_name="q", run_names=["short"], measures=["AP"], missing_topics="skip")
    evaluate_runs(synthetic, qrels_name="q", run_names=["alpha"], measures=["AP"], missing_topics="skip")
    with pytest.raises(EvaluationError) as raised:
        comparisons.compare(synthetic, qrels_name="q", run_names=["alpha", "short"], measures=["AP"])
    assert str(raised.value) == (
        "Run 'short' has no value for 2 topic(s) the other runs have (407, 408): its evaluation skipped topics "
        "it did not retrieve for."
    )
    assert raised.value.remedy == Remedy(
        cli="Re-evaluate it scoring them 0 with 'evalstore evaluate --qrels q --run short "
        "--missing zero --force --wait', or pass --missing zero to score them 0 here."
    )
    filled = comparisons.compare(
        synthetic, qrels_name="q", run_names=["alpha", "short"], measures=["AP"], missing="zero"
    )
    assert filled.matrix.zero_filled == {"short": ["407", "408"]}
    assert filled.pairs[0].topics == 8
    assert filled.matrix.scores["AP"][1, -2:].tolist() == [0.0, 0.0]


def test_runs_evaluated_with_different_options_are_refused(synthetic: Engine) -> None:
    evaluate_runs(synthetic, qrels_name="q", run_names=["alpha"], measures=["AP"], relevance_level=2)
    evaluate_runs(synthetic, qrels_name="q", run_names=["beta"], measures=["AP"])
    with pytest.raises(EvaluationError, match=r"different relevance_level \(2 vs 1\)") as raised:
        comparisons.compare(synthetic, qrels_name="q", run_names=["alpha", "beta"], measures=["AP"])
    assert str(raised.value) == (
        "Runs 'alpha' and 'beta' were evaluated with different relevance_level (2 vs 1), so their values do not "
        "compare."
    )
    assert raised.value.remedy == Remedy(
        cli="Evaluate both with the same options: 'evalstore evaluate --qrels q --run alpha --run beta --force --wait'."
    )


def test_bad_parameters_are_refused_before_any_work(synthetic: Engine) -> None:
    with pytest.raises(InvalidParameterError, match=r"^The paired test is one of t, .*; not 'z'\.$") as wrong_test:
        comparisons.compare(synthetic, qrels_name="q", run_names=["alpha", "beta"], measures=["AP"], test="z")
    assert wrong_test.value.remedy == Remedy(cli="Choose one with --test.", web="Choose one in the Test field.")
    with pytest.raises(InvalidParameterError, match=r"^A comparison is of two runs or more; 1 named\.$") as one:
        comparisons.compare(synthetic, qrels_name="q", run_names=["alpha"], measures=["AP"])
    assert one.value.remedy == Remedy(
        cli="Name at least two runs, or one run and --baseline.", web="Pick two or more runs."
    )


def test_correlate_two_measures_and_two_qrels(synthetic: Engine, write) -> None:  # type: ignore[no-untyped-def]
    runs = ["alpha", "beta", "gamma", "delta"]
    evaluate_runs(synthetic, qrels_name="q", run_names=runs, measures=["AP", "P@5"])
    result = comparisons.correlate(synthetic, qrels_names=["q"], measures=["AP", "P@5"])
    ap = [float(_per_topic(synthetic, r, "AP").mean()) for r in sorted(runs)]
    p5 = [float(_per_topic(synthetic, r, "P@5").mean()) for r in sorted(runs)]
    assert result.systems == sorted(runs)
    assert result.result.kendall_tau == pytest.approx(stats.kendalltau(ap, p5).statistic)
    # the same measure on a second qrels set that judges only half of the documents
    half = "\n".join(line for line in _qrels_text().splitlines() if int(line.split()[2][1:]) < 6) + "\n"
    store.import_qrels(synthetic, write("half", half), name="half")
    evaluate_runs(synthetic, qrels_name="half", run_names=runs, measures=["AP"])
    across = comparisons.correlate(synthetic, qrels_names=["q", "half"], measures=["AP"])
    assert across.first == "AP on q" and across.second == "AP on half" and across.result.systems == 4
    with pytest.raises(InvalidParameterError) as raised:
        comparisons.correlate(synthetic, qrels_names=["q"], measures=["AP"])
    assert raised.value.on_the_command_line() == (
        "A correlation is of two orderings: two measures on one qrels, or one measure on two qrels; not 1 "
        "measure(s) on 1 qrels. Give one --qrels and two --measure, or two --qrels and one --measure."
    )


@pytest.mark.slow
def test_robust03_and_dl_hard_runs_compare_as_scipy_says(sqlite_engine: Engine) -> None:
    """Real runs: the stored per-topic values go through compare and match scipy's tests."""
    engine = sqlite_engine
    store.import_qrels(engine, shared_path("robust03", "robust03_qrels.txt"), name="robust03")
    names = ["pircRBa1", "aplrob03a", "uwmtCR0", "SABIR03BASE"]
    for name in names:
        store.register_run(engine, shared_path("robust03", "runs", f"input.{name}.gz"), name=name)
    comparison = comparisons.compare(
        engine, qrels_name="robust03", run_names=names[:3], baseline="SABIR03BASE", measures=["AP"], test="wilcoxon"
    )
    base = results(engine, qrels_name="robust03", run_name="SABIR03BASE").frame["AP"].astype(float)
    for pair in comparison.pairs:
        other = results(engine, qrels_name="robust03", run_name=pair.run).frame["AP"].astype(float)
        assert pair.p_value == pytest.approx(stats.wilcoxon(other - base).pvalue, rel=1e-9)
        assert pair.topics == 100

    store.import_qrels(engine, shared_path("dl-hard", "dl_hard-passage.qrels"), name="dl-hard")
    runs = ["bm25", "bm25+rm3", "bm25+t5-zs"]
    for name in runs:
        store.register_run(engine, shared_path("dl-hard", "runs", "passage", f"{name}.run.gz"), name=name)
    evaluate_runs(engine, qrels_name="dl-hard", run_names=runs, measures=["nDCG@10", "RR"], relevance_level=2)
    comparison = comparisons.compare(
        engine, qrels_name="dl-hard", run_names=runs, measures=["nDCG@10"], test="sign", correction="bh"
    )
    for pair in comparison.pairs:
        wins, losses = pair.wins, pair.losses
        assert pair.p_value == pytest.approx(stats.binomtest(wins, wins + losses).pvalue, rel=1e-9)


def test_the_compare_pages_grades_are_the_qrels_last_row_of_each_shown_document(engine: Engine, write) -> None:  # type: ignore[no-untyped-def]
    """The top documents' grades are read for the documents shown alone, and are what a dict built
    from the whole qrels in file order holds: a document judged once a subtopic gets its last row,
    an unjudged one none, a long id (a digest key on PostgreSQL) its own."""
    from evalstore.db import repositories as repo
    from evalstore.db.session import read_only

    long_doc = "d" * 300
    lines = [f"1 {sub} d{doc} {(doc + sub) % 3}" for doc in range(40) for sub in (1, 2, 3)]
    lines += [f"2 1 {long_doc} 2", "2 2 d7 1", "2 1 d7 0"]
    store.import_qrels(engine, write("subtopics", "\n".join(lines) + "\n"), name="sub", kind="subtopics")
    wanted = [("1", "d3"), ("1", "d39"), ("1", "d40"), ("2", long_doc), ("2", "d7"), ("3", "d1")]
    wanted += [("1", f"d{doc}") for doc in range(0, 40, 2)] + [("1", f"u{doc}") for doc in range(600)]  # two IN lists
    with read_only(engine) as session:
        qrels = repo.get_qrels(session, "sub")
        table = repo.qrels_table(session, qrels).to_pylist()
        whole = {(row["topic"], row["doc"]): row["relevance"] for row in table}
        grades = repo.grades_of(session, qrels, wanted)
    assert grades == {pair: whole[pair] for pair in wanted if pair in whole}
    assert grades[("1", "d3")] == 0 and grades[("2", "d7")] == 0 and grades[("2", long_doc)] == 2
    assert ("1", "d40") not in grades and ("3", "d1") not in grades
