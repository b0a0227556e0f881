"""`evalstore ndeval`: the TREC Web track's diversity measures, as ndeval prints them."""

import sys
from pathlib import Path
from typing import Annotated

import typer


def ndeval(
    qrels: Annotated[Path, typer.Argument(help="Subtopic qrels (topic subtopic docno judgment).")],
    run: Annotated[Path, typer.Argument(help="Run file (qid Q0 docno rank score tag).")],
    alpha: Annotated[
        float, typer.Option("-alpha", min=0.0, max=1.0, help="Redundancy intolerance (alpha-nDCG, NRBP).")
    ] = 0.5,
    beta: Annotated[float, typer.Option("-beta", min=0.0, max=1.0, help="Patience (NRBP).")] = 0.5,
    max_docs: Annotated[int | None, typer.Option("-M", min=1, help="Keep only the top N documents per topic.")] = None,
    complete: Annotated[bool, typer.Option("-c", help="Average over every qrels topic.")] = False,
    traditional: Annotated[
        bool,
        typer.Option(
            "-traditional", hidden=True, help="Accepted for ndeval's command lines; the order is always trec_eval's."
        ),
    ] = True,
) -> None:
    """The TREC Web track's diversity measures, exactly as ndeval -traditional prints them (CSV)."""
    from evalstore.io.formats import read_qrels, read_run
    from evalstore.metrics.diversity import evaluate_diversity, render_ndeval

    subtopics = read_qrels(qrels, judgment_groups=True, strict=False)
    parsed = read_run(run, strict=False, content_hash=False)
    result = evaluate_diversity(
        subtopics.table,
        parsed.table,
        alpha=alpha,
        beta=beta,
        max_docs=max_docs,
        qrels_path=str(qrels),
        run_path=str(run),
    )
    sys.stdout.write(render_ndeval(result, _first_run_tag(run), complete=complete))


def _first_run_tag(path: Path) -> str:
    """ndeval names the run after the tag on its first line (trec_eval: the last)."""
    import gzip

    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as lines:
        for line in lines:
            fields = line.split()
            if len(fields) >= 6 and not fields[0].startswith("#"):
                return fields[5]
    return "unknown"
