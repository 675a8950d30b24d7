"""Install hints fit where roofwise runs: a clone gets `pip install -e`, and the gpu hint warns
that PyPI's plain torch is the CUDA build."""

from __future__ import annotations

from pathlib import Path

from roofwise.base import install


def test_checkout_gets_the_editable_form():
    root = install.checkout_root()
    assert root == Path(__file__).resolve().parents[2]  # the tests run from this clone
    hint = install.install_hint("parquet")
    assert hint.startswith("pip install -e '.[parquet]'") and "roofwise[" not in hint


def test_installed_package_gets_the_index_form(monkeypatch):
    monkeypatch.setattr(install, "checkout_root", lambda: None)
    assert install.install_hint("parquet") == "pip install 'roofwise[parquet]'"


def test_gpu_hint_warns_that_plain_torch_is_the_cuda_build():
    hint = install.install_hint("gpu")
    assert "CUDA build" in hint and "download.pytorch.org/whl/cpu" in hint
