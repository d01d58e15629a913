"""The memory plan under a multi-turn environment (issue 48): the longest sequence is the whole
trajectory (prompt + max_turns responses + the feedback between them), so the learner's and the
generator's plans grow with environment.max_turns; a single-turn run plans as before."""

from __future__ import annotations

import json
from pathlib import Path

from microcoder.launch.config import load_config
from microcoder.launch.run.memory_check import (
    generator_plan,
    learner_inputs,
    longest_sequence,
    memory_report,
    run_shape,
)
from microcoder.learner.models.memory_plan import plan_learner, qwen25_shape

CONFIGS = Path(__file__).parents[2] / "configs"
QWEN_15B = {"model_type": "qwen2", **qwen25_shape("1.5b")}


def config(tmp_path: Path, *overrides: str):
    folder = tmp_path / "model"
    folder.mkdir(exist_ok=True)
    (folder / "config.json").write_text(json.dumps(QWEN_15B))
    return load_config(
        CONFIGS / "qwen2.5-coder-1.5b-8gpu.toml", [f"model.path={folder}", *overrides]
    )


def test_the_longest_sequence_is_the_whole_trajectory(tmp_path):
    single = config(tmp_path)
    g = single.generator
    assert longest_sequence(single) == g.max_prompt_tokens + g.max_response_tokens
    for turns in (1, 2, 3):
        cfg = config(
            tmp_path,
            "environment.kind=repair",
            f"environment.max_turns={turns}",
            "environment.feedback_chars=400",
        )
        # written out: each feedback is 4 parts of 400 characters (a token each) + 256 tokens
        want = g.max_prompt_tokens + turns * g.max_response_tokens + (turns - 1) * (4 * 400 + 256)
        assert longest_sequence(cfg) == want
        assert learner_inputs(cfg, "cuda")["longest_sequence"] == want
    # a single-turn environment plans one turn whatever max_turns says
    assert longest_sequence(config(tmp_path, "environment.max_turns=4")) == longest_sequence(single)


def test_the_learner_and_generator_plans_grow_with_max_turns(tmp_path):
    peaks = []
    sequences = []
    for turns in (1, 2, 4):
        cfg = config(
            tmp_path,
            "environment.kind=repair",
            f"environment.max_turns={turns}",
            "learner.micro_batch_tokens=4096",
        )
        shape = run_shape(cfg)
        peaks.append(plan_learner(shape, **learner_inputs(cfg, "cuda")).peak())
        sequences.append(generator_plan(shape, cfg, 1, 80 * 2**30, 2).sequence_tokens)
    assert peaks[0] < peaks[1] < peaks[2]
    assert sequences[0] < sequences[1] < sequences[2]
    assert sequences[2] == longest_sequence(cfg)


def test_a_generator_without_room_for_a_trajectory_names_max_turns(tmp_path):
    cfg = config(
        tmp_path,
        "environment.kind=repair",
        "environment.max_turns=16",
        "generator.max_response_tokens=32768",
        "generator.gpu_memory_utilization=0.3",
    )
    errors = memory_report(cfg, "cuda", 24).errors
    assert any("lower environment.max_turns" in e for e in errors), errors
