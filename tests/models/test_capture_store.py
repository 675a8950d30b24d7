"""Captures kept on disk (`models/stored.py`): a step read back is the step captured, byte for
byte in every output; a damaged, foreign or stale entry is a miss, never an error; the key
holds what changes a capture and nothing that does not.

The config runs reduced to 2 layers (a copy written by the test), so each capture is quick.
"""

from __future__ import annotations

import gzip
import json
import os
from dataclasses import fields, replace
from pathlib import Path

import pytest

pytest.importorskip("transformers")

from roofwise.cli import main
from roofwise.ledgers.ledger import Ledger
from roofwise.models import capture, stored
from roofwise.models.capture import Capture, CapturedOp, Step, capture_steps
from roofwise.models.config import load_config

MODELS = Path(__file__).resolve().parents[2] / "examples" / "models"


def reduced(tmp_path, name="llama-3.2-1b", layers=2):
    config = json.loads((MODELS / f"{name}.json").read_text())
    config["num_hidden_layers"] = layers
    path = tmp_path / f"{name}-{layers}.json"
    path.write_text(json.dumps(config))
    return path


@pytest.fixture
def store_dir(tmp_path, monkeypatch):
    """The store on, in a folder of this test's own (the suite runs with it off)."""
    directory = tmp_path / "cache"
    monkeypatch.delenv("ROOFWISE_NO_CACHE", raising=False)
    monkeypatch.setenv("ROOFWISE_CACHE_DIR", str(directory))
    return directory


def entries(directory):
    return sorted(directory.rglob("*.json.gz"))


def run(capsys, *args):
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def counting_captures(monkeypatch):
    """Count the steps captured from here on (captures_for imports capture_steps when it
    runs, so the module's name is the one to replace)."""
    made = []
    real = capture.capture_steps

    def counted(config, steps, *args, **kwargs):
        made.extend(steps)
        return real(config, steps, *args, **kwargs)

    monkeypatch.setattr(capture, "capture_steps", counted)
    return made


@pytest.mark.parametrize("name", ["llama-3.2-1b", "deepseek-v2-lite", "mixtral-8x7b"])
def test_a_capture_round_trips_through_its_entry_exactly(tmp_path, name):
    config = load_config(reduced(tmp_path, name))
    for made in capture_steps(config, [Step("prefill", 2, 24, 0),
                                          Step("decode", 3, 1, 200)]):
        text = json.dumps(stored.capture_data(made), allow_nan=False)
        back = stored.capture_from_data(json.loads(text))
        assert back == made
        # a repeated layer's ops are one object each, read back as one object each
        assert _sharing(back.ops) == _sharing(made.ops)
        # and the ledgers inside, stages and notes included, are the ones captured
        ledgers = [op.ledger for op in made.ops if op.ledger is not None]
        assert ledgers and all(isinstance(x, Ledger) for x in ledgers)


def _sharing(ops):
    """Each op as the place of the first op that is the same object."""
    first = {}
    return [first.setdefault(id(op), i) for i, op in enumerate(ops)]


def test_a_repeated_op_is_written_once(tmp_path):
    config = load_config(reduced(tmp_path, layers=4))
    made = capture_steps(config, [Step("decode", 2, 1, 64)])[0]
    data = stored.capture_data(made)
    distinct = len({id(op) for op in made.ops})
    assert distinct < len(made.ops)  # 4 layers: the third recorded as the second
    assert len(data["ops"]) == distinct and len(data["order"]) == len(made.ops)
    assert [data["ops"][at]["op"] for at in data["order"]] == [op.op for op in made.ops]


@pytest.mark.parametrize("order", [[0, 5], [0, -1], [0, 0], [0, "1"]])
def test_an_order_that_does_not_fit_its_ops_is_unreadable(order):
    op = CapturedOp("l", "o", "s", None)
    data = stored.capture_data(Capture((op, replace(op, op="p")), 0, 0, 0, 0, 0, "bf16",
                                       "bf16"))
    assert data["order"] == [0, 1]
    data["order"] = order
    with pytest.raises(stored._Unreadable):
        stored.capture_from_data(data)


