"""The held-out eval beside training (launch/run/eval_beside.py): the training loop keeps stepping
while a slow stand-in eval runs, the eval record names the policy version the generators held,
the last eval is awaited with a deadline, and a failed eval stops the run. The generator's hold
(`Generator.hold_weights`) is tested on the product's Generator with a stand-in update. No Ray:
`hold_pool` / `release_pool` and `evaluation.evaluate` are replaced by stand-ins here."""

from __future__ import annotations

import os
import threading
import time
from types import SimpleNamespace

import pytest

from microcoder.launch.config import load_config
from microcoder.launch.monitor.metrics_log import MetricsLogger
from microcoder.launch.run import eval_beside, training_loop
from microcoder.launch.run import heldout_eval as evaluation
from microcoder.launch.run.step_result import StepResult
from microcoder.launch.run.training_loop import _train_steps

DEADLINE_S = 30.0


class StandInLearners:
    """Steps at once (a little sleep), counting; `version` as LearnerGroup has it."""

    def __init__(self):
        self.version = 0
        self.step_times: list[float] = []

    def step(self, timeout_s=None, on_wait=None, notice_s=None):
        time.sleep(0.01)
        self.version += 1
        self.step_times.append(time.monotonic())
        m = {"version": self.version, "diversity": 0.5, "wait_s": 0.0, "compute_s": 0.01}
        return StepResult.of({**m, "sync_s": 0.0})

    def memory(self, timeout_s=None):
        return []


class StandInPool:
    def __init__(self, replicas=None):
        self.replicas = replicas or {"executor-0": SimpleNamespace(handle="executor handle")}

    def stats(self):
        return []

    def call_all(self, *args):
        pass

    def memory(self, timeout_s=None):
        return []


def stand_in_run(tmp_path, *sets: str):
    cfg = load_config(None, ["max_steps=6", "eval.every=2", *sets])
    lines: list[str] = []
    controller = SimpleNamespace(
        temperature=1.0, start_step=lambda step: None, observe=lambda step, d: None
    )
    return SimpleNamespace(
        cfg=cfg,
        controller=controller,
        learners=StandInLearners(),
        metrics=MetricsLogger(tmp_path),
        log=lines.append,
        logs=lines,
        raise_if_stopped=lambda: None,
        saves=SimpleNamespace(poll=lambda: None),  # no checkpoint written in the background
        generators=StandInPool(),
        executors=StandInPool(),
        client=SimpleNamespace(stats=lambda: {}),
        run_dir=tmp_path,
    )


@pytest.fixture
def held(monkeypatch):
    """hold_pool / release_pool stand-ins: the learner's version, one generator."""
    calls: list = []

    def hold(run):
        calls.append(("hold", run.learners.version))
        return run.learners.version, {"generator-0": "handle"}

    monkeypatch.setattr(eval_beside, "hold_pool", hold)
    monkeypatch.setattr(eval_beside, "release_pool", lambda run, g: calls.append(("release",)))
    return calls


def patch_evaluate(monkeypatch, fn) -> None:
    """Put `fn` in place of heldout_eval.evaluate wherever a module bound it at its head."""
    for module in (evaluation, training_loop, eval_beside):
        if hasattr(module, "evaluate"):
            monkeypatch.setattr(module, "evaluate", fn)


def slow_eval(monkeypatch, seconds: float, evals: list):
    """evaluation.evaluate as a stand-in that takes `seconds` and logs an eval record."""

    def evaluate(run, step, generators=None, held_version=None):
        t0 = time.monotonic()
        time.sleep(seconds)
        evals.append((step, held_version, t0, time.monotonic()))
        return run.metrics.log("eval", step=step, policy_version=held_version)

    patch_evaluate(monkeypatch, evaluate)


@pytest.mark.timeout(60)
def test_the_learner_steps_while_an_eval_runs_and_the_record_names_its_version(
    tmp_path, monkeypatch, held
):
    run, evals = stand_in_run(tmp_path), []
    slow_eval(monkeypatch, 0.5, evals)
    summary = _train_steps(run, None)
    assert summary.steps == 6
    assert [(s, v) for s, v, _, _ in evals] == [(0, 0), (2, 2), (4, 4), (6, 6)]
    # each eval (but the last, after step 6) overlapped learner steps: they did not wait for it
    for step, _, t0, t1 in evals[:-1]:
        during = [t for t in run.learners.step_times if t0 < t < t1]
        assert during, f"no learner step during the eval at step {step}"
    records = [r for r in run.metrics.history if r["kind"] == "eval"]
    assert [(r["step"], r["policy_version"]) for r in records] == [(0, 0), (2, 2), (4, 4), (6, 6)]
    assert held.count(("release",)) == 4
    assert any("waiting for the eval at step" in line for line in run.logs)


