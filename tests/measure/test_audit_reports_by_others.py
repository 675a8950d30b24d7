"""`roofwise audit` on Nsight Compute reports written by other people (round 2, 2026-12-06):
the shapes of real `ncu --csv` output the synthetic fixture never had. Figures recounted here
from the CSV with Python's csv module."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from roofwise.base.errors import InputError
from roofwise.cli import main
from roofwise.measure.audit import calls_of, parse_ncu_csv

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "ncu"
# ncu 2025 with rules: metric rows end before the 5 rule columns (16 fields, 20 in the header)
RULES = FIXTURES / "llm_perf_opt_kernel_0009_metrics.csv"
# ncu 2026.2 on an RTX 5070 (sm_120), Windows: a UTF-8 BOM, CRLF, program output before the
# header, `134,221,568`, and the read counter named dram__bytes_op_read.sum
SAXPY = FIXTURES / "gpu_roofline_profiler_saxpy.csv"


def recount(path: Path, metric: str) -> float:
    """The counter summed over the report's rows, by the csv module, units converted."""
    scale = {"byte": 1, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9}
    total = 0.0
    for row in csv.reader(io.StringIO(path.read_text(encoding="utf-8-sig"))):
        if len(row) > 14 and row[12] == metric:
            total += float(row[14].replace(",", "")) * scale[row[13]]
    return total


def test_a_report_with_rule_columns_is_read():
    (k,) = parse_ncu_csv(RULES.read_text(), str(RULES))
    assert k.kernel.startswith("fmha_cutlassF_bf16_aligned_64x64_rf_sm80")
    assert k.read_bytes == recount(RULES, "dram__bytes_read.sum") == pytest.approx(99.63e6)
    assert k.write_bytes == recount(RULES, "dram__bytes_write.sum") == pytest.approx(6.02e6)


def test_a_windows_report_with_a_bom_and_the_op_counters_is_read(capsys):
    (k,) = parse_ncu_csv(SAXPY.read_text(encoding="utf-8"), str(SAXPY))
    assert k.read_bytes == recount(SAXPY, "dram__bytes_op_read.sum") == 134_221_568
    assert k.write_bytes == 43_631_104
    # saxpy over 65,536 x 256 = 16,777,216 floats reads x and y: 2 x 4 B each, 134,217,728 B
    code = main(["audit", "--ncu-csv", str(SAXPY), "--op", "add", "--shape",
                 "a_shape=16777216,b_shape=16777216,dtype=fp32", "--json"])
    (row,) = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert code == 0 and row["verdict"] == "PASS"
    assert row["ledger_read_bytes"] == 2 * 16_777_216 * 4
    # the BOM right before the header (as `ncu --import --csv` prints it) is no obstacle
    table = SAXPY.read_text(encoding="utf-8-sig")
    first = "\ufeff" + table[table.index('"ID"'):]
    assert parse_ncu_csv(first)[0].read_bytes == 134_221_568


# the NVTX columns as `ncu --nvtx --csv` names them (ncu 2025.3; the header of the app-range
# replay fixture in cfregly/ai-performance-engineering, Apache-2.0)
NVTX_HEADER = ('"ID","Process ID","Process Name","Host Name","thread Domain:Push/Pop_Range:'
               'PL_Type:PL_Value:CLR_Type:Color:Msg_Type:Msg","Id:Domain:Start/Stop_Range:'
               'PL_Type:PL_Value:CLR_Type:Color:Msg_Type:Msg","Kernel Name","Context","Stream",'
               '"Device","CC","Section Name","Metric Name","Metric Unit","Metric Value",'
               '"Rule Name","Rule Type","Rule Description","Estimated Speedup Type",'
               '"Estimated Speedup"')


def test_nvtx_ranges_under_ncus_own_column_names_make_the_calls():
    rows = [NVTX_HEADER]
    # three ranges: call 0 of two kernels, call 1 of two, call 2 of one
    for launch, (call, kernel) in enumerate([(0, "a"), (0, "b"), (1, "a"), (1, "b"), (2, "a")]):
        rng = f'"1  ""<default domain>:rmsnorm_call_{call}:none:none:none:none:none:none"" "'
        rows.append(f'"{launch}","1","python","host",{rng},"","k_{kernel}","1","7","0","9.0",'
                    f'"Command line profiler metrics","dram__bytes_read.sum","Mbyte","10",')
    calls = calls_of(parse_ncu_csv("\n".join(rows)))
    assert [[k.launch_id for k in c] for c in calls] == [["0", "1"], ["2", "3"], ["4"]]


@pytest.mark.parametrize(("text", "said"), [
    # a report with DRAM counters, but no read counter: nothing to judge, never exit 0
    (NVTX_HEADER + '\n"0","1","p","h","","","k","1","7","0","9.0","s","dram__bytes.sum",'
     '"Mbyte","10",', "no DRAM read counter (dram__bytes_read.sum) in the report, which has "
     "dram__bytes.sum"),
    # ncu's own error instead of a table
    ("==PROF== Connected\n==ERROR== Option '--section .*SpeedOfLight.*' did not match any "
     "section.\n", "ncu reported an error and wrote no table: ==ERROR== Option"),
    # the wide layout of --page raw
    ('"ID","Kernel Name","dram__bytes_read.sum"\n"","","byte"\n"0","k","1,024"\n',
     "a wide report (one row per kernel, a column per metric: `--page raw`)"),
])
def test_reports_that_cannot_be_audited_say_why(text, said):
    with pytest.raises(InputError) as caught:
        parse_ncu_csv(text, "r.csv")
    assert said in str(caught.value)


def test_a_short_row_that_is_not_missing_rule_columns_is_still_malformed():
    header = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream",'
              '"Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"')
    row = '"0","1","p","h","k","1","7","0","9.0","s","dram__bytes_read.sum","byte"'
    with pytest.raises(InputError) as caught:
        parse_ncu_csv(header + "\n" + row, "r.csv")
    assert "r.csv:2" in str(caught.value) and "12 field(s), the header has 13" in str(
        caught.value)
