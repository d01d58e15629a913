"""THE multi-turn loss mask (issue 48): a trajectory's feedback tokens (the environment's
messages between the model's turns) contribute nothing to the loss, its gradient, its token
counts, or the step's sums; the loss equals the objective written here by hand over the model's
tokens only.

One in-process rank on CPU (a gloo world of 1), the small model of conftest.py. The reference
is an independent forward of the same checkpoint with plain transformers (eager attention, one
sequence at a time), and the formula below (no product function computes it)."""

from __future__ import annotations

import math
import random

import pytest
import torch
from transformers import AutoModelForCausalLM

from microcoder.learner.batch import build_batch, mask_generator
from microcoder.learner.config import AlgorithmConfig, LearnerConfig
from microcoder.learner.intake import pack_samples
from microcoder.learner.sample import SampleGroup, TrainSample
from microcoder.learner.trainer import Learner

PROMPT = [1, 2, 3]
FEEDBACK = [250, 251, 252, 253]
"""The feedback tokens between two turns (end of turn, user message, next assistant header)."""
CAP = 2.0


def trajectories(feedback_logp: float = 0.0, masked: bool = True) -> list[SampleGroup]:
    """Two groups of three trajectories: in each, two of two turns (turn 1, FEEDBACK, turn 2)
    and one of one turn (no mask). Feedback tokens carry `feedback_logp` as their behaviour
    log-prob; without `masked` no trajectory has a mask (every token the model's)."""
    rng = random.Random(7)
    groups = []
    for k, rewards in enumerate(((1.0, 0.0, 0.0), (0.0, 1.0, 0.5))):
        samples = []
        for i, reward in enumerate(rewards):
            first = [rng.randrange(240) for _ in range(rng.randint(3, 7))]
            second = [rng.randrange(240) for _ in range(rng.randint(2, 6))] if i < 2 else []
            fb = FEEDBACK if second else []
            ids = first + fb + second
            logp = [-rng.uniform(4.5, 6.5) for _ in first]
            logp += [feedback_logp] * len(fb) + [-rng.uniform(4.5, 6.5) for _ in second]
            mask = [1] * len(first) + [0] * len(fb) + [1] * len(second)
            samples.append(
                TrainSample(
                    PROMPT,
                    ids,
                    logp,
                    1.0 if k == 0 else 0.8,
                    reward,
                    False,
                    "WA",
                    0,
                    loss_mask=mask if (masked and second) else None,
                )
            )
        groups.append(SampleGroup(f"g{k}", samples))
    return groups


def make_learner(model, aggregation: str = "token-mean") -> Learner:
    return Learner(
        model,
        LearnerConfig(lr=1e-3, micro_batch_tokens=64),  # several micro-batches
        AlgorithmConfig(
            truncation_mask="none", aggregation=aggregation, loss_constant=16, tis_cap=CAP
        ),
        seed=0,
    )


def loss_and_grads(learner: Learner, groups: list[SampleGroup]):
    """The step's loss as the trainer computes it (every micro-batch's share, summed) and the
    gradient it leaves, without an optimizer step."""
    batch = build_batch(pack_samples(groups), learner.algo, mask_generator(0, 0))
    learner.model.zero_grad(set_to_none=True)
    total = torch.zeros((), dtype=torch.float64)
    micros = learner._micro_batches(batch)
    assert len(micros) > 1
    for mb in micros:
        part, _ = learner._loss_and_stats(mb, None, len(batch))
        part.backward()
        total += part.detach().double()
    grads = {n: p.grad.to_local().clone() for n, p in learner.model.named_parameters()}
    return float(total), grads


def hand_objective(model, groups: list[SampleGroup], aggregation: str, constant: float):
    """The objective written out: per group A_i = (r_i − mean) / (std + 1e-6) (unbiased std);
    per MODEL token t of trajectory i, log pi(o_t) at the trajectory's temperature from a plain
    forward, w_t = min(exp(log pi − log pi_behaviour), C) (token TIS, pi_old = pi_theta),
    l_t = w_t · (−A_i · exp(log pi − sg(log pi))); summed with the aggregation's weight."""
    per_seq = []  # (A_i, [logp at model tokens], [behaviour at model tokens])
    for g in groups:
        r = [s.reward for s in g.samples]
        mean = sum(r) / len(r)
        std = math.sqrt(sum((x - mean) ** 2 for x in r) / (len(r) - 1))
        for s, reward in zip(g.samples, r, strict=True):
            ids = torch.tensor([*s.prompt_ids, *s.response_ids])
            logits = model(input_ids=ids[None]).logits[0].float() / s.temperature
            logp = torch.log_softmax(logits[len(s.prompt_ids) - 1 : -1], -1)
            logp = logp.gather(-1, torch.tensor(s.response_ids)[:, None])[:, 0]
            keep = [t for t in range(len(s.response_ids)) if s.loss_mask is None or s.loss_mask[t]]
            per_seq.append(
                (
                    (reward - mean) / (std + 1e-6),
                    logp[keep],
                    [s.behaviour_logprobs[t] for t in keep],
                )
            )
    n_seqs = len(per_seq)
    n_tokens = sum(len(lp) for _, lp, _ in per_seq)
    total = 0.0
    for adv, logp, behaviour in per_seq:
        w = torch.exp(logp.detach() - torch.tensor(behaviour)).clamp(max=CAP)
        l_t = w * (-adv * torch.exp(logp - logp.detach()))
        weight = {
            "token-mean": 1.0 / n_tokens,
            "seq-mean-token-mean": 1.0 / (n_seqs * len(logp)),
            "constant-normaliser": 1.0 / (n_seqs * constant),
        }[aggregation]
        total = total + weight * l_t.sum()
    return total


