"""`evalstore measures`: every measure the registry holds, and trec_eval's names for them."""

from typing import Annotated

import typer

from evalstore.cli._output import OutputFormat, render
from evalstore.errors import InvalidParameterError


def measures(
    fmt: Annotated[OutputFormat, typer.Option("--format")] = OutputFormat.table,
    trec: Annotated[bool, typer.Option("--trec", help="List trec_eval's measure names and what they map to.")] = False,
    kind: Annotated[
        str,
        typer.Option(
            "--kind",
            help="ranking (runs on qrels), classifier or clustering (predictions on gold labels), "
            "answers (generated answers on nuggets).",
        ),
    ] = "ranking",
) -> None:
    """Every measure: canonical name, aliases, parameters, the judgments it needs, definition, what
    trec_eval and ir_measures call it and whether their values are the same, reference."""
    from evalstore.metrics import list_measures, prediction_measures
    from evalstore.metrics.peers import PEERS
    from evalstore.metrics.registry import REGISTRY, TREC_FAMILIES, TREC_ORDER

    if kind not in ("ranking", "classifier", "clustering", "answers"):
        raise InvalidParameterError(f"--kind must be ranking, classifier, clustering or answers, not '{kind}'.")
    if trec:
        qrels_mode = [TREC_FAMILIES[name] for name in TREC_ORDER]
        # in registration order, which is trec_eval's printing order of them (metrics.preferences)
        prefs_mode = [spec for family in REGISTRY.values() for spec in family.trec if spec.mode == "prefs"]
        rows = [
            {
                "trec_eval": spec.name,
                "evalstore": spec.family,
                "parameters": spec.param or "",
                "mode": "-R qrels" if spec.mode == "qrels" else "-R prefs, -R qrels_prefs",
            }
            for spec in [*qrels_mode, *prefs_mode]
        ]
        render(rows, ["trec_eval", "evalstore", "parameters", "mode"], fmt, title="trec_eval measures")
        return
    if kind != "ranking":
        rows = [
            {
                "name": family.name,
                "aliases": ", ".join(family.aliases),
                "better": "higher" if family.higher_is_better else "lower",
                "shown by default": "yes" if family.headline else "",
                "definition": family.description,
                "reference": family.reference,
            }
            for family in prediction_measures(kind)
        ]
        columns = ["name", "aliases", "better", "shown by default", "definition", "reference"]
        render(rows, columns, fmt, title=f"{kind} measures")
        return
    rows = []
    for family in list_measures():
        params = ", ".join(
            f"{name}={_show(p.default)}" + (f" ({p.doc})" if p.doc else "") for name, p in family.params.items()
        )
        rows.append(
            {
                "name": family.name,
                "aliases": ", ".join(family.aliases),
                "parameters": params,
                "summary": family.summary,
                "judgments": family.judgments,
                "better": "higher" if family.higher_is_better else "lower",
                "definition": " ".join(family.description.split()),
                "peers": PEERS[family.name],
                "reference": family.reference,
            }
        )
    render(
        rows,
        ["name", "aliases", "parameters", "summary", "judgments", "better", "definition", "peers", "reference"],
        fmt,
        title="measures",
    )


def _show(value: object) -> str:
    from evalstore.metrics.registry import REQUIRED

    return "required" if value is REQUIRED else ("default" if value is None else str(value))
