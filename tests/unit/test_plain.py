"""The one conversion of typed results to JSON values at the CLI's and the web's edge."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from evalstore.services.plain import plain
from evalstore.services.repro import ReproFigure


@dataclass(frozen=True)
class _Inner:
    name: str
    values: tuple[int, ...]


@dataclass(frozen=True)
class _Outer:
    inner: _Inner
    rows: list[_Inner]
    extra: dict[str, Any]


@dataclass(frozen=True)
class _Renamed:
    source: str

    def as_dict(self) -> dict[str, Any]:
        return {"from": self.source}


def test_dataclasses_become_dicts_in_field_order_and_tuples_lists() -> None:
    found = plain(_Outer(_Inner("a", (1, 2)), [_Inner("b", ())], {"z": _Inner("c", (3,)), "a": None}))
    assert found == {
        "inner": {"name": "a", "values": [1, 2]},
        "rows": [{"name": "b", "values": []}],
        "extra": {"z": {"name": "c", "values": [3]}, "a": None},
    }
    assert list(found) == ["inner", "rows", "extra"] and list(found["extra"]) == ["z", "a"]


def test_a_dataclass_with_its_own_as_dict_is_sent_as_it_says() -> None:
    assert plain([_Renamed("pool")]) == [{"from": "pool"}]


def test_a_figure_is_the_same_json_as_the_dict_it_replaces() -> None:
    figure = ReproFigure("advanced", "AP", "RMSE", 0.25)
    before = {"part": "advanced", "measure": "AP", "figure": "RMSE", "value": 0.25}
    assert json.dumps(plain(figure)) == json.dumps(before)