@pytest.mark.timeout(60)
def test_in_the_foreground_the_learner_waits_for_each_eval(tmp_path, monkeypatch, held):
    run, evals = stand_in_run(tmp_path, "eval.beside_training=false"), []
    slow_eval(monkeypatch, 0.2, evals)
    _train_steps(run, None)
    assert len(evals) == 4
    for _, version, t0, t1 in evals:
        assert version is None and not [t for t in run.learners.step_times if t0 < t < t1]
    assert held == []


@pytest.mark.timeout(60)
def test_the_run_end_waits_for_the_last_eval_at_most_eval_wait_s(tmp_path, monkeypatch, held):
    run, done = stand_in_run(tmp_path, "max_steps=1", "eval.every=5", "eval.wait_s=0.5"), []
    gate = threading.Event()

    def never_ends(run, step, generators=None, held_version=None):
        if step == 1:
            gate.wait(DEADLINE_S)
        done.append(step)

    patch_evaluate(monkeypatch, never_ends)
    t0 = time.monotonic()
    assert _train_steps(run, None).steps == 1
    assert time.monotonic() - t0 < DEADLINE_S / 2
    assert any("did not finish within eval.wait_s = 0.5" in line for line in run.logs)
    gate.set()
    deadline = time.monotonic() + DEADLINE_S  # its thread releases while the stand-ins are in place
    while held.count(("release",)) < 2 and time.monotonic() < deadline:  # steps 0 and 1
        time.sleep(0.01)
    assert held.count(("release",)) == 2 and done == [0, 1]


@pytest.mark.timeout(60)
def test_a_failed_eval_stops_the_run_at_the_next_step(tmp_path, monkeypatch, held):
    """...and only once its generators are released: the run does not end (and shut its
    actors down) while the eval's thread still releases them."""
    run = stand_in_run(tmp_path, "max_steps=50")

    def fails(run, step, generators=None, held_version=None):
        raise RuntimeError("executor-0 died")

    def slow_release(run, generators):
        time.sleep(0.5)
        held.append(("release",))

    patch_evaluate(monkeypatch, fails)
    monkeypatch.setattr(eval_beside, "release_pool", slow_release)
    with pytest.raises(RuntimeError, match="executor-0 died"):
        _train_steps(run, None)
    assert run.learners.version < 50 and ("release",) in held


@pytest.mark.timeout(60)
@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_on_cpu_the_eval_runs_nicer_than_the_learner_and_is_set_back(
    tmp_path, monkeypatch, held, device
):
    """eval.nice: during each eval the held generators and the executors are lowered (and set
    back after it), and the driver's eval thread runs eval.nice nicer under SCHED_IDLE
    (eval.sched_idle); on GPU nothing changes."""
    run = stand_in_run(tmp_path, f"cluster.device={device}", "eval.nice=3", "eval.sched_idle=true")
    calls, seen = [], []
    learner_nice = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())

    def call_each(run, actors, method, *args):
        calls.append((method, sorted(actors), *args))
        return {name: "" for name in actors}

    def evaluate(run, step, generators=None, held_version=None):
        tid = threading.get_native_id()
        seen.append((os.getpriority(os.PRIO_PROCESS, tid), os.sched_getscheduler(tid)))
        calls.append(("eval", step))

    monkeypatch.setattr(eval_beside, "_call_each", call_each)
    patch_evaluate(monkeypatch, evaluate)
    _train_steps(run, None)
    lowered = ("lower_priority", ["executor-0", "generator-0"], 3, True)
    restored = ("restore_priority", ["executor-0", "generator-0"])
    if device == "cpu":
        assert calls == [c for step in (0, 2, 4, 6) for c in (lowered, ("eval", step), restored)]
        assert seen == [(min(19, learner_nice + 3), os.SCHED_IDLE)] * 4
    else:
        assert calls == [("eval", step) for step in (0, 2, 4, 6)]
        assert seen == [(learner_nice, os.SCHED_OTHER)] * 4
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == learner_nice


