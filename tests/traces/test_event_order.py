"""A trace's verdicts do not depend on the order its events are written in.

Kineto writes events in no promised order, and tools that merge or filter traces reorder
them. Found by shuffling the events of real traces: where two ops share a span to the
microsecond (DDP's `torch::distributed::reducer::mul_out` around the `aten::mul` it calls,
`aten::layer_norm` around `aten::native_layer_norm`), the launch inside went to whichever came
first in the file. The profiler hands out External ids as ops start, so the callee (the higher
id) is the inner op in any order.
"""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

import pytest

from roofwise.cli import main

TRACES = Path(__file__).resolve().parents[1] / "fixtures" / "traces"


def _groups(capsys, path: Path) -> tuple[list[str], str]:
    """The rows (sorted: rows of equal time may swap places) and the summary, as text."""
    code = main(["analyze", str(path), "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    rows = [json.loads(line) for line in out.splitlines()]
    rows[-1].pop("trace")
    # sums of the same durations in another order differ in the last bits
    texts = [json.dumps({k: (float(f"{v:.10g}") if isinstance(v, float) else v)
                         for k, v in r.items()}, sort_keys=True) for r in rows]
    return sorted(texts[:-1]), texts[-1]


def _reordered(tmp_path: Path, name: str, how: str) -> Path:
    trace = json.loads(gzip.decompress((TRACES / name).read_bytes()))
    events = trace["traceEvents"]
    if how == "reversed":
        events.reverse()
    else:
        random.Random(7).shuffle(events)
    out = tmp_path / f"{how}-{name}"
    out.write_bytes(gzip.compress(json.dumps(trace).encode()))
    return out


@pytest.mark.parametrize(("name", "how"), [
    ("hta_a100_80gb_rank0.json.gz", "reversed"), ("hta_a100_80gb_rank0.json.gz", "shuffled"),
    ("hta_sampled_rank1.json.gz", "shuffled"),  # `layer_norm` and `native_layer_norm` tie
    ("kineto_resnet50_v100_torch19_step6.json.gz", "shuffled")])  # the 1.x schema
def test_same_groups_in_any_event_order(capsys, tmp_path, name, how):
    rows, summary = _groups(capsys, TRACES / name)
    again, summary_again = _groups(capsys, _reordered(tmp_path, name, how))
    assert summary_again == summary
    assert again == rows


def test_a_wrapper_with_its_callees_span_does_not_take_its_launches(capsys, tmp_path):
    # In this DDP trace, 336 of the 815 `reducer::mul_out` calls have an `aten::mul` of the
    # same span inside, 336 launches in all; their kernels are the mul's, in every order.
    name = "hta_a100_80gb_rank0.json.gz"
    trace = json.loads(gzip.decompress((TRACES / name).read_bytes()))
    ops = [e for e in trace["traceEvents"] if e.get("cat") == "cpu_op"]
    spans = {(e["tid"], e["ts"], e["dur"]): e for e in ops
             if e["name"] == "torch::distributed::reducer::mul_out"}
    callees = [e for e in ops if e["name"] == "aten::mul"
               and (e["tid"], e["ts"], e["dur"]) in spans]
    assert len(spans) == 815 and len(callees) == 336 and all(
        e["args"]["External id"] > spans[(e["tid"], e["ts"], e["dur"])]["args"]["External id"]
        for e in callees)
    for path in (TRACES / name, _reordered(tmp_path, name, "reversed")):
        rows, _ = _groups(capsys, path)
        assert not [r for r in rows if "reducer::mul_out" in r]
