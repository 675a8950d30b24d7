"""Two runs of the same benchmarks, row by row: what got slower beyond the noise, what got faster.

Pure: takes two analyses, returns a comparison. Rows are matched by (op, workload as canonical
JSON, device); repeated keys within one file are paired in file order, and listed in
`Comparison.duplicates` so that a caller can say so (a CI gate fails on them).

A pair is *incomparable* when no ratio of its times says anything about the kernel, and it
carries the reason:
- a base or new time that is not a positive number;
- a row whose verdict is impossible (its bytes or FLOPs over its time exceed a theoretical
  ceiling: the accounting or the timer is wrong, and a "99% faster" would celebrate the bug);
- a row that is blank (the model cannot price it: nothing says what its time should be);
- a row that is latency-bound (under the latency floor the launch, not the kernel, sets the
  time: a change in it is not the kernel's).
Such a pair is never an improvement or a regression; its change in time is still shown, beside
both verdicts, and a CI gate fails on it: it cannot be shown not to regress.

A regression is a slowdown beyond the measurement spread: with spreads on both rows
(`time_p10_s`, `time_p90_s`), the new p10 must lie above the base p90 *and* the relative change
must exceed the threshold; without spreads, the threshold alone decides. Improvements mirror it.

Matching and classifying are vectorised over numpy columns (two million-row runs compare in
seconds); `Change` objects are built only for the rows a caller looks at.
"""

from __future__ import annotations

import json
import math
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

from roofwise.base import fmt
from roofwise.base.built import Built
from roofwise.base.errors import InputError
from roofwise.base.text_columns import coded, strings
from roofwise.output.analysis import Analysis
from roofwise.verdicts.rules import BLANK, IMPOSSIBLE, LATENCY_BOUND, NO_EFFICIENCY, VERDICTS

REGRESSION, INCOMPARABLE, IMPROVEMENT, UNCHANGED, ONLY_BASE, ONLY_NEW = (
    "regression", "incomparable", "improvement", "unchanged", "only_base", "only_new")
STATUS_ORDER = (REGRESSION, INCOMPARABLE, IMPROVEMENT, UNCHANGED, ONLY_BASE, ONLY_NEW)
DEFAULT_THRESHOLD = 0.05

Key = tuple[str, str, str]
# verdict codes whose efficiency is not a reading (the table shows "—"), so no change in it
# either; the same verdicts make a pair incomparable, in this order of precedence
_UNJUDGED = {
    IMPOSSIBLE: "is impossible (above a theoretical ceiling: its accounting or timer is wrong)",
    BLANK: "is blank (the model cannot price it)",
    LATENCY_BOUND: "is latency-bound (under the latency floor, the launch sets its time)",
}
_STATUS_CODE = {s: k for k, s in enumerate(STATUS_ORDER)}


@dataclass(frozen=True)
class Side:
    """One row of one run, as the comparison needs it."""

    index: int
    line: int  # where the record sits in its file (1-based), for messages
    time_s: float
    time_p10_s: float  # NaN when the record has no spread
    time_p90_s: float
    efficiency: float  # NaN when blank, latency-bound or impossible: not a reading there
    verdict: str

    @property
    def has_spread(self) -> bool:
        return math.isfinite(self.time_p10_s) and math.isfinite(self.time_p90_s)


@dataclass(frozen=True)
class Change:
    key: Key
    status: str
    base: Side | None
    new: Side | None
    time_change: float  # new/base - 1; NaN when unmatched or a time is not positive
    efficiency_change: float  # new - base, in efficiency units (0.05 = 5 points); NaN if unknown
    beyond_spread: bool | None  # None when either side has no spread
    reason: str = ""  # why the pair is incomparable; empty otherwise

    def to_json(self) -> dict[str, Any]:
        op, workload, device = self.key
        return {
            "op": op, "workload": json.loads(workload) if workload else None,
            "device": device or None, "status": self.status,
            "base_time_s": _opt(self.base.time_s if self.base else None),
            "new_time_s": _opt(self.new.time_s if self.new else None),
            "time_change": _opt(self.time_change),
            "base_efficiency": _opt(self.base.efficiency if self.base else None),
            "new_efficiency": _opt(self.new.efficiency if self.new else None),
            "efficiency_change": _opt(self.efficiency_change),
            "base_verdict": self.base.verdict if self.base else None,
            "new_verdict": self.new.verdict if self.new else None,
            "beyond_spread": self.beyond_spread,
            "reason": self.reason or None,
        }


