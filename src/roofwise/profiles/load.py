"""Load, validate and look up machine profiles (the I/O edge of `machine.py`)."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from roofwise.base import paths, schema
from roofwise.base.errors import InputError
from roofwise.profiles.machine import (
    ASSUMED_FLOORS,
    OP_CLASSES,
    REGIMES,
    TIMINGS,
    ComputeUnit,
    Interconnect,
    LatencyFloors,
    Machine,
    MemoryLevel,
    TimingFloor,
    _normalise,
)

UNIT_KEY = re.compile(r"^[a-z][a-z0-9_]*\.[a-z0-9_]+$")
MIXES = ("copy", "triad", "read", "write")

_TOP_KEYS = ("name", "display_name", "aliases", "clock_hz", "source", "memory", "units",
             "latency_floor", "notes", "provenance", "pipes_by_class", "interconnect")
_MEMORY_KEYS = ("theoretical_bytes_per_s", "calibration_by_mix", "bytes_per_cycle", "source",
                "choice", "capacity_bytes", "capacity_source", "measured_bytes_per_s")
_UNIT_KEYS = ("theoretical_ops_per_s", "calibration_by_regime", "ops_per_cycle", "source",
              "choice")
_FLOOR_KEYS = ("per_call_s", "per_kernel_s", "assumed", "source")
_INTERCONNECT_KEYS = ("name", "bytes_per_s", "source", "hop_latency_s", "hop_latency_assumed",
                      "hop_latency_source")


def load_machine(path: str | Path, packaged: bool = False) -> Machine:
    """Read one profile; any fault raises InputError naming the file and the key.
    `packaged`: a built-in profile (parsed by libyaml where PyYAML has it)."""
    return parse_machine(schema.load_yaml(path, packaged), str(path))


def parse_machine(data: Any, origin: str) -> Machine:
    top = schema.expect_mapping(data, origin)
    if "memory" not in top and ("tensors" in top or "stages" in top or "roof" in top):
        raise InputError(origin, "this is a ledger, not a machine profile; pass it to "
                                 "`roofwise price`")
    schema.reject_unknown_keys(top, _TOP_KEYS, origin)
    name = schema.expect_str(schema.require(top, "name", origin), schema.at(origin, "name"))
    memory_raw = schema.expect_mapping(schema.require(top, "memory", origin),
                                       schema.at(origin, "memory"))
    if not memory_raw:
        raise InputError(schema.at(origin, "memory"), "expected at least one memory level")
    units_raw = schema.expect_mapping(schema.require(top, "units", origin),
                                      schema.at(origin, "units"))
    memory = {str(level): _memory(level, body, schema.at(origin, f"memory.{level}"))
              for level, body in memory_raw.items()}
    units = {str(key): _unit(str(key), body, schema.at(origin, f"units.{key}"))
             for key, body in units_raw.items()}
    floor = _floor(top.get("latency_floor"), schema.at(origin, "latency_floor"))
    aliases = tuple(schema.expect_str(a, schema.at(origin, f"aliases[{i}]"))
                    for i, a in enumerate(schema.expect_list(top.get("aliases", []),
                                                             schema.at(origin, "aliases"))))
    notes = tuple(schema.free_text(n, schema.at(origin, f"notes[{i}]")) for i, n in
                  enumerate(schema.expect_list(top.get("notes", []), schema.at(origin, "notes"))))
    clock = top.get("clock_hz")
    pipes = _pipes_by_class(top.get("pipes_by_class"), units, schema.at(origin, "pipes_by_class"))
    return Machine(
        name=name,
        display_name=schema.free_text(top.get("display_name"),
                                      schema.at(origin, "display_name")) or name,
        memory=memory,
        units=units,
        latency_floors=floor,
        aliases=aliases,
        clock_hz=(None if clock is None
                  else schema.expect_positive(clock, schema.at(origin, "clock_hz"))),
        source=schema.free_text(top.get("source"), schema.at(origin, "source")),
        notes=notes,
        path=origin,
        pipes_by_class=pipes,
        interconnect=_interconnect(top.get("interconnect"), schema.at(origin, "interconnect")),
    )


def _interconnect(body: Any, where: str) -> Interconnect | None:
    if body is None:
        return None
    body = schema.expect_mapping(body, where)
    schema.reject_unknown_keys(body, _INTERCONNECT_KEYS, where)

    def text(key: str) -> str:
        return schema.expect_str(schema.require(body, key, where), schema.at(where, key))

    def positive(key: str) -> float:
        return schema.expect_positive(schema.require(body, key, where), schema.at(where, key))

    assumed = body.get("hop_latency_assumed", True)
    if not isinstance(assumed, bool):
        raise InputError(schema.at(where, "hop_latency_assumed"),
                         f"expected true or false, got {assumed!r}")
    return Interconnect(name=text("name"), bytes_per_s=positive("bytes_per_s"),
                        hop_latency_s=positive("hop_latency_s"), hop_latency_assumed=assumed,
                        source=text("source"), hop_latency_source=text("hop_latency_source"))


def _pipes_by_class(body: Any, units: Mapping[str, ComputeUnit], where: str) -> dict[str, str]:
    """Work class -> the unit (or unit family, keeping the op's variant) that runs it here."""
    raw = schema.expect_mapping(body or {}, where)
    out: dict[str, str] = {}
    for op_class, target in raw.items():
        here = schema.at(where, str(op_class))
        if op_class not in OP_CLASSES:
            raise InputError(here, f"unknown work class; expected one of {', '.join(OP_CLASSES)}")
        text = schema.expect_str(target, here)
        if text not in units and not any(k.startswith(text + ".") for k in units):
            raise InputError(here, f"{text!r} names no unit or unit family of this profile "
                                   f"(its units: {', '.join(units)})")
        out[str(op_class)] = text
    return out


def _memory(level: Any, body: Any, where: str) -> MemoryLevel:
    body = schema.expect_mapping(body, where)
    schema.reject_unknown_keys(body, _MEMORY_KEYS, where)
    return MemoryLevel(
        name=str(level),
        theoretical_bytes_per_s=_theoretical(body, "theoretical_bytes_per_s", where),
        calibration_by_mix=_fractions(body, "calibration_by_mix", MIXES, "access mix", where),
        bytes_per_cycle=_optional_positive(body.get("bytes_per_cycle"),
                                           schema.at(where, "bytes_per_cycle")),
        source=schema.free_text(body.get("source"), schema.at(where, "source")),
        choice=schema.free_text(body.get("choice"), schema.at(where, "choice")),
        capacity_bytes=_capacity(body, where),
        capacity_source=schema.free_text(body.get("capacity_source"),
                                         schema.at(where, "capacity_source")),
        measured_bytes_per_s=_optional_positive(body.get("measured_bytes_per_s"),
                                                schema.at(where, "measured_bytes_per_s")),
    )


def _capacity(body: Mapping[str, Any], where: str) -> float | None:
    """How many bytes the level holds; a figure needs its source beside it (`capacity_source`,
    or the level's `source` where that one names it, as a cache level's does)."""
    value = _optional_positive(body.get("capacity_bytes"), schema.at(where, "capacity_bytes"))
    if value is not None and not (body.get("capacity_source") or body.get("source")):
        raise InputError(schema.at(where, "capacity_source"),
                         "missing: capacity_bytes needs the source it was taken from")
    return value


def _unit(key: str, body: Any, where: str) -> ComputeUnit:
    if not UNIT_KEY.match(key):
        raise InputError(where, "expected a unit key of the form family.variant, "
                                "e.g. cuda_core.fp32 or tensor_core.bf16")
    body = schema.expect_mapping(body, where)
    schema.reject_unknown_keys(body, _UNIT_KEYS, where)
    return ComputeUnit(
        key=key,
        theoretical_ops_per_s=_theoretical(body, "theoretical_ops_per_s", where),
        calibration_by_regime=_fractions(body, "calibration_by_regime", REGIMES, "regime",
                                         where),
        ops_per_cycle=_optional_positive(body.get("ops_per_cycle"),
                                         schema.at(where, "ops_per_cycle")),
        source=schema.free_text(body.get("source"), schema.at(where, "source")),
        choice=schema.free_text(body.get("choice"), schema.at(where, "choice")),
    )


def _theoretical(body: Mapping[str, Any], key: str, where: str) -> float | None:
    """A theoretical rate must be stated: a number, or null for a gap in the sources."""
    if key not in body:
        raise InputError(schema.at(where, key),
                         "missing required key (write null to mark a gap in the sources)")
    return _optional_positive(body[key], schema.at(where, key))


def _fractions(body: Mapping[str, Any], key: str, names: tuple[str, ...], kind: str,
               where: str) -> dict[str, float]:
    """Measured fractions of a theoretical rate, keyed by a known mix or regime name."""
    raw = schema.expect_mapping(body.get(key) or {}, schema.at(where, key))
    for name in raw:
        if name not in names:
            raise InputError(schema.at(where, f"{key}.{name}"),
                             f"unknown {kind}; expected one of {', '.join(names)}")
    return {str(n): schema.expect_fraction(v, schema.at(where, f"{key}.{n}"))
            for n, v in raw.items()}


def _floor(body: Any, where: str) -> LatencyFloors:
    """A floor per timing method; a method the profile leaves out keeps the assumed one."""
    if body is None:
        return LatencyFloors.assumed_default()
    body = schema.expect_mapping(body, where)
    schema.reject_unknown_keys(body, TIMINGS, where)
    floors = dict(ASSUMED_FLOORS)
    for timing, raw in body.items():
        at = schema.at(where, str(timing))
        raw = schema.expect_mapping(raw, at)
        schema.reject_unknown_keys(raw, _FLOOR_KEYS, at)
        per_call = schema.expect_positive(schema.require(raw, "per_call_s", at),
                                          schema.at(at, "per_call_s"))
        per_kernel = schema.expect_non_negative(raw.get("per_kernel_s", per_call),
                                                schema.at(at, "per_kernel_s"))
        # a floor is assumed unless the profile says it was measured (`assumed: false`, as
        # `roofwise calibrate` writes it): a typed-in number never passes for a measurement
        assumed = raw.get("assumed", True)
        if not isinstance(assumed, bool):
            raise InputError(schema.at(at, "assumed"), f"expected true or false, got {assumed!r}")
        source = schema.expect_str(schema.require(raw, "source", at), schema.at(at, "source"))
        floors[str(timing)] = TimingFloor(per_call, per_kernel, assumed, source)
    return LatencyFloors(floors)


def _optional_positive(value: Any, where: str) -> float | None:
    return None if value is None else schema.expect_positive(value, where)


def builtin_paths() -> list[Path]:
    folder = resources.files("roofwise.profiles") / "machines"
    return sorted(Path(str(p)) for p in folder.iterdir() if str(p).endswith(".yaml"))


def builtin_machines() -> dict[str, Machine]:
    """Every built-in profile by name (rates in bytes or operations per second, each sourced).
    A new dict each call (callers may change it); the profiles, frozen, are parsed once per
    process: the packaged YAML cannot change under a running process, and parsing all of it
    costs a command a sizeable share of its time."""
    return dict(_builtin_machines())


@functools.cache
def _builtin_machines() -> tuple[tuple[str, Machine], ...]:
    return tuple((m.name, m) for m in (load_machine(p, packaged=True) for p in builtin_paths()))


@dataclass(frozen=True)
class Match:
    """The profile a device name selects, or None with the reason it is blank."""

    machine: Machine | None
    reason: str


def match_device(device: str | None, machines: Iterable[Machine]) -> Match:
    """Exact, case-insensitive name or alias; never the nearest guess."""
    if device is None or not str(device).strip():
        return Match(None, "no device named and no --machine given")
    for machine in machines:
        if machine.matches(str(device)):
            return Match(machine, f"device {device!r} matched profile {machine.name}")
    return Match(None, f"no profile matches device {device!r}")


def resolve_machine(name_or_path: str, machines: Mapping[str, Machine] | None = None) -> Machine:
    """A built-in profile by name, alias or unambiguous short name, or a YAML file by path."""
    return choose_machine(name_or_path, machines)[0]


def choose_machine(name_or_path: str, machines: Mapping[str, Machine] | None = None,
                   ) -> tuple[Machine, str | None]:
    """`resolve_machine`, with a sentence saying which profile a short name or alias chose
    (None for a file or the exact name). A short name is a prefix of one profile's name
    (`a100` -> a100-sxm) or one of its words (`4090` -> rtx-4090); one that fits several is
    refused, listing them: nothing is guessed."""
    if name_or_path.endswith((".yaml", ".yml")) or paths.is_file(name_or_path):
        return load_machine(name_or_path), None
    known = builtin_machines() if machines is None else machines
    if name_or_path in known:
        return known[name_or_path], None
    found = match_device(name_or_path, known.values()).machine
    if found is None:
        wanted = _normalise(name_or_path)
        fits = [m for m in known.values() if wanted and (
            _normalise(m.name).startswith(wanted) or wanted in _normalise(m.name).split())]
        if len(fits) > 1:
            raise InputError("--machine", f"{name_or_path!r} fits several profiles: "
                                          f"{', '.join(m.name for m in fits)}; name one")
        if not fits:
            raise InputError("--machine", f"unknown machine {name_or_path!r}; expected a "
                                          f"profile file or one of {', '.join(sorted(known))}")
        found = fits[0]
    return found, f"--machine {name_or_path}: using profile {found.name} ({found.display_name})"
