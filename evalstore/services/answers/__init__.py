"""Generated answers (TREC RAG): answer runs with their citations and references, nugget banks and
the assignments that judge answers by them.

Modules: runs (register, list, show answer runs; each one's references are a ranking run of
its name), nuggets (import banks and NIST's assignment files, matching the runs they assess),
support (citation-support labels from a file) and compare (two assessors' assignments: label
agreement and the order of the runs).
"""

from __future__ import annotations

from evalstore.services.answers.compare import AssessedPairs, AssignmentComparison, compare_assignments
from evalstore.services.answers.nuggets import (
    HUMAN,
    BankSummary,
    ImportedNuggets,
    RunMatch,
    UnreviewedDraft,
    accept_bank,
    bank_hash,
    get_bank,
    import_nuggets,
    list_banks,
    stored_bank_hash,
)
from evalstore.services.answers.runs import (
    AnswerRunSummary,
    ShownAnswer,
    ShownSentence,
    add_answer_run,
    get_answer_run,
    list_answer_runs,
    references_file,
    register_answers,
    show_answers,
    shown_answer,
    topic_ids,
)
from evalstore.services.answers.support import ImportedSupport, import_support

__all__ = [
    "HUMAN",
    "UnreviewedDraft",
    "accept_bank",
    "AnswerRunSummary",
    "BankSummary",
    "ImportedNuggets",
    "ImportedSupport",
    "RunMatch",
    "AssessedPairs",
    "AssignmentComparison",
    "compare_assignments",
    "ShownAnswer",
    "ShownSentence",
    "add_answer_run",
    "get_answer_run",
    "bank_hash",
    "get_bank",
    "import_nuggets",
    "import_support",
    "list_answer_runs",
    "list_banks",
    "references_file",
    "register_answers",
    "show_answers",
    "stored_bank_hash",
    "shown_answer",
    "topic_ids",
]
