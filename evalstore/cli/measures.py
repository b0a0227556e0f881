"""`evalstore measures`: every measure the registry holds, and trec_eval's names for them."""

from __future__ import annotations

import typer

from evalstore.cli._output import OutputFormat, render


def measures(
    fmt: OutputFormat = typer.Option(OutputFormat.table, "--format"),
    trec: bool = typer.Option(False, "--trec", help="List trec_eval's measure names and what they map to."),
) -> None:
    """Every measure: canonical name, aliases, parameters, the judgments it needs, definition, what
    trec_eval and ir_measures call it and whether their values are the same, reference."""
    from evalstore.metrics import list_measures
    from evalstore.metrics._registry import TREC_FAMILIES
    from evalstore.metrics.peers import PEERS
    from evalstore.metrics.preferences import PREFS_MEASURES

    if trec:
        rows = [{"trec_eval": name, "evalstore": spec.family, "parameters": spec.param or "", "mode": "-R qrels"}
                for name, spec in TREC_FAMILIES.items()]
        rows += [{"trec_eval": name, "evalstore": name, "parameters": "", "mode": "-R prefs, -R qrels_prefs"}
                 for name in PREFS_MEASURES]
        render(rows, ["trec_eval", "evalstore", "parameters", "mode"], fmt, title="trec_eval measures")
        return
    rows = []
    for family in list_measures():
        params = ", ".join(
            f"{name}={_show(p.default)}" + (f" ({p.doc})" if p.doc else "") for name, p in family.params.items()
        )
        rows.append({
            "name": family.name, "aliases": ", ".join(family.aliases), "parameters": params,
            "summary": family.summary, "judgments": family.judgments,
            "definition": " ".join(family.description.split()), "peers": PEERS[family.name],
            "reference": family.reference,
        })
    render(rows, ["name", "aliases", "parameters", "summary", "judgments", "definition", "peers", "reference"], fmt,
           title="measures")


def _show(value: object) -> str:
    from evalstore.metrics._registry import _REQUIRED

    return "required" if value is _REQUIRED else ("default" if value is None else str(value))
