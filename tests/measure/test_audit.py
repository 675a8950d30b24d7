"""The bytes audit on ncu --csv fixtures: unit conversion, PASS/FAIL/WARN, unjudged rows, CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from roofwise.base.errors import InputError
from roofwise.cli import main
from roofwise.measure.audit import audit, excess_match, judge_reads, parse_ncu_csv, to_bytes
from roofwise.ops import rmsnorm

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "ncu"
SYNTHETIC = FIXTURES / "synthetic_rmsnorm_h200.csv"
REAL = FIXTURES / "branch_cc75_real.csv"

# rmsnorm 8192 x 4096 bf16: x 8192*4096*2 = 67,108,864 B plus the weight 4096*2 = 8,192 B.
LEDGER_READ = 67_117_056
LEDGER_WRITE = 67_108_864


def kernels():
    return {k.kernel: k for k in parse_ncu_csv(SYNTHETIC.read_text(), str(SYNTHETIC))}


def test_ledger_of_the_fixture_reads_what_the_comment_says():
    ledger = rmsnorm(rows=8192, hidden=4096, dtype="bf16")
    assert (ledger.read_bytes, ledger.write_bytes) == (LEDGER_READ, LEDGER_WRITE)


@pytest.mark.parametrize(("value", "unit", "expected"), [
    ("2,816", "byte", 2816.0), ("65,544", "Kbyte", 65_544_000.0), ("67.12", "Mbyte", 67_120_000.0),
    ("0.134217728", "Gbyte", 134_217_728.0), ("1,073,741,824", "byte", 1_073_741_824.0),
])
def test_units_are_decimal_and_separators_dropped(value, unit, expected):
    assert to_bytes(value, unit) == pytest.approx(expected, rel=1e-12)


def test_unknown_unit_is_refused_not_guessed():
    with pytest.raises(InputError, match="unknown byte unit"):
        to_bytes("5", "sector")


def test_parse_skips_prof_lines_and_reads_every_launch():
    found = kernels()
    assert list(found) == ["rmsnorm_pass", "rmsnorm_l2_resident", "rmsnorm_reread",
                           "rmsnorm_kbyte", "rmsnorm_no_counter", "split_stage1", "split_stage2",
                           "rmsnorm_time_only"]
    assert found["rmsnorm_l2_resident"].read_bytes == 41_943_040
    assert found["rmsnorm_l2_resident"].write_bytes == pytest.approx(20_970_000)
    assert found["rmsnorm_no_counter"].read_bytes is None
    assert found["rmsnorm_time_only"].read_bytes is None


def test_real_ncu_output_parses():
    (branch,) = parse_ncu_csv(REAL.read_text())
    assert (branch.launch_id, branch.kernel, branch.read_bytes, branch.write_bytes) == (
        "0", "branch()", 2816.0, 0.0)
    (row,) = audit([branch], ledger_read_bytes=2816)
    assert (row.verdict, row.read_ratio) == ("PASS", 1.0)


def test_verdicts_with_hand_computed_ratios():
    # the fixture's kernels are alternatives, not one call: each judged alone
    rows = {r.kernel: r for r in audit(list(kernels().values()), LEDGER_READ, LEDGER_WRITE,
                                       per_kernel=True)}
    expected = {
        "rmsnorm_pass": ("PASS", 67_120_000 / 67_117_056),          # 1.0000439
        "rmsnorm_l2_resident": ("FAIL", 41_943_040 / 67_117_056),   # 0.6249
        "rmsnorm_reread": ("WARN", 134_217_728 / 67_117_056),       # 1.9998
        "rmsnorm_kbyte": ("PASS", 65_544_000 / 67_117_056),         # 0.9766
    }
    for name, (verdict, ratio) in expected.items():
        assert rows[name].verdict == verdict, name
        assert rows[name].read_ratio == pytest.approx(ratio, rel=1e-12), name
    assert rows["rmsnorm_l2_resident"].read_ratio == pytest.approx(0.624924, abs=1e-6)
    assert rows["rmsnorm_reread"].read_ratio == pytest.approx(1.999756, abs=1e-6)
    assert rows["rmsnorm_no_counter"].verdict == "UNJUDGED"
    assert "metric missing" in rows["rmsnorm_no_counter"].reason
    assert "n/a" in rows["rmsnorm_no_counter"].reason
    assert rows["rmsnorm_time_only"].verdict == "UNJUDGED"
    # writes are reported, never judged: a low write count leaves the verdict alone
    assert rows["rmsnorm_l2_resident"].dram_write_bytes == pytest.approx(20_970_000)


def test_boundaries():
    assert judge_reads(100, 95)[0] == "PASS"
    assert judge_reads(100, 94.9)[0] == "FAIL"
    assert judge_reads(100, 150)[0] == "PASS"
    assert judge_reads(100, 150.1)[0] == "WARN"
    assert judge_reads(0, 10)[:2] == ("UNJUDGED", None)  # no ratio, never NaN


def test_one_call_over_two_kernels_is_summed_by_default():
    ks = list(kernels().values())
    (row,) = audit(ks, LEDGER_READ, kernel_pattern="^split_")
    assert row.launch_ids == ("5", "6")
    assert row.dram_read_bytes == 33_558_528 * 2
    assert (row.verdict, row.read_ratio) == ("PASS", 1.0)
    assert [(p.kernel, p.dram_read_bytes) for p in row.parts] == [
        ("split_stage1", 33_558_528), ("split_stage2", 33_558_528)]
    separately = audit(ks, LEDGER_READ, kernel_pattern="^split_", per_kernel=True)
    assert [r.verdict for r in separately] == ["FAIL", "FAIL"]  # each half is 0.5x


NAMES = ("rmsnorm_pass, rmsnorm_l2_resident, rmsnorm_reread, rmsnorm_kbyte, "
         "rmsnorm_no_counter, ...")


def test_unmatched_kernel_is_an_error_listing_the_kernels():
    # a typo in --kernel must fail, never pass CI as an UNJUDGED row
    found = list(kernels().values())
    assert len({k.kernel for k in found}) == 8  # the fixture's distinct names
    with pytest.raises(InputError) as caught:
        audit(found, LEDGER_READ, kernel_pattern="gemm", origin="r.csv")
    assert str(caught.value) == (f"--kernel 'gemm': matches none of the 8 kernel(s) in r.csv: "
                                 f"{NAMES}")
    with pytest.raises(InputError, match=r"^r\.csv: holds no kernel to audit$"):
        audit([], LEDGER_READ, origin="r.csv")


@pytest.mark.parametrize("extra", [(), ("--json",)])
def test_cli_unmatched_kernel_exits_2_in_one_line(capsys, extra):
    code = main(["audit", "--ncu-csv", str(SYNTHETIC), "--op", "rmsnorm", "--kernel", "zzz",
                 *extra])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert err == (f"roofwise: error: --kernel 'zzz': matches none of the 8 kernel(s) in "
                   f"{SYNTHETIC}: {NAMES}\n")


def test_cli_shape_with_a_ledger_file_is_refused(tmp_path, capsys):
    ledger = tmp_path / "L.yaml"
    ledger.write_text("name: x\n")  # never read: the mistake is caught first
    code = main(["audit", "--ncu-csv", str(SYNTHETIC), "--ledger", str(ledger),
                 "--shape", "rows=4"])
    err = capsys.readouterr().err
    assert code == 2
    assert err == f"roofwise: error: --shape: applies to --op, not to the ledger file {ledger}\n"


def test_cli_shape_takes_comma_lists_as_price_does(capsys):
    # rows=8192,hidden=4096 in one --shape is the same ledger as two --shape options
    code = main(["audit", "--ncu-csv", str(SYNTHETIC), "--op", "rmsnorm", "--shape",
                 "rows=8192,hidden=4096", "--kernel", "rmsnorm_reread", "--json"])
    assert code == 0
    row = json.loads(capsys.readouterr().out)
    assert row["ledger_read_bytes"] == LEDGER_READ


def test_bad_unit_names_the_unit_column(tmp_path, capsys):
    path = report(tmp_path, '"0","k","dram__bytes_read.sum","sector","5"\n')
    code = main(["audit", "--ncu-csv", str(path), "--op", "rmsnorm"])
    err = capsys.readouterr().err
    assert code == 2
    assert err == (f"roofwise: error: {path}:3: Metric Unit: unknown byte unit 'sector'; "
                   "expected one of byte, Kbyte, Mbyte, Gbyte, Tbyte\n")


def test_not_a_report():
    with pytest.raises(InputError, match="no ncu --csv header"):
        parse_ncu_csv("==PROF== nothing profiled\n")


def test_cli_json(capsys):
    code = main(["audit", "--ncu-csv", str(SYNTHETIC), "--op", "rmsnorm", "--shape", "rows=8192",
                 "--shape", "hidden=4096", "--kernel", "rmsnorm_reread", "--json"])
    assert code == 0  # WARN alone exits 0
    row = json.loads(capsys.readouterr().out)
    assert (row["verdict"], row["ledger_read_bytes"], row["dram_read_bytes"]) == (
        "WARN", LEDGER_READ, 134_217_728)


def test_cli_bad_report_is_one_line(tmp_path, capsys):
    bad = tmp_path / "bad.csv"
    bad.write_text("hello\n")
    code = main(["audit", "--ncu-csv", str(bad), "--op", "rmsnorm"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and "no ncu --csv header" in err


HEADER = ('"ID","Kernel Name","Metric Name","Metric Unit","Metric Value"\n')


def report(tmp_path, *rows, name="r.csv"):
    path = tmp_path / name
    path.write_text("==PROF== Connected\n" + HEADER + "".join(rows))
    return path


@pytest.mark.parametrize("value", ["nan", "inf", "1e400", "-67.12", "-0.5"])
def test_impossible_counter_values_are_one_line_errors(tmp_path, capsys, value):
    path = report(tmp_path, f'"0","k","dram__bytes_read.sum","Mbyte","{value}"\n')
    with pytest.raises(InputError) as caught:
        parse_ncu_csv(path.read_text(), str(path))
    assert str(caught.value) == (f"{path}:3: Metric Value: expected a non-negative finite "
                                 "number")
    for extra in ((), ("--json",)):
        code = main(["audit", "--ncu-csv", str(path), "--op", "rmsnorm", *extra])
        out, err = capsys.readouterr()
        assert code == 2 and out == ""
        assert err == f"roofwise: error: {path}:3: Metric Value: expected a non-negative " \
                      "finite number\n"


def test_truncated_row_is_malformed_not_a_missing_counter(tmp_path):
    path = report(tmp_path, '"0","k","dram__bytes_read.sum","Mbyte","67.12"\n',
                  '"0","k","dram__bytes_write.sum"\n')
    with pytest.raises(InputError, match=r"r.csv:4: malformed line: 3 field\(s\), the header "
                                         r"has 5"):
        parse_ncu_csv(path.read_text(), str(path))


def test_header_without_rows_is_refused(tmp_path):
    with pytest.raises(InputError, match="no kernel rows"):
        parse_ncu_csv(report(tmp_path).read_text(), "r.csv")


def test_non_utf8_report_is_one_line(tmp_path, capsys):
    path = tmp_path / "u16.csv"
    path.write_text(HEADER, encoding="utf-16")
    code = main(["audit", "--ncu-csv", str(path), "--op", "rmsnorm"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "not UTF-8 text" in err


def test_exit_status_is_one_when_a_row_fails(capsys):
    base = ["audit", "--ncu-csv", str(SYNTHETIC), "--op", "rmsnorm", "--shape", "rows=8192",
            "--shape", "hidden=4096"]
    assert main([*base, "--kernel", "rmsnorm_l2_resident"]) == 1      # FAIL
    assert main([*base, "--kernel", "rmsnorm_l2_resident", "--json"]) == 1
    assert main([*base, "--kernel", "rmsnorm_pass"]) == 0             # PASS
    assert main([*base, "--kernel", "rmsnorm_no_counter"]) == 0       # UNJUDGED
    capsys.readouterr()


def test_run_command_is_split_as_a_shell_would():
    from roofwise.cli.audit import command_argv

    assert command_argv("python -c 'import x; x.run(1, 2)'") == [
        "python", "-c", "import x; x.run(1, 2)"]
    with pytest.raises(InputError, match="cannot split"):
        command_argv("python -c 'unclosed")
    with pytest.raises(InputError, match="empty"):
        command_argv("   ")


# ---- one call, several kernels (issue 8) ----

# A ledger of one call: x 8192 x 4096 bf16 (67,108,864 B) and a 4096 x 256 fp32 lookup table
# (4,194,304 B) read, out 67,108,864 B written: reads 71,303,168 B.
X_BYTES, TABLE_BYTES = 67_108_864, 4_194_304
CALL_READ = X_BYTES + TABLE_BYTES


def counters_line(launch: int, kernel: str, metric: str, value: int, nvtx: str = "") -> str:
    extra = f',"{nvtx}"' if nvtx else ""
    return f'"{launch}","{kernel}","{metric}","byte","{value:,}"{extra}\n'


def two_kernel_calls(calls: int, nvtx: tuple[str, ...] = ()) -> str:
    """Each call: a kernel reading half of x and the whole table, then another reading the
    other half and the table again (the table is read twice per call)."""
    header = HEADER.rstrip("\n") + (',"NVTX"\n' if nvtx else "\n")
    rows = []
    for c in range(calls):
        tag = nvtx[c] if nvtx else ""
        for k, name in enumerate(("gather_half", "norm_half")):
            launch = 2 * c + k
            rows.append(counters_line(launch, name, "dram__bytes_read.sum",
                                      X_BYTES // 2 + TABLE_BYTES, tag))
            rows.append(counters_line(launch, name, "dram__bytes_write.sum", X_BYTES // 2, tag))
    return "==PROF== Connected\n" + header + "".join(rows)


def test_kernels_of_one_call_are_summed_by_launch_order_with_the_excess_named():
    kernels = parse_ncu_csv(two_kernel_calls(3), "r.csv")
    rows = audit(kernels, CALL_READ, X_BYTES, ledger_reads=[("x", X_BYTES),
                                                             ("gamma_table", TABLE_BYTES)])
    # three calls of two kernels each: one row per call, not six FAILs at 0.529x each
    assert [r.launch_ids for r in rows] == [("0", "1"), ("2", "3"), ("4", "5")]
    # per call: 2 x (33,554,432 + 4,194,304) = 75,497,472 B read, 1.0588x the ledger
    for row in rows:
        assert row.dram_read_bytes == 75_497_472
        assert row.read_ratio == pytest.approx(75_497_472 / 71_303_168, rel=1e-12)
        assert row.verdict == "PASS"
        assert [p.kernel for p in row.parts] == ["gather_half", "norm_half"]
        # the excess, 4,194,304 B, is exactly the table: read once more
        assert row.excess_matches == "gamma_table (4,194,304 B) read once more"
        assert "the excess 4,194,304 B matches gamma_table" in row.reason
    alone = audit(kernels, CALL_READ, per_kernel=True)
    assert [r.verdict for r in alone] == ["FAIL"] * 6  # 37,748,736 / 71,303,168 = 0.529x


def test_kernels_are_grouped_by_nvtx_range_where_the_report_has_one():
    kernels = parse_ncu_csv(two_kernel_calls(2, ("step 0", "step 1")), "r.csv")
    assert [k.nvtx for k in kernels] == ["step 0", "step 0", "step 1", "step 1"]
    rows = audit(kernels, CALL_READ)
    assert [r.launch_ids for r in rows] == [("0", "1"), ("2", "3")]
    assert rows[0].kernel == "call of 2 kernels (gather_half, norm_half)"


def test_one_eager_call_whose_kernels_repeat_irregularly_stays_one_call():
    # an eager chain A B A C: no exact shorter period, so one call of four launches
    text = "==PROF== Connected\n" + HEADER + "".join(
        counters_line(i, name, "dram__bytes_read.sum", CALL_READ // 4)
        for i, name in enumerate(("ew", "reduce", "ew", "cast")))
    (row,) = audit(parse_ncu_csv(text, "r.csv"), CALL_READ)
    assert row.launch_ids == ("0", "1", "2", "3") and row.read_ratio == pytest.approx(1.0)


def test_an_excess_that_matches_no_tensor_names_none():
    # one kernel reading 1.3x the ledger: no tensor of the ledger is 0.3x its reads
    text = ("==PROF== Connected\n" + HEADER
            + counters_line(0, "k", "dram__bytes_read.sum", int(CALL_READ * 1.3)))
    (row,) = audit(parse_ncu_csv(text, "r.csv"), CALL_READ,
                   ledger_reads=[("x", X_BYTES), ("gamma_table", TABLE_BYTES)])
    assert row.excess_matches == "" and "excess" not in row.reason


def test_cli_sums_a_call_and_shows_its_kernels(tmp_path, capsys):
    path = tmp_path / "calls.csv"
    path.write_text(two_kernel_calls(1))
    ledger = tmp_path / "L.yaml"
    ledger.write_text(
        "name: table_norm\nroof: cuda_core.fp32\ntensors:\n"
        "  - {name: x, shape: [8192, 4096], dtype: bf16, role: input}\n"
        "  - {name: gamma_table, shape: [4096, 256], dtype: fp32, role: lookup}\n"
        "  - {name: out, shape: [8192, 4096], dtype: bf16, role: output}\n")
    assert main(["audit", "--ncu-csv", str(path), "--ledger", str(ledger), "--json"]) == 0
    (row,) = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert row["verdict"] == "PASS" and row["dram_read_bytes"] == 75_497_472
    assert [k["kernel"] for k in row["kernels"]] == ["gather_half", "norm_half"]
    assert row["excess_matches"] == "gamma_table (4,194,304 B) read once more"


def test_an_excess_that_equals_two_lookups_together_is_named_as_that_set():
    """The compiled case study (issue 21): two kernels of one call read 37,764,608 B and
    12,596,480 B of DRAM against the ledger's 46,137,856 B; the 4,223,232 B excess is the cos
    and sin tables (4096 x 128 fp32 = 2,097,152 B each) read once more, 4,194,304 B together,
    0.69% off (within the 5% tolerance); no single tensor of the ledger is that size."""
    from roofwise.ops.case_study import qk_norm_rope_quant

    ledger = qk_norm_rope_quant(tokens=4096)
    reads = [(t.name, float(t.read_bytes), t.role.value == "lookup") for t in ledger.tensors
             if t.read_bytes > 0]
    assert ledger.read_bytes == 46_137_856
    excess = 37_764_608 + 12_596_480 - 46_137_856
    assert excess == 4_223_232
    found = excess_match(excess, reads, 2)
    assert found == "lookups cos + sin (4,194,304 B together) read once more"
    # a rate no set explains is left unnamed
    assert excess_match(3_000_000, reads, 2) == ""
    # a single tensor still comes first when one matches
    assert excess_match(2_097_152, reads, 2).startswith("cos (2,097,152 B) read once more")