@dataclass(frozen=True)
class Duplicate:
    """A key seen again in one file: its rows are paired with the other file's in file order."""

    side: str  # "base" or "new"
    key: Key
    line: int  # the repeated record
    first_line: int  # the first record with the same key

    def describe(self) -> str:
        op, workload, device = self.key
        return (f"line {self.line} repeats line {self.first_line} (op {op!r}, workload "
                f"{workload or 'none'}, device {device or 'none'!r}); paired in file order")


@dataclass(frozen=True)
class _Run:
    """One run's columns, as matching and classifying need them."""

    op: np.ndarray  # object
    workload: np.ndarray  # object: canonical JSON, "" where absent
    device: np.ndarray  # object
    line: np.ndarray
    time_s: np.ndarray
    time_p10_s: np.ndarray
    time_p90_s: np.ndarray
    efficiency: np.ndarray  # NaN where not a reading
    verdict: np.ndarray  # verdict codes (indices into VERDICTS)

    def side(self, i: int) -> Side:
        return Side(index=i, line=int(self.line[i]), time_s=float(self.time_s[i]),
                    time_p10_s=float(self.time_p10_s[i]),
                    time_p90_s=float(self.time_p90_s[i]),
                    efficiency=float(self.efficiency[i]),
                    verdict=VERDICTS[int(self.verdict[i])])

    def key(self, i: int) -> Key:
        return (str(self.op[i]), str(self.workload[i]), str(self.device[i]))


class Changes(Built[Change]):
    """The pairs in display order; each `Change` is built when it is looked at."""

    def __init__(self, base: _Run, new: _Run, base_index: np.ndarray, new_index: np.ndarray,
                 status: np.ndarray, time_change: np.ndarray, efficiency_change: np.ndarray,
                 beyond: np.ndarray, reason: np.ndarray) -> None:
        self._base, self._new = base, new
        self.base_index, self.new_index = base_index, new_index
        self.status = status  # codes into STATUS_ORDER
        self.time_change, self.efficiency_change = time_change, efficiency_change
        self.beyond, self.reason = beyond, reason

    def __len__(self) -> int:
        return int(self.status.shape[0])

    def _at(self, k: int) -> Change:
        b, n = int(self.base_index[k]), int(self.new_index[k])
        key = self._base.key(b) if b >= 0 else self._new.key(n)
        beyond = int(self.beyond[k])
        return Change(key, STATUS_ORDER[int(self.status[k])],
                      self._base.side(b) if b >= 0 else None,
                      self._new.side(n) if n >= 0 else None,
                      float(self.time_change[k]), float(self.efficiency_change[k]),
                      None if beyond < 0 else bool(beyond), str(self.reason[k] or ""))

    def json_frame(self) -> pl.DataFrame:
        """`Change.to_json` of every pair as a frame row, built column by column (no object
        per pair); `workload` holds its JSON text (`output.frame.json_rows_writer` writes it
        as JSON)."""
        base, new = self._base, self._new
        b, n = self.base_index, self.new_index
        from_base = b >= 0

        def pick(column: str) -> np.ndarray:
            return np.where(from_base, getattr(base, column)[np.maximum(b, 0)],
                            getattr(new, column)[np.maximum(n, 0)])

        def texts(name: str, values: np.ndarray) -> pl.Series:
            return strings(name, values).replace("", None)

        return pl.DataFrame([
            strings("op", pick("op")), texts("workload", pick("workload")),
            texts("device", pick("device")),
            coded("status", self.status, STATUS_ORDER),
            _floats("base_time_s", base.time_s, b), _floats("new_time_s", new.time_s, n),
            _floats("time_change", self.time_change),
            _floats("base_efficiency", base.efficiency, b),
            _floats("new_efficiency", new.efficiency, n),
            _floats("efficiency_change", self.efficiency_change),
            _verdicts("base_verdict", base, b), _verdicts("new_verdict", new, n),
            pl.Series("beyond_spread", self.beyond, pl.Int8).replace_strict(
                {-1: None, 0: False, 1: True}, return_dtype=pl.Boolean),
            texts("reason", self.reason.astype(object)),
        ])


