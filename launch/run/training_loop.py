"""The driver's training loop: one learner step per iteration, temperature control, metrics,
progress, periodic evaluation and checkpoints. Actors do the work; this only coordinates.

It runs in the launcher's main thread and may block waiting for a batch; keeping the pools
alive and applying `microcoder scale` requests is the supervisor's thread (launch/run/supervisor.py),
which `train` starts beside it. The actor handles it drives are the `Run` of launch/run/cluster.py.
"""

from __future__ import annotations

import json
import time
from typing import Any

from microcoder.launch.run.cluster import Run
from microcoder.rates import Rates

WAIT_NOTICE_S = 30.0
"""While the learner waits for a batch, the launcher says what the buffer and pools do this often."""
WAIT_LOOK_S = 1.0
"""While the learner waits for a batch, the loop looks this often whether the run must stop (the
supervisor found the buffer dead: `Run.raise_if_stopped`)."""


def build_controller(run: Run, generator=None):
    """Temperature controller from the config's ladder, target, window (resolved against
    max_steps), step-up budget and schedule, at: the
    temperature saved in the checkpoint being resumed (with the monitor's count; no calibration),
    else the one calibrated on `generator` (default: the first running one) when
    algorithm.temperature.calibrate, else algorithm.temperature.initial. Logs an "event" record:
    event="calibration" (table, chosen, target, reached_target, calibration_s) or
    event="temperature" with cause="resume"."""
    from microcoder.learner.algorithm.temperature import controller_for

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
    from microcoder.actors.deadline import get_within
    from microcoder.launch.run.pools import with_log
    from microcoder.learner.algorithm.temperature import calibrate

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


def pool_fields(run: Run, rates: Rates) -> dict[str, Any]:
    gens, execs = run.generators.stats(), run.executors.stats()
    buf = run.client.stats()
    tokens = sum(g.get("tokens", 0) for g in gens)
    tests = sum(e.get("tests", 0) for e in execs)
    idle = lambda xs: sum(x.get("idle_frac", 0.0) for x in xs) / max(len(xs), 1)  # noqa: E731
    return {
        "generators": len(gens),
        "executors": len(execs),
        "gen_tokens_per_s": rates.rate("gen_tokens", tokens),
        "tests_per_s": rates.rate("tests", tests),
        "generator_idle_frac": idle(gens),
        "executor_idle_frac": idle(execs),
        "reward_errors": sum(e.get("reward_errors", 0) for e in execs),
        "buffer": buf,
        "replicas": [
            {k: x.get(k) for k in ("name", "pid", "restarts", "version", "error", "temperature")}
            for x in gens + execs
        ],
    }


def train(run: Run, progress=None) -> dict[str, Any]:
    """Run learner steps until max_steps (or the data runs out); returns a summary."""

    from microcoder.launch.run.supervisor import Supervisor

    # Built when the first generator started (Run.prepare_generator), else here.
    run.controller = run.controller or build_controller(run)
    run.generators.call_all("set_temperature", run.controller.temperature)
    supervisor = Supervisor(run).start()
    try:
        return _train_steps(run, progress)
    finally:
        supervisor.stop()