def test_every_field_of_a_capture_and_a_ledger_is_written():
    """A field added to Capture, CapturedOp or Ledger without a place in the entry would be
    dropped silently on the way back; this names it."""
    empty = Capture((), 0, 0, 0, 0, 0, "bf16", "bf16")
    assert set(stored.capture_data(empty)) == {f.name for f in fields(Capture)} | {"order"}
    op = CapturedOp("l", "o", "s", Ledger("n", "r", (), ()))
    written = stored.capture_data(replace(empty, ops=(op,)))["ops"][0]
    assert set(written) == {f.name for f in fields(CapturedOp)}
    assert set(written["ledger"]) == {f.name for f in fields(Ledger)}


def test_a_projection_read_back_prints_what_a_capture_prints(capsys, tmp_path, store_dir,
                                                             monkeypatch):
    path = reduced(tmp_path)
    args = ("model", path, "-m", "h200", "--phase", "decode", "--batch", "4", "--context",
            "512", "--json")
    code, fresh, err = run(capsys, *args, "--no-cache")
    assert code == 0, err
    assert not store_dir.exists()  # --no-cache neither reads nor writes
    made = counting_captures(monkeypatch)
    code, first, _ = run(capsys, *args)
    assert code == 0 and made == [Step("decode", 4, 1, 512)]
    assert len(entries(store_dir)) == 2  # the config's sizes and the step
    code, again, _ = run(capsys, *args)
    assert code == 0 and len(made) == 1  # read back: nothing captured
    assert fresh == first == again
    # another card, another output: the same capture, priced again
    code, table, _ = run(capsys, "model", path, "-m", "b200", "--phase", "decode", "--batch",
                         "4", "--context", "512")
    assert code == 0 and len(made) == 1 and "decode on b200" in table
    # a step not captured yet: captured (the model loaded again), the rest read back
    code, _, _ = run(capsys, "model", path, "-m", "h200", "--phase", "decode", "--sweep",
                     "batch=4,8", "--context", "512")
    assert code == 0 and made[1:] == [Step("decode", 8, 1, 512)]


def test_serve_figures_read_back_are_the_same(capsys, tmp_path, store_dir, monkeypatch):
    path = reduced(tmp_path)
    args = ("model", path, "-m", "h200", "--serve", "input=256,output=32", "--batch", "1,4",
            "--json")
    code, fresh, err = run(capsys, *args, "--no-cache")
    assert code == 0, err
    made = counting_captures(monkeypatch)
    run(capsys, *args)
    captured = len(made)
    assert captured == 4  # a prefill and a decode step per batch
    code, again, _ = run(capsys, *args)
    assert code == 0 and again == fresh and len(made) == captured


@pytest.mark.parametrize("damage", ["truncated", "not gzip", "edited", "other format",
                                    "wrong kind", "a field missing", "a bad role"])
