"""Offload (issue 44, learner.offload): the weights after 3 steps are bit-equal to no offload
with AdamW's moments streamed from host memory ("optimizer") and with FSDP2's CPU offload of the
masters ("params"); the state is where the mode says; the non-finite guard, clipping and exact
resume (into and out of offload) still hold. One in-process rank (a gloo world of 1); the
2-rank runs are in test_offload_ranks.py.

On CPU host and device are the same memory, so placement is proven by what ran: the streamed
step's byte counters (learner/offload.py: `StreamedAdamW.streamed`) and FSDP2's own record of
offloaded parameters (`params_offloaded`)."""

from __future__ import annotations

import copy
import math

import pytest
import torch
from learner_groups import mixed_groups

from microcoder.learner import offload
from microcoder.learner.config import AlgorithmConfig, LearnerConfig
from microcoder.learner.offload import StreamedAdamW, params_offloaded
from microcoder.learner.trainer import Learner

CLIP = 0.05
"""Below every step's gradient norm: clipping acts in each of the 3 steps."""


def make_learner(model, offload_mode: str) -> Learner:
    cfg = LearnerConfig(lr=1e-2, micro_batch_tokens=512, grad_clip=CLIP, offload=offload_mode)
    return Learner(model, cfg, AlgorithmConfig(truncation_mask="none"), seed=0)


def train(learner: Learner, steps) -> list[dict]:
    return [learner.train_step(mixed_groups(s)) for s in steps]


def moments_elements(learner: Learner) -> int:
    """Elements of this rank's parameter shards: each has two fp32 moments."""
    return sum(p.to_local().numel() for p in learner.model.parameters())


