"""`evalstore trec-eval`: a drop-in for trec_eval 10.0's command line and output. Its options are
parsed by :mod:`evalstore.trec_eval.command_line` (argparse), the one parser of the command: the
``evalstore`` entry point runs it without loading this CLI when ``trec-eval`` comes first."""

import typer

from evalstore.cli._output import warn


def trec_eval(ctx: typer.Context) -> None:
    """Evaluate a run against qrels exactly as trec_eval 10.0 does, with the same output
    ('evalstore trec-eval --help' lists its options: -q -c -n -J -l -M -m -N -R -T -Z)."""
    from evalstore.trec_eval.command_line import run

    run(ctx.args, warn=warn)


# trec_eval's options pass through to the command's own parser, --help included
SETTINGS = {"allow_extra_args": True, "ignore_unknown_options": True, "help_option_names": []}
