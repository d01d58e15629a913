"""MicroCoder-GRPO pure functions checked against hand computation."""

from __future__ import annotations

import math

import pytest
import torch

from microcoder.learner.algorithm import grpo, off_policy


def test_advantages_normalise_within_each_group():
    rewards = torch.tensor([1.0, 0.0, 0.0, 0.0, 1.0, 1.0])
    groups = torch.tensor([0, 0, 0, 1, 1, 1])
    adv = grpo.group_advantages(rewards, groups, eps=0.0)
    std = math.sqrt(((2 / 3) ** 2 + 2 * (1 / 3) ** 2) / 2)  # unbiased, divisor G-1
    expected = torch.tensor([2 / 3, -1 / 3, -1 / 3, -2 / 3, 1 / 3, 1 / 3]) / std
    torch.testing.assert_close(adv, expected.float())


def test_equal_rewards_give_zero_advantage():
    adv = grpo.group_advantages(torch.tensor([1.0, 1.0, 1.0]), torch.tensor([0, 0, 0]))
    assert torch.equal(adv, torch.zeros(3))


def test_looping_needs_last_m_equal_to_previous_m():
    assert grpo.is_looping([9, 1, 2, 3, 1, 2, 3], m=3)
    assert not grpo.is_looping([9, 1, 2, 3, 1, 2, 4], m=3)
    assert not grpo.is_looping([1, 2, 3, 1, 2], m=3)  # shorter than 2m


@pytest.mark.parametrize(
    "ids, looping",
    [([9, 1, 2, 3, 1, 2, 3], True), ([9, 1, 2, 3, 1, 2, 4], False), ([1, 2, 3, 1, 2], False)],
)
def test_looping_reads_a_tensor_and_a_numpy_array_as_it_reads_a_list(ids, looping):
    """One is_looping serves the batch builder (tensors) and the bench (numpy arrays)."""
    import numpy as np

    assert grpo.is_looping(torch.tensor(ids), m=3) is looping
    assert grpo.is_looping(np.asarray(ids, np.int32), m=3) is looping


def _mask(truncated, non_incorrect, looping, draws, rho=0.1):
    return grpo.conditional_truncation_mask(
        torch.tensor(truncated),
        torch.tensor(non_incorrect),
        torch.tensor(looping),
        torch.tensor(draws, dtype=torch.float64),
        rho,
    )


def test_mask_requires_truncation():
    assert _mask([False, True], [True, True], [False, False], [0.0, 0.0]).tolist() == [False, True]


def test_mask_requires_non_incorrect():
    assert _mask([True, True], [False, True], [False, False], [0.0, 0.0]).tolist() == [False, True]


def test_mask_spares_looping_responses():
    assert _mask([True, True], [True, True], [True, False], [0.0, 0.0]).tolist() == [False, True]


def test_mask_requires_draw_below_rho():
    assert _mask([True, True], [True, True], [False, False], [0.1, 0.0999]).tolist() == [
        False,
        True,
    ]


def test_mask_draws_are_reproducible_and_hit_rho_on_average():
    a = grpo.mask_draws(20000, torch.Generator().manual_seed(7))
    b = grpo.mask_draws(20000, torch.Generator().manual_seed(7))
    assert torch.equal(a, b)
    assert abs(float((a < 0.1).double().mean()) - 0.1) < 0.01


def test_masked_response_still_shifts_group_statistics():
    rewards = torch.tensor([1.0, 0.0, 0.0, 1.0])  # response 3 is the masked one
    groups = torch.zeros(4, dtype=torch.long)
    adv = grpo.group_advantages(rewards, groups)
    masked = torch.tensor([False, False, False, True])
    out = grpo.apply_mask(adv, masked)
    without = grpo.group_advantages(rewards[:3], groups[:3])
    assert out[3] == 0
    torch.testing.assert_close(out[:3], adv[:3])
    assert not torch.allclose(out[:3], without)  # dropping it would change the others


def test_incorrect_verdicts_are_the_ones_that_failed_a_test():
    assert [grpo.is_non_incorrect(v) for v in ["WA", "TLE", "MLE", "RE", "OLE"]] == [False] * 5
    assert all(grpo.is_non_incorrect(v) for v in ["AC", "CE", "SE", ""])


def test_unfinished_is_non_incorrect_so_a_truncated_unfinished_response_may_be_masked():
    """The rule of docs/architecture.md §5: `unfinished` ran no test (cut inside its reasoning
    or final code block), so it is non-incorrect; the mask still needs truncated, ¬looping and
    U < rho. Checked from the scored group the learner receives (actors/convert.py)."""
    import numpy as np

    from microcoder.actors.convert import to_group_arrays
    from microcoder.protocol import Group, GroupScores, Response, Score, ScoredGroup
    from microcoder.sandbox import UNFINISHED, VERDICTS

    assert UNFINISHED in VERDICTS and grpo.is_non_incorrect(UNFINISHED)
    verdicts = [UNFINISHED, "WA", UNFINISHED]
    truncated = [True, True, False]  # the last one stopped inside an open fence (EOS): no mask
    group = Group(
        group_id=1,
        problem_id="p",
        prompt="p",
        prompt_ids=np.array([1], np.int32),
        responses=[
            Response(np.array([1, 2], np.int32), np.array([-1, -1], np.float32), truncated=t)
            for t in truncated
        ],
    )
    scores = GroupScores(1, [Score(reward=0.0, verdict=v) for v in verdicts])
    arrays = to_group_arrays(ScoredGroup(group, scores))
    assert arrays.non_incorrect.tolist() == [True, False, True]
    masked = _mask(arrays.truncated.tolist(), arrays.non_incorrect.tolist(), [False] * 3, [0.0] * 3)
    assert masked.tolist() == [True, False, False]


