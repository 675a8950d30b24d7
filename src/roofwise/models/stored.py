"""Captures kept on disk, so that a step once captured is never captured again.

A capture depends only on the config's contents, the step (phase, batch, seq, context), the
options that change what runs (tensor parallelism, dtypes, fused or eager, the MLA form), and
the code that ran it (roofwise, torch, transformers). Which card it is priced on, the regime,
the output format and the weight scheme (applied to a capture afterwards) do not change it. So
the same step projected again, on another card, as JSON or as a table, reads its capture back
from here: no torch, no transformers, no model built. The first capture of each step costs
what it always did.

Where: `$ROOFWISE_CACHE_DIR`, else `$XDG_CACHE_HOME/roofwise`, else `~/.cache/roofwise`;
`ROOFWISE_NO_CACHE=1` or `roofwise model --no-cache` turns it off. Each entry is one gzipped
JSON file named by the SHA-256 of everything above, written whole (a temporary file renamed
into place), so that a reader never sees half of one. An entry that cannot be read back
exactly as written (truncated, edited, from another format) is a miss: the step is captured
again and the entry replaced. Nothing here can end a projection: a cache that cannot be read
or written is no cache.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import tempfile
import zlib
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, fields
from importlib import metadata
from pathlib import Path
from typing import Any

from roofwise.base.errors import InputError
from roofwise.ledgers.ledger import Ledger, Role, Tensor, Work
from roofwise.models.capture import Capture, CapturedOp, Step
from roofwise.models.config import DecoderSizes, ModelConfig

FORMAT = 3  # bumped whenever an entry's layout changes: older entries are then misses
MAX_ENTRIES = 2048  # beyond this, the least recently used entries are removed on a write


@dataclass(frozen=True)
class CaptureStore:
    """Where captures are kept (None: nowhere), and what the code that makes them is: the
    versions and the source files of roofwise, torch and transformers."""

    directory: Path | None
    code: str = ""

    @property
    def enabled(self) -> bool:
        return self.directory is not None


NO_STORE = CaptureStore(None)


def store_from_environment(no_cache: bool = False,
                           environ: Mapping[str, str] | None = None) -> CaptureStore:
    """The store the environment names (see the module docstring); NO_STORE when off."""
    env = os.environ if environ is None else environ
    if no_cache or env.get("ROOFWISE_NO_CACHE", "").strip() not in ("", "0"):
        return NO_STORE
    named = env.get("ROOFWISE_CACHE_DIR", "").strip()
    if named:
        directory = Path(named).expanduser()
    else:
        base = env.get("XDG_CACHE_HOME", "").strip()
        directory = (Path(base) if base else Path.home() / ".cache") / "roofwise"
    return CaptureStore(directory / f"captures-v{FORMAT}", _code_digest())


def _code_digest() -> str:
    """What made a capture: roofwise's source files (size and modification time each: an
    edited checkout or a new version is new code), torch's and transformers' versions."""
    digest = hashlib.sha256()
    package = Path(__file__).resolve().parents[1]  # the roofwise package this module is in
    for path in sorted(package.rglob("*.py")):
        stat = path.stat()
        digest.update(f"{path.relative_to(package)}:{stat.st_size}:{stat.st_mtime_ns};".encode())
    for name in ("torch", "transformers"):
        try:
            digest.update(f"{name}={metadata.version(name)};".encode())
        except metadata.PackageNotFoundError:
            digest.update(f"{name}=none;".encode())
    return digest.hexdigest()


def config_key(raw: Mapping[str, Any], tp: int) -> str:
    """The key of a config's contents (key order and layout aside) on `tp` devices."""
    return _sha(["config", json.dumps(raw, sort_keys=True, ensure_ascii=False), tp])


def step_key(config: str, step: Step, dtype: str, kv_dtype: str | None, fused: bool,
             mla: str) -> str:
    return _sha(["step", config, step.phase, step.batch, step.seq, step.context, dtype,
                 kv_dtype, fused, mla])


def _sha(parts: list[Any]) -> str:
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()


def load_sharded(path: str, tp: int, store: CaptureStore) -> ModelConfig:
    """The config of `path` on `tp` devices: as stored beside its captures when it was loaded
    before by this code (no transformers), else loaded, sharded and stored."""
    from roofwise.models.config import load_config, read_config_json, shard

    raw = read_config_json(Path(path))
    key = config_key(raw, tp)
    found = load_config_entry(store, key, path, raw)
    if found is not None:
        return found
    config = shard(load_config(path), tp)
    save_config_entry(store, key, config)
    return config


# ------------------------------------------------------------------------- entries on disk


def load_config_entry(store: CaptureStore, key: str, path: str,
                      raw: dict[str, Any]) -> ModelConfig | None:
    """The config of `path` as stored with its captures (no transformers object: `hf` is
    None), or None when there is no readable entry."""
    data = _read(store, "config", key)
    if data is None:
        return None
    try:
        sizes = _sizes_from(_mapping(data.get("sizes")))
        notes = _texts(data.get("notes"))
        tp = _whole(data.get("tp"))
        warned = _texts(data.get("warnings"))
    except _Unreadable:
        return None
    return ModelConfig(path, raw, None, sizes, notes, None, tp, warnings=warned)


