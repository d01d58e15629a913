"""The policy losses (learner/algorithm/policy_loss.py: POLICY_LOSSES), each against its paper's
equation written out here in plain Python on hand-made tensors, its gradient against a finite
difference of the objective the paper differentiates, and the config rules around them: an
unknown name is refused with the list, a user `module:function` that does not import is a
config error, and sequence parallelism refuses the sequence-level loss."""

from __future__ import annotations

import math

import pytest
import torch

from microcoder.config import ConfigError
from microcoder.launch.compare.arms import ArmError, parse_arm
from microcoder.launch.config import load_config
from microcoder.learner.algorithm import grpo, loss_names, policy_loss
from microcoder.learner.algorithm.policy_loss import LossInput, LossParams
from microcoder.learner.config import AlgorithmConfig
from microcoder.learner.sequence_parallel import model_errors

RECIPE = "configs/tiny-cpu.toml"
PARAMS = LossParams(
    eps_low=0.2, eps_high=0.28, dual_clip_c=3.0, gspo_eps_low=0.1, gspo_eps_high=0.2
)
# six tokens of three sequences (0: three tokens, 1: one, 2: two) and their ratios pi_theta / pi_old
RATIOS = [1.5, 0.5, 1.1, 5.0, 0.5, 1.25]
ADV = [1.0, 1.0, 1.0, -2.0, -0.5, -0.5]
SEQ = [0, 0, 0, 1, 2, 2]
OLD = [-1.0, -2.0, -0.5, -3.0, -1.5, -0.7]


def clip(v: float, lo: float, hi: float) -> float:
    return min(max(v, lo), hi)


def inputs(ratios=RATIOS, adv=ADV, seq=SEQ, old=OLD, dtype=torch.float64, mask=None) -> LossInput:
    old_t = torch.tensor(old, dtype=dtype)
    logp = (old_t + torch.tensor([math.log(r) for r in ratios], dtype=dtype)).requires_grad_()
    seq_t = torch.tensor(seq, dtype=torch.long)
    keep = seq_t >= 0 if mask is None else torch.tensor(mask)
    return LossInput(
        logp,
        old_t,
        old_t - 0.1,
        torch.tensor(adv, dtype=dtype),
        keep,
        seq_t,
        max(seq) + 1,
    )


def run(name: str, x: LossInput | None = None, params: LossParams = PARAMS):
    return policy_loss.PolicyLoss(name, params)(x or inputs())


def close(t: torch.Tensor, expected: list[float]) -> None:
    assert t.tolist() == pytest.approx(expected, rel=1e-9, abs=1e-12)


# --- the registry and the config ----------------------------------------------------------------


def test_the_registry_is_the_config_choices_and_clip_is_the_default():
    assert tuple(policy_loss.POLICY_LOSSES) == loss_names.BUILTIN
    assert AlgorithmConfig().policy_loss == "clip"
    assert AlgorithmConfig().dual_clip_c == 3.0
    assert (AlgorithmConfig().gspo_eps_low, AlgorithmConfig().gspo_eps_high) == (3e-4, 4e-4)


def test_an_unknown_name_is_refused_with_the_nearest_and_the_list():
    with pytest.raises(ConfigError) as err:
        load_config(RECIPE, ["algorithm.policy_loss=gpso"])
    text = str(err.value)
    assert "did you mean 'gspo'" in text
    assert "clip, dual-clip, gspo, cispo" in text and "module:function" in text


def test_a_user_loss_that_does_not_import_is_a_config_error():
    with pytest.raises(ConfigError, match="does not import.*No module named 'no_such_losses'"):
        load_config(RECIPE, ["algorithm.policy_loss=no_such_losses:mine"])
    with pytest.raises(ConfigError, match="does not import.*has no attribute 'nothing'"):
        load_config(RECIPE, ["algorithm.policy_loss=math:nothing"])
    with pytest.raises(ConfigError, match="dual_clip_c"):
        load_config(RECIPE, ["algorithm.dual_clip_c=1.0"])  # c must exceed 1


def test_sequence_parallelism_refuses_the_sequence_level_loss():
    (error,) = model_errors(None, 2, policy_loss="gspo")
    assert "gspo" in error and "sequence_parallel = 1" in error
    assert model_errors(None, 2, policy_loss="cispo") == []
    assert model_errors(None, 1, policy_loss="gspo") == []


# --- each loss against its equation --------------------------------------------------------------


