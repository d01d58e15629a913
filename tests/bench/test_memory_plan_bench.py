"""bench/memory-plan's plan side for the issue-44 shapes (no torch: the measured side runs in the
bench, `microcoder bench memory-plan --world W --sp N --offload O --replicas R`): what a CPU rank
is expected to allocate in its first step."""

from __future__ import annotations

import argparse

from microcoder.bench.memory_plan import SHAPES, add_arguments, knobs, planned
from microcoder.learner.models.memory_plan import ModelShape


def params(shape: str) -> int:
    return ModelShape.from_config({**SHAPES[shape], "model_type": "qwen2"}).params()


def test_the_knobs_reach_the_learner_config_fields() -> None:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(
        ["--world", "4", "--sp", "2", "--offload", "params", "--replicas", "2"]
    )
    assert knobs(args) == {
        "world_size": 4,
        "sequence_parallel": 2,
        "offload": "params",
        "replicas": 2,
    }


def test_on_a_cpu_the_offloaded_states_still_count_in_the_first_step() -> None:
    p = params("0.5b")
    opt = planned("0.5b", 1024, 256, True, {"offload": "optimizer"})
    off = planned("0.5b", 1024, 256, True, {"offload": "params"})
    assert opt["step"] >= 12 * p  # the gradients on the "device", the moments on the host
    assert off["step"] == max(off["backward"], 16 * p)  # the host step: grads, moments, temporary


def test_sequence_parallel_halves_the_planned_backward_of_a_long_micro_batch() -> None:
    one = planned("tiny", 8192, 1024, False, {"world_size": 2})
    two = planned("tiny", 8192, 1024, False, {"world_size": 2, "sequence_parallel": 2})
    assert two["backward"] < 0.6 * one["backward"]


def test_hsdp_plans_the_states_of_one_replica_s_shard() -> None:
    flat = planned("0.5b", 1024, 256, True, {"world_size": 4})
    hsdp = planned("0.5b", 1024, 256, True, {"world_size": 4, "replicas": 2})
    # gradients, AdamW's moments and its temporary: 16 B per parameter over 2 ranks, not 4
    p = params("0.5b")
    assert hsdp["step"] == 4 * p // 2 + 8 * p // 2 + 4 * p // 2
    assert flat["step"] < hsdp["step"] and flat["backward"] == hsdp["backward"]