@pytest.mark.timeout(60)
def test_by_default_nothing_is_lowered_on_cpu(tmp_path, monkeypatch, held):
    """eval.nice = 0 and eval.sched_idle = false by default (measured worse on the shared box)."""
    run, calls = stand_in_run(tmp_path, "cluster.device=cpu", "max_steps=2"), []
    monkeypatch.setattr(eval_beside, "_call_each", lambda *a: calls.append(a) or {})
    patch_evaluate(monkeypatch, lambda run, step, **kw: None)
    _train_steps(run, None)
    assert calls == []


def stand_in_generator(newest: list[int]):
    """The product's Generator with a stand-in weight update that takes version newest[0]."""
    from microcoder.actors.generator import Generator
    from microcoder.actors.weights.channel_source import ChannelSource
    from microcoder.actors.weights.follower import WeightFollower

    gen = Generator.__new__(Generator)
    gen.version, gen.learner0, gen.name = 0, "rank-0", "generator-0"
    gen.settings = SimpleNamespace(generator=SimpleNamespace(weight_poll_s=0.0))
    gen.weights = WeightFollower(gen, "rank-0", source=ChannelSource("gen-0", None, None))
    gen.updates = 0

    def update_locked(block: bool = True) -> bool:
        gen.updates += 1
        changed = gen.version != newest[0]
        gen.version = newest[0]
        return changed

    gen.weights._update_locked = update_locked
    return gen


def test_a_held_generator_takes_no_newer_weights_until_released():
    newest = [3]
    gen = stand_in_generator(newest)
    assert gen.hold_weights() == 3 and gen.updates == 1
    newest[0] = 5  # the learner steps on
    assert not gen.maybe_update(throttled=False) and not gen.maybe_sync_weights()
    assert gen.version == 3 and gen.updates == 1
    gen.release_weights()
    assert gen.maybe_update(throttled=False) and gen.version == 5


@pytest.mark.timeout(60)
def test_keep_best_keeps_a_checkpoint_whose_eval_lands_steps_later(tmp_path, monkeypatch, held):
    """learner.keep_best with a checkpoint every step: the eval at step 2 (the best score) runs
    while steps 3 and 4 are checkpointed with keep_checkpoints = 1; its checkpoint must still be
    there when its record lands. The stand-in checkpoint writes the folder and runs the run's
    own retention (launch/run/checkpoint_retention.py `retain`, as Run.checkpoint does)."""
    from microcoder.launch.run.checkpoint_retention import retain

    sets = ("learner.checkpoint_every=1", "learner.keep_checkpoints=1", "learner.keep_best=true")
    run, scores = stand_in_run(tmp_path, *sets), {0: 0.1, 2: 0.9, 4: 0.2, 6: 0.3}
    ckpts = tmp_path / "checkpoints"

    def checkpoint(pending=()):
        path = ckpts / f"step_{run.learners.version}"
        path.mkdir(parents=True)
        (path / "COMPLETE").write_text(str(run.learners.version))
        retain(ckpts, 1, True, run.metrics.path, pending, run.log)
        return path

    def evaluate(run, step, generators=None, held_version=None):
        time.sleep(1.0)  # the learner checkpoints the next steps meanwhile
        return run.metrics.log("eval", step=step, heldout_pass_rate=scores[step])

    run.checkpoint = checkpoint
    patch_evaluate(monkeypatch, evaluate)
    _train_steps(run, None)
    left = sorted(int(p.name[5:]) for p in ckpts.glob("step_*"))
    assert 2 in left  # the best evaluated checkpoint (0.9), kept while its eval ran
    assert 6 in left and not {1, 3, 5} & set(left)
    assert "deleted step_3 (learner.keep_checkpoints = 1)" in run.logs


class StandInGenerator:
    """A generator handle whose `hold_weights` / `release_weights` answer at once (the stand-in
    `get_within` below returns the "ref"), logging each call with the learner's version."""

    def __init__(self, name: str, run, calls: list):
        def call(method: str):
            def remote(*args):
                calls.append((name, method, run.learners.version))
                return run.learners.version if method == "hold_weights" else None

            return SimpleNamespace(remote=remote)

        self.hold_weights = call("hold_weights")
        self.release_weights = call("release_weights")