def test_clip_is_the_clip_higher_ppo_surrogate():
    """PPO (Schulman et al. 2017) with DAPO's clip-higher: l = −min(r·A, clip(r, 1 − εl, 1 + εh)·A)."""
    out = run("clip")
    expected = [
        -min(r * a, clip(r, 1 - PARAMS.eps_low, 1 + PARAMS.eps_high) * a)
        for r, a in zip(RATIOS, ADV, strict=True)
    ]
    close(out.loss, expected)
    # clipped: the clipped term is the active (gradient-free) one
    assert out.clipped.tolist() == [True, False, False, False, True, False]
    # and it is today's surrogate, bit for bit
    x = inputs(dtype=torch.float32)
    same = grpo.clipped_policy_loss(x.logp, x.old_logp, x.advantages, 0.2, 0.28)
    assert torch.equal(run("clip", x).loss, same[0])


def test_dual_clip_bounds_a_negative_advantage_token_at_c_times_abs_a():
    """Ye et al. 2020, eq. (5): for A < 0 the objective is max(min(r·A, clip(r)·A), c·A); else
    PPO's. The loss is its negative."""
    c = PARAMS.dual_clip_c
    expected = []
    for r, a in zip(RATIOS, ADV, strict=True):
        ppo = min(r * a, clip(r, 1 - PARAMS.eps_low, 1 + PARAMS.eps_high) * a)
        expected.append(-(max(ppo, c * a) if a < 0 else ppo))
    out = run("dual-clip")
    close(out.loss, expected)
    assert expected[3] == pytest.approx(6.0)  # r = 5, A = −2: bounded at 3·2, not 10
    assert out.metrics["dual_clipped"].tolist() == [0, 0, 0, 1, 0, 0]
    assert out.clipped.tolist() == [True, False, False, True, True, False]


def seq_ratios(ratios=RATIOS, seq=SEQ) -> dict[int, float]:
    """GSPO eq. (7): s_i = (Π_t r_t)^(1/|y_i|) per sequence."""
    out: dict[int, list[float]] = {}
    for r, s in zip(ratios, seq, strict=True):
        out.setdefault(s, []).append(r)
    return {s: math.prod(rs) ** (1 / len(rs)) for s, rs in out.items()}


def test_gspo_is_the_clipped_length_normalised_sequence_ratio():
    """GSPO (Zheng et al. 2025) eq. (5): l_i = −min(s_i·A_i, clip(s_i, 1 − εl, 1 + εh)·A_i) at
    every token of i."""
    s = seq_ratios()
    lo, hi = 1 - PARAMS.gspo_eps_low, 1 + PARAMS.gspo_eps_high
    expected = [-min(s[i] * a, clip(s[i], lo, hi) * a) for i, a in zip(SEQ, ADV, strict=True)]
    out = run("gspo")
    close(out.loss, expected)
    close(out.metrics["seq_ratio"], [s[i] for i in SEQ])
    # seq 0: s = (1.5·0.5·1.1)^(1/3) = 0.937 inside [0.9, 1.2]; seq 1: 5 > 1.2 with A < 0 (not
    # clipped: PPO's min keeps the larger loss); seq 2: (0.5·1.25)^(1/2) = 0.79 < 0.9 with A < 0
    assert out.clipped.tolist() == [False] * 4 + [True] * 2
    lone = run("gspo", inputs(ratios=[1.5, 1.5, 1.5, 0.5, 1.0, 1.0], adv=[1.0] * 3 + [-1.0] * 3))
    assert lone.clipped.tolist() == [True, True, True, True, False, False]


def test_gspo_ignores_masked_and_dummy_tokens():
    """A token outside the mask (a dummy's, a dropped sequence's) takes no part in s_i."""
    full = run("gspo")
    x = inputs(
        ratios=[*RATIOS, 40.0, 0.01],
        adv=[*ADV, 1.0, 1.0],
        seq=[*SEQ, 0, -1],
        old=[*OLD, -1.0, -1.0],
        mask=[True] * 6 + [False, False],
    )
    close(run("gspo", x).loss[:6], full.loss.tolist())


def test_cispo_weights_every_tokens_log_prob_by_the_clipped_ratio():
    """MiniMax-M1 eq. (4): J = sg(r̂)·A·log pi, r̂ = clip(r, 1 − εl, 1 + εh); the loss is −J."""
    logp = [o + math.log(r) for o, r in zip(OLD, RATIOS, strict=True)]
    expected = [
        -clip(r, 1 - PARAMS.eps_low, 1 + PARAMS.eps_high) * a * lp
        for r, a, lp in zip(RATIOS, ADV, logp, strict=True)
    ]
    out = run("cispo")
    close(out.loss, expected)
    assert out.clipped.tolist() == [True, True, False, True, True, False]


