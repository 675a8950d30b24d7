"""Ledgers from YAML: a single call (tensors + work) or stages composed fused or separate."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from roofwise.base import schema
from roofwise.base.errors import InputError
from roofwise.ledgers.ledger import Ledger, Role, Tensor, Work, fuse, separate
from roofwise.profiles.load import UNIT_KEY
from roofwise.profiles.machine import OP_CLASSES

_LEDGER_KEYS = ("name", "roof", "tensors", "work", "stages", "compose", "keep", "notes")
_TENSOR_KEYS = ("name", "shape", "dtype", "role", "uses", "bytes_per_use")
_WORK_KEYS = ("unit", "class", "ops", "label")
COMPOSITIONS = ("fused", "separate")


def load_ledger(path: str | Path) -> Ledger:
    """A ledger from its YAML file (docs/ledger-format.md): tensors (bytes follow from shape and
    dtype), work in operations per unit and class, stages. Any fault is one InputError naming
    the file and the key."""
    return parse_ledger(schema.load_yaml(path), str(path))


def parse_ledger(data: Any, where: str) -> Ledger:
    body = schema.expect_mapping(data, where)
    if "memory" in body and "units" in body:
        raise InputError(where, "this is a machine profile, not a ledger; pass it as --machine")
    schema.reject_unknown_keys(body, _LEDGER_KEYS, where)
    name = schema.expect_str(schema.require(body, "name", where), schema.at(where, "name"))
    roof = body.get("roof")
    if roof is not None:
        _unit_key(roof, schema.at(where, "roof"))
    notes = tuple(schema.free_text(n, schema.at(where, f"notes[{i}]")) for i, n in
                  enumerate(schema.expect_list(body.get("notes", []), schema.at(where, "notes"))))
    if "stages" in body:
        return _composed(body, name, roof, notes, where)
    if roof is None:
        raise InputError(schema.at(where, "roof"), "missing required key: the unit an optimal "
                                                   "implementation would use, e.g. cuda_core.fp32")
    if "tensors" not in body:
        raise InputError(schema.at(where, "tensors"),
                         "missing required key (or give `stages` to compose a ledger)")
    tensors_raw = schema.expect_list(body["tensors"], schema.at(where, "tensors"))
    work_raw = schema.expect_list(body.get("work", []), schema.at(where, "work"))
    tensors = tuple(_tensor(t, schema.at(where, f"tensors[{i}]"))
                    for i, t in enumerate(tensors_raw))
    seen: set[str] = set()
    for i, tensor in enumerate(tensors):
        if tensor.name in seen:
            raise InputError(schema.at(where, f"tensors[{i}].name"),
                             f"tensor {tensor.name!r} is listed twice; list each storage once")
        seen.add(tensor.name)
    work = tuple(_work(w, schema.at(where, f"work[{i}]")) for i, w in enumerate(work_raw))
    return Ledger(name=name, roof=str(roof), tensors=tensors, work=work, notes=notes)


def _composed(body: Mapping[str, Any], name: str, roof: str | None, notes: tuple[str, ...],
              where: str) -> Ledger:
    stages_raw = schema.expect_list(body["stages"], schema.at(where, "stages"))
    if not stages_raw:
        raise InputError(schema.at(where, "stages"), "expected at least one stage")
    stages = [parse_ledger(s, schema.at(where, f"stages[{i}]"))
              for i, s in enumerate(stages_raw)]
    compose = body.get("compose", "fused")
    if compose not in COMPOSITIONS:
        raise InputError(schema.at(where, "compose"),
                         f"expected one of {', '.join(COMPOSITIONS)}, got {compose!r}")
    keep = [schema.free_text(k, schema.at(where, f"keep[{i}]")) for i, k in
            enumerate(schema.expect_list(body.get("keep", []), schema.at(where, "keep")))]
    composed = (fuse(name, stages, roof, keep) if compose == "fused"
                else separate(name, stages, roof))
    return Ledger(composed.name, composed.roof, composed.tensors, composed.work,
                  composed.calls, composed.stages, notes)


def _tensor(data: Any, where: str) -> Tensor:
    body = schema.expect_mapping(data, where)
    schema.reject_unknown_keys(body, _TENSOR_KEYS, where)
    name = schema.expect_str(schema.require(body, "name", where), schema.at(where, "name"))
    shape_raw = schema.expect_list(schema.require(body, "shape", where), schema.at(where, "shape"))
    shape = tuple(schema.expect_positive_int(d, schema.at(where, f"shape[{i}]"))
                  for i, d in enumerate(shape_raw))
    role = schema.require(body, "role", where)
    roles = [r.value for r in Role]
    if role not in roles:
        raise InputError(schema.at(where, "role"),
                         f"expected one of {', '.join(roles)}, got {role!r}")
    uses = int(schema.expect_non_negative(body.get("uses", 0), schema.at(where, "uses")))
    per_use = int(schema.expect_non_negative(body.get("bytes_per_use", 0),
                                             schema.at(where, "bytes_per_use")))
    if uses and not per_use:
        raise InputError(schema.at(where, "bytes_per_use"),
                         "expected a positive number when uses is set")
    dtype = schema.expect_str(schema.require(body, "dtype", where), schema.at(where, "dtype"))
    try:
        return Tensor(name, shape, dtype, Role(role), uses, per_use)
    except InputError as exc:
        raise InputError(schema.at(where, "dtype"), exc.problem) from None


def _work(data: Any, where: str) -> Work:
    body = schema.expect_mapping(data, where)
    schema.reject_unknown_keys(body, _WORK_KEYS, where)
    unit = _unit_key(schema.require(body, "unit", where), schema.at(where, "unit"))
    op_class = schema.require(body, "class", where)
    if op_class not in OP_CLASSES:
        raise InputError(schema.at(where, "class"),
                         f"expected one of {', '.join(OP_CLASSES)}, got {op_class!r}")
    ops = schema.expect_non_negative(schema.require(body, "ops", where), schema.at(where, "ops"))
    return Work(unit, op_class, ops,
                schema.free_text(body.get("label"), schema.at(where, "label")))


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