class Duplicates(Built[Duplicate]):
    """The keys repeated within a file, base's then new's, in file order; each `Duplicate` is
    built when it is looked at (a million repeated keys cost arrays, not a million objects).
    Each part is (side, run, the repeated rows, the line of each one's first row)."""

    def __init__(self, parts: Sequence[tuple[str, _Run, np.ndarray, np.ndarray]] = ()) -> None:
        self._parts = [p for p in parts if len(p[2])]
        self._ends = np.cumsum([len(p[2]) for p in self._parts], dtype=np.int64)

    def __len__(self) -> int:
        return int(self._ends[-1]) if len(self._ends) else 0

    def _at(self, k: int) -> Duplicate:
        part = int(np.searchsorted(self._ends, k, side="right"))
        side, run, rows, first_lines = self._parts[part]
        j = k - (int(self._ends[part - 1]) if part else 0)
        row = int(rows[j])
        return Duplicate(side, run.key(row), int(run.line[row]), int(first_lines[j]))

    def of_side(self, side: str) -> Duplicates:
        return Duplicates([p for p in self._parts if p[0] == side])


@dataclass(frozen=True)
class Comparison:
    changes: Changes  # in STATUS_ORDER: regressions first, unmatched last
    threshold: float
    duplicates: Duplicates = field(default_factory=Duplicates)

    def by_status(self, status: str) -> list[Change]:
        where = np.flatnonzero(self.changes.status == _STATUS_CODE[status])
        return [self.changes[int(k)] for k in where]

    @property
    def regressions(self) -> list[Change]:
        return self.by_status(REGRESSION)

    def counts(self) -> dict[str, int]:
        found = np.bincount(self.changes.status, minlength=len(STATUS_ORDER))
        return {s: int(found[k]) for k, s in enumerate(STATUS_ORDER)}


