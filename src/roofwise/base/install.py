"""The install command that fits where roofwise runs: a checkout or an installed package.

A hint that says `pip install 'roofwise[gpu]'` to someone working in a clone installs a second
copy from the index; from a clone the fitting form is `pip install -e '.[gpu]'`.
"""

from __future__ import annotations

from pathlib import Path

# PyPI's `torch` wheel for Linux is the CUDA build (gigabytes of CUDA libraries); the CPU
# build comes from PyTorch's own index.
TORCH_NOTE = ("plain `pip install torch` fetches the CUDA build; on a host without a GPU use "
              "`pip install torch --index-url https://download.pytorch.org/whl/cpu`")


def checkout_root() -> Path | None:
    """The clone roofwise is imported from (an editable install), or None when installed."""
    root = Path(__file__).resolve().parents[3]  # src/roofwise/base/install.py
    return root if (root / "pyproject.toml").is_file() and (root / "src").is_dir() else None


def install_hint(extra: str) -> str:
    """`pip install -e '.[extra]'` in a checkout, `pip install 'roofwise[extra]'` otherwise;
    for the gpu extra, the warning about PyPI's CUDA torch too."""
    command = (f"pip install -e '.[{extra}]' (in {checkout_root()})" if checkout_root()
               else f"pip install 'roofwise[{extra}]'")
    return f"{command}; {TORCH_NOTE}" if extra == "gpu" else command
