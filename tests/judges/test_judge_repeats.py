"""`judges run --repeats K`: each document asked K times, the first answer its label, the others
stored as its repeats; the judge's self-consistency over them (checked against krippendorff and
counts made here from the stored answers); repeats' tokens in the ledger."""

from __future__ import annotations

import json

import krippendorff
import numpy as np
import pytest
from sqlalchemy import Engine, select
from typer.testing import CliRunner

from evalstore.cli import app
from evalstore.db.models import JudgeLabel, JudgeRepeat
from evalstore.db.session import read_only
from evalstore.errors import InvalidParameterError
from evalstore.services.judges import registry, running
from tests.judges.fake_llm import Script


def test_repeats_are_stored_and_give_self_consistency(world: Engine, endpoint: str, script: Script) -> None:
    registry.add_judge(world, "fake", endpoint=endpoint, model="m", max_concurrency=1, temperature=0.7)
    script.vary = True  # answers move between identical requests
    result = running.run_judge(world, "fake", pool_name="p", repeats=3)
    assert (result.judged, result.repeats, len(script.requests)) == (9, 3, 27)
    with read_only(world) as session:
        labels = {
            (t, d): r for t, d, r in session.execute(select(JudgeLabel.topic, JudgeLabel.doc, JudgeLabel.relevance))
        }
        repeats = session.execute(
            select(JudgeRepeat.topic, JudgeRepeat.doc, JudgeRepeat.repeat, JudgeRepeat.relevance)
        ).all()
    assert len(labels) == 9 and len(repeats) == 18 and {r[2] for r in repeats} == {2, 3}
    answers = {key: [value] for key, value in labels.items()}
    for topic, doc, _number, relevance in sorted(repeats, key=lambda r: r[2]):
        answers[(topic, doc)].append(relevance)
    data = np.array(list(answers.values()), dtype=float).T  # repeats x documents
    consistency = result.self_consistency
    assert consistency is not None
    assert consistency["documents"] == 9 and consistency["answers"] == 27
    assert consistency["all_agree"] == pytest.approx(np.mean([len(set(a)) == 1 for a in answers.values()]))
    assert 0 < consistency["all_agree"] < 1  # some moved, some (graded 3 already) could not
    assert consistency["krippendorff_alpha"] == pytest.approx(
        krippendorff.alpha(reliability_data=data, level_of_measurement="ordinal"), abs=1e-12
    )
    pairs = [sum(a[i] == a[j] for i in range(3) for j in range(i + 1, 3)) / 3 for a in answers.values()]
    assert consistency["pairwise_agreement"] == pytest.approx(np.mean(pairs))
    shown = registry.show_judge(world, "fake")
    assert shown.self_consistency == consistency
    assert shown.costs["repeats"] == 18 and shown.costs["attempts"] == 27
    assert shown.costs["input_tokens"] == result.input_tokens  # the repeats' tokens counted


def test_a_deterministic_judge_is_consistent_and_repeats_are_bounded(
    world: Engine, endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EVALSTORE_MLFLOW", "off")
    registry.add_judge(world, "fake", endpoint=endpoint, model="m")
    with pytest.raises(InvalidParameterError, match="A document is asked 1 to 20 times; not 0."):
        running.run_judge(world, "fake", pool_name="p", repeats=0)
    url = world.url.render_as_string(hide_password=False)
    ran = CliRunner().invoke(
        app, ["--database-url", url, "judges", "run", "fake", "--pool", "p", "--repeats", "2", "--format", "json"]
    )
    assert ran.exit_code == 0, ran.output
    consistency = json.loads(ran.stdout)[0]["self_consistency"]
    assert (consistency["documents"], consistency["all_agree"], consistency["pairwise_agreement"]) == (9, 1.0, 1.0)
    assert registry.show_judge(world, "fake").self_consistency["krippendorff_alpha"] == 1.0
