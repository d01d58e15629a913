"""The driver's training loop: one learner step per iteration, temperature control, metrics,
progress, periodic evaluation and checkpoints. Actors do the work; this only coordinates.

It runs in the launcher's main thread and may block waiting for a batch; keeping the pools
alive and applying `microcoder scale` requests is the supervisor's thread (launch/run/supervisor.py),
which `train` starts beside it. The actor handles it drives are the `Run` of launch/run/cluster.py.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from microcoder.launch.monitor.memory_view import collect_memory, memory_section
from microcoder.launch.monitor.summary import TrainSummary
from microcoder.launch.run.eval_beside import EvalBeside
from microcoder.launch.run.heldout_eval import evaluate
from microcoder.launch.run.memory_check import learner_memory_lines
from microcoder.launch.run.step_result import TIMINGS, StepResult
from microcoder.launch.run.supervisor import Supervisor
from microcoder.launch.run.temperature_control import apply_change, build_controller
from microcoder.rates import Rates

if TYPE_CHECKING:  # cluster.py imports the modules it uses lazily; none imports it back
    from microcoder.launch.run.cluster import Run

WAIT_NOTICE_S = 30.0
"""While the learner waits for a batch, the launcher says what the buffer and pools do this often."""
WAIT_LOOK_S = 1.0
"""While the learner waits for a batch, the loop looks this often whether the run must stop (the
supervisor found the buffer dead: `Run.raise_if_stopped`)."""


def pool_fields(run: Run, rates: Rates) -> dict[str, Any]:
    gens = run.generators.stats()
    execs = run.executors.stats()
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
        "memory": memory_section(collect_memory(run)),
        "replicas": [
            {k: x.get(k) for k in ("name", "pid", "restarts", "version", "error", "temperature")}
            for x in gens + execs
        ],
    }


def train(run: Run, progress=None) -> TrainSummary:
    """Run learner steps until max_steps (or the data runs out); returns a summary."""

    # Built when the first generator started (Run.prepare_generator), else here.
    run.controller = run.controller or build_controller(run)
    run.generators.call_all("set_temperature", run.controller.temperature)
    supervisor = Supervisor(run).start()
    try:
        return _train_steps(run, progress)
    finally:
        supervisor.stop()


def _train_steps(run: Run, progress) -> TrainSummary:
    """`train`'s loop: a learner step a turn until max_steps, the data's end or a stop (the
    all-filtered patience, a non-finite update); each step logged, checkpointed and evaluated
    on its schedule."""
    cfg = run.cfg
    controller = run.controller
    rates = Rates()
    step = run.learners.version
    t_start = time.time()
    sums = dict.fromkeys(TIMINGS, 0.0)
    last_ckpt = None
    last_eval = None
    stopped = ""
    skipped: list[StepResult] = []
    evals = Evaluations(run)
    if cfg.eval.every:
        last_eval = step
        evals.at(step)
    on_wait = waiter(run)
    first = True  # this launch's first trained step: the learner's memory against the plan
    while step < cfg.max_steps:
        # 1. Before the step: a stop, a failed eval, the temperature schedule's stage.
        run.raise_if_stopped()
        evals.raise_if_failed()
        run.saves.poll()  # a checkpoint written in the background becomes COMPLETE
        change = controller.start_step(step)
        if change is not None:
            apply_change(run, change)
        temperature = controller.temperature
        t0 = time.time()
        # 2. The step (fetch, train, publish: launch/run/learner_group.py); None: no more data.
        res = run.learners.step(
            timeout_s=cfg.learner.batch_wait_s or None,
            on_wait=on_wait,
            notice_s=WAIT_LOOK_S,
        )
        run.raise_if_stopped()
        if res is None:
            run.log("the prompt source is exhausted: stopping (raise data.epochs or set it to 0)")
            break
        # 3. No learning signal (every group filtered): skipped, until the patience runs out.
        if res.skipped:
            skipped.append(res)
            run.log(
                f"no learning signal: all {int(res.filtered_groups)} groups fetched had equal "
                f"rewards (mean reward {res.reward_mean:.3f}); step skipped "
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
        step = _log_step(run, res, temperature, t0, sums, rates, progress, first)
        first = False
        if res.update_skipped:
            stopped = nonfinite_skipped(run, step, res)
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
    return TrainSummary(
        steps=step,
        wall_s=time.time() - t_start,
        **sums,
        last_checkpoint=last_ckpt,
        stopped=stopped,
    )


def _log_step(
    run: Run, res: StepResult, temperature: float, t0: float, sums, rates, progress, first=False
) -> int:
    """A trained step's bookkeeping: the temperature monitor, the run's `sums`, rank 0's rollouts
    rows, the "step" record (its `step_s` since `t0`, given to `progress`) and, on the launch's
    `first` step, the learner's measured memory next to the plan's; returns the step's
    version."""
    from microcoder.actors.rollouts import write_rollouts

    step = res.version
    change = run.controller.observe(step, res.diversity)
    if change is not None:
        apply_change(run, change)
    for k in sums:
        sums[k] += res.timings[k]
    if res.rollouts is not None:  # monitor.rollouts_every: rank 0's rows of this step
        write_rollouts(run.run_dir, step, res.rollouts)
    record = run.metrics.log(
        "step",
        step=step,
        policy_version=step,
        temperature=temperature,
        step_s=time.time() - t0,
        **res.metrics,
        **pool_fields(run, rates),
    )
    if progress is not None:
        progress(record)
    if first:
        ranks = (record.get("memory") or {}).get("learner")
        for line in learner_memory_lines(run.cfg, ranks, step):
            run.log(line)
    return step


class Evaluations:
    """The loop's held-out evals: `at(step)` starts one (beside training, launch/run/eval_beside.py,
    or in the foreground with eval.beside_training = false); `finish()` awaits the last."""

    def __init__(self, run: Run):
        self.run = run
        self.beside = EvalBeside(run, run.cfg.eval.wait_s) if run.cfg.eval.beside_training else None

    def at(self, step: int) -> None:
        if self.beside is not None:
            self.beside.start(step)
            return

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


def nonfinite_skipped(run: Run, step: int, res: StepResult) -> str:
    """The learner's non-finite guard skipped this step's update: say so; after
    learner.max_skipped_steps in a row, return why the run stops ("" to go on). The weights are
    those of the last good step, so the checkpoint the launch then writes is finite."""
    limit = run.cfg.learner.max_skipped_steps
    in_a_row = res.skipped_in_a_row
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


def all_filtered(run: Run, skipped: list[StepResult]) -> str:
    """Dynamic filtering rejected every group for `all_filtered_patience` steps: say so with the
    measured pass rate, then stop (returns why) or train unfiltered (returns "")."""
    algo = run.cfg.algorithm
    groups = sum(r.filtered_groups for r in skipped)
    rate = sum(r.reward_mean * r.filtered_groups for r in skipped) / max(groups, 1)
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
