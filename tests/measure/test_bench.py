"""The harness on the host: torch CPU ops, the host timer, records, sweeps and shards."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")

import roofwise  # noqa: E402
from roofwise.cli import main  # noqa: E402
from roofwise.cli.bench import parse_shard, shard, sweep_points  # noqa: E402
from roofwise.errors import InputError  # noqa: E402
from roofwise.measure.bench import BenchResult, _rotated, bench  # noqa: E402
from roofwise.measure.torch_ops import build_case, rmsnorm, rmsnorm_ledger  # noqa: E402
from roofwise.records import validate_record  # noqa: E402


def test_result_fields_on_the_host():
    calls = []
    x = torch.randn(64, 64)
    result = bench(lambda a: calls.append(1) or a @ a, x, warmup=3, reps=7, flush_l2=False,
                   rotate_inputs=False)
    assert isinstance(result, BenchResult)
    assert len(calls) == 3 + 7  # warm-up, then exactly `reps` timed calls
    assert (result.reps, result.timing, result.kernels, result.method) == (7, "wall", None, "host")
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
    x = torch.randn(32, 128, dtype=torch.bfloat16)
    w = torch.randn(128, dtype=torch.bfloat16)
    ledger = rmsnorm_ledger(32, 128, "bf16")
    result = bench(rmsnorm, x, w, ledger=ledger, warmup=1, reps=5)
    record = result.to_record(ledger, "h200", op="rmsnorm", workload={"rows": 32})
    clean = validate_record(json.loads(json.dumps(record)), "record")
    # x 32*128*2 + weight 128*2 read; y 32*128*2 written
    assert (clean["read_bytes"], clean["write_bytes"], clean["bytes"]) == (8448, 8192, 16640)
    assert clean["profile"] == "h200" and clean["timing"] == "wall"
    assert clean["time_s"] == result.time_s and clean["time_p90_s"] == result.time_p90_s
    assert clean["flops"] == 3 * 32 * 128 + 32
    with pytest.raises(ValueError):
        BenchResult(1.0, 1.0, 1.0, 1.0, None, 1, "wall", "cpu").to_record()


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