def generator_pool(run, calls: list, *names: str) -> StandInPool:
    return StandInPool({n: SimpleNamespace(handle=StandInGenerator(n, run, calls)) for n in names})


@pytest.mark.timeout(60)
def test_with_generators_set_aside_no_training_generator_is_ever_held(tmp_path, monkeypatch):
    """eval.generators = 1: at every eval point only the set-aside generator holds the learner's
    version; the training generators are never asked to hold (the real `hold_pool` and
    `release_pool`, with stand-in handles), and each eval record names the version held and
    the generator that sampled it."""
    run, calls, evals, during = stand_in_run(tmp_path, "eval.generators=1"), [], [], []
    run.generators = generator_pool(run, calls, "generator-0", "generator-1")
    run.eval_generators = generator_pool(run, calls, "eval-generator-0")
    monkeypatch.setattr(eval_beside, "get_within", lambda ref, *a, **kw: ref)

    def evaluate(run, step, generators=None, held_version=None):
        during.append({k: run.eval_activity[k] for k in ("state", "step", "version", "replicas")})
        time.sleep(0.2)  # the learner steps meanwhile
        evals.append((step, held_version, sorted(generators)))
        return run.metrics.log(
            "eval", step=step, policy_version=held_version, eval_generators=sorted(generators)
        )

    patch_evaluate(monkeypatch, evaluate)
    _train_steps(run, None)
    assert [name for name, _, _ in calls] == ["eval-generator-0"] * len(calls)
    holds = [v for _, method, v in calls if method == "hold_weights"]
    assert holds == [0, 2, 4, 6]
    assert evals == [(s, s, ["eval-generator-0"]) for s in (0, 2, 4, 6)]
    records = [r for r in run.metrics.history if r["kind"] == "eval"]
    assert [r["policy_version"] for r in records] == [0, 2, 4, 6]
    # what status and the dashboard show of the eval's pool (launch/monitor/status_view.py)
    assert during == [
        {"state": "evaluating", "step": s, "version": s, "replicas": ["eval-generator-0"]}
        for s in (0, 2, 4, 6)
    ]
    assert (run.eval_activity["state"], run.eval_activity["version"]) == ("idle", 6)


@pytest.mark.timeout(60)
def test_by_default_the_eval_holds_the_training_generators(tmp_path, monkeypatch):
    """eval.generators = 0: the real `hold_pool` holds the training generators (today's mode)."""
    run, calls = stand_in_run(tmp_path, "max_steps=2"), []
    run.generators = generator_pool(run, calls, "generator-0")
    monkeypatch.setattr(eval_beside, "get_within", lambda ref, *a, **kw: ref)
    patch_evaluate(monkeypatch, lambda run, step, **kw: None)
    _train_steps(run, None)
    assert ("generator-0", "hold_weights", 0) in calls


def test_set_aside_generators_need_the_eval_beside_training():
    from microcoder.config import ConfigError

    with pytest.raises((ConfigError, ValueError), match="eval.beside_training = true"):
        load_config(None, ["eval.generators=1", "eval.beside_training=false"])


def test_the_plans_count_the_set_aside_generators():
    """Placement has an eval-gen pool of eval.generators engines; the memory plan names them;
    their settings take weights over channels even when the run uses the relay, with a seed
    of their own."""
    from microcoder.launch.run.actor_settings import eval_generator_settings, generator_settings
    from microcoder.launch.run.memory_check import memory_report
    from microcoder.launch.run.placement import make_plan

    cfg = load_config(
        None, ["eval.generators=2", "learner.weight_transport=relay", "generator.num_engines=3"]
    )
    plan = make_plan(cfg, "cpu", 64, 0)
    pools = {p.name: p for p in plan.pools}
    assert pools["eval-gen"].replicas == 2
    assert plan.cpus == sum(p.cpus for p in plan.pools) and "eval-gen" in plan.format()
    assert any("eval.generators = 2" in line for line in memory_report(cfg, "cpu").lines)
    settings = eval_generator_settings(cfg, 0)
    assert settings.learner.weight_transport == "channels"
    assert cfg.learner.weight_transport == "relay"  # the run's own config is left as it was
    assert settings.seed not in {generator_settings(cfg, i).seed for i in range(3)}
    plain = load_config(None, [])
    assert "eval-gen" not in {p.name for p in make_plan(plain, "cpu", 64, 0).pools}
