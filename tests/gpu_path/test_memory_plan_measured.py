"""The memory plan against a measured CPU peak: one training step of the tiny-shaped Qwen2 on the
learner's own path (bench/memory_plan.py's worker, a fresh process), within ±20% of the plan."""

from __future__ import annotations

import pytest

from microcoder.bench.memory_plan import _measure, build_model, planned


@pytest.mark.slow  # one fresh process that imports torch and transformers: about a minute here
def test_tiny_step_peak_is_within_20_percent_of_the_plan(tmp_path) -> None:
    tokens, chunk = 4096, 1024
    model = build_model(tmp_path / "model", "tiny", tokens)
    got = _measure(model, tmp_path / "step.safetensors", tokens, chunk, ckpt=True)
    plan = planned("tiny", tokens, chunk, ckpt=True)
    assert 0.8 <= plan["step"] / got["step"] <= 1.2, (plan, got)
