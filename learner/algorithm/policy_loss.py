"""The policy loss (`algorithm.policy_loss`): one pure function per surrogate, registered once in
POLICY_LOSSES, or a user's `module:function` with the same signature.

The loss sits where MicroCoder-GRPO's clipped surrogate sits (learner/algorithm/grpo.py:
token_loss); everything around it is unchanged: the advantages (group-normalised, after the
truncation mask), the off-policy weight w_t (learner/algorithm/off_policy.py) that multiplies the
per-token loss, the KL term and the aggregation weights. Shapes: T = response tokens of a
micro-batch, S = sequences of its mini-batch. Per response token t of response i, with

    ratio_t = exp(log pi_theta(o_t) − log pi_old(o_t)),   A = A_i,   sg = stop-gradient,

each loss gives l_t ([T], before w_t and the aggregation):

    clip       l_t = max(−A·ratio_t, −A·clip(ratio_t, 1 − eps_low, 1 + eps_high))
               (PPO with DAPO's clip-higher; the default, MicroCoder-GRPO's)
    dual-clip  l_t = min(clip's l_t, c·|A|)  for A < 0;  clip's l_t  for A ≥ 0
               (Ye et al. 2020, dual-clip PPO; c = algorithm.dual_clip_c > 1)
    gspo       s_i   = exp(mean_{u∈i}(log pi_theta(o_u) − log pi_old(o_u)))        [S]
               s_i,t = sg(s_i) · pi_theta(o_t) / sg(pi_theta(o_t))   (value s_i)    [T]
               l_t   = max(−A·s_i,t, −A·clip(s_i,t, 1 − gspo_eps_low, 1 + gspo_eps_high))
               (Zheng et al. 2025, GSPO, token-level form; its gradient at t is
               A·s_i·∇log pi_theta(o_t) inside the clip range, 0 outside)
    cispo      l_t = −sg(clip(ratio_t, 1 − eps_low, 1 + eps_high)) · A · log pi_theta(o_t)
               (MiniMax-M1, 2025: every token keeps its gradient, weighted by the clipped ratio)

A user loss `module:function` is called as `function(LossInput, LossParams) -> LossOutput`, like
the built-ins; it is imported when the config is read (a path that does not import is a config
error) and, when it raises, the step stops with PolicyLossError naming it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import torch

from microcoder.learner.algorithm import loss_names
from microcoder.learner.algorithm.grpo import clipped_policy_loss
from microcoder.learner.algorithm.off_policy import per_token, segment_sum


class LossInput(NamedTuple):
    """What a policy loss gets for one micro-batch (all [T] but `num_seqs`)."""

    logp: torch.Tensor  # float: log pi_theta(o_t) at the token's temperature, WITH gradient
    old_logp: torch.Tensor  # float, detached: log pi_old (the step's start policy)
    behaviour_logp: torch.Tensor  # float, detached: log pi_behaviour (the generator's)
    advantages: torch.Tensor  # float: A of the token's response (0 where the truncation mask acted)
    mask: torch.Tensor  # bool: tokens that count (not a dummy's, not a non-finite sequence's,
    # not a multi-turn trajectory's feedback token)
    seq_index: torch.Tensor  # long in [0, num_seqs): the token's sequence; −1 = a dummy token
    # (and a feedback token: the trainer gives it no sequence, so no sequence-level sum reads it)
    num_seqs: int  # S: sequences of the mini-batch (seq_index's range)


class LossParams(NamedTuple):
    """The algorithm's numbers a loss may read (AlgorithmConfig's fields of the same names)."""

    eps_low: float
    eps_high: float
    dual_clip_c: float
    gspo_eps_low: float
    gspo_eps_high: float


class LossOutput(NamedTuple):
    """What a policy loss returns (all [T]); tokens outside `mask` are ignored."""

    loss: torch.Tensor  # float: l_t with gradient, before the off-policy weight and aggregation
    clipped: torch.Tensor  # bool: the token gets no gradient from a clip (the clip_frac metric)
    metrics: dict[str, torch.Tensor] = {}
    """name -> [T] per-token values; the step reports each as `policy_loss_<name>`, its mean over
    the trained tokens. The names must be the same on every call."""


PolicyLossFn = Callable[[LossInput, LossParams], LossOutput]


class PolicyLossError(RuntimeError):
    """A user policy loss raised or returned something else than a LossOutput of [T] tensors."""


def _clip(x: LossInput, p: LossParams) -> LossOutput:
    """PPO's clipped ratio with clip-higher: max(−A·ratio, −A·clip(ratio, 1 − eps_low, 1 + eps_high))."""
    loss, clipped = clipped_policy_loss(x.logp, x.old_logp, x.advantages, p.eps_low, p.eps_high)
    return LossOutput(loss, clipped)


def _dual_clip(x: LossInput, p: LossParams) -> LossOutput:
    """Dual-clip PPO: clip's loss, bounded at c·|A| for a negative advantage."""
    loss, clipped = clipped_policy_loss(x.logp, x.old_logp, x.advantages, p.eps_low, p.eps_high)
    bound = -p.dual_clip_c * x.advantages  # [T] c·|A| where A < 0
    dual = (x.advantages < 0) & (loss > bound)
    out = torch.where(dual, bound.to(loss.dtype), loss)
    return LossOutput(out, clipped | dual, {"dual_clipped": dual.float()})


