"""`transformers.models` imported with its folder scanned once (models/config.py:
`import_models_package`) is the same lazy package transformers builds on its own."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytest.importorskip("transformers")

# The state of transformers' two lazy modules, as text: what each resolves a name to.
DUMP = """
import json, sys
if sys.argv[1] == "once":
    from roofwise.models.config import import_models_package
    import_models_package()
import transformers.models

def canon(x):
    if isinstance(x, dict):
        return sorted((repr(canon(k)), canon(v)) for k, v in x.items())
    if isinstance(x, (set, frozenset, list, tuple)):
        return sorted(repr(canon(v)) for v in x)
    return repr(x)

out = {name: {k: canon(getattr(sys.modules[name], k, None))
              for k in ("_modules", "_class_to_module", "_object_missing_backend",
                        "_import_structure", "__all__")}
       for name in ("transformers", "transformers.models")}
print(json.dumps(out))
"""


def _state(how: str) -> dict[str, dict[str, object]]:
    done = subprocess.run([sys.executable, "-c", DUMP, how], capture_output=True, text=True,
                          check=True)
    return json.loads(done.stdout)


def test_the_models_package_is_the_one_transformers_builds() -> None:
    once, own = _state("once"), _state("own")
    assert once == own
    names = " ".join(own["transformers.models"]["__all__"])
    assert "'LlamaForCausalLM'" in names and "'DeepseekV3ForCausalLM'" in names


def test_the_scan_is_restored_and_the_models_resolve() -> None:
    from transformers.utils import import_utils

    from roofwise.models.config import import_models_package

    before = import_utils.define_import_structure
    import_models_package()
    assert import_utils.define_import_structure is before
    from transformers.models.llama import LlamaForCausalLM

    assert LlamaForCausalLM.__name__ == "LlamaForCausalLM"
