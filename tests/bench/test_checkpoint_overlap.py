"""`microcoder bench checkpoint-overlap` runs end to end on a small batch and reports every arm
with its paired ratios and the load average (its figures go to bench/RESULTS.md; no timing is
asserted here)."""

from __future__ import annotations

import argparse
import os
import sys

import pytest

from microcoder.bench import checkpoint_overlap
from microcoder.launch.cli.cmd_bench import BENCHES


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    checkpoint_overlap.add_arguments(parser)
    return parser.parse_args(list(argv))


def test_the_bench_times_every_arm_paired_and_names_the_goal(tiny_model_dir):
    assert BENCHES["checkpoint-overlap"] == "microcoder.bench.checkpoint_overlap"
    args = parse(
        "--model", str(tiny_model_dir), "--rounds", "2", "--groups", "1",
        "--arms", "thread,nice,switch",
    )  # fmt: skip
    interval = sys.getswitchinterval()
    result = checkpoint_overlap.run(args)
    assert result["rounds"] == 2 and result["plain_step_s"] > 0
    assert result["ratio"] == result["overlapped_step_s"] / result["plain_step_s"]
    assert 0 < result["snapshot_s"] and 0 < result["sync_save_s"]
    assert list(result["arms"]) == ["thread", "nice", "switch"]
    for arm in result["arms"].values():
        p = arm["paired_ratio"]
        assert 0 < p["min"] <= p["q1"] <= p["median"] <= p["q3"] <= p["max"]
    assert len(result["loadavg_start"]) == 3 and len(result["loadavg_end"]) == 3
    assert sys.getswitchinterval() == interval  # the switch arm set it back
    assert os.getpriority(os.PRIO_PROCESS, 0) == 0
    table = checkpoint_overlap.format_table(result)
    assert "ratio (goal <= 1.1)" in table and "[switch] paired ratio median" in table


def test_an_unknown_arm_is_refused_with_the_choices():
    with pytest.raises(ValueError, match="choose from thread, nice, switch"):
        checkpoint_overlap.Arm("process")