def compare(base: Analysis, new: Analysis, threshold: float = DEFAULT_THRESHOLD) -> Comparison:
    """Match rows, classify each pair, and order them: regressions, improvements, the rest."""
    if not (threshold >= 0 and math.isfinite(threshold)):
        raise InputError("--threshold", f"expected a non-negative fraction, got {threshold!r}")
    runs = (_run(base), _run(new))
    codes = _key_codes(runs)
    occurrence = [_occurrence(c) for c in codes]
    duplicates = Duplicates([_duplicates(side, run, code, occ) for side, run, code, occ in zip(
        ("base", "new"), runs, codes, occurrence, strict=True)])
    base_index, new_index = _match(codes, occurrence)
    matched = (base_index >= 0) & (new_index >= 0)
    b, n = runs[0], runs[1]
    bi, ni = base_index[matched], new_index[matched]

    status = np.full(len(base_index), _STATUS_CODE[UNCHANGED], dtype=np.int64)
    status[(base_index >= 0) & (new_index < 0)] = _STATUS_CODE[ONLY_BASE]
    status[(base_index < 0) & (new_index >= 0)] = _STATUS_CODE[ONLY_NEW]
    time_change = np.full(len(base_index), np.nan)
    efficiency_change = np.full(len(base_index), np.nan)
    beyond = np.full(len(base_index), -1, dtype=np.int8)
    reason = np.full(len(base_index), "", dtype=object)

    tb, tn = b.time_s[bi], n.time_s[ni]
    timed = (tb > 0) & np.isfinite(tb) & (tn > 0) & np.isfinite(tn)
    with np.errstate(divide="ignore", invalid="ignore"):
        change = np.where(timed, tn / tb - 1.0, np.nan)
    spread = (np.isfinite(b.time_p10_s[bi]) & np.isfinite(b.time_p90_s[bi])
              & np.isfinite(n.time_p10_s[ni]) & np.isfinite(n.time_p90_s[ni]))
    slower_beyond = n.time_p10_s[ni] > b.time_p90_s[bi]
    faster_beyond = n.time_p90_s[ni] < b.time_p10_s[bi]
    unjudged = np.zeros(len(bi), dtype=bool)
    for code in _UNJUDGED:
        unjudged |= (b.verdict[bi] == code) | (n.verdict[ni] == code)
    incomparable = ~timed | unjudged
    pair_status = np.full(len(bi), _STATUS_CODE[UNCHANGED], dtype=np.int64)
    regressed = (change > threshold) & (~spread | slower_beyond)
    improved = (change < -threshold) & (~spread | faster_beyond)
    pair_status[regressed] = _STATUS_CODE[REGRESSION]
    pair_status[improved] = _STATUS_CODE[IMPROVEMENT]
    pair_status[incomparable] = _STATUS_CODE[INCOMPARABLE]
    status[matched] = pair_status
    time_change[matched] = change
    efficiency_change[matched] = np.where(incomparable, np.nan,
                                          n.efficiency[ni] - b.efficiency[bi])
    beyond[matched] = np.where(spread, (slower_beyond | faster_beyond).astype(np.int8), -1)
    reason[matched] = _reasons(b, bi, n, ni, timed, incomparable)

    # regressions first, unmatched last; within a status the largest change first
    size = np.where(np.isfinite(time_change), -np.abs(time_change), 0.0)
    order = np.lexsort((size, status))
    changes = Changes(b, n, base_index[order], new_index[order], status[order],
                      time_change[order], efficiency_change[order], beyond[order],
                      reason[order])
    return Comparison(changes, threshold, duplicates)


def _run(analysis: Analysis) -> _Run:
    cols, judged = analysis.columns, analysis.judged
    n = len(cols)
    lines = cols.line if len(cols.line) == n else np.arange(1, n + 1)
    verdict = np.asarray(judged.verdict, dtype=np.int64)
    no_reading = np.isin(verdict, list(NO_EFFICIENCY))
    with np.errstate(invalid="ignore"):
        efficiency = np.where(no_reading, np.nan, judged.efficiency.astype(float))
    return _Run(op=np.asarray(cols.op, dtype=object), workload=workload_texts(analysis),
                device=_devices(cols),
                line=np.asarray(lines, dtype=np.int64),
                time_s=np.asarray(cols.time_s, dtype=float),
                time_p10_s=np.asarray(cols.time_p10_s, dtype=float),
                time_p90_s=np.asarray(cols.time_p90_s, dtype=float),
                efficiency=efficiency, verdict=verdict)


def _devices(cols: Any) -> np.ndarray:
    """Each row's device name, "" where none: one string per distinct device."""
    codes, names = cols.device_categories()
    return np.array([str(d or "") for d in names] + [""], dtype=object)[codes]


def workload_texts(analysis: Analysis) -> np.ndarray:
    """Each row's workload as canonical JSON (keys sorted), "" where it has none: the same
    benchmark written with its keys in another order is the same key."""
    import polars as pl  # distinct workloads found by the engine

    cols = analysis.columns
    extras = cols.extras
    if extras is not None and "workload" in extras.columns and extras["workload"].dtype == (
            pl.String):
        # each distinct value made canonical once (a sweep repeats its shapes)
        column = extras["workload"]
        distinct = column.drop_nulls().unique(maintain_order=True).to_list()
        as_text = "workload" in cols.extras_json
        canonical = canonical_json(_decode_many(distinct) if as_text else distinct)
        return (column.replace_strict(distinct, canonical, default=None,
                                      return_dtype=pl.String)
                .fill_null("").to_numpy().astype(object))
    values, as_text = _raw_workloads(cols)
    present = [k for k, v in enumerate(values) if v is not None]
    out = np.full(len(values), "", dtype=object)
    if present:
        picked = [values[k] for k in present]
        out[present] = canonical_json(_decode_many(picked) if as_text else picked)
    return out


