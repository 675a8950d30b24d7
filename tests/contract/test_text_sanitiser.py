"""User text reaches rich, matplotlib and the HTML writer inert: markup, mathtext and lone
surrogates in names print as themselves; a chart with extreme rows draws."""

from __future__ import annotations

import json

import pytest

from roofwise.base.text import for_mpl
from roofwise.cli import main
from roofwise.profiles.load import builtin_paths
from roofwise.render.layout import for_rich

MARKUP = "[/x]"
MATH = "$\\frac{$"


def run(capsys, *args):
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, out, err


def records(tmp_path, rows, name="r.jsonl"):
    path = tmp_path / name
    with path.open("w", encoding="utf-8", errors="surrogatepass") as handle:
        for row in rows:
            handle.write(json.dumps(row) + "\n")
    return path


def row(op, bytes_=1e6, time_s=1e-3, **extra):
    return {"op": op, "device": "h200", "flops": 1e6, "bytes": bytes_,
            "roof": "cuda_core.fp32", "time_s": time_s, **extra}


def test_sanitisers_make_text_inert():
    from rich.console import Console

    console = Console(record=True, width=80)
    console.print(for_rich(MARKUP + " \udc80"))
    assert console.export_text().strip() == "[/x] \\udc80"
    assert for_mpl(MATH) == "\\$\\frac{\\$"


def ledger_file(tmp_path):
    path = tmp_path / "l.yaml"
    path.write_text(f'name: "{MARKUP}"\nroof: cuda_core.fp32\nnotes: ["{MARKUP}"]\n'
                    f'tensors:\n  - {{name: "{MARKUP}", shape: [4], dtype: fp32, role: input}}\n'
                    f'work:\n  - {{unit: cuda_core.fp32, class: arithmetic, ops: 8, '
                    f'label: "{MARKUP}"}}\n')
    return path


def profile_file(tmp_path):
    h200 = next(p for p in builtin_paths() if p.stem == "h200").read_text()
    text = h200.replace("name: h200", f'name: "{MARKUP}"', 1)
    text = "\n".join(f'display_name: "{MARKUP} \\udc80"' if line.startswith("display_name:")
                     else line for line in text.splitlines())
    path = tmp_path / "m.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize("args", [
    ["price", "{ledger}", "-m", "h200"],
    ["price", "{ledger}", "-m", "{profile}"],
    ["price", "{ledger}", "-m", "ascend-a5-vector"],
    ["machine", "{profile}"],
    ["lint", "{profile}"],
    ["analyze", "{records}"],
    ["analyze", "{records}", "-m", "{profile}"],
    ["compare", "{records}", "{records}"],
    ["lint", "{ledger}", "{records}", "-m", "{profile}"],
])
def test_markup_in_names_prints_as_itself(tmp_path, capsys, args):
    paths = {"ledger": ledger_file(tmp_path), "profile": profile_file(tmp_path),
             "records": records(tmp_path, [row(MARKUP, workload=MARKUP),
                                           row(MARKUP + "2", bytes_=1e12)])}
    code, out, err = run(capsys, *[a.format(**paths) for a in args])
    assert code in (0, 1), err
    assert MARKUP in out


@pytest.mark.parametrize("command, suffix", [("plot", ".png"), ("plot", ".svg"),
                                             ("plot", ".pdf"), ("report", ".html")])
def test_mathtext_and_surrogates_in_names_and_titles_draw(tmp_path, capsys, command, suffix):
    # records cannot hold a lone surrogate (the reader refuses its line); an argument can: a
    # byte that is not UTF-8 in argv reaches Python as one
    path = records(tmp_path, [row(MATH), row("ok", bytes_=1e12),
                              row("big", bytes_=1e300, time_s=1e-300)], name="$x$.jsonl")
    out_path = tmp_path / ("chart" + suffix)
    code, _out, err = run(capsys, command, path, "-m", "h200", "-o", out_path,
                         "--title", MATH + " ok\udc80")
    assert code == 0, err
    written = out_path.read_bytes()
    assert written
    if suffix in (".svg", ".html"):
        text = written.decode("utf-8")  # encodable throughout
        assert "ok\\udc80" in text


def test_a_row_at_1e300_bytes_in_1e_300_s_is_counted_not_drawn(tmp_path, capsys):
    path = records(tmp_path, [row("fine"), row("big", bytes_=1e300, time_s=1e-300)])
    out_path = tmp_path / "c.svg"
    code, _out, err = run(capsys, "plot", path, "-m", "h200", "-o", out_path)
    assert code == 0, err
    assert "1 row with no finite intensity or rate (or one beyond 1e±100) not plotted" in (
        out_path.read_text())


def test_surrogates_reach_a_strict_terminal_escaped(tmp_path):
    import subprocess
    import sys

    # a file name that is not UTF-8 reaches Python with a lone surrogate, and the warning
    # about a skipped row names the file
    path = records(tmp_path, [row("ok"), {"op": "bad"}], name="ok\udc80.jsonl")
    done = subprocess.run([sys.executable, "-c", "import sys; from roofwise.cli import main; "
                           "sys.exit(main(sys.argv[1:]))", "analyze", str(path), "--csv"],
                          capture_output=True, env={"PYTHONIOENCODING": "utf-8:strict",
                                                    "PATH": "/usr/bin:/bin"}, check=False)
    assert done.returncode == 0, done.stderr
    assert b"ok\\udc80.jsonl:2" in done.stderr


def test_the_terminal_text_escapes_unicode_line_separators():
    """Found by the long fuzz run: an op named U+2029 reached the table raw."""
    from roofwise.base.text import for_terminal

    assert for_terminal("\u2029para\u2028x\n") == "\\u2029para\\u2028x\n"
