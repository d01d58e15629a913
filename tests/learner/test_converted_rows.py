"""learner/converted_rows.py: a rank's rows of a fused MoE parameter, converted from only the
checkpoint tensors of its experts, equal those rows of the whole conversion (what loading read
before), and the key selection reads no other expert's tensors."""

from __future__ import annotations

import pytest
import torch
from family_models import build_family
from safetensors import safe_open

from microcoder.learner.checkpoint_names import sources, to_model_names
from microcoder.learner.converted_rows import converted_rows, keys_for_rows, stacking_index
from microcoder.learner.distributed import _checkpoint_files

GATE_UP = [
    f"model.layers.0.mlp.experts.{e}.{p}.weight" for e in range(4) for p in ("gate_proj", "up_proj")
]


@pytest.fixture(scope="module")
def moe(tmp_path_factory):
    """(meta-device qwen3_moe model, its checkpoint files by tensor name)."""
    from transformers import AutoConfig, AutoModelForCausalLM

    folder = build_family("qwen3_moe", tmp_path_factory.mktemp("moe"))
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(folder))
    return model, _checkpoint_files(folder)


def test_the_expert_index_is_found_beside_the_projection_names():
    assert stacking_index(GATE_UP, 4) == 5
    assert keys_for_rows(GATE_UP, slice(2, 4), 4) == GATE_UP[4:]


def test_sources_that_do_not_stack_along_dim0_are_all_read():
    two_numbers = [f"model.layers.{i}.mlp.experts.{i}.down_proj.weight" for i in range(2)]
    assert stacking_index(two_numbers, 2) is None
    assert stacking_index(GATE_UP, 3) is None  # 4 experts cannot be the rows of a 3-row tensor
    assert keys_for_rows(two_numbers, slice(0, 1), 2) == two_numbers


@pytest.mark.parametrize("rows", [slice(0, 2), slice(2, 4), slice(1, 2), slice(4, 4)])
@pytest.mark.parametrize("param", ["mlp.experts.gate_up_proj", "mlp.experts.down_proj"])
def test_a_ranks_rows_equal_those_rows_of_the_whole_conversion(moe, param, rows):
    model, files = moe
    name = f"model.layers.1.{param}"
    keys = sources(model, files)[name]
    whole = {}
    for key in keys:
        with safe_open(files[key], framework="pt") as f:
            whole[key] = f.get_tensor(key)
    want = to_model_names(model, whole)[name][rows]
    if want.shape[0] == 0:
        assert keys_for_rows(keys, rows, 4) == []
        return
    got = converted_rows(model, name, keys, files, rows, 4)
    torch.testing.assert_close(got, want, atol=0, rtol=0)
