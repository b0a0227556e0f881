"""Registering, listing, exporting and deleting runs and qrels.

The package's modules, by job: common (summaries, names from files, refusing bad input, the name-
race retry), runs (registering runs: the steps prepare_run, run_unit_of_work and add_run, and the
use case register_run; listing, exporting, deleting, indexing them) and qrels (importing, listing,
exporting and deleting judgments of every kind).
"""

from __future__ import annotations

from evalstore.services.store.common import (
    NAME_SOURCES,
    Progress,
    Registered,
    Summary,
    T,
    log,
    name_from_file,
    qrels_table_kept,
    retry_on_name_race,
    run_summary,
)
from evalstore.services.store.qrels import (
    add_qrels,
    delete_qrels,
    import_many_qrels,
    import_qrels,
    list_qrels,
    qrels_rows,
    read_judgments,
    show_qrels,
    store_qrels,
)
from evalstore.services.store.run_metadata import ir_metadata_of, matches_meta
from evalstore.services.store.runs import (
    PreparedRun,
    add_run,
    delete_run,
    index_next_run,
    list_runs,
    prepare_run,
    register_run,
    register_runs,
    run_rows,
    run_unit_of_work,
    show_run,
)

__all__ = [
    "NAME_SOURCES",
    "PreparedRun",
    "Progress",
    "Registered",
    "Summary",
    "T",
    "add_run",
    "delete_qrels",
    "delete_run",
    "import_many_qrels",
    "import_qrels",
    "ir_metadata_of",
    "matches_meta",
    "index_next_run",
    "list_qrels",
    "list_runs",
    "log",
    "name_from_file",
    "prepare_run",
    "qrels_rows",
    "qrels_table_kept",
    "read_judgments",
    "register_run",
    "register_runs",
    "retry_on_name_race",
    "run_rows",
    "run_summary",
    "run_unit_of_work",
    "show_qrels",
    "show_run",
    "add_qrels",
    "store_qrels",
]
