"""Which ledger a report row shows on demand, and whether the record agrees with it.

A row's ledger comes from, in order:

1. a reference ledger (`--reference LEDGER.yaml`) whose name is the record's op, compared
   case-blind: the same match `roofwise.lint` uses, so the details and the lint findings talk
   about the same ledger;
2. the operator library (`roofwise.ops`), when the op is one of its operators and the
   record's `workload` is a mapping naming at least one of that operator's parameters. A key
   that is not a parameter is ignored only when its value is text (a note); any other key
   (`tokens` on an op that takes `rows`) means the workload describes another shape, so no
   ledger is built rather than one at the wrong size. Parameters the workload leaves out take
   the operator's defaults, and the row says which.

Where the ledger's bytes, FLOPs or read/write split differ from the record's, the row says so:
a record that disagrees with the ledger of its own op is what misuses M4 and M6 look like.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from roofwise.base import fmt
from roofwise.ledgers.ledger import Ledger
from roofwise.ops import OPS, build_op, op_parameters

NO_LEDGER = "no ledger for this op (pass --reference LEDGER.yaml)"


@dataclass(frozen=True)
class Reference:
    """A ledger the user gave, and where it came from (shown beside it)."""

    ledger: Ledger
    origin: str = ""


@dataclass(frozen=True)
class RowLedger:
    """The ledger a row shows, where it came from, and how the record differs from it."""

    ledger: Ledger
    source: str  # "reference examples/x.yaml" or "operator library: op(k=v, ...)"
    defaults: tuple[str, ...] = ()  # "in_dtype=bf16": parameters the workload left out
    ignored: tuple[str, ...] = ()  # workload keys that are not parameters (notes)
    differences: tuple[str, ...] = ()  # "bytes: the record counts ..., this ledger ..."


@dataclass(frozen=True)
class NoLedger:
    """No ledger is known for the row; `why` adds what the operator library said, if anything."""

    why: str = ""

    @property
    def text(self) -> str:
        return f"{NO_LEDGER}; {self.why}" if self.why else NO_LEDGER


class LedgerFinder:
    """Finds each row's ledger; one per report, so each (op, workload) is built once."""

    def __init__(self, references: Sequence[Reference] = ()) -> None:
        self._references = {r.ledger.name.lower(): r for r in references}
        self._built: dict[tuple[str, tuple[tuple[str, str], ...]], Ledger | NoLedger] = {}

    def find(self, row: Mapping[str, Any]) -> RowLedger | NoLedger:
        """The ledger for one verdict row (`Analysis.row(i)`), with the record's differences."""
        op = str(row.get("op", ""))
        reference = self._references.get(op.lower())
        if reference is not None:
            where = f"reference {reference.origin}" if reference.origin else "reference"
            found: RowLedger | NoLedger = RowLedger(reference.ledger,
                                                    f"{where} ({reference.ledger.name})")
        else:
            found = self._from_library(op, row.get("workload"))
        if isinstance(found, NoLedger):
            return found
        return RowLedger(found.ledger, found.source, found.defaults, found.ignored,
                         differences(row, found.ledger))

    def _from_library(self, op: str, workload: Any) -> RowLedger | NoLedger:
        call = _library_call(op, workload)
        if isinstance(call, NoLedger):
            return call
        given, defaults, ignored = call
        key = (op, tuple(sorted(given.items())))
        if key not in self._built:
            self._built[key] = _build(op, given)
        built = self._built[key]
        if isinstance(built, NoLedger):
            return built
        shown = ", ".join(f"{k}={v}" for k, v in given.items())
        return RowLedger(built, f"operator library: {op}({shown})", defaults, ignored)


def _build(op: str, given: Mapping[str, str]) -> Ledger | NoLedger:
    try:
        return build_op(op, given)
    except (ValueError, OverflowError, ZeroDivisionError) as exc:  # InputError is a ValueError
        return NoLedger(f"the library's {op} does not build from this workload: {exc}")


def _library_call(op: str, workload: Any
                  ) -> tuple[dict[str, str], tuple[str, ...], tuple[str, ...]] | NoLedger:
    """(parameters as text, defaults taken, keys ignored) for `op`, or why there are none."""
    if op not in OPS:
        return NoLedger()
    if not isinstance(workload, Mapping):
        return NoLedger(f"the operator library has {op}, but this record's workload is not a "
                        "mapping of its parameters")
    params = {p.name: p for p in op_parameters(op)}
    ignored = [k for k, v in workload.items() if k not in params and isinstance(v, str)]
    unknown = [k for k in workload if k not in params and k not in ignored]
    expected = ", ".join(params)
    if unknown:
        return NoLedger(f"workload key{'s' if len(unknown) > 1 else ''} "
                        f"{', '.join(map(repr, unknown))} "
                        f"{'are not parameters' if len(unknown) > 1 else 'is not a parameter'} "
                        f"of the library's {op} (expected: {expected})")
    given = {k: v for k, v in workload.items() if k in params}
    if not given:
        return NoLedger(f"the workload names none of the library's {op} parameters "
                        f"({expected})")
    defaults = tuple(f"{p.name}={p.default_text}" for name, p in params.items()
                     if name not in given)
    return {k: _text(v) for k, v in given.items()}, defaults, tuple(ignored)


def _text(value: Any) -> str:
    """A workload value as the registry's parser reads it (`--shape` text)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return str(value)


def differences(row: Mapping[str, Any], ledger: Ledger) -> tuple[str, ...]:
    """Where the record's bytes, FLOPs and read/write split differ from the ledger's."""
    out = []
    for field, ours, unit in (("bytes", ledger.bytes, " B"), ("flops", ledger.flops, ""),
                              ("read_bytes", ledger.read_bytes, " B"),
                              ("write_bytes", ledger.write_bytes, " B")):
        theirs = row.get(field)
        if theirs is None or not math.isfinite(float(theirs)):
            continue  # a split the record does not give
        if math.isclose(float(theirs), float(ours), rel_tol=1e-12, abs_tol=0.5):
            continue
        gap = float(theirs) - float(ours)
        out.append(f"{field}: the record counts {fmt.exact(float(theirs))}{unit}, this ledger "
                   f"{fmt.exact(float(ours))}{unit} (the record {fmt.exact(abs(gap))}{unit} "
                   f"{'more' if gap > 0 else 'fewer'})")
    return tuple(out)