def test_a_damaged_entry_is_a_miss_and_is_replaced(capsys, tmp_path, store_dir, monkeypatch,
                                                   damage):
    path = reduced(tmp_path)
    args = ("model", path, "-m", "h200", "--phase", "decode", "--batch", "2", "--context",
            "64", "--json")
    code, first, _ = run(capsys, *args)
    assert code == 0
    step = max(entries(store_dir), key=lambda p: p.stat().st_size)  # the capture, not sizes
    raw = step.read_bytes()
    data = json.loads(gzip.decompress(raw))
    if damage == "truncated":
        step.write_bytes(raw[: len(raw) // 2])
    elif damage == "not gzip":
        step.write_bytes(b"{}")
    else:
        if damage == "edited":
            data["capture"]["tokens"] = "two"
        elif damage == "other format":
            data["format"] = stored.FORMAT + 1
        elif damage == "wrong kind":
            data["kind"] = "config"
        elif damage == "a field missing":
            del data["capture"]["ops"][0]["ledger"]
        else:
            op = next(o for o in data["capture"]["ops"] if o["ledger"] and
                      o["ledger"]["tensors"])
            op["ledger"]["tensors"][0][3] = "lookup-table"
        step.write_bytes(gzip.compress(json.dumps(data).encode()))
    made = counting_captures(monkeypatch)
    code, again, err = run(capsys, *args)
    assert code == 0 and again == first and not err
    assert made == [Step("decode", 2, 1, 64)]
    assert json.loads(gzip.decompress(step.read_bytes())) == json.loads(gzip.decompress(raw))


def test_a_store_that_cannot_be_written_is_no_store(capsys, tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.delenv("ROOFWISE_NO_CACHE", raising=False)
    monkeypatch.setenv("ROOFWISE_CACHE_DIR", str(blocker / "cache"))
    code, out, err = run(capsys, "model", reduced(tmp_path), "-m", "h200", "--phase",
                         "decode", "--context", "64")
    assert code == 0 and not err and "decode on h200" in out
    assert blocker.read_text() == "not a folder"


def test_where_the_store_is_and_how_it_is_turned_off(tmp_path):
    home = Path.home()
    directory = stored.store_from_environment(environ={}).directory
    assert directory == home / ".cache" / "roofwise" / f"captures-v{stored.FORMAT}"
    xdg = stored.store_from_environment(environ={"XDG_CACHE_HOME": str(tmp_path)})
    assert xdg.directory == tmp_path / "roofwise" / f"captures-v{stored.FORMAT}"
    named = stored.store_from_environment(environ={"ROOFWISE_CACHE_DIR": str(tmp_path / "x"),
                                                   "XDG_CACHE_HOME": "/elsewhere"})
    assert named.directory == tmp_path / "x" / f"captures-v{stored.FORMAT}"
    assert not stored.store_from_environment(environ={"ROOFWISE_NO_CACHE": "1"}).enabled
    assert stored.store_from_environment(environ={"ROOFWISE_NO_CACHE": "0"}).enabled
    assert not stored.store_from_environment(True, environ={}).enabled


def test_the_key_holds_what_changes_a_capture():
    config = {"model_type": "llama", "hidden_size": 64}
    key = stored.config_key(config, 1)
    # key order and layout do not matter; contents and tensor parallelism do
    assert stored.config_key(dict(reversed(list(config.items()))), 1) == key
    assert stored.config_key({**config, "hidden_size": 128}, 1) != key
    assert stored.config_key(config, 2) != key
    step = Step("decode", 8, 1, 4096)
    base = stored.step_key(key, step, "bf16", None, True, "absorbed")
    others = {stored.step_key(key, Step("decode", 9, 1, 4096), "bf16", None, True, "absorbed"),
              stored.step_key(key, Step("prefill", 8, 1, 4096), "bf16", None, True,
                              "absorbed"),
              stored.step_key(key, step, "fp16", None, True, "absorbed"),
              stored.step_key(key, step, "bf16", "fp8", True, "absorbed"),
              stored.step_key(key, step, "bf16", None, False, "absorbed"),
              stored.step_key(key, step, "bf16", None, True, "expanded")}
    assert base not in others and len(others) == 6


def test_edited_code_is_new_code(tmp_path, monkeypatch):
    """An entry written by other code (an edited checkout: a source file's size or time
    changed) is not read back."""
    import roofwise

    before = stored.store_from_environment(environ={"ROOFWISE_CACHE_DIR": str(tmp_path)})
    source = Path(roofwise.__file__).parent / "models" / "stored.py"
    stat = source.stat()
    try:
        os.utime(source, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
        after = stored.store_from_environment(environ={"ROOFWISE_CACHE_DIR": str(tmp_path)})
    finally:
        os.utime(source, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert before.code != after.code
    stored.save_config_entry(before, "k", replace(
        load_config(reduced(tmp_path)), hf=None))
    assert stored.load_config_entry(before, "k", "p", {}) is not None
    assert stored.load_config_entry(after, "k", "p", {}) is None


def test_the_store_keeps_its_most_recently_used_entries(tmp_path, monkeypatch):
    monkeypatch.setattr(stored, "MAX_ENTRIES", 3)
    store = stored.CaptureStore(tmp_path, "code")
    kept = Capture((), 1, 2, 3, 4, 5, "bf16", "bf16")

    def entry(key):
        return stored._entry_path(store, stored._full_key(store, "step", key))

    for i in range(3):
        stored.save_capture(store, f"k{i}", kept)
        os.utime(entry(f"k{i}"), ns=(i, i))  # k0 the least recently used, k2 the most
    assert stored.load_capture(store, "k0") == kept  # k0 now the most recently used
    stored.save_capture(store, "k3", kept)  # a fourth: the least recently used goes
    assert [entry(k).exists() for k in ("k0", "k1", "k2", "k3")] == [True, False, True, True]
    assert len(entries(tmp_path)) == 3
