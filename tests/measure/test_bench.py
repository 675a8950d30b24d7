"""The harness on the host: torch CPU ops, the host timer, records, sweeps and shards."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")

import roofwise  # noqa: E402
from roofwise.base.errors import InputError  # noqa: E402
from roofwise.cli import main  # noqa: E402
from roofwise.cli.bench import check_appendable  # noqa: E402
from roofwise.measure.bench import BenchResult, _rotated, bench  # noqa: E402
from roofwise.measure.sweep import (  # noqa: E402
    parse_assignments,
    parse_shard,
    shard,
    shard_or_refuse,
    sweep_points,
)
from roofwise.measure.timer import replay_plan  # noqa: E402
from roofwise.measure.torch_ops import build_case, resolve_params  # noqa: E402
from roofwise.ops import OPS  # noqa: E402
from roofwise.records.read import validate_record  # noqa: E402


def test_result_fields_on_the_host():
    calls = []
    x = torch.randn(64, 64)
    result = bench(lambda a: calls.append(1) or a @ a, x, warmup=3, reps=7, flush_l2=False,
                   rotate_inputs=False)
    assert isinstance(result, BenchResult)
    assert len(calls) == 3 + 7  # warm-up, then exactly `reps` timed calls
    assert (result.reps, result.timing, result.kernels) == (7, "wall", None)
    assert result.time_p10_s <= result.time_s <= result.time_p90_s
    assert result.wall_time_s == result.time_s
    assert result.device


def test_roofwise_bench_forwards():
    result = roofwise.bench(lambda: None, warmup=0, reps=3, flush_l2=False)
    assert result.reps == 3 and result.timing == "wall"


def test_inputs_rotate_until_they_exceed_the_cache():
    x = torch.randn(1024)  # 4096 B
    copies = _rotated((x, 3), cache_bytes=10_000, rotate=True)
    assert len(copies) == 4  # ceil(10000 / 4096) + 1
    assert copies[0][0] is x and all(c[1] == 3 for c in copies)
    assert all(torch.equal(c[0], x) and c[0] is not x for c in copies[1:])
    assert len(_rotated((x,), cache_bytes=10_000, rotate=False)) == 1
    big = torch.randn(1 << 20)
    assert len(_rotated((big,), cache_bytes=1 << 20, rotate=True)) == 2


def test_each_timed_call_sees_the_next_copy():
    seen = []
    x = torch.randn(256)
    bench(lambda a: seen.append(id(a)), x, warmup=0, reps=8, flush_l2=False)
    assert len(set(seen)) > 1


def test_record_contract_validates():
    # the ledger bench times with is the registry's (roofwise.ops.OPS), and only that one
    case = build_case("rmsnorm", {"rows": "32", "hidden": "128"}, "cpu")
    assert case.ledger == OPS["rmsnorm"](rows=32, hidden=128, dtype="bf16")
    assert case.ledger_source == "roofwise.ops.OPS"
    result = bench(case.fn, *case.args, ledger=case.ledger, warmup=1, reps=5)
    record = result.to_record(case.ledger, "h200", op="rmsnorm", workload={"rows": 32})
    clean = validate_record(json.loads(json.dumps(record)), "record")
    # x 32*128*2 + weight 128*2 read; y 32*128*2 written
    assert (clean["read_bytes"], clean["write_bytes"], clean["bytes"]) == (8448, 8192, 16640)
    assert clean["profile"] == "h200" and clean["timing"] == "wall"
    # the caches were flushed before every timed call: the record says so, and without the
    # flush it says nothing (inputs rotated over copies may still meet a warm cache)
    assert clean["cache_state"] == "cold"
    warm = bench(case.fn, *case.args, ledger=case.ledger, warmup=1, reps=3, flush_l2=False)
    assert "cache_state" not in warm.to_record(case.ledger)
    assert clean["time_s"] == result.time_s and clean["time_p90_s"] == result.time_p90_s
    # norms.rmsnorm: 4/elem (FMA 2, times rstd, times weight) + 2/row + 1 rsqrt/row
    assert clean["flops"] == 4 * 32 * 128 + 2 * 32 + 32
    with pytest.raises(ValueError):
        BenchResult(1.0, 1.0, 1.0, 1.0, None, 1, "wall", "cpu").to_record()


def test_an_op_without_a_registry_ledger_cannot_be_benched(monkeypatch):
    monkeypatch.delitem(OPS, "softmax")
    with pytest.raises(InputError, match=r"no ledger in roofwise\.ops\.OPS"):
        build_case("softmax", {"rows": "4", "cols": "8"}, "cpu")


def test_params_default_to_the_registry_and_name_the_option():
    assert resolve_params("softmax", {}) == {"rows": 4096, "cols": 8192, "dtype": "bf16"}
    with pytest.raises(InputError, match=r"^--sweep rows: expected an integer"):
        resolve_params("rmsnorm", {"rows": "a"}, "--sweep")
    with pytest.raises(InputError, match=r"^--shape hidden: expected a positive integer"):
        resolve_params("rmsnorm", {"hidden": "0"})
    with pytest.raises(InputError, match=r"^--shape weight: unknown parameter"):
        resolve_params("rmsnorm", {"weight": "false"})  # the torch reference always scales


def test_graph_replay_times_one_call_per_window_each_after_a_flush():
    plan = replay_plan(reps=4, graphs=1, flush=True)
    assert [s.kind for s in plan] == ["flush", "start", "replay", "end"] * 4
    # within every timed window exactly one replay of a one-call graph: no warm second call
    for rep in range(4):
        window = [s for s in plan if s.rep == rep]
        assert [s.kind for s in window] == ["flush", "start", "replay", "end"]
    rotated = replay_plan(reps=5, graphs=3, flush=False)
    assert "flush" not in {s.kind for s in rotated}
    assert [s.graph for s in rotated if s.kind == "replay"] == [0, 1, 2, 0, 1]
    with pytest.raises(ValueError):
        replay_plan(reps=0, graphs=1, flush=True)


def test_case_study_reference_matches_its_ledger():
    case = build_case("qk_norm_rope_quant", {"tokens": "4", "q_heads": "2", "kv_heads": "1",
                                             "head_dim": "8"}, "cpu")
    q8, k8, qs, ks = case.fn(*case.args)
    assert q8.dtype == torch.float8_e4m3fn and tuple(q8.shape) == (4, 2, 8)
    assert tuple(ks.shape) == (4, 1)
    written = q8.numel() * 1 + k8.numel() * 1 + qs.numel() * 4 + ks.numel() * 4
    assert case.ledger.write_bytes == written
    assert float(q8.float().abs().max()) == pytest.approx(448.0)  # each row scaled to fp8 max


def test_sweep_is_the_product_and_shards_partition_it():
    points = sweep_points({"dtype": "bf16"}, {"m": "1,2,3", "n": "4,5"})
    assert len(points) == 6
    assert points[0] == {"dtype": "bf16", "m": "1", "n": "4"}
    for count in (1, 2, 4, 7):
        parts = [shard(points, i, count) for i in range(count)]
        flat = [json.dumps(p, sort_keys=True) for part in parts for p in part]
        assert sorted(flat) == sorted(json.dumps(p, sort_keys=True) for p in points)
        assert len(flat) == len(set(flat))  # no point twice
    assert shard(points, 1, 4) == [points[1], points[5]]


@pytest.mark.parametrize("text", ["3/3", "-1/2", "1", "a/b", "0/0"])
def test_bad_shard(text):
    with pytest.raises(InputError):
        parse_shard(text)


def test_cli_sweep_appends_records(tmp_path):
    out = tmp_path / "r.jsonl"
    args = ["bench", "rmsnorm", "--shape", "hidden=64", "--sweep", "rows=8,16,32",
            "--device", "cpu", "--reps", "3", "--warmup", "1", "-o", str(out)]
    assert main([*args, "--shard", "0/2"]) == 0
    assert main([*args, "--shard", "1/2"]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(r["workload"]["rows"] for r in rows) == [8, 16, 32]
    for r in rows:
        validate_record(r, "row")
        assert r["read_bytes"] == r["workload"]["rows"] * 64 * 2 + 64 * 2


def test_cli_cuda_without_gpu_is_one_line(tmp_path, capsys):
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    out = tmp_path / "r.jsonl"
    code = main(["bench", "gemm", "--device", "cuda", "-o", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "no CUDA GPU" in err
    assert not out.exists()


def test_cli_unknown_parameter(tmp_path, capsys):
    code = main(["bench", "gemm", "--shape", "q=3", "--device", "cpu",
                 "-o", str(tmp_path / "r.jsonl")])
    assert code == 2 and "unknown parameter" in capsys.readouterr().err


def test_same_parameter_twice_is_refused():
    with pytest.raises(InputError, match="given twice"):
        parse_assignments(["rows=8", "rows=16"], "--shape")


def test_empty_shard_is_refused():
    with pytest.raises(InputError, match="shard 5/10 of a 2-point sweep has no points"):
        shard_or_refuse([{"rows": "8"}, {"rows": "16"}], 5, 10)
    assert shard_or_refuse([1, 2, 3], 1, 2) == [2]


def test_appendable_output(tmp_path):
    assert check_appendable(str(tmp_path / "new.jsonl")) is False
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    assert check_appendable(str(empty)) is False
    good = tmp_path / "good.jsonl"
    good.write_text('{"op": "x"}\n')
    assert check_appendable(str(good)) is True
    with pytest.raises(InputError, match="is a directory"):
        check_appendable(str(tmp_path))
    with pytest.raises(InputError, match="does not exist"):
        check_appendable(str(tmp_path / "nodir" / "r.jsonl"))
    corrupt = tmp_path / "corrupt.jsonl"
    corrupt.write_text('{"op": "x"}\nnot json\n')
    with pytest.raises(InputError, match=r"corrupt.jsonl:2: the existing file is not a record "
                                         r"file \(.*\); not appending to it$"):
        check_appendable(str(corrupt))
    latin = tmp_path / "latin.jsonl"
    latin.write_bytes(b'{"op": "caf\xe9"}\n')
    with pytest.raises(InputError, match=r"latin.jsonl.*not appending to it$"):
        check_appendable(str(latin))


def bench_cli(capsys, *args):
    code = main(["bench", "rmsnorm", "--device", "cpu", "--reps", "2", "--warmup", "0", *args])
    _, err = capsys.readouterr()
    return code, err


@pytest.mark.parametrize(("args", "needle"), [
    (("--sweep", "rows=a,b"), "--sweep rows: expected an integer, got 'a'"),
    (("--sweep", "rows=8", "--shape", "rows=16"), "--sweep rows: also given with --shape rows"),
    (("--shape", "rows=8", "--shape", "rows=16"), "--shape rows: given twice"),
    (("--sweep", "rows=8,16", "--shard", "5/10"), "shard 5/10 of a 2-point sweep has no points"),
])
def test_cli_bad_sweeps_are_one_line_and_write_nothing(tmp_path, capsys, args, needle):
    out = tmp_path / "r.jsonl"
    code, err = bench_cli(capsys, "--shape", "hidden=8", *args, "-o", str(out))
    assert code == 2 and err.count("\n") == 1 and needle in err
    assert not out.exists()


def test_cli_refuses_a_corrupt_output_before_timing(tmp_path, capsys, monkeypatch):
    import roofwise.measure.bench as bench_module

    def never(*_args, **_kwargs):
        raise AssertionError("timed before the output was checked")

    monkeypatch.setattr(bench_module, "bench", never)
    out = tmp_path / "r.jsonl"
    out.write_text("garbage\n")
    code, err = bench_cli(capsys, "--shape", "hidden=8", "-o", str(out))
    assert code == 2 and err.count("\n") == 1 and "r.jsonl:1: the existing file" in err
    assert out.read_text() == "garbage\n"
    folder = tmp_path / "d.jsonl"
    folder.mkdir()
    code, err = bench_cli(capsys, "--shape", "hidden=8", "-o", str(folder))
    assert code == 2 and err.count("\n") == 1 and "is a directory" in err


def test_cli_shape_takes_comma_lists_as_price_does(tmp_path):
    out = tmp_path / "r.jsonl"
    assert main(["bench", "rmsnorm", "--shape", "rows=8,hidden=16", "--device", "cpu",
                 "--reps", "2", "--warmup", "0", "-o", str(out)]) == 0
    (row,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert (row["workload"]["rows"], row["workload"]["hidden"]) == (8, 16)
    assert row["read_bytes"] == 8 * 16 * 2 + 16 * 2  # bf16 x and weight


def test_storage_bytes_count_each_tensor_once():
    from roofwise.measure.memory import storage_bytes

    # rmsnorm 1e6 x 1e6 bf16: x and out 2e12 B each, the weight 2e6 B
    ledger = OPS["rmsnorm"](rows=10**6, hidden=10**6, dtype="bf16")
    assert storage_bytes(ledger) == 2 * 2 * 10**12 + 2 * 10**6


def test_host_memory_is_the_physical_pages():
    import os

    from roofwise.measure.memory import available_bytes

    limit, what = available_bytes("cpu")
    assert limit == os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    assert what == "of host memory"


@pytest.mark.parametrize(("shape", "need"), [
    # (2 * 1e12 + 1e6) bf16 elements = 4,000,002,000,000 B = 3,725.29 GiB
    (("--shape", "rows=1000000", "--shape", "hidden=1000000"), "3,725"),
    # 2 * 99999999999 * 99999999 * 2 + 99999999 * 2 B = 3.9999999e19 B: past int64 storage
    (("--shape", "rows=99999999999,hidden=99999999"), "37,252,902,612"),
])
def test_cli_too_large_for_memory_is_one_line_before_allocating(tmp_path, capsys, monkeypatch,
                                                                 shape, need):
    import roofwise.measure.memory as memory
    import roofwise.measure.torch_ops as torch_ops

    def never(*_args, **_kwargs):
        raise AssertionError("allocated before the memory check")

    monkeypatch.setattr(torch_ops, "build_case", never)
    monkeypatch.setattr(memory, "available_bytes", lambda device: (8 << 30, "of host memory"))
    out = tmp_path / "h.jsonl"
    code, err = bench_cli(capsys, *shape, "-o", str(out))
    rows, hidden = ("1000000", "1000000") if len(shape) == 4 else ("99999999999", "99999999")
    assert code == 2
    assert err == (f"roofwise: error: rmsnorm rows={rows}, hidden={hidden}, dtype=bf16: the "
                   f"inputs and outputs need {need} GiB, more than the 8 GiB of host memory "
                   "(cpu)\n")
    assert not out.exists()


def test_refused_allocations_become_one_line_and_other_errors_pass():
    from roofwise.cli.bench import refused_allocation

    torch_says = ("[enforce fail at alloc_cpu.cpp:117] DefaultCPUAllocator: can't allocate "
                  "memory: you tried to allocate 4000000000000 bytes.\nframe #0: ...")
    with pytest.raises(InputError) as caught, refused_allocation("rmsnorm rows=8"):
        raise RuntimeError(torch_says)
    assert str(caught.value) == ("rmsnorm rows=8: torch could not allocate the inputs "
                                 f"({torch_says.splitlines()[0]})")
    with pytest.raises(RuntimeError, match="a real bug"), refused_allocation("rmsnorm rows=8"):
        raise RuntimeError("a real bug")


@pytest.mark.parametrize(("event_s", "kernel_s", "graph"), [
    # 40 small kernels eagerly: 200 us of events, 60 us of kernels (30%): launch gaps, replay
    (200e-6, 60e-6, True),
    # one long kernel of 29 us in 30 us of events (97%): nothing for a graph to remove
    (30e-6, 29e-6, False),
    # a 2 ms GEMM: 1.99 ms of kernel time
    (2e-3, 1.99e-3, False),
    # exactly at the 80% share: events
    (100e-6, 80e-6, False),
    # no kernel seen (a host-only call): events
    (10e-6, 0.0, False),
])
def test_graph_replay_is_chosen_by_kernel_time_share(event_s, kernel_s, graph):
    """Issue 8: the old rule (graph below 50 us of event time) timed the 200 us eager call
    with events and the 30 us single kernel with a graph; the share of kernel time decides."""
    from roofwise.measure.bench import use_graph_replay

    assert use_graph_replay(event_s, kernel_s) is graph