def _train_steps(run: Run, progress) -> dict[str, Any]:
    """`train`'s loop: a learner step a turn until max_steps, the data's end or a stop (the
    all-filtered patience, a non-finite update); each step logged, checkpointed and evaluated
    on its schedule."""
    cfg, controller = run.cfg, run.controller
    rates, step, t_start = Rates(), run.learners.version, time.time()
    sums = {"wait_s": 0.0, "compute_s": 0.0, "sync_s": 0.0}
    last_ckpt, skipped, last_eval, stopped = None, [], None, ""
    evals = Evaluations(run)
    if cfg.eval.every:
        last_eval = step
        evals.at(step)
    on_wait = waiter(run)
    while step < cfg.max_steps:
        # 1. Before the step: a stop, a failed eval, the temperature schedule's stage.
        run.raise_if_stopped()
        evals.raise_if_failed()
        change = controller.start_step(step)
        if change is not None:
            apply_change(run, change)
        temperature = controller.temperature
        t0 = time.time()
        # 2. The step (fetch, train, publish: launch/run/learner_group.py); None: no more data.
        m = run.learners.step(
            timeout_s=cfg.learner.batch_wait_s or None,
            on_wait=on_wait,
            notice_s=WAIT_LOOK_S,
        )
        run.raise_if_stopped()
        if m is None:
            run.log("the prompt source is exhausted: stopping (raise data.epochs or set it to 0)")
            break
        # 3. No learning signal (every group filtered): skipped, until the patience runs out.
        if m.get("skipped"):
            skipped.append(m)
            run.log(
                f"no learning signal: all {int(m['filtered_groups'])} groups fetched had equal "
                f"rewards (mean reward {m['reward_mean']:.3f}); step skipped "
                f"({len(skipped)}/{cfg.algorithm.all_filtered_patience})"
            )
            if len(skipped) >= cfg.algorithm.all_filtered_patience:
                stopped = all_filtered(run, skipped)
                skipped = []
                if stopped:
                    break
            continue
        skipped = []
        # 4. A trained step: its record (launch/monitor), then what its number makes due.
        step = _log_step(run, m, temperature, t0, sums, rates, progress)
        if m.get("update_skipped"):
            stopped = nonfinite_skipped(run, step, m)
            if stopped:
                break
        if cfg.learner.checkpoint_every and step % cfg.learner.checkpoint_every == 0:
            last_ckpt = run.checkpoint(pending=evals.pending())
        if cfg.eval.every and step % cfg.eval.every == 0:
            last_eval = step
            evals.at(step)
    if cfg.eval.every and last_eval != step:
        evals.at(step)
    evals.finish()
    return {
        "steps": step,
        "wall_s": time.time() - t_start,
        **sums,
        "last_checkpoint": last_ckpt,
        "stopped": stopped,
    }


def _log_step(run: Run, m: dict, temperature: float, t0: float, sums, rates, progress) -> int:
    """A trained step's bookkeeping: the temperature monitor, the run's `sums`, rank 0's rollouts
    rows, the "step" record (its `step_s` since `t0`, given to `progress`); returns the step's
    version."""
    from microcoder.actors.rollouts import write_rollouts

    step = int(m["version"])
    change = run.controller.observe(step, m["diversity"])
    if change is not None:
        apply_change(run, change)
    for k in sums:
        sums[k] += m[k]
    if "rollouts" in m:  # monitor.rollouts_every: rank 0's rows of this step
        write_rollouts(run.run_dir, step, m.pop("rollouts"))
    record = run.metrics.log(
        "step",
        step=step,
        policy_version=step,
        temperature=temperature,
        step_s=time.time() - t0,
        **m,
        **pool_fields(run, rates),
    )
    if progress is not None:
        progress(record)
    return step


class Evaluations:
    """The loop's held-out evals: `at(step)` starts one (beside training, launch/run/eval_beside.py,
    or in the foreground with eval.beside_training = false); `finish()` awaits the last."""

    def __init__(self, run: Run):
        from microcoder.launch.run.eval_beside import EvalBeside

        self.run = run
        self.beside = EvalBeside(run, run.cfg.eval.wait_s) if run.cfg.eval.beside_training else None

    def at(self, step: int) -> None:
        if self.beside is not None:
            self.beside.start(step)
            return
        from microcoder.launch.run.heldout_eval import evaluate

        evaluate(self.run, step)

    def pending(self) -> set[int]:
        """The step of the eval still running beside training ({} when none): its record, and
        so its checkpoint's score for learner.keep_best, is not in yet."""
        if self.beside is not None and self.beside.busy() and self.beside.step is not None:
            return {self.beside.step}
        return set()

    def raise_if_failed(self) -> None:
        if self.beside is not None:
            self.beside.raise_if_failed()

    def finish(self) -> None:
        if self.beside is not None:
            self.beside.wait()


