"""The eight misuses (M1-M8), R1 and R2, as checks over ledgers, machines and analyses: no I/O.

Each check is a small function registered by its code. `lint_machine` checks a profile,
`lint_ledger` one ledger, `lint_rows` / `lint_analysis` an analysis of benchmark records
(`lint_columns` and `findings_frame` the same findings as a frame; `finding_kinds` folds them
by kind, `BatchFindings` / `file_finding_kinds` over a file read in batches).
"""

from roofwise.lint.findings import (
    CODES,
    ERROR,
    WARNING,
    Finding,
    has_errors,
    is_matrix_unit,
    is_sfu_unit,
)
from roofwise.lint.judgments import MAX_STAGES_SPLIT, Reading, decompositions
from roofwise.lint.ledger_checks import LEDGER_CHECKS, LedgerCase, lint_ledger
from roofwise.lint.machine_checks import (
    DATASHEET_MARGIN,
    KNOWN_DENSE_PEAKS,
    MACHINE_CHECKS,
    lint_machine,
    sparse_reason,
)
from roofwise.lint.record_checks import (
    FINDING_FIELDS,
    ROW_CHECKS,
    BatchFindings,
    RowCase,
    file_finding_kinds,
    file_stale_findings,
    finding_frame,
    finding_kinds,
    findings_frame,
    lint_analysis,
    lint_columns,
    lint_findings,
    lint_rows,
    row_where,
)
from roofwise.lint.stale_checks import ANALYSIS_CHECKS, check_stale_profiles, stale_profile_groups

__all__ = [
    "ANALYSIS_CHECKS",
    "CODES",
    "DATASHEET_MARGIN",
    "ERROR",
    "FINDING_FIELDS",
    "KNOWN_DENSE_PEAKS",
    "LEDGER_CHECKS",
    "MACHINE_CHECKS",
    "MAX_STAGES_SPLIT",
    "ROW_CHECKS",
    "WARNING",
    "BatchFindings",
    "Finding",
    "LedgerCase",
    "Reading",
    "RowCase",
    "check_stale_profiles",
    "decompositions",
    "file_finding_kinds",
    "file_stale_findings",
    "finding_frame",
    "finding_kinds",
    "findings_frame",
    "has_errors",
    "is_matrix_unit",
    "is_sfu_unit",
    "lint_analysis",
    "lint_columns",
    "lint_findings",
    "lint_ledger",
    "lint_machine",
    "lint_rows",
    "row_where",
    "sparse_reason",
    "stale_profile_groups",
]
