"""Typed results as plain JSON values: the one conversion the CLI and the web make at their edge.

Services return frozen dataclasses (or TypedDicts, where a payload goes to JSON as it is built);
:func:`plain` turns either into dicts, lists, strings, numbers and None, in the order of the
result's fields. A dataclass that is sent under other names or with keys left out (a field named
``from``, a key only some callers may see) says so in its own ``as_dict``, which :func:`plain`
uses.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any


def plain(value: object) -> Any:
    """``value`` with every dataclass in it as a dict (its ``as_dict()`` when it has one), every
    tuple as a list; mappings keep their keys' order, and other values are left as they are."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        as_dict = getattr(value, "as_dict", None)
        if callable(as_dict):
            return plain(as_dict())
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {key: plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [plain(item) for item in value]
    return value


__all__ = ["plain"]