def canonical_json(values: list[Any]) -> list[str]:
    """`json.dumps(v, sort_keys=True, separators=(",", ":"))` of each value, in one call of the
    C encoder: the values are encoded as one list, each followed by a sentinel string no
    record holds (a random token), and the text is cut at the sentinels. A million small
    workloads take about a second instead of ten."""
    sentinel = f"\x00{uuid.uuid4().hex}\x00"
    encode = json.JSONEncoder(sort_keys=True, separators=(",", ":")).encode
    text = encode([x for v in values for x in (v, sentinel)])
    parts = text[1:-1].split("," + encode(sentinel))
    if len(parts) != len(values) + 1 or parts[-1]:
        return [encode(v) for v in values]  # a value held the token after all
    return [parts[0], *(p[1:] for p in parts[1:-1])]


def _decode_many(texts: list[str]) -> list[Any]:
    """JSON texts decoded in one call of the C decoder (one by one if any is not JSON)."""
    try:
        decoded = json.loads("[" + ",".join(texts) + "]")
    except ValueError:
        decoded = None
    if not isinstance(decoded, list) or len(decoded) != len(texts):
        decoded = [_loads_or_text(t) for t in texts]
    return decoded


def _loads_or_text(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text  # not JSON after all: the text itself is the workload


def _raw_workloads(cols: Any) -> tuple[list[Any], bool]:
    """The workload of every row (None where absent), and whether they are JSON text: every
    reader keeps the fields outside the contract as columns (`extras`, JSON text where named
    in `extras_json`), so no row is read here; no such column, no workload."""
    extras = getattr(cols, "extras", None)
    if extras is not None and "workload" in getattr(extras, "columns", ()):
        return extras["workload"].to_list(), "workload" in getattr(cols, "extras_json", ())
    return [None] * len(cols), False


def _key_codes(runs: tuple[_Run, _Run]) -> list[np.ndarray]:
    """One integer per row for (op, workload, device), shared by both runs."""
    import polars as pl  # the engine hashes the keys; only compare needs it here

    both = pl.DataFrame({name: pl.Series(name, np.concatenate([getattr(r, name) for r in runs])
                                         .tolist(), dtype=pl.String)
                         for name in ("op", "workload", "device")})
    keys = both.unique().with_row_index("code")  # hashed, not sorted
    codes = both.join(keys, on=both.columns, how="left", maintain_order="left")[
        "code"].to_numpy()
    cut = len(runs[0].op)
    return [codes[:cut].astype(np.int64), codes[cut:].astype(np.int64)]


def _occurrence(codes: np.ndarray) -> np.ndarray:
    """How many earlier rows of the file share each row's key (0 for the first)."""
    order = np.argsort(codes, kind="stable")
    sorted_codes = codes[order]
    starts = np.r_[True, sorted_codes[1:] != sorted_codes[:-1]] if len(codes) else np.zeros(
        0, dtype=bool)
    group_start = np.maximum.accumulate(np.where(starts, np.arange(len(codes)), 0))
    occurrence = np.empty(len(codes), dtype=np.int64)
    occurrence[order] = np.arange(len(codes)) - group_start
    return occurrence


def _duplicates(side: str, run: _Run, codes: np.ndarray, occurrence: np.ndarray
                ) -> tuple[str, _Run, np.ndarray, np.ndarray]:
    """A `Duplicates` part: the rows whose key an earlier row has, and that row's line."""
    repeated = np.flatnonzero(occurrence > 0)
    first_line = np.zeros(int(codes.max(initial=-1)) + 1, dtype=np.int64)
    firsts = occurrence == 0
    first_line[codes[firsts]] = run.line[firsts]
    return side, run, repeated, first_line[codes[repeated]]


def _match(codes: list[np.ndarray], occurrence: list[np.ndarray]
           ) -> tuple[np.ndarray, np.ndarray]:
    """Row indices of each pair (-1 for the missing side): matched pairs in base order, then
    base rows with no match, then new rows with no match, each in file order."""
    width = int(max((o.max(initial=0) for o in occurrence), default=0)) + 1
    base_key = codes[0] * width + occurrence[0]
    new_key = codes[1] * width + occurrence[1]
    if len(new_key):
        order = np.argsort(new_key, kind="stable")
        sorted_keys = new_key[order]
        at = np.minimum(np.searchsorted(sorted_keys, base_key), len(new_key) - 1)
        found = sorted_keys[at] == base_key
        partner = np.where(found, order[at], -1)
    else:
        found = np.zeros(len(base_key), dtype=bool)
        partner = np.full(len(base_key), -1)
    taken = np.zeros(len(new_key), dtype=bool)
    taken[partner[found]] = True
    base_rows = np.arange(len(base_key))
    base_index = np.concatenate((base_rows[found], base_rows[~found],
                                 np.full(int((~taken).sum()), -1)))
    new_index = np.concatenate((partner[found], np.full(int((~found).sum()), -1),
                                np.flatnonzero(~taken)))
    return base_index.astype(np.int64), new_index.astype(np.int64)


def _reasons(base: _Run, bi: np.ndarray, new: _Run, ni: np.ndarray, timed: np.ndarray,
             incomparable: np.ndarray) -> np.ndarray:
    """Why each incomparable pair says nothing about the kernel ("" for the others): a time
    that is not positive (named with its value), else the first unjudged verdict by
    precedence, on one side or both (a handful of sentences, assigned by mask)."""
    out = np.full(len(bi), "", dtype=object)
    left = incomparable & timed
    for k in np.flatnonzero(incomparable & ~timed).tolist():
        bad = [_bad_time(name, float(run.time_s[i])) for name, run, i in
               (("base", base, int(bi[k])), ("new", new, int(ni[k])))
               if not (run.time_s[i] > 0 and math.isfinite(run.time_s[i]))]
        out[k] = "; ".join(bad) + ": no change in time can be measured"
    for code, why in _UNJUDGED.items():
        on_base, on_new = base.verdict[bi] == code, new.verdict[ni] == code
        for mask, who, text in ((on_base & on_new, "both rows are", why.removeprefix("is ")),
                                (on_base & ~on_new, "the base row", why),
                                (~on_base & on_new, "the new row", why)):
            hit = left & mask
            out[hit] = f"{who} {text}; its change in time is not the kernel's to judge"
        left &= ~(on_base | on_new)
    return out


def _bad_time(name: str, time_s: float) -> str:
    if not math.isfinite(time_s):
        return f"{name} time is not a finite number"
    return f"{name} time {fmt.seconds(time_s, significant=3)} is not positive"


def _floats(name: str, values: np.ndarray, index: np.ndarray | None = None) -> pl.Series:
    """Numbers, null where not finite or the side is absent."""
    picked = values if index is None else np.where(index >= 0, values[np.maximum(index, 0)],
                                                   np.nan)
    picked = np.asarray(picked, dtype=np.float64)
    return pl.Series(name, picked).fill_nan(None).replace([math.inf, -math.inf], None)


def _verdicts(name: str, run: _Run, index: np.ndarray) -> pl.Series:
    verdict = coded(name, run.verdict[np.maximum(index, 0)], VERDICTS)
    return verdict.set(pl.Series(index < 0), None) if (index < 0).any() else verdict


def _opt(value: float | None) -> float | None:
    return None if value is None or not math.isfinite(value) else value