def test_token_logprobs_use_the_temperature():
    logits = torch.tensor([[2.0, 0.0], [2.0, 0.0]])
    logp, ent = grpo.token_logprobs(logits, torch.tensor([0, 0]), torch.tensor([1.0, 2.0]))
    expected = [2 - math.log(math.exp(2) + 1), 1 - math.log(math.exp(1) + 1)]
    torch.testing.assert_close(logp, torch.tensor(expected))
    p = torch.softmax(torch.tensor([1.0, 0.0]), 0)
    torch.testing.assert_close(ent[1], -(p * p.log()).sum())


def test_clip_higher_bounds_and_clip_flags():
    old = torch.zeros(4)
    ratio = torch.tensor([1.5, 1.5, 0.5, 0.5])
    adv = torch.tensor([1.0, -1.0, 1.0, -1.0])
    loss, clipped = grpo.clipped_policy_loss(ratio.log(), old, adv, 0.2, 0.28)
    # A>0, ratio 1.5 -> clipped at 1.28; A<0, ratio 1.5 -> unclipped 1.5; A>0, r .5 -> .5; A<0, r .5 -> .8
    torch.testing.assert_close(loss, torch.tensor([-1.28, 1.5, -0.5, 0.8]))
    assert clipped.tolist() == [True, False, False, True]


def test_clipped_tokens_have_no_gradient():
    logp = torch.tensor([math.log(1.5), math.log(1.1)], requires_grad=True)
    loss, _ = grpo.clipped_policy_loss(logp, torch.zeros(2), torch.tensor([1.0, 1.0]), 0.2, 0.28)
    loss.sum().backward()
    assert logp.grad[0] == 0 and logp.grad[1] != 0


def test_kl_k3_is_zero_at_equality_and_positive_elsewhere():
    k = grpo.kl_k3(torch.tensor([-1.0, -1.0]), torch.tensor([-1.0, -2.0]))
    assert k[0] == 0 and k[1] > 0


TOKEN_LOSS = torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0])  # seq 0: 3 tokens, seq 1: 2 tokens
SEQ_INDEX = torch.tensor([0, 0, 0, 1, 1])
LENGTHS = torch.tensor([3, 2])


@pytest.mark.parametrize(
    "mode,constant,expected",
    [
        ("token-mean", 0.0, 15 / 5),
        ("seq-mean-token-mean", 0.0, (6 / 3 + 9 / 2) / 2),
        ("constant-normaliser", 4.0, 15 / (2 * 4)),
    ],
)
def test_aggregation_matches_hand_computation(mode, constant, expected):
    out = grpo.aggregate(TOKEN_LOSS, SEQ_INDEX, LENGTHS, mode, constant)
    assert float(out) == pytest.approx(expected)


def test_unknown_aggregation_names_the_choices():
    with pytest.raises(ValueError, match="token-mean"):
        grpo.sequence_weights("mean", LENGTHS)


def test_dynamic_filter_drops_groups_with_equal_rewards():
    assert not grpo.group_has_signal([1.0, 1.0, 1.0])
    assert not grpo.group_has_signal([0.0, 0.0])
    assert grpo.group_has_signal([0.0, 1.0, 0.0])


def test_token_loss_with_tis_weights_each_token():
    logp = torch.log(torch.tensor([0.5, 0.5]))
    old = logp.clone()
    behaviour = torch.log(torch.tensor([0.25, 0.05]))  # old/behaviour = 2 and 10 -> capped at 3
    w = off_policy.correct("tis", old - behaviour, torch.tensor([0, 1]), 2, 3.0).weight
    out = grpo.token_loss(logp, old, torch.tensor([1.0, -1.0]), 0.2, 0.28, is_weight=w)
    torch.testing.assert_close(out.is_weight, torch.tensor([2.0, 3.0]))
    torch.testing.assert_close(out.loss, torch.tensor([-2.0, 3.0]))


def test_token_loss_without_tis_is_the_plain_surrogate():
    logp = torch.log(torch.tensor([0.5, 0.5]))
    out = grpo.token_loss(logp, logp.clone(), torch.tensor([1.0, -1.0]), 0.2, 0.28)
    torch.testing.assert_close(out.loss, torch.tensor([-1.0, 1.0]))
    assert torch.equal(out.is_weight, torch.ones(2)) and torch.equal(out.kl, torch.zeros(2))


def test_token_loss_adds_the_kl_term_only_with_a_reference():
    logp, ref = torch.tensor([-1.0]), torch.tensor([-2.0])
    out = grpo.token_loss(logp, logp, torch.tensor([0.0]), 0.2, 0.28, ref_logp=ref, kl_coef=0.5)
    torch.testing.assert_close(out.loss, 0.5 * grpo.kl_k3(logp, ref))
