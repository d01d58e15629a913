"""The learner's packed attention does no host sync inside the layers, and its log-probs equal
transformers' own forward of each sequence (issue 31, item 5: `.tolist()` ran in every layer)."""

from __future__ import annotations

import random

import pytest
import torch
from transformers import AutoModelForCausalLM

from microcoder.learner import attention
from microcoder.learner.batch import build_batch, mask_generator
from microcoder.learner.config import AlgorithmConfig, LearnerConfig
from microcoder.learner.models.tiny_model import SMALL_ARCH, build_tiny_model
from microcoder.learner.sample import SampleGroup, TrainSample
from microcoder.learner.trainer import Learner

SYNCS = ("tolist", "item", "cpu")
"""Tensor methods that copy from the device to the host (a sync on CUDA)."""


@pytest.fixture(scope="module")
def small_model(tmp_path_factory):
    """A 2-layer Qwen2 (hidden 64) with a 300-token vocabulary, built locally."""
    corpus = ["def add(a, b):\n    return a + b\n"] * 20
    out = tmp_path_factory.mktemp("two-layer")
    return build_tiny_model(out, seed=0, corpus=corpus, vocab_size=300, **SMALL_ARCH)


@pytest.fixture(scope="module")
def learner(small_model):
    return Learner(small_model, LearnerConfig(micro_batch_tokens=512), AlgorithmConfig(), seed=1)


def _micro_batch(learner: Learner):
    """One packed micro-batch: pairs of equal-length responses (so buckets merge) and odd ones."""
    rng = random.Random(3)
    groups = []
    for k, lens in enumerate(([20, 20, 19, 7], [33, 12, 12, 5])):
        prompt = [rng.randrange(250) for _ in range(6)]
        samples = [
            TrainSample(
                prompt, [rng.randrange(250) for _ in range(n)], [-5.0] * n, t, i % 2, False, "WA", 0
            )
            for i, (n, t) in enumerate(zip(lens, (1.0, 0.7, 1.3, 1.0), strict=True))
        ]
        groups.append(SampleGroup(f"g{k}", samples))
    batch = build_batch(groups, learner.algo, mask_generator(0, 0))
    (mb,) = learner._micro_batches(batch)
    return batch, mb


def test_the_packed_forward_copies_nothing_to_the_host_inside_the_layers(learner, monkeypatch):
    _, mb = _micro_batch(learner)
    assert mb.packed
    inside, calls, entered = [False], [], []
    layers = learner.model.get_decoder().layers
    hooks = [
        layer.register_forward_pre_hook(lambda *_: inside.__setitem__(0, True)) for layer in layers
    ]
    hooks += [
        layer.register_forward_hook(lambda *_: inside.__setitem__(0, False)) for layer in layers
    ]
    hooks += [layer.register_forward_pre_hook(lambda *_: entered.append(1)) for layer in layers]
    for name in SYNCS:
        real = getattr(torch.Tensor, name)

        def counted(self, *args, _real=real, _name=name, **kwargs):
            if inside[0]:
                calls.append(_name)
            return _real(self, *args, **kwargs)

        monkeypatch.setattr(torch.Tensor, name, counted)
    try:
        with torch.no_grad():
            learner._logp(learner.model, mb)
    finally:
        for h in hooks:
            h.remove()
    assert len(entered) == 2  # both layers ran under the counter
    assert calls == []


def test_packed_logprobs_equal_transformers_forward_of_each_sequence(learner, small_model):
    batch, mb = _micro_batch(learner)
    plan = attention.plan(mb.seq_lens, "cpu")
    assert max(b.rows for b in plan.buckets) > 1  # one SDPA call ran several sequences
    with torch.no_grad():
        logp, _ = learner._logp(learner.model, mb)
    ref_model = AutoModelForCausalLM.from_pretrained(
        small_model, attn_implementation="eager", dtype=torch.float32
    )
    ref = []
    for i in range(len(batch.input_ids)):
        ids, p = batch.input_ids[i], int(batch.prompt_lens[i])
        with torch.no_grad():
            logits = ref_model(input_ids=ids[None]).logits[0, p - 1 : -1]
        t = float(batch.temperatures[i])
        ref.append(torch.log_softmax(logits / t, -1).gather(1, ids[p:, None])[:, 0])
    # the micro-batch holds the sequences in packing order: put the reference in that order
    order = mb.seq_index.unique_consecutive().tolist()
    expected = torch.cat([ref[i] for i in order])
    torch.testing.assert_close(logp, expected, atol=1e-5, rtol=1e-5)