def assert_bit_equal(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k


def host_buffers(opt) -> dict:
    """(parameter index, moment name) -> the address of the local tensor the state holds."""
    return {
        (i, k): v.to_local().data_ptr()
        for i, s in enumerate(opt.state.values())
        for k, v in s.items()
        if k != "step"
    }


def assert_offloaded(learner: Learner, mode: str) -> None:
    """The offload `mode` was on: streamed moments in host buffers, or FSDP2's CPU offload."""
    if mode == "optimizer":
        assert learner.optimizer.host_resident() and learner.optimizer.streamed.to_host > 0
    else:
        assert params_offloaded(learner.model)


@pytest.fixture(autouse=True)
def small_buckets(monkeypatch):
    """Buckets of 4 KiB of moments: the tiny model's step streams many of them."""
    monkeypatch.setattr(offload, "BUCKET_BYTES", 4096)


@pytest.fixture(scope="module")
def reference(small_model):
    """No offload: 3 steps' metrics, then the fp32 masters and the published weights."""
    learner = make_learner(small_model, "none")
    metrics = train(learner, range(3))
    return metrics, learner.full_state_dict(masters=True), learner.full_state_dict()


@pytest.mark.parametrize("mode", ["optimizer", "params"])
def test_three_clipped_steps_with_offload_give_bit_equal_weights(mode, small_model, reference):
    ref_metrics, ref_masters, ref_published = reference
    learner = make_learner(small_model, mode)
    metrics = train(learner, range(3))
    assert all(r["grad_norm"] > CLIP for r in ref_metrics)  # the clip acted in every step
    assert [m["grad_norm"] for m in metrics] == [r["grad_norm"] for r in ref_metrics]
    assert_bit_equal(learner.full_state_dict(masters=True), ref_masters)
    assert_bit_equal(learner.full_state_dict(), ref_published)  # publishing, params offloaded
    assert_offloaded(learner, mode)


def test_streamed_moments_live_in_host_buffers_and_cross_to_the_device_each_step(small_model):
    learner = make_learner(small_model, "optimizer")
    opt = learner.optimizer
    assert isinstance(opt, StreamedAdamW)
    train(learner, [0])
    buffers = host_buffers(opt)
    train(learner, [1, 2])
    n = moments_elements(learner)
    # created on the device in step 1 and streamed out; in and out in steps 2 and 3
    assert (opt.streamed.to_device, opt.streamed.to_host) == (2 * 8 * n, 3 * 8 * n)
    assert opt.streamed.buckets > 3 * 8  # several buckets a step, none larger than 4 KiB...
    assert opt.bucket_bytes == 4096
    assert opt.host_resident()
    # ...and between steps the state holds the same host buffers, not the device copies
    assert host_buffers(opt) == buffers


def test_params_offload_keeps_every_shard_on_the_host_and_none_does_not(small_model):
    assert params_offloaded(make_learner(small_model, "params").model)
    assert not params_offloaded(make_learner(small_model, "none").model)


@pytest.mark.parametrize("mode", ["optimizer", "params"])
def test_a_nan_step_with_offload_leaves_weights_and_moments_bit_equal(mode, small_model):
    learner = make_learner(small_model, mode)
    train(learner, [0])

    def snapshot():
        params = {n: p.to_local().clone() for n, p in learner.model.named_parameters()}
        moments = {
            f"{i}.{k}": v.to_local().clone() if hasattr(v, "to_local") else v.clone()
            for i, s in enumerate(learner.optimizer.state.values())
            for k, v in s.items()
        }
        return params, moments

    before = snapshot()
    m = learner.train_step(mixed_groups(1, nan=True))
    assert m["update_skipped"] == 1.0 and not math.isfinite(m["grad_norm"])
    for a, b in zip(snapshot(), before, strict=True):
        assert_bit_equal(a, b)
    assert learner.train_step(mixed_groups(2))["update_skipped"] == 0.0
    assert_offloaded(learner, mode)


@pytest.mark.parametrize(
    ("saved", "resumed"),
    [
        ("optimizer", "optimizer"),
        ("none", "optimizer"),
        ("optimizer", "none"),
        ("params", "params"),
        ("none", "params"),
        ("params", "optimizer"),
    ],
)
def test_resume_across_offload_modes_continues_bit_exactly(
    saved, resumed, small_model, reference, tmp_path
):
    learner = make_learner(small_model, saved)
    train(learner, range(2))
    learner.save_checkpoint(tmp_path / "ckpt")
    del learner
    cfg = LearnerConfig(lr=1e-2, micro_batch_tokens=512, grad_clip=CLIP, offload=resumed)
    algo = AlgorithmConfig(truncation_mask="none")
    learner = Learner.from_checkpoint(tmp_path / "ckpt", cfg, algo, seed=0)
    if resumed == "optimizer":
        learner.optimizer.streamed = offload.Streamed()  # what loading streamed does not count
    metrics = train(learner, [2])
    assert metrics[0]["grad_norm"] == reference[0][2]["grad_norm"]
    assert_bit_equal(learner.full_state_dict(masters=True), reference[1])
    if resumed == "optimizer":  # the loaded moments came in from host buffers
        assert learner.optimizer.host_resident()
        n = moments_elements(learner)
        assert (learner.optimizer.streamed.to_device, learner.optimizer.streamed.to_host) == (
            8 * n,
            8 * n,
        )
    assert params_offloaded(learner.model) == (resumed == "params")


def test_a_streamed_adamw_loads_a_plain_adamw_state_into_host_buffers_and_steps_alike():
    """Plain tensors, no FSDP: a StreamedAdamW given a plain AdamW's state (a checkpoint saved
    without offload) copies every moment into host buffers of its own, and its next step equals
    the plain AdamW's, bit for bit; 64-B buckets: the 15-element tensor is a bucket of its own."""
    torch.manual_seed(0)
    values = [torch.randn(5, 3), torch.randn(7), torch.randn(1)]
    grads = [[torch.randn_like(v) for v in values] for _ in range(2)]
    kwargs = dict(lr=0.1, betas=(0.9, 0.99), weight_decay=0.1, foreach=True)
    plain_params = [v.clone().requires_grad_() for v in values]
    plain = torch.optim.AdamW(plain_params, **kwargs)
    for p, g in zip(plain_params, grads[0], strict=True):
        p.grad = g.clone()
    plain.step()
    params = [p.detach().clone().requires_grad_() for p in plain_params]
    streamed = StreamedAdamW(params, bucket_bytes=64, **kwargs)
    streamed.load_state_dict(copy.deepcopy(plain.state_dict()))  # as read from a checkpoint
    assert streamed.host_resident()
    for ps, opt in ((plain_params, plain), (params, streamed)):
        for p, g in zip(ps, grads[1], strict=True):
            p.grad = g.clone()
        opt.step()
    assert all(torch.equal(a, b) for a, b in zip(params, plain_params, strict=True))
    assert streamed.streamed.buckets == 2 and streamed.host_resident()
