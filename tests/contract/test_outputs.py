"""Outputs: every path is checked before any work; no write through a symbolic link or over a
read-only file without saying so; writes are all or nothing."""

from __future__ import annotations

import os

import pytest

from roofwise.cli import main


def run(capsys, *args):
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def test_analyze_json_with_an_unwritable_plot_fails_before_printing(tmp_path, capsys, examples):
    code, out, err = run(capsys, "analyze", examples / "records.jsonl", "--json", "--plot",
                         tmp_path / "unwritable" / "x.svg")
    assert code == 2 and out == ""  # not one JSON row printed before the failure
    assert len(err.splitlines()) == 1 and "no folder" in err


@pytest.mark.parametrize("command", ["plot", "report", "analyze", "bench", "trace"])
def test_a_symlink_output_is_refused_and_left_alone(tmp_path, capsys, examples, command):
    suffix = {"plot": ".svg", "report": ".html", "analyze": ".svg", "bench": ".jsonl",
              "trace": ".yaml"}[command]
    real = tmp_path / ("real" + suffix)
    real.write_text("keep me\n")
    link = tmp_path / ("link" + suffix)
    link.symlink_to(real)
    records = examples / "records.jsonl"
    args = {
        "plot": ["plot", records, "-m", "h200", "-o", link],
        "report": ["report", records, "-m", "h200", "-o", link],
        "analyze": ["analyze", records, "--plot", link],
        "bench": ["bench", "gemm", "--shape", "m=8,n=8,k=8", "--device", "cpu", "-o", link],
        "trace": ["trace", "roofwise.measure.reference_ops:qk_norm_rope_quant_reference",
                  "-o", link],
    }[command]
    code, _out, err = run(capsys, *args)
    assert code == 2, err
    assert "symbolic link" in err and len(err.splitlines()) == 1
    assert link.is_symlink() and real.read_text() == "keep me\n"


def test_a_read_only_output_is_refused(tmp_path, capsys, examples):
    target = tmp_path / "chart.svg"
    target.write_text("old\n")
    target.chmod(0o444)
    code, _out, err = run(capsys, "plot", examples / "records.jsonl", "-m", "h200", "-o", target)
    assert code == 2 and "read-only" in err
    assert target.read_text() == "old\n"
    target.chmod(0o644)
    code, _out, err = run(capsys, "plot", examples / "records.jsonl", "-m", "h200", "-o", target)
    assert code == 0 and target.read_text().lstrip().startswith("<?xml")


def test_a_failed_write_leaves_no_file_and_no_temporary(tmp_path):
    from roofwise.records.write import atomic_writer

    target = tmp_path / "out.jsonl"
    target.write_text("before\n")
    with pytest.raises(RuntimeError), atomic_writer(target) as handle:
        handle.write("half")
        raise RuntimeError("interrupted")
    assert target.read_text() == "before\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.jsonl"]


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write into any folder")
def test_an_unwritable_folder_is_refused(tmp_path, capsys, examples):
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    code, _out, err = run(capsys, "plot", examples / "records.jsonl", "-m", "h200", "-o",
                         folder / "c.svg")
    assert code == 2 and "not writable" in err
