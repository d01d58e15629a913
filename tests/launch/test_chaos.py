"""Chaos on one tiny run: kill -9 each actor kind once and resume where needed (issue 16, item 3).

One launched run (the tiny config, a checkpoint every step) goes through, in the module fixture:
kill -9 of the buffer actor's process (the run stops, non-zero, naming the checkpoint) ->
--resume -> kill -9 of a learner rank (the run stops the same way) -> --resume to a final step.
kill -9 of a generator and of an executor (they restart and the run goes on, no EngineCore is
left behind) happens in the shared live run (tests/live/test_pools.py). The tests then check one
property each on what the fixture saw and on the checkpoints' buffer snapshots (plain msgpack,
buffer/snapshot.py). Every launch runs in its own process group, killed at the end however the
module ends."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from launch_testing.launched import SMALL_RUN
from launch_testing.waiting import records, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]  # one module fixture drives every launch

BATCH = 4
SETTINGS = [
    f"learner.batch_size={BATCH}",
    "learner.checkpoint_every=1",
    *SMALL_RUN,
    "generator.enforce_eager=true",  # no torch.compile: each of the three launches starts sooner
]


def sets(*pairs: str) -> list[str]:
    return [arg for p in pairs for arg in ("--set", p)]


def complete(run_dir: Path) -> list[Path]:
    """COMPLETE checkpoints, oldest first."""
    found = [p for p in (run_dir / "checkpoints").glob("step_*") if (p / "COMPLETE").exists()]
    return sorted(found, key=lambda p: int(p.name[5:]))


def holding(run_dir: Path, after: Path | None) -> bool:
    """The newest checkpoint is newer than `after` and its buffer held groups (so a death now
    checks that they are not lost)."""
    newest = complete(run_dir)
    if not newest or newest[-1] == after:
        return False
    try:
        return bool(held_groups(snapshot(newest[-1])))
    except (OSError, ValueError):  # being written
        return False


def actor_pid(launcher_pid: int, cls: str) -> int | None:
    """Pid of an actor of class `cls` among the launcher's descendants (Ray names the process)."""
    import psutil

    for child in psutil.Process(launcher_pid).children(recursive=True):
        try:
            if child.cmdline()[:1] and child.cmdline()[0].startswith(f"ray::{cls}"):
                return child.pid
        except psutil.Error:
            continue
    return None


def descendants(pid: int) -> list[tuple[int, float, str]]:
    """(pid, start time, command line) of every process below `pid` (Ray's workers, hence the
    actors, run in process groups of their own, under the raylet)."""
    import psutil

    out = []
    for child in psutil.Process(pid).children(recursive=True):
        try:
            out.append((child.pid, child.create_time(), " ".join(child.cmdline())[:120]))
        except psutil.Error:
            continue
    return out


def still_running(procs: list[tuple[int, float, str]]) -> list[str]:
    import psutil

    out = []
    for pid, started, cmd in procs:
        try:
            if psutil.Process(pid).create_time() == started:
                out.append(f"{pid} {cmd}")
        except psutil.Error:
            continue
    return out


def group_members(pgid: int) -> list[str]:
    """The processes still in process group `pgid` (a launch and everything it started)."""
    import psutil

    out = []
    for p in psutil.process_iter(["pid", "cmdline"]):
        try:
            if os.getpgid(p.pid) == pgid:
                out.append(f"{p.pid} {' '.join(p.info['cmdline'] or [])[:120]}")
        except (ProcessLookupError, psutil.Error):
            continue
    return out


class Launches:
    """`microcoder launch` processes, each in its own process group, all killed by `close`."""

    def __init__(self, folder: Path):
        self.folder, self.procs = folder, []

    def start(self, name: str, args: list[str]) -> tuple[subprocess.Popen, Path]:
        log_path = self.folder / f"{name}.log"
        with log_path.open("w") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "microcoder", "launch", *args],
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.procs.append(proc)
        return proc, log_path

    def close(self) -> None:
        for proc in self.procs:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()


