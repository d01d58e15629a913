"""The non-finite guard (issue 32): a step whose gradient norm is NaN/Inf leaves the weights and
the AdamW state bit-equal and the next good step trains; learner.max_skipped_steps in a row stop
the training loop with why; weights holding NaN are neither published nor saved.

One in-process rank (a gloo world of 1); the NaN enters through a NaN reward of the batch (its
group's advantages are then NaN). A NaN behaviour log-prob no longer reaches the loss: the
intake's guard drops its response (tests/learner/test_off_policy_guard.py)."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch
from learner_groups import mixed_groups

from microcoder.launch.config import load_config
from microcoder.launch.monitor.metrics_log import MetricsLogger
from microcoder.launch.run.step_result import StepResult
from microcoder.launch.run.training_loop import _train_steps
from microcoder.learner.algorithm.temperature import TemperatureController
from microcoder.learner.config import AlgorithmConfig, LearnerConfig
from microcoder.learner.sample import SampleGroup
from microcoder.learner.trainer import Learner, NonFiniteWeights


def make_learner(model) -> Learner:
    return Learner(
        model,
        LearnerConfig(lr=1e-3, micro_batch_tokens=512, max_skipped_steps=2),
        AlgorithmConfig(truncation_mask="none"),
        seed=0,
    )


def snapshot(learner: Learner) -> tuple[dict, dict]:
    params = {n: p.to_local().clone() for n, p in learner.model.named_parameters()}
    state = {
        (id(p), k): v.clone() if torch.is_tensor(v) else v
        for p, s in learner.optimizer.state.items()
        for k, v in s.items()
    }
    return params, state


def assert_bit_equal(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for k in a:
        if torch.is_tensor(a[k]):
            assert torch.equal(a[k], b[k]), k
        else:
            assert a[k] == b[k], k


@pytest.fixture(scope="module")
def learner(small_model):
    return make_learner(small_model)


def test_a_nan_gradient_leaves_weights_and_adam_state_bit_equal_and_the_next_step_trains(learner):
    assert learner.train_step(mixed_groups(0))["update_skipped"] == 0.0  # Adam moments exist now
    params, state = snapshot(learner)
    m = learner.train_step(mixed_groups(1, nan=True))
    assert m["update_skipped"] == 1.0 and m["skipped_in_a_row"] == 1.0
    assert not math.isfinite(m["grad_norm"])
    after_params, after_state = snapshot(learner)
    assert_bit_equal(after_params, params)
    assert_bit_equal(after_state, state)
    m = learner.train_step(mixed_groups(2))
    assert m["update_skipped"] == 0.0 and m["skipped_in_a_row"] == 0.0
    moved = snapshot(learner)[0]
    assert any(not torch.equal(moved[n], params[n]) for n in params)
    assert all(torch.isfinite(t).all() for t in moved.values())


def test_weights_holding_nan_are_neither_published_nor_saved(small_model, tmp_path):
    learner = make_learner(small_model)
    with torch.no_grad():
        next(learner.model.parameters()).to_local()[0] = math.nan
    with pytest.raises(NonFiniteWeights, match="policy version 0"):
        learner.save_checkpoint(tmp_path / "ckpt")
    assert not (tmp_path / "ckpt").exists()
    with pytest.raises(NonFiniteWeights, match="not publishing"):
        learner.full_state_dict()


class RealLearnerGroup:
    """The launch's learner group reduced to one in-process Learner fed fixed batches."""

    def __init__(self, learner: Learner, batches: list[list[SampleGroup]]):
        self.learner, self.batches = learner, batches

    @property
    def version(self) -> int:
        return self.learner.version

    def memory(self, timeout_s: float) -> list:
        return []  # the step record's memory section: not what this test checks

    def step(self, **_wait) -> StepResult | None:
        if not self.batches:
            return None
        m = self.learner.train_step(self.batches.pop(0))
        return StepResult.of(
            {**m, "diversity": 0.5, "wait_s": 0.0, "compute_s": 0.0, "sync_s": 0.0}
        )


def test_max_skipped_steps_in_a_row_stop_the_training_loop_with_why(small_model, tmp_path):
    learner = make_learner(small_model)
    batches = [
        mixed_groups(0),
        mixed_groups(1, nan=True),
        mixed_groups(2),
        mixed_groups(3, nan=True),
        mixed_groups(4, nan=True),
    ]
    batches.append(mixed_groups(5))  # never trained: the loop stopped before it
    idle = SimpleNamespace(stats=lambda: [], memory=lambda timeout_s: [])
    lines: list[str] = []
    run = SimpleNamespace(
        cfg=load_config(None, ["max_steps=10", "learner.max_skipped_steps=2"]),
        controller=TemperatureController(1.0, [1.0], 0.5, 0, []),
        learners=RealLearnerGroup(learner, batches),
        metrics=MetricsLogger(tmp_path),
        log=lines.append,
        raise_if_stopped=lambda: None,
        saves=SimpleNamespace(poll=lambda: None),  # no checkpoint written in the background
        generators=idle,
        executors=idle,
        client=SimpleNamespace(stats=lambda: {}),
    )
    summary = _train_steps(run, None)
    assert "2 updates in a row skipped" in summary.stopped
    assert "learner.max_skipped_steps = 2" in summary.stopped
    assert summary.steps == 5 and len(batches) == 1  # the one skip at step 2 did not stop it
    steps = [r for r in run.metrics.history if r["kind"] == "step"]
    assert [r["update_skipped"] for r in steps] == [0.0, 1.0, 0.0, 1.0, 1.0]
    assert any("step 4: the gradient norm was not finite" in line for line in lines)
    # what the launch's final checkpoint then saves: the weights of the good steps alone
    control = make_learner(small_model)
    control.train_step(mixed_groups(0))
    control.train_step(mixed_groups(2))
    assert_bit_equal(snapshot(learner)[0], snapshot(control)[0])
    learner.save_checkpoint(tmp_path / "ckpt")  # finite: saving is not refused
