"""The run's temperature controller on the driver: built from `[algorithm.temperature]`
(`build_controller`, at the first generator's start: launch/run/cluster.py `Run.prepare_generator`,
else when training starts), calibrated on a generator (`calibrate_on`), and its changes applied
to every generator (`apply_change`, from the training loop: launch/run/training_loop.py).
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING

from microcoder.actors.deadline import get_within
from microcoder.launch.run.pools import with_log
from microcoder.learner.algorithm.temperature import calibrate, controller_for

if TYPE_CHECKING:  # cluster.py imports this module lazily: it must not import cluster.py back
    from microcoder.launch.run.cluster import Run


def build_controller(run: Run, generator=None):
    """Temperature controller from the config's ladder, target, window (resolved against
    max_steps), step-up budget and schedule, at: the
    temperature saved in the checkpoint being resumed (with the monitor's count; no calibration),
    else the one calibrated on `generator` (default: the first running one) when
    algorithm.temperature.calibrate, else algorithm.temperature.initial. Logs an "event" record:
    event="calibration" (table, chosen, target, reached_target, calibration_s) or
    event="temperature" with cause="resume"."""

    t = run.cfg.algorithm.temperature
    ckpt = run.resume_from
    saved = ckpt / "temperature.json" if ckpt is not None else None
    resuming = saved is not None and saved.exists()
    temperature = t.initial
    if t.calibrate and not resuming:
        temperature = calibrate_on(run, generator)
    c = controller_for(t, temperature, run.cfg.max_steps)
    if not resuming:
        return c
    c = c.resumed(json.loads(saved.read_text()))
    msg = f"temperature {c.temperature:g} resumed from {saved}"
    run.log(msg + " (no calibration)")
    run.metrics.log(
        "event",
        event="temperature",
        cause="resume",
        step=run.learners.version,
        temperature=c.temperature,
        message=msg,
    )
    return c


def calibrate_on(run: Run, generator=None) -> float:
    """Probe the diversity at every candidate on one generator, log the table (and an "event"
    record event="calibration"), return the chosen temperature."""

    t = run.cfg.algorithm.temperature
    probe = [text for _, text in run.problems.head(t.probe_prompts)]
    if generator is None:
        name, replica = next(iter(run.generators.replicas.items()))
        generator = replica.handle
    else:
        name = "the generator being started"
    name = with_log(name)
    deadline = run.cfg.cluster.ready_timeout_s  # part of the run's start, like a vLLM start

    def probe_at(T: float) -> float:
        return get_within(
            generator.probe_diversity.remote(probe, T),
            deadline,
            f"the diversity probe at T={T}",
            name,
            "sampling the probe prompts is slow or the engine is stuck: raise "
            "cluster.ready_timeout_s, or lower algorithm.temperature.probe_prompts",
        )

    t0 = time.perf_counter()
    res = calibrate(t.candidates, t.target_diversity, probe_at)
    seconds = time.perf_counter() - t0
    text = res.format(t.target_diversity)
    g = run.cfg.algorithm.group_size
    run.log(f"{text}\n  ({len(probe)} probe prompts x {g} samples per candidate, {seconds:.1f} s)")
    run.metrics.log(
        "event",
        event="calibration",
        step=run.learners.version,
        table=[list(row) for row in res.table],
        chosen=res.chosen,
        target=t.target_diversity,
        reached_target=res.reached_target,
        probe_prompts=len(probe),
        calibration_s=seconds,
        message=f"calibrated temperature {res.chosen:g}"
        + ("" if res.reached_target else " (no candidate reached the target: the highest)"),
    )
    return res.chosen


def apply_change(run: Run, change) -> None:
    """A schedule stage or a monitor step-up (learner/algorithm/temperature.py TemperatureChange): log it,
    record it as an "event" record event="temperature", and set it on every generator."""
    run.log(change.message)
    run.metrics.log(
        "event",
        event="temperature",
        cause=change.cause,
        step=change.step,
        before=change.before,
        temperature=change.after,
        message=change.message,
    )
    if change.after != change.before:
        run.generators.call_all("set_temperature", change.after)