def stop_by_kill(proc, run_dir: Path, cls: str, facts: dict, key: str, log_path: Path) -> None:
    """kill -9 the `cls` actor of the live run `proc`; wait for the run to stop; note what it did."""
    before = complete(run_dir)
    pid = wait_for(lambda: actor_pid(proc.pid, cls), 60, f"the {cls} process", proc)
    live = group_members(proc.pid)
    below = descendants(proc.pid)
    os.kill(pid, signal.SIGKILL)
    killed_at = time.time()
    rc = proc.wait(timeout=600)
    stop_s = time.time() - killed_at
    deadline = time.monotonic() + 30  # Ray's shutdown may still be reaping its workers
    while time.monotonic() < deadline and (group_members(proc.pid) or still_running(below)):
        time.sleep(1)
    facts[key] = {
        "rc": rc,
        "stop_s": stop_s,
        "killed_at": killed_at,
        "log": log_path.read_text(),
        "events": records(run_dir, "event"),
        "before": before[-1] if before else None,
        "complete": complete(run_dir),
        "live": live,
        "left": group_members(proc.pid),
        "below": below,
        "left_below": still_running(below),
    }


@pytest.fixture(scope="module")
def chaos(tiny_model_dir, tmp_path_factory):
    folder = tmp_path_factory.mktemp("chaos")
    run_dir = folder / "run"
    launches, facts, t0 = Launches(folder), {"run_dir": run_dir}, time.monotonic()
    try:
        proc, log = launches.start(
            "first",
            [
                "configs/tiny-cpu.toml",
                "--run-dir",
                str(run_dir),
                *sets("max_steps=100000", f'model.path="{tiny_model_dir}"', *SETTINGS),
            ],
        )
        wait_for(lambda: len(records(run_dir, "step")) >= 2, 900, "two learner steps", proc)
        wait_for(lambda: holding(run_dir, None), 600, "a checkpoint holding groups", proc)
        stop_by_kill(proc, run_dir, "BufferHost", facts, "buffer", log)

        proc, log = launches.start(
            "resume-1", ["--resume", str(run_dir), *sets("max_steps=100000")]
        )
        resumed_from = facts["buffer"]["complete"][-1]
        wait_for(
            lambda: holding(run_dir, resumed_from),
            900,
            "a checkpoint of the resumed run holding groups",
            proc,
        )
        stop_by_kill(proc, run_dir, "LearnerRank", facts, "learner", log)

        final_step = int(facts["learner"]["complete"][-1].name[5:]) + 2
        proc, log = launches.start(
            "resume-2", ["--resume", str(run_dir), *sets(f"max_steps={final_step}")]
        )
        facts["final"] = {"rc": proc.wait(timeout=900), "log": log.read_text(), "step": final_step}
    finally:
        launches.close()
    facts["wall_s"] = time.monotonic() - t0
    stops = ", ".join(f"{k} {facts[k]['stop_s']:.0f} s" for k in ("buffer", "learner"))
    print(f"\nchaos run: {facts['wall_s']:.0f} s wall; kill -9 to exit: {stops}", file=sys.stderr)
    (folder / "wall_s.txt").write_text(f"{facts['wall_s']:.0f}\n")
    return facts


def snapshot(ckpt: Path) -> dict:
    from microcoder.buffer.wire import unpack

    return unpack((ckpt / "buffer.snapshot").read_bytes())


def held_groups(snap: dict) -> set[int]:
    """Groups the buffer had accepted and not yet handed to the learner (waiting to be scored,
    being scored, or scored)."""
    return {s["group_id"] for s in snap["slots"] if s["group"] is not None}


def consumed_ids(snap: dict) -> set[int]:
    """Groups handed to the learner (the snapshot keeps their ids for filter reports; with
    dynamic filtering off none is ever reported, so it holds all of a short run's)."""
    return set(snap["awaiting_filter"])


def lost_groups(before: Path, after: Path) -> set[int]:
    """Groups held at checkpoint `before` that the checkpoint `after` of the run resumed from it
    has neither handed to the learner nor still holds."""
    later = snapshot(after)
    return (
        held_groups(snapshot(before))
        - consumed_ids(later)
        - {s["group_id"] for s in later["slots"]}
    )