# --- gradients against finite differences ------------------------------------------------------

# ratios kept away from the clip edges, where the objectives have kinks
SMOOTH = [1.1, 0.85, 1.3, 4.0, 0.95, 0.7]


@pytest.mark.parametrize("name", ["clip", "dual-clip"])
def test_the_token_losses_gradient_is_the_finite_difference(name):
    x = inputs(ratios=SMOOTH)

    def total(logp):
        return run(name, x._replace(logp=logp)).loss

    assert torch.autograd.gradcheck(total, (x.logp,), eps=1e-6, atol=1e-7)
    # some tokens clipped (zero gradient), some not; dual-clip bounds token 3 (4·2 > 3·2)
    out = run(name, x)
    assert 0 < out.clipped.sum() < 6
    assert out.metrics.get("dual_clipped", torch.ones(1)).sum() > 0


def central_difference(f, values: list[float], h: float = 1e-6) -> list[float]:
    out = []
    for k in range(len(values)):
        up = [v + (h if j == k else 0.0) for j, v in enumerate(values)]
        down = [v - (h if j == k else 0.0) for j, v in enumerate(values)]
        out.append((f(up) - f(down)) / (2 * h))
    return out


def test_gspo_gradient_is_the_sequence_objectives():
    """GSPO's token-level form aggregated as a mean over sequences of each one's token mean has
    the gradient of the paper's sequence objective J = (1/G) Σ_i min(s_i·A_i, clip(s_i)·A_i)
    (eq. (5); its gradient, eq. (10), equals the token form's, eq. (14), when A_i,t = A_i)."""
    ratios = [1.05, 0.97, 1.02, 0.5, 0.99, 1.01]  # seq 1 clipped (A < 0), 0 and 2 inside
    x = inputs(ratios=ratios)
    lo, hi = 1 - PARAMS.gspo_eps_low, 1 + PARAMS.gspo_eps_high

    def objective(logp: list[float]) -> float:
        s = seq_ratios([math.exp(lp - o) for lp, o in zip(logp, OLD, strict=True)])
        adv = {i: a for i, a in zip(SEQ, ADV, strict=True)}
        return -sum(min(s[i] * adv[i], clip(s[i], lo, hi) * adv[i]) for i in s) / len(s)

    loss = grpo.aggregate(
        run("gspo", x).loss, x.seq_index, torch.tensor([3, 1, 2]), "seq-mean-token-mean"
    )
    (grad,) = torch.autograd.grad(loss, x.logp)
    fd = central_difference(objective, x.logp.tolist())
    assert grad.tolist() == pytest.approx(fd, rel=1e-6, abs=1e-9)
    assert fd[3] == pytest.approx(0.0) and fd[0] != pytest.approx(0.0)


def test_cispo_gradient_is_the_clipped_weight_times_the_log_prob_gradient():
    """CISPO's r̂ carries no gradient: ∂l_t/∂log pi_t = −r̂_t·A_t, the finite difference of
    −r̂·A·log pi with r̂ held at its value (every token, clipped ones too, keeps a gradient)."""
    x = inputs(ratios=SMOOTH)
    weights = [clip(r, 1 - PARAMS.eps_low, 1 + PARAMS.eps_high) for r in SMOOTH]

    def objective(logp: list[float]) -> float:
        return sum(-w * a * lp for w, a, lp in zip(weights, ADV, logp, strict=True))

    (grad,) = torch.autograd.grad(run("cispo", x).loss.sum(), x.logp)
    fd = central_difference(objective, x.logp.tolist())
    assert grad.tolist() == pytest.approx(fd, rel=1e-6)
    assert all(g != 0 for g in grad.tolist())


@pytest.mark.parametrize("name", loss_names.BUILTIN)
def test_a_compare_arm_for_each_builtin_sets_it(name):
    arm = parse_arm(f"policy_loss={name}")
    assert arm.overrides == (f"algorithm.policy_loss={name}",)
    assert arm.description.startswith(f"policy loss {name}: ")
    assert load_config(RECIPE, list(arm.overrides)).algorithm.policy_loss == name
    with pytest.raises(ArmError, match="did you mean 'cispo'"):
        parse_arm("policy_loss=cisp")