def nonfinite_skipped(run: Run, step: int, m: dict[str, Any]) -> str:
    """The learner's non-finite guard skipped this step's update: say so; after
    learner.max_skipped_steps in a row, return why the run stops ("" to go on). The weights are
    those of the last good step, so the checkpoint the launch then writes is finite."""
    limit, in_a_row = run.cfg.learner.max_skipped_steps, int(m.get("skipped_in_a_row", 0))
    run.log(
        f"step {step}: the gradient norm was not finite (NaN/Inf); the update was skipped, "
        f"weights and optimizer state unchanged ({in_a_row} in a row, "
        f"learner.max_skipped_steps = {limit}); each learner rank's log names the step"
    )
    if in_a_row < limit:
        return ""
    return (
        f"non-finite gradients: {in_a_row} updates in a row skipped (learner.max_skipped_steps "
        f"= {limit}); the checkpoint holds the last good weights. Look for NaN/Inf in the "
        "inputs (behaviour log-probs, rewards), lower learner.lr, or use learner.dtype = "
        "float32, then resume with microcoder launch --resume RUN_DIR"
    )


def all_filtered(run: Run, skipped: list[dict[str, Any]]) -> str:
    """Dynamic filtering rejected every group for `all_filtered_patience` steps: say so with the
    measured pass rate, then stop (returns why) or train unfiltered (returns "")."""
    algo = run.cfg.algorithm
    groups = sum(m["filtered_groups"] for m in skipped)
    rate = sum(m["reward_mean"] * m["filtered_groups"] for m in skipped) / max(groups, 1)
    verdict = (
        "every response failed: the data is too hard for the model"
        if rate <= 0.5
        else "every response passed: the data is too easy for the model"
    )
    msg = (
        f"all filtered: for {len(skipped)} steps in a row every one of {int(groups)} groups had "
        f"equal rewards; measured pass rate {rate:.3f} ({verdict})"
    )
    run.metrics.log(
        "event", event="all_filtered", message=msg, pass_rate=rate, step=run.learners.version
    )
    if algo.all_filtered_action == "train-unfiltered":
        run.log(msg + "; training on unfiltered groups from now on (algorithm.all_filtered_action)")
        run.learners.set_dynamic_filtering(False)
        return ""
    run.log(
        msg + ". Stopping. Warm-start the model (microcoder tiny-model --warmstart), choose "
        "problems nearer its level (microcoder eval measures it), or set "
        'algorithm.all_filtered_action = "train-unfiltered" / algorithm.dynamic_filtering = false'
    )
    return msg


def waiter(run: Run):
    """The learner's `on_wait`: called every WAIT_LOOK_S while it waits for a batch, it raises
    BufferDied as soon as the run must stop, and logs `waiting_notice` every WAIT_NOTICE_S."""
    last = {"notice": 0.0}

    def on_wait(waited_s: float) -> None:
        run.raise_if_stopped()
        if waited_s < last["notice"]:  # a new step's wait
            last["notice"] = 0.0
        if waited_s - last["notice"] >= WAIT_NOTICE_S:
            last["notice"] = waited_s
            run.log(waiting_notice(run, waited_s))

    return on_wait


def waiting_notice(run: Run, waited_s: float) -> str:
    """One line on what the pipeline is doing while the learner waits for a batch."""
    try:
        b = run.client.stats()
    except Exception as err:  # the buffer itself may be the problem
        return f"waiting for a batch for {waited_s:.0f} s; the buffer does not answer ({err})"
    d = b.get("depths", {})
    gens = run.generators.stats()
    failed = sum(g.get("failed_prompts", 0) for g in gens)
    return (
        f"waiting for a batch for {waited_s:.0f} s: buffer leased {d.get('leased', 0)}, "
        f"unscored {d.get('unscored', 0)}, scoring {d.get('scoring', 0)}, scored "
        f"{d.get('scored', 0)} (batch {b.get('batch_size')}); admission capacity "
        f"{b.get('admission_capacity')}; {len(gens)} generator(s), {failed} prompts failed, "
        f"{b.get('quarantined', 0)} quarantined, {b.get('retired', 0)} retired; prompts done: "
        f"{b.get('prompts_done')}"
    )
