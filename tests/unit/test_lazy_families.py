"""The registry is one: families whose modules are imported when a name they own is first looked
up (registry.LAZY_FAMILIES) are found by every spelling, listed in the order of an eager import,
and their names declared in the registry are exactly the names they register."""

from __future__ import annotations

import json
import subprocess
import sys

from evalstore.metrics import registry

# a fresh interpreter each: this one's registry may hold every family already
_FRESH = """
import json, sys
import evalstore.metrics
from evalstore.metrics import registry
loaded = lambda: sorted(m for m in registry.LAZY_FAMILIES if m in sys.modules)
report = {"at_import": loaded()}
{probe}
print(json.dumps(report))
"""


def _fresh(probe: str) -> dict[str, object]:
    code = _FRESH.replace("{probe}", probe)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    return dict(json.loads(result.stdout))


def _names_registered_by(module: str) -> dict[str, str]:
    """Each (lower-cased) name the families of ``module`` register, to its family."""
    return {
        alias.lower(): family.name
        for family in registry.REGISTRY.values()
        if registry._OWNER.get(family.name.lower(), registry._EAGER_MODULE) == module
        for alias in (family.name, *family.aliases)
    }


def test_the_lazy_modules_register_exactly_the_names_the_registry_declares_for_them() -> None:
    for module, declared in registry.LAZY_FAMILIES.items():
        registered = _names_registered_by(module)
        assert set(registered) == {name.lower() for name in declared}, module
        # every declared name is found through the aliases, to a family of that module
        assert all(registry._ALIASES[name.lower()] == registered[name.lower()] for name in declared)
        # TREC_FAMILIES (-R qrels' names) is complete without them
        owned = set(registered.values())
        assert not [spec for spec in registry.TREC_FAMILIES.values() if spec.family in owned]


def test_importing_the_measures_registers_no_lazy_family_and_a_lookup_registers_its_module_only() -> None:
    report = _fresh(
        """
from evalstore import metrics
report["parsed"] = str(metrics.parse_measure("alpha_nDCG(alpha=0.3)@5"))
report["after_parse"] = loaded()
report["by_alias"] = registry.canonical_name("bpm-static")
report["in"] = "prefs_simp" in registry.REGISTRY
report["after_in"] = loaded()
report["spec"] = registry.Measure("Accuracy").spec.name
report["after_spec"] = loaded()
"""
    )
    assert report["at_import"] == []
    assert report["parsed"] == "alpha_nDCG(alpha=0.3)@5"
    assert report["after_parse"] == ["evalstore.metrics.diversity"]
    assert report["by_alias"] == "BPM"
    assert report["in"] is True
    assert report["after_in"] == [
        "evalstore.metrics.cwl",
        "evalstore.metrics.diversity",
        "evalstore.metrics.preferences",
    ]
    assert report["spec"] == "Accuracy"
    assert report["after_spec"] == sorted(registry.LAZY_FAMILIES)


def test_a_listing_holds_every_family_in_the_order_of_the_eager_import_whatever_was_looked_up_first() -> None:
    # the order of every module imported in FAMILY_MODULES' order, as evalstore.metrics once did
    # (a leaderboard's groups of measures follow it)
    eager = _fresh(
        """
import importlib
for module in registry.FAMILY_MODULES:
    importlib.import_module(module)
report["order"] = list(registry.REGISTRY)
"""
    )
    looked_up_first = _fresh(
        """
registry.make("prefs_simp"); registry.make("compat"); registry.canonical_name("nerr-eq8")
report["order"] = list(registry.REGISTRY)
report["count"] = len(registry.REGISTRY)
"""
    )
    assert looked_up_first["order"] == eager["order"] == list(registry.REGISTRY)
    assert looked_up_first["count"] == len(registry.REGISTRY)
    assert list(registry.REGISTRY)[:2] == ["BPM", "SDCG"]  # cwl's first, as imported before


def test_an_unknown_name_still_suggests_a_lazy_family() -> None:
    report = _fresh(
        """
from evalstore.errors import InvalidParameterError
try:
    registry.make("alpha_ndgc")
except InvalidParameterError as error:
    report["error"] = str(error)
"""
    )
    assert "Did you mean 'alpha_nDCG'?" in str(report["error"])
