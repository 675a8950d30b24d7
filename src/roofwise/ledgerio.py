"""Ledgers from YAML: a single call (tensors + work) or stages composed fused or separate."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from . import schema
from .errors import InputError
from .ledger import OP_CLASSES, Ledger, Role, Tensor, Work, fuse, separate
from .profiles import UNIT_KEY

_LEDGER_KEYS = ("name", "roof", "tensors", "work", "stages", "compose", "keep", "notes")
_TENSOR_KEYS = ("name", "shape", "dtype", "role", "uses", "bytes_per_use")
_WORK_KEYS = ("unit", "class", "ops", "label")
COMPOSITIONS = ("fused", "separate")


def load_ledger(path: str | Path) -> Ledger:
    return parse_ledger(schema.load_yaml(path), str(path))


def parse_ledger(data: Any, where: str) -> Ledger:
    body = schema.expect_mapping(data, where)
    schema.reject_unknown_keys(body, _LEDGER_KEYS, where)
    name = schema.expect_str(schema.require(body, "name", where), f"{where}: name")
    roof = body.get("roof")
    if roof is not None:
        _unit_key(roof, f"{where}: roof")
    notes = tuple(str(n) for n in schema.expect_list(body.get("notes", []), f"{where}: notes"))
    if "stages" in body:
        stages_raw = schema.expect_list(body["stages"], f"{where}: stages")
        if not stages_raw:
            raise InputError(f"{where}: stages", "expected at least one stage")
        stages = [parse_ledger(s, f"{where}: stages[{i}]") for i, s in enumerate(stages_raw)]
        compose = body.get("compose", "fused")
        if compose not in COMPOSITIONS:
            raise InputError(f"{where}: compose",
                             f"expected one of {', '.join(COMPOSITIONS)}, got {compose!r}")
        keep = [str(k) for k in schema.expect_list(body.get("keep", []), f"{where}: keep")]
        composed = (fuse(name, stages, roof, keep) if compose == "fused"
                    else separate(name, stages, roof))
        return Ledger(composed.name, composed.roof, composed.tensors, composed.work,
                      composed.calls, composed.stages, notes)
    if roof is None:
        raise InputError(f"{where}: roof", "missing required key: the unit an optimal "
                                           "implementation would use, e.g. cuda_core.fp32")
    tensors_raw = schema.expect_list(schema.require(body, "tensors", where), f"{where}: tensors")
    work_raw = schema.expect_list(body.get("work", []), f"{where}: work")
    tensors = tuple(_tensor(t, f"{where}: tensors[{i}]") for i, t in enumerate(tensors_raw))
    work = tuple(_work(w, f"{where}: work[{i}]") for i, w in enumerate(work_raw))
    return Ledger(name=name, roof=str(roof), tensors=tensors, work=work, notes=notes)


def _tensor(data: Any, where: str) -> Tensor:
    body = schema.expect_mapping(data, where)
    schema.reject_unknown_keys(body, _TENSOR_KEYS, where)
    name = schema.expect_str(schema.require(body, "name", where), f"{where}.name")
    shape_raw = schema.expect_list(schema.require(body, "shape", where), f"{where}.shape")
    shape = tuple(int(schema.expect_positive(d, f"{where}.shape[{i}]"))
                  for i, d in enumerate(shape_raw))
    role = schema.require(body, "role", where)
    roles = [r.value for r in Role]
    if role not in roles:
        raise InputError(f"{where}.role", f"expected one of {', '.join(roles)}, got {role!r}")
    uses = int(schema.expect_non_negative(body.get("uses", 0), f"{where}.uses"))
    per_use = int(schema.expect_non_negative(body.get("bytes_per_use", 0),
                                             f"{where}.bytes_per_use"))
    if uses and not per_use:
        raise InputError(f"{where}.bytes_per_use", "expected a positive number when uses is set")
    dtype = schema.expect_str(schema.require(body, "dtype", where), f"{where}.dtype")
    try:
        return Tensor(name, shape, dtype, Role(role), uses, per_use)
    except InputError as exc:
        raise InputError(f"{where}.dtype", exc.problem) from None


def _work(data: Any, where: str) -> Work:
    body = schema.expect_mapping(data, where)
    schema.reject_unknown_keys(body, _WORK_KEYS, where)
    unit = _unit_key(schema.require(body, "unit", where), f"{where}.unit")
    op_class = schema.require(body, "class", where)
    if op_class not in OP_CLASSES:
        raise InputError(f"{where}.class",
                         f"expected one of {', '.join(OP_CLASSES)}, got {op_class!r}")
    ops = schema.expect_non_negative(schema.require(body, "ops", where), f"{where}.ops")
    return Work(unit, op_class, ops, str(body.get("label", "")))


def _unit_key(value: Any, where: str) -> str:
    text = schema.expect_str(value, where)
    if not UNIT_KEY.match(text):
        raise InputError(where, f"expected a unit key such as cuda_core.fp32, got {text!r}")
    return text


def ledger_to_yaml_data(ledger: Ledger) -> dict[str, Any]:
    """A plain mapping that `parse_ledger` reads back into an equal single-call ledger."""
    return {
        "name": ledger.name, "roof": ledger.roof,
        "tensors": [{"name": t.name, "shape": list(t.shape), "dtype": t.dtype,
                     "role": t.role.value, **({"uses": t.uses, "bytes_per_use": t.bytes_per_use}
                                              if t.uses else {})} for t in ledger.tensors],
        "work": [{"unit": w.unit, "class": w.op_class, "ops": w.ops,
                  **({"label": w.label} if w.label else {})} for w in ledger.work],
    }
