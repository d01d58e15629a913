"""Chunked log-probs (learner.logprob_chunk_tokens): the same values and gradients as the whole
[tokens, vocab] computation, without keeping any chunk's logits for backward."""

from __future__ import annotations

import random

import pytest
import torch

from microcoder.config import ConfigError, load_layers
from microcoder.learner.algorithm import grpo
from microcoder.learner.config import AlgorithmConfig, LearnerConfig
from microcoder.learner.sample import SampleGroup, TrainSample
from microcoder.learner.trainer import Learner

T, H, V = 37, 16, 50  # 37 tokens: no chunk size below divides it except 1


def _head_inputs(seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    hidden = torch.randn(T, H, generator=g, dtype=torch.float64).requires_grad_()
    weight = torch.randn(V, H, generator=g, dtype=torch.float64).requires_grad_()
    bias = torch.randn(V, generator=g, dtype=torch.float64).requires_grad_()
    targets = torch.randint(V, (T,), generator=g)
    temperature = torch.rand(T, generator=g, dtype=torch.float64) + 0.5
    return hidden, weight, bias, targets, temperature


def _values_and_grads(chunk: int):
    hidden, weight, bias, targets, temperature = _head_inputs()
    logp, entropy = grpo.chunked_token_logprobs(hidden, weight, targets, temperature, chunk, bias)
    coef = torch.linspace(-1.0, 2.0, T, dtype=logp.dtype)  # a loss that weighs every token
    (coef * logp).sum().backward()
    return logp.detach(), entropy, hidden.grad, weight.grad, bias.grad


@pytest.mark.parametrize("chunk", [1, 5, 16, 37, 64])
def test_chunked_head_equals_token_logprobs_of_the_full_logits(chunk):
    hidden, weight, bias, targets, temperature = _head_inputs()
    logits = hidden @ weight.T + bias
    want_logp, want_entropy = grpo.token_logprobs(logits, targets, temperature)
    logp, entropy = grpo.chunked_token_logprobs(hidden, weight, targets, temperature, chunk, bias)
    torch.testing.assert_close(logp, want_logp.float(), atol=1e-5, rtol=0)
    torch.testing.assert_close(entropy, want_entropy.float(), atol=1e-5, rtol=0)


@pytest.mark.parametrize("chunk", [1, 5, 16, 64])
def test_chunked_head_gradients_equal_the_unchunked_ones(chunk):
    want = _values_and_grads(0)
    got = _values_and_grads(chunk)
    for name, a, b in zip(["logp", "entropy", "hidden", "weight", "bias"], got, want, strict=True):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=0, msg=name)


def test_entropy_is_detached_and_only_logp_carries_gradient():
    hidden, weight, bias, targets, temperature = _head_inputs()
    logp, entropy = grpo.chunked_token_logprobs(hidden, weight, targets, temperature, 8, bias)
    assert logp.requires_grad and not entropy.requires_grad


def test_no_logits_are_saved_for_backward():
    """Autograd keeps no [rows, V] tensor outside the checkpointed chunks (whose own saved tensors
    are dropped and recomputed): what it keeps are the chunks' inputs, views of `hidden` and the
    head's parameters."""
    hidden, weight, bias, targets, temperature = _head_inputs()

    def saved_logit_shapes(chunk: int) -> list[tuple[int, ...]]:
        shapes: list[tuple[int, ...]] = []

        def pack(t: torch.Tensor) -> torch.Tensor:
            shapes.append(tuple(t.shape))
            return t

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            grpo.chunked_token_logprobs(hidden, weight, targets, temperature, chunk, bias)
        return [s for s in shapes if len(s) == 2 and s[1] == V]

    assert saved_logit_shapes(8) == []
    assert (T, V) in saved_logit_shapes(0)  # the unchunked path keeps [T, V]: the check can fail


def _groups(vocab: int) -> list[SampleGroup]:
    """Two groups of varied lengths, mixed rewards and temperatures (about 130 response tokens)."""
    rng = random.Random(5)
    groups = []
    for k in range(2):
        prompt = [rng.randrange(vocab) for _ in range(rng.randint(4, 9))]
        samples = []
        for i in range(4):
            resp = [rng.randrange(vocab) for _ in range(rng.randint(5, 30))]
            logp = [-rng.uniform(3.0, 6.0) for _ in resp]
            temp = rng.choice([0.7, 1.0, 1.3])
            samples.append(TrainSample(prompt, resp, logp, temp, float(i % 2), False, "WA", 0))
        groups.append(SampleGroup(f"g{k}", samples))
    return groups


@pytest.fixture(scope="module")
def learners(small_model):
    """One Learner per chunk size, all from the same weights (0 = unchunked)."""
    out = {}
    for chunk in (0, 7, 16, 1024):
        for packing in (True, False):
            cfg = LearnerConfig(logprob_chunk_tokens=chunk, packing=packing, micro_batch_tokens=512)
            out[chunk, packing] = Learner(small_model, cfg, AlgorithmConfig(), seed=1)
    return out


def _loss_logp_grads(learner: Learner):
    from microcoder.learner.batch import build_batch, mask_generator

    batch = build_batch(_groups(200), learner.algo, mask_generator(0, 0))
    (mb,) = learner._micro_batches(batch)
    logp, entropy = learner._logp(learner.model, mb)
    loss, _ = learner._loss_and_stats(mb, None)
    learner.model.zero_grad(set_to_none=True)
    loss.backward()
    grads = {n: p.grad.full_tensor().clone() for n, p in learner.model.named_parameters()}
    learner.model.zero_grad(set_to_none=True)
    return loss.detach(), logp.detach(), entropy, grads


@pytest.mark.parametrize("packing", [True, False], ids=["packed", "padded"])
@pytest.mark.parametrize("chunk", [7, 16, 1024])
def test_learner_chunked_loss_logp_entropy_and_grads_equal_unchunked(learners, chunk, packing):
    loss0, logp0, ent0, grads0 = _loss_logp_grads(learners[0, packing])
    loss, logp, ent, grads = _loss_logp_grads(learners[chunk, packing])
    assert logp.numel() > 100 and logp.numel() % 7 and logp.numel() % 16  # several uneven chunks
    torch.testing.assert_close(loss, loss0, atol=1e-5, rtol=0)
    torch.testing.assert_close(logp, logp0, atol=1e-5, rtol=0)
    torch.testing.assert_close(ent, ent0, atol=1e-5, rtol=0)
    assert grads.keys() == grads0.keys()
    assert grads0["lm_head.weight"].abs().sum() > 0  # the head's gradient reached the sharded param
    for name in grads0:
        torch.testing.assert_close(grads[name], grads0[name], atol=1e-5, rtol=0, msg=name)


def test_chunk_size_defaults_to_1024_and_zero_means_unchunked():
    assert LearnerConfig().logprob_chunk_tokens == 1024
    assert LearnerConfig(logprob_chunk_tokens=0).logprob_chunk_tokens == 0


def test_negative_chunk_size_is_rejected_with_what_to_set():
    with pytest.raises(ConfigError) as err:
        load_layers(LearnerConfig, None, ["logprob_chunk_tokens=-8"])
    text = str(err.value)
    assert "logprob_chunk_tokens" in text and "-8" in text
    assert "1024" in text and "0 to compute log-probs unchunked" in text