def save_config_entry(store: CaptureStore, key: str, config: ModelConfig) -> None:
    _write(store, "config", key, {"sizes": asdict(config.sizes), "notes": list(config.notes),
                                  "tp": config.tp, "warnings": list(config.warnings)})


def load_capture(store: CaptureStore, key: str) -> Capture | None:
    data = _read(store, "step", key)
    if data is None:
        return None
    try:
        return capture_from_data(data.get("capture"))
    except _Unreadable:
        return None


def save_capture(store: CaptureStore, key: str, capture: Capture) -> None:
    _write(store, "step", key, {"capture": capture_data(capture)})


def _entry_path(store: CaptureStore, key: str) -> Path:
    assert store.directory is not None
    return store.directory / f"{key}.json.gz"


def _full_key(store: CaptureStore, kind: str, key: str) -> str:
    return _sha([kind, key, store.code])


def _read(store: CaptureStore, kind: str, key: str) -> dict[str, Any] | None:
    if not store.enabled:
        return None
    path = _entry_path(store, _full_key(store, kind, key))
    try:
        with gzip.open(path, "rb") as handle:
            data = json.loads(handle.read())
        os.utime(path)  # recently used: kept when the store is pruned
    except (OSError, EOFError, zlib.error, ValueError, RecursionError):
        return None
    if not isinstance(data, dict) or data.get("format") != FORMAT or data.get("kind") != kind:
        return None
    return data


def _write(store: CaptureStore, kind: str, key: str, body: dict[str, Any]) -> None:
    """The entry written whole or not at all; a store that cannot be written is skipped."""
    if not store.enabled:
        return
    assert store.directory is not None
    path = _entry_path(store, _full_key(store, kind, key))
    temporary = None
    try:
        store.directory.mkdir(parents=True, exist_ok=True)
        text = json.dumps({"format": FORMAT, "kind": kind, **body}, allow_nan=False)
        with tempfile.NamedTemporaryFile("wb", dir=store.directory, suffix=".part",
                                         delete=False) as handle:
            temporary = Path(handle.name)
            handle.write(gzip.compress(text.encode(), compresslevel=1))
        os.replace(temporary, path)
        temporary = None
        _prune(store.directory)
    except (OSError, ValueError, TypeError):
        pass
    finally:
        if temporary is not None:
            temporary.unlink(missing_ok=True)


def _prune(directory: Path) -> None:
    entries = list(directory.glob("*.json.gz"))
    if len(entries) <= MAX_ENTRIES:
        return
    by_use = sorted(entries, key=lambda p: p.stat().st_mtime_ns)
    for path in by_use[:len(entries) - MAX_ENTRIES]:
        path.unlink(missing_ok=True)


# ------------------------------------------------------- a capture as plain data, and back


class _Unreadable(Exception):
    """An entry that is not exactly what `capture_data` writes."""


def capture_data(capture: Capture) -> dict[str, Any]:
    """Each distinct op written once (a decoder's repeated layers hand on the same op
    objects, `models/repeats.py`), and the step's ops as indices into them."""
    index: dict[int, int] = {}  # id of an op -> its place among the distinct ones
    distinct: list[CapturedOp] = []
    order = []
    for op in capture.ops:
        at = index.setdefault(id(op), len(distinct))
        if at == len(distinct):
            distinct.append(op)
        order.append(at)
    return {
        "ops": [{"layer": op.layer, "op": op.op, "shapes": op.shapes,
                 "ledger": None if op.ledger is None else ledger_data(op.ledger),
                 "reason": op.reason, "cache_write": op.cache_write} for op in distinct],
        "order": order,
        "weight_bytes": capture.weight_bytes, "kv_cache_bytes": capture.kv_cache_bytes,
        "tokens": capture.tokens, "layers": capture.layers, "hidden": capture.hidden,
        "dtype": capture.dtype, "kv_dtype": capture.kv_dtype,
        "kv_layers": [list(layer) for layer in capture.kv_layers],
        "weights": [[name, list(shape), quantized] for name, shape, quantized in capture.weights],
        "mla": capture.mla, "notes": list(capture.notes),
    }


def ledger_data(ledger: Ledger) -> dict[str, Any]:
    return {"name": ledger.name, "roof": ledger.roof,
            "tensors": [[t.name, list(t.shape), t.dtype, t.role.value, t.uses, t.bytes_per_use]
                        for t in ledger.tensors],
            "work": [[w.unit, w.op_class, w.ops, w.label] for w in ledger.work],
            "calls": ledger.calls, "stages": [ledger_data(s) for s in ledger.stages],
            "notes": list(ledger.notes)}


