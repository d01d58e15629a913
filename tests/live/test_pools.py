"""The live run's pools: `microcoder scale` adds a generator and takes it away again with the
accounting intact, and a replica killed with SIGKILL is restarted while the run goes on."""

from __future__ import annotations

import os
import signal

import pytest
from launch_testing.live import microcoder
from launch_testing.waiting import wait_for


@pytest.mark.timeout(600)  # a second vLLM engine starts (15-40 s here, minutes on a busy box)
def test_scale_generators_up_then_down_keeps_the_accounting(live):
    up = microcoder("scale", "generators", "2", "--run", str(live.run_dir), timeout=400)
    assert up.returncode == 0, up.stdout + up.stderr
    wait_for(
        lambda: live.last_step()["generators"] == 2, 240, "a step with two generators", live.proc
    )
    live.wait_steps(2, "more steps with two generators")
    assert {r["name"] for r in live.last_step()["replicas"]} >= {"generator-0", "generator-1"}
    down = microcoder("scale", "generators", "1", "--run", str(live.run_dir), timeout=120)
    assert down.returncode == 0, down.stdout + down.stderr
    live.wait_steps(2, "steps after scaling down")
    rec = live.last_step()
    assert rec["generators"] == 1 and rec["buffer"]["invariant_ok"]


def engine_cores(pid: int) -> list[tuple[int, float]]:
    """(pid, start time) of the vLLM EngineCore processes below `pid`."""
    import psutil

    out = []
    for child in psutil.Process(pid).children(recursive=True):
        try:
            if "EngineCore" in " ".join(child.cmdline()):
                out.append((child.pid, child.create_time()))
        except psutil.Error:
            continue
    return out


def still_running(procs: list[tuple[int, float]]) -> list[int]:
    import psutil

    out = []
    for pid, started in procs:
        try:
            if psutil.Process(pid).create_time() == started:
                out.append(pid)
        except psutil.Error:
            continue
    return out


@pytest.mark.parametrize("kind", ["generator", "executor"])
def test_sigkill_of_a_replica_is_restarted_and_the_run_goes_on(live, kind):
    victim = next(
        r for r in live.last_step()["replicas"] if r["name"].startswith(kind) and r.get("pid")
    )
    cores = engine_cores(victim["pid"])
    os.kill(victim["pid"], signal.SIGKILL)
    wait_for(
        lambda: f"{victim['name']} restarted" in live.events(),
        240,
        f"{victim['name']} to be restarted",
        live.proc,
    )
    live.wait_steps(2, "steps after the restart")
    assert live.last_step()["buffer"]["invariant_ok"]
    assert {r["name"] for r in live.last_step()["replicas"]} >= {victim["name"]}
    # A killed generator's vLLM EngineCore (its child: scheduler and model) died with it
    # (actors/engines/worker_ext.py: mc_die_with_parent) instead of living on under init.
    assert bool(cores) == (kind == "generator"), cores
    assert still_running(cores) == []
