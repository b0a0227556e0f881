"""The leaderboard's measure picker: the measures the runs were evaluated with, grouped by family
with the common ones first, under the names readers know, as a plain form of checkboxes (the
filter field is the script's); and a board says "1 run" and shows no column of dashes."""

from __future__ import annotations

import re

from evalstore.services import reports, tasks
from tests.http.conftest import World, client_for

CHECKBOX = re.compile(r'<input type="checkbox" name="measure" value="([^"]+)"( checked)?>\s*([^<]+)</label>')


def test_the_picker_groups_the_measures_common_first_by_their_readers_names(world: World) -> None:
    tasks.create_task(
        world.engine,
        "wide",
        qrels_name="sample",
        owner="owner",
        measures=["P@5", "AP", "nDCG@10", "P@10", "RR", "P@100", "IPrec(rounding=trec_eval10)@0.1"],
    )
    world.submit("wide", "red-wide")
    with client_for(world.engine) as client:
        page = client.get("/tasks/wide", headers=world.headers("red")).text
    groups = re.findall(r'<details class="measure-group" data-family="([^"]+)"( open)?>', page)
    assert groups == [("common", " open"), ("P", " open"), ("IPrec", "")]  # none of IPrec shown: closed
    offered = [(value, bool(checked), label.strip()) for value, checked, label in CHECKBOX.findall(page)]
    assert offered == [
        ("AP", True, "AP"),
        ("nDCG@10", True, "nDCG@10"),
        ("P@10", True, "P@10"),
        ("RR", True, "RR"),
        ("P@5", True, "P@5"),
        ("P@100", True, "P@100"),
        ("IPrec(rounding=trec_eval10)@0.1", False, "iprec_at_recall_0.10"),
    ]
    assert "IPrec(rounding=trec_eval10)@0.1</" not in page  # the stored spelling is only a value and a title
    assert "<select" not in page.split('aria-label="measures"')[1].split("</form>")[0]  # no ctrl-click list
    assert 'id="measure-filter"' in page and '<script src="/static/picker.js" defer></script>' in page


def test_a_picked_measure_is_shown_by_a_plain_form_post(world: World) -> None:
    with client_for(world.engine) as client:
        page = client.get(
            "/tasks/open", params={"measure": ["AP", "IPrec(rounding=trec_eval10)@0.1"]}, headers=world.headers("red")
        ).text
    header = page.split("<thead>")[1].split("</thead>")[0]
    assert ">AP" in header and ">iprec_at_recall_0.10" in header  # the column says the reader's name too
    checked = [value for value, on, _ in CHECKBOX.findall(page) if on]
    assert checked == ["AP", "IPrec(rounding=trec_eval10)@0.1"]


def test_one_run_is_one_run_and_an_empty_judged_column_is_left_out(world: World) -> None:
    tasks.create_task(world.engine, "narrow", qrels_name="sample", owner="owner", measures=["AP", "P@10"])
    world.submit("narrow", "red-narrow")
    with client_for(world.engine) as client:
        narrow = client.get("/tasks/narrow", headers=world.headers("red")).text
        full = client.get("/tasks/open", headers=world.headers("red")).text
    assert "<caption>1 run; mean over topics" in narrow
    assert "Judged@10</th>" not in narrow  # the task's measures hold no Judged@10: no column of dashes
    assert "Judged@10</th>" in full


def test_the_groups_follow_the_registry_and_numbers_sort_as_numbers() -> None:
    groups = reports.measure_groups(["P@100", "P@5", "AP", "R@1000", "R@50", "accuracy"], ["AP"])
    assert [(g.family, [c.value for c in g.choices]) for g in groups] == [
        ("common", ["AP"]),
        ("P", ["P@5", "P@100"]),
        ("R", ["R@50", "R@1000"]),
        ("Accuracy", ["accuracy"]),
    ]
    assert groups[0].shown == 1 and groups[1].shown == 0