@pytest.mark.parametrize(
    "aggregation", ["token-mean", "seq-mean-token-mean", "constant-normaliser"]
)
def test_the_loss_is_the_objective_over_model_tokens_only(small_model, aggregation):
    learner = make_learner(small_model, aggregation)
    loss, grads = loss_and_grads(learner, trajectories())
    ref_model = AutoModelForCausalLM.from_pretrained(
        small_model, torch_dtype=torch.float32, attn_implementation="eager"
    )
    ref = hand_objective(ref_model, trajectories(), aggregation, 16.0)
    ref.backward()
    assert loss == pytest.approx(float(ref.detach()), rel=1e-5, abs=1e-7)
    ref_grads = dict(ref_model.named_parameters())
    for name, g in grads.items():
        want = ref_grads[name].grad
        if "lm_head" in name and want is None:  # tied to the embedding in the reference
            want = ref_grads["model.embed_tokens.weight"].grad
        torch.testing.assert_close(g, want, rtol=1e-4, atol=1e-6, msg=name)


@pytest.mark.parametrize("value", [-80.0, 7.5, math.nan, -math.inf])
def test_feedback_token_values_change_nothing(small_model, value):
    learner = make_learner(small_model)
    loss, grads = loss_and_grads(learner, trajectories(0.0))
    loss2, grads2 = loss_and_grads(learner, trajectories(value))
    assert loss2 == loss
    assert all(torch.equal(grads[n], grads2[n]) for n in grads)
    # the step's metrics are blind to them too: counts, IS weights, mismatch
    m = make_learner(small_model).train_step(trajectories(0.0))
    m2 = make_learner(small_model).train_step(trajectories(value))
    for key in (
        "loss",
        "clip_frac",
        "entropy",
        "is_weight_mean",
        "is_weight_max",
        "mismatch_abs_dlogp",
        "mismatch_kl",
        "grad_norm",
        "nonfinite_dropped",
    ):
        assert m2[key] == m[key], key
    assert m["nonfinite_dropped"] == 0.0 and m["responses"] == 6


def test_without_the_mask_the_feedback_values_would_move_the_loss(small_model):
    """The control: unmasked, the same trajectories' feedback log-probs do change the loss (so
    the two tests above could fail)."""
    learner = make_learner(small_model)
    loss, _ = loss_and_grads(learner, trajectories(0.0, masked=False))
    loss2, _ = loss_and_grads(learner, trajectories(-80.0, masked=False))
    masked, _ = loss_and_grads(learner, trajectories(0.0))
    assert loss2 != loss and masked != loss


def test_the_token_counts_are_model_tokens():
    groups = trajectories()
    batch = build_batch(pack_samples(groups), AlgorithmConfig(), mask_generator(0, 0))
    lens = [len(s.response_ids) for g in groups for s in g.samples]
    fb = [len(FEEDBACK) if s.loss_mask is not None else 0 for g in groups for s in g.samples]
    assert batch.response_lens.tolist() == lens
    assert batch.model_lens.tolist() == [n - f for n, f in zip(lens, fb, strict=True)]
    single = build_batch(
        pack_samples(trajectories(masked=False)), AlgorithmConfig(), mask_generator(0, 0)
    )
    assert single.loss_masks is None and single.model_lens.tolist() == lens


def turn_sample(first, second, reward, truncated=True, fb=4):
    ids = [*first, *[250] * fb, *second]
    mask = [1] * len(first) + [0] * fb + [1] * len(second)
    return TrainSample(
        PROMPT, ids, [-1.0] * len(ids), 1.0, reward, truncated, "", 0, loss_mask=mask
    )


def test_the_truncation_mask_and_overlong_penalty_read_the_final_turn():
    """Looping and length are the final turn's: a looping first turn does not make a truncated
    trajectory `looping`, a looping final turn does; a long trajectory whose final turn is short
    is not punished for its length."""
    loop = [1, 2, 3, 4, 1, 2, 3, 4]
    plain = [5, 6, 7, 8, 9, 10, 11, 12]
    group = SampleGroup(
        "g",
        [
            turn_sample(loop, plain, 1.0),  # loop in turn 1 only: maskable
            turn_sample(plain, loop, 0.0),  # final turn loops: never masked
            turn_sample(plain + plain, [13, 14, 15], 0.0, truncated=False),  # 19 + 4 tokens
            # a short final turn that repeats the feedback tokens: the trajectory's last 8
            # tokens repeat, but the final turn is too short to show a loop: maskable
            turn_sample(plain, [250] * 4, 0.0),
        ],
    )
    algo = AlgorithmConfig(
        truncation_mask="conditional",
        rho=1.0,
        repeat_window=4,
        overlong_max_tokens=12,
        overlong_buffer_tokens=4,
    )
    batch = build_batch(pack_samples([group]), algo, mask_generator(0, 0))
    assert batch.masked.tolist() == [True, False, False, True]
    assert batch.stats.looping == 1
    # final turns of 8, 8, 3 and 4 tokens: none past L_max − L_cache = 8
    assert batch.stats.overlong_penalised == 0
    unmasked = [
        SampleGroup(
            "g",
            [
                TrainSample(
                    PROMPT, s.response_ids, s.behaviour_logprobs, 1.0, s.reward, s.truncated, "", 0
                )
                for s in group.samples
            ],
        )
    ]
    assert (
        build_batch(pack_samples(unmasked), algo, mask_generator(0, 0)).stats.overlong_penalised
        == 4
    )
