"""The launch's pre-start checks (launch/run/command.py: preflight_errors) refuse a
learner.sequence_parallel the learner ranks would refuse at start (learner/sequence_parallel.py:
model_errors): attention heads it does not divide, unpacked micro-batches, a sequence-level
off-policy correction."""

from __future__ import annotations

import json
from pathlib import Path

from microcoder.launch.config import load_config
from microcoder.launch.run.command import preflight_errors

TINY_CPU = Path(__file__).resolve().parents[2] / "configs" / "tiny-cpu.toml"


def _errors(tmp_path: Path, heads: int, *overrides: str) -> list[str]:
    folder = tmp_path / "model"
    folder.mkdir(exist_ok=True)
    arch = dict(model_type="qwen3", hidden_size=32 * heads, num_attention_heads=heads, head_dim=32)
    (folder / "config.json").write_text(json.dumps(arch))
    sets = [f'model.path="{folder}"', "data.source=synthetic", 'cluster.device="cpu"']
    sets += ["learner.world_size=4", *overrides]
    return preflight_errors(load_config(TINY_CPU, sets), tmp_path / "run", str(folder))


def test_a_split_the_heads_packing_and_correction_allow_passes(tmp_path):
    assert _errors(tmp_path, 4, "learner.sequence_parallel=4") == []


def test_a_split_the_attention_heads_cannot_take_is_refused_naming_the_heads(tmp_path):
    (err,) = _errors(tmp_path, 2, "learner.sequence_parallel=4")
    assert "does not divide the model's 2 attention heads" in err


def test_unpacked_rows_and_a_sequence_level_correction_are_refused_under_sp(tmp_path):
    sets = [
        "learner.sequence_parallel=2",
        "learner.packing=false",
        'algorithm.off_policy="seq-tis"',
    ]
    errors = _errors(tmp_path, 4, *sets)
    assert len(errors) == 2
    assert "learner.packing = true" in errors[0] and "seq-tis" in errors[1]
    assert _errors(tmp_path, 4, *sets[1:]) == []  # without SP both are fine
