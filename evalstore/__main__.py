"""`python -m evalstore`: the same as the `evalstore` command (the MLflow hand-off of `evaluate --wait`
starts it this way, with the interpreter that runs the parent)."""

from evalstore._entry import main

main()