@pytest.mark.parametrize("death", ["buffer", "learner"])
def test_a_death_stops_the_run_non_zero_naming_the_newest_checkpoint(chaos, death):
    seen = chaos[death]
    assert seen["rc"] == 1, seen["log"][-3000:]  # the launcher re-raises the actor's death
    newest = seen["complete"][-1]
    line = f"resume with: microcoder launch --resume {chaos['run_dir']}   (from {newest.name})"
    assert "the run stopped" in seen["log"] and line in seen["log"], seen["log"][-3000:]
    # ... and says so in metrics.jsonl too (what `microcoder compare` reports beside the exit)
    said = [r for r in seen["events"] if r.get("event") == "stopped"]
    assert said and f"the run stopped: {said[-1]['message']}" in seen["log"]


def test_the_dead_buffer_is_named_as_the_cause(chaos):
    """Whatever the launcher's main thread was waiting on when the buffer died (the learner's
    batch: BufferDied; its version announce: the rank's error), the stop names the buffer."""
    text = chaos["buffer"]["log"]
    stopped = [ln for ln in text.splitlines() if "] the run stopped: " in ln]
    assert stopped and "the buffer actor died" in stopped[0], text[-3000:]


def test_no_checkpoint_is_marked_complete_without_a_snapshot_from_the_live_buffer(chaos):
    """Every COMPLETE checkpoint has its buffer snapshot, and none was written after the buffer
    was killed (a checkpoint from a state without the buffer)."""
    seen = chaos["buffer"]
    for ckpt in seen["complete"]:
        snap = ckpt / "buffer.snapshot"
        assert snap.exists(), ckpt
        assert snap.stat().st_mtime <= seen["killed_at"], f"{snap} written after the buffer died"


@pytest.mark.parametrize("death", ["buffer", "learner"])
def test_a_stopped_run_leaves_no_process_behind(chaos, death):
    """Its process group (the launcher, Ray's GCS and raylet) and every process below the
    launcher while it ran (the actors' workers too, in groups of their own): none is left."""
    live, below = chaos[death]["live"], [cmd for _, _, cmd in chaos[death]["below"]]
    assert any("raylet" in p for p in live), live
    for actor in ("ray::BufferHost", "ray::LearnerRank", "ray::Generator", "ray::Executor"):
        assert any(cmd.startswith(actor) for cmd in below), (actor, below)
    assert chaos[death]["left"] == [] and chaos[death]["left_below"] == []


def test_the_last_resume_runs_to_its_final_step(chaos):
    final = chaos["final"]
    assert final["rc"] == 0, final["log"][-3000:]
    steps = records(chaos["run_dir"], "step")
    assert steps[-1]["policy_version"] == final["step"]
    assert complete(chaos["run_dir"])[-1].name == f"step_{final['step']}"


def test_the_accounting_invariant_holds_on_the_final_buffer_state(chaos):
    from microcoder.buffer.accounting import STAGES, Counters, invariant_violations

    assert records(chaos["run_dir"], "step")[-1]["buffer"]["invariant_ok"]
    snap = snapshot(complete(chaos["run_dir"])[-1])
    depths = {stage: sum(s["stage"] == stage for s in snap["slots"]) for stage in STAGES}
    assert invariant_violations(Counters.from_dict(snap["counters"]), depths) == []


def test_every_checkpoint_counts_exactly_the_groups_its_learner_trained_on(chaos):
    """Dynamic filtering off: each policy version consumed exactly one batch, so a checkpoint at
    step N whose buffer counts N * batch groups consumed has neither lost the counts of a restore
    nor counted groups a dead run took past its checkpoint."""
    for ckpt in complete(chaos["run_dir"]):
        step = int(ckpt.name[5:])
        assert snapshot(ckpt)["counters"]["consumed"] == step * BATCH, ckpt


@pytest.mark.parametrize("death", ["buffer", "learner"])
def test_no_group_accepted_before_the_last_checkpoint_is_lost(chaos, death):
    """Every group the buffer held at the checkpoint a resume started from is, at the resumed
    run's next checkpoint, trained on or still in the buffer."""
    before = chaos[death]["complete"][-1]
    after = {"buffer": chaos["learner"]["complete"][-1], "learner": complete(chaos["run_dir"])[-1]}
    after = after[death]
    assert int(after.name[5:]) > int(before.name[5:])
    assert held_groups(snapshot(before)), "nothing was held at the checkpoint: nothing checked"
    assert lost_groups(before, after) == set()