def _gspo(x: LossInput, p: LossParams) -> LossOutput:
    """GSPO: one length-normalised sequence ratio s_i, clipped to [1 − gspo_eps_low, 1 + gspo_eps_high]."""
    delta = (x.logp - x.old_logp.detach()).where(x.mask, 0.0)  # [T]
    count = segment_sum(x.mask.double(), x.seq_index, x.num_seqs).clamp(min=1)  # [S]
    log_s = segment_sum(delta.detach(), x.seq_index, x.num_seqs) / count  # [S] log s_i
    log_s_t = per_token(log_s, x.seq_index).to(x.logp.dtype)  # [T]
    s_t = torch.exp(log_s_t + x.logp - x.logp.detach())  # value s_i, gradient s_i·∇log pi
    unclipped = -x.advantages * s_t
    clipped = -x.advantages * s_t.clamp(1.0 - p.gspo_eps_low, 1.0 + p.gspo_eps_high)
    return LossOutput(
        torch.maximum(unclipped, clipped), clipped > unclipped, {"seq_ratio": s_t.detach()}
    )


def _cispo(x: LossInput, p: LossParams) -> LossOutput:
    """CISPO: −sg(clip(ratio, 1 − eps_low, 1 + eps_high))·A·log pi_theta, a gradient on every token."""
    ratio = torch.exp(x.logp.detach() - x.old_logp.detach())
    weight = ratio.clamp(1.0 - p.eps_low, 1.0 + p.eps_high)
    return LossOutput(-weight * x.advantages * x.logp, weight != ratio)


POLICY_LOSSES: dict[str, PolicyLossFn] = {
    "clip": _clip,
    "dual-clip": _dual_clip,
    "gspo": _gspo,
    "cispo": _cispo,
}
"""The built-in losses (algorithm.policy_loss): name -> f(LossInput, LossParams) -> LossOutput."""


def describe(name: str) -> str:
    """What loss `name` does, in one line: its function's docstring up to the first period (for
    `microcoder compare`'s arm list)."""
    doc = " ".join((POLICY_LOSSES[name].__doc__ or name).split())
    return doc.split(". ")[0].rstrip(".")


def resolve(name: str) -> PolicyLossFn:
    """The function `name` names: a built-in of POLICY_LOSSES or a user's `module:function`
    (imported here). ValueError, saying what to set, for anything else (loss_names.check)."""
    return loss_names.check(name) or POLICY_LOSSES[name]


class PolicyLoss:
    """The configured loss, resolved once: call it with a micro-batch's LossInput."""

    def __init__(self, name: str, params: LossParams) -> None:
        self.name = name
        self.params = params
        self.fn = resolve(name)
        self.user = name not in POLICY_LOSSES

    @classmethod
    def of(cls, algorithm: object) -> PolicyLoss:
        """The loss an AlgorithmConfig names, with its LossParams fields."""
        params = LossParams(*(float(getattr(algorithm, f)) for f in LossParams._fields))
        return cls(algorithm.policy_loss, params)

    def __call__(self, x: LossInput) -> LossOutput:
        if not self.user:
            return self.fn(x, self.params)
        try:
            out = self.fn(x, self.params)
        except Exception as err:
            raise PolicyLossError(
                f"the user policy loss {self.name} (algorithm.policy_loss) raised "
                f"{type(err).__name__}: {err}; the run stops: fix the function, or set "
                f"algorithm.policy_loss to one of {', '.join(POLICY_LOSSES)}"
            ) from err
        return self._checked(out, x.logp.shape)

    def _checked(self, out: object, shape: torch.Size) -> LossOutput:
        """The user's result, refused unless it is a LossOutput of [T] tensors."""
        if isinstance(out, LossOutput):
            parts = {"loss": out.loss, "clipped": out.clipped, **out.metrics}
            wrong = {
                k: tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__
                for k, t in parts.items()
                if not (isinstance(t, torch.Tensor) and t.shape == shape)
            }
            if not wrong:
                return LossOutput(out.loss, out.clipped.bool(), out.metrics)
            got = f"a LossOutput with {wrong}"
        else:
            got = type(out).__name__
        raise PolicyLossError(
            f"the user policy loss {self.name} (algorithm.policy_loss) returned {got}; it must "
            f"return a LossOutput whose loss, clipped and metrics are tensors shaped like logp, "
            f"{tuple(shape)} (learner/algorithm/policy_loss.py: LossOutput)"
        )


class MetricSums:
    """A step's sums of the loss's named metrics over trained tokens, kept on the device."""

    def __init__(self) -> None:
        self.sums: dict[str, torch.Tensor] = {}

    def add(self, metrics: dict[str, torch.Tensor], real: torch.Tensor) -> None:
        """Add Σ_t value_t over the tokens `real` ([T] bool) of one micro-batch."""
        for name, value in metrics.items():
            part = (value.detach().double() * real.double()).sum()
            self.sums[name] = self.sums.get(name, 0) + part

    def vector(self, device: torch.device) -> torch.Tensor:  # [len(sums)] float64
        """The sums in name order (for the step's one all-gather)."""
        if not self.sums:
            return torch.zeros(0, dtype=torch.float64, device=device)
        return torch.stack([self.sums[k] for k in sorted(self.sums)])

    def metrics(self, reduced: torch.Tensor, tokens: float) -> dict[str, float]:
        """`policy_loss_<name>`: each metric's mean over `tokens` trained tokens, from the
        reduced vector."""
        return {
            f"policy_loss_{k}": float(v) / tokens
            for k, v in zip(sorted(self.sums), reduced.tolist(), strict=True)
        }