def capture_from_data(data: Any) -> Capture:
    """The capture `capture_data` wrote; _Unreadable for anything else."""
    body = _keys(data, ("ops", "order", "weight_bytes", "kv_cache_bytes", "tokens", "layers",
                        "hidden", "dtype", "kv_dtype", "kv_layers", "weights", "mla", "notes"))
    distinct = [_op(op) for op in _list(body["ops"])]
    order = [_whole(at) for at in _list(body["order"])]
    if any(not 0 <= at < len(distinct) for at in order) or len(set(order)) != len(distinct):
        raise _Unreadable
    ops = tuple(distinct[at] for at in order)  # a repeated op is one object, as captured
    kv_layers = tuple(_pair(layer) for layer in _list(body["kv_layers"]))
    weights = tuple(_weight(w) for w in _list(body["weights"]))
    mla = body["mla"]
    if mla is not None:
        mla = _text(mla)
    return Capture(ops, _whole(body["weight_bytes"]), _whole(body["kv_cache_bytes"]),
                   _whole(body["tokens"]), _whole(body["layers"]), _whole(body["hidden"]),
                   _text(body["dtype"]), _text(body["kv_dtype"]), kv_layers, weights, mla,
                   _texts(body["notes"]))


def _op(data: Any) -> CapturedOp:
    body = _keys(data, ("layer", "op", "shapes", "ledger", "reason", "cache_write"))
    ledger = None if body["ledger"] is None else _ledger(body["ledger"])
    return CapturedOp(_text(body["layer"]), _text(body["op"]), _text(body["shapes"]), ledger,
                      _text(body["reason"]), _flag(body["cache_write"]))


def _ledger(data: Any) -> Ledger:
    body = _keys(data, ("name", "roof", "tensors", "work", "calls", "stages", "notes"))
    tensors = tuple(_tensor(t) for t in _list(body["tensors"]))
    work = tuple(_work(w) for w in _list(body["work"]))
    return Ledger(_text(body["name"]), _text(body["roof"]), tensors, work, _whole(body["calls"]),
                  tuple(_ledger(s) for s in _list(body["stages"])), _texts(body["notes"]))


def _tensor(data: Any) -> Tensor:
    name, shape, dtype, role, uses, per_use = _fixed(data, 6)
    roles = {r.value: r for r in Role}
    if not isinstance(role, str) or role not in roles:
        raise _Unreadable
    return _built(Tensor, _text(name), tuple(_whole(d) for d in _list(shape)), _text(dtype),
                  roles[role], _whole(uses), _whole(per_use))


def _work(data: Any) -> Work:
    unit, op_class, ops, label = _fixed(data, 4)
    if isinstance(ops, bool) or not isinstance(ops, (int, float)):
        raise _Unreadable
    return _built(Work, _text(unit), _text(op_class), ops, _text(label))


def _built(kind: Callable[..., Any], *args: Any) -> Any:
    """A value whose own checks (a dtype, a count) refuse what was not written by us."""
    try:
        return kind(*args)
    except (InputError, ValueError, TypeError, OverflowError):
        raise _Unreadable from None


def _pair(data: Any) -> tuple[int, int | None]:
    elements, window = _fixed(data, 2)
    return _whole(elements), None if window is None else _whole(window)


def _weight(data: Any) -> tuple[str, tuple[int, ...], bool]:
    name, shape, quantized = _fixed(data, 3)
    return _text(name), tuple(_whole(d) for d in _list(shape)), _flag(quantized)


def _sizes_from(data: dict[str, Any]) -> DecoderSizes:
    names = [f.name for f in fields(DecoderSizes)]
    if sorted(data) != sorted(names):
        raise _Unreadable
    values: dict[str, Any] = {}
    for name in names:
        value = data[name]
        if name == "intermediate_size" and isinstance(value, list):
            values[name] = tuple(_whole(v) for v in value)
        else:
            values[name] = None if value is None else _whole(value)
    for name in ("num_hidden_layers", "hidden_size", "qk_nope_head_dim", "qk_rope_head_dim",
                 "v_head_dim", "n_shared_experts", "vocab_size"):
        if values[name] is None:
            raise _Unreadable
    return DecoderSizes(**values)


def _keys(data: Any, names: tuple[str, ...]) -> dict[str, Any]:
    body = _mapping(data)
    if sorted(body) != sorted(names):
        raise _Unreadable
    return body


def _mapping(data: Any) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise _Unreadable
    return data


def _list(data: Any) -> list[Any]:
    if not isinstance(data, list):
        raise _Unreadable
    return data


def _fixed(data: Any, size: int) -> list[Any]:
    items = _list(data)
    if len(items) != size:
        raise _Unreadable
    return items


def _text(data: Any) -> str:
    if not isinstance(data, str):
        raise _Unreadable
    return data


def _texts(data: Any) -> tuple[str, ...]:
    return tuple(_text(t) for t in _list(data))


def _whole(data: Any) -> int:
    if isinstance(data, bool) or not isinstance(data, int):
        raise _Unreadable
    return data


def _flag(data: Any) -> bool:
    if not isinstance(data, bool):
        raise _Unreadable
    return data
