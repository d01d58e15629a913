"""The per-step mismatch between the generators' and the learner's log-probs, by staleness.

Per response token the model sampled (a multi-turn trajectory's feedback tokens are not
counted), Δ = log pi_learner(o_t) − log pi_behaviour(o_t) and ρ = exp(Δ), where
pi_learner is the learner's policy at the start of the step (the recomputed pi_old, or this
step's forward with one mini-batch) and pi_behaviour the generator's reported log-prob. Even at
staleness 0 they differ: vLLM's kernels and precision are not the learner's.

    abs_dlogp      mean |Δ|
    kl             mean k3 = ρ − 1 − Δ, Schulman's estimate of KL(pi_behaviour ‖ pi_learner) from
                   tokens sampled by pi_behaviour (≥ 0 per token)
    ratio_p1/p50/p99   quantiles of ρ over the tokens (from a histogram of Δ, see below)
    out_of_band_frac   fraction of tokens with ρ outside [1/C, C] (C = algorithm.tis_cap: the
                   band of the `mask` and `geo-reject` corrections, learner/algorithm/off_policy.py)

Each micro-batch adds its tokens to one fixed-size float64 vector (`mismatch_sums`): per
staleness bucket (learner version − the response's policy version; 0 … STALENESS_BUCKETS − 2,
and a last bucket for every older one) four sums and a histogram of Δ in bins of BIN_WIDTH over
[−LOG_RANGE, LOG_RANGE] (values beyond are counted in the edge bins). The vector is summed over
micro-batches and ranks with the step's other sums (one collective, no host sync before it);
`mismatch_metrics` turns the total into the step's metrics.
The same four sums are also kept for two spans, responses sampled by one policy version
("single") and responses that an in-flight weight update split between two ("spanned": their
last version is newer than their first, `generator.weight_update = "inflight"`; under
`generator.inflight_kv = "reuse"` also a response whose every token the new version sampled
over prompt KV the old one may have cached, tagged with its submission version by
actors/generate_loop.py `sample_group`'s KV floor), so the price in
mismatch of `generator.inflight_kv` (old KV kept under new weights, or recomputed) can be read
apart from the staleness (`mismatch_by_span`; no histogram, so no quantiles). A quantile is the centre of the
first bin where the cumulative count reaches p · N, so it is within BIN_WIDTH / 2 in log space
(0.1 % in ratio) of the exact inverted-CDF quantile, inside the range.
"""

from __future__ import annotations

import math

import torch

from microcoder.learner.algorithm.grpo import kl_k3

STALENESS_BUCKETS = 9
"""Buckets 0 … 7 hold responses of that staleness, bucket 8 ("8+") every older one."""
BIN_WIDTH = 2e-3
"""Histogram bin width in log-ratio (nats)."""
LOG_RANGE = 4.0
"""The histogram spans log ratios in [−LOG_RANGE, LOG_RANGE] (ratios e^±4 ≈ 55 and 1/55)."""
BINS = int(round(2 * LOG_RANGE / BIN_WIDTH)) + 1
_SUMS = ("tokens", "abs_dlogp", "kl", "out_of_band")
_MEANS = ("abs_dlogp", "kl", "out_of_band_frac")  # _SUMS[1:] divided by the tokens
SPANS = ("single", "spanned")
"""The `mismatch_by_span` keys: responses of one policy version, and those an update split
(last_policy_version newer than policy_version)."""
SIZE = STALENESS_BUCKETS * (len(_SUMS) + BINS) + len(SPANS) * len(_SUMS)
"""Length of the vector `mismatch_sums` returns."""
QUANTILES = {"ratio_p1": 0.01, "ratio_p50": 0.5, "ratio_p99": 0.99}


def mismatch_sums(
    learner_logp: torch.Tensor,  # [T] log pi_learner at the sampled tokens
    behaviour_logp: torch.Tensor,  # [T] log pi_behaviour
    staleness: torch.Tensor,  # [T] long: staleness of each token's response
    real: torch.Tensor,  # [T] bool: tokens to count (finite, not a dummy)
    cap: float,  # C: the band [1/C, C]
    spanned: torch.Tensor | None = None,  # [T] bool: the token's response spans two versions
) -> torch.Tensor:  # [SIZE] float64
    """One micro-batch's per-bucket sums and Δ histogram, then the per-span sums (layout:
    [buckets × 4 sums, buckets × BINS histogram, spans × 4 sums]). Tokens that are not `real`
    add nothing; `spanned` None = every response of one version."""
    k = STALENESS_BUCKETS
    delta = (learner_logp.detach().double() - behaviour_logp.double()).where(real, 0.0)
    w = real.double()
    bucket = staleness.clamp(0, k - 1)
    values = torch.stack(
        [
            w,
            delta.abs() * w,
            kl_k3(torch.zeros_like(delta), delta) * w,
            (delta.abs() > math.log(cap)).double() * w,
        ],
        dim=1,
    )  # [T, 4]
    sums = torch.zeros(k, len(_SUMS), dtype=torch.float64, device=delta.device)
    sums.index_add_(0, bucket, values)
    bins = ((delta + LOG_RANGE) / BIN_WIDTH).round().clamp(0, BINS - 1).long()
    hist = torch.zeros(k * BINS, dtype=torch.float64, device=delta.device)
    hist.index_add_(0, bucket * BINS + bins, w)
    span = torch.zeros_like(bucket) if spanned is None else spanned.long()
    by_span = torch.zeros(len(SPANS), len(_SUMS), dtype=torch.float64, device=delta.device)
    by_span.index_add_(0, span, values)
    return torch.cat([sums.flatten(), hist, by_span.flatten()])


def _quantile(hist: torch.Tensor, p: float) -> float:
    """exp(centre of the first bin where the cumulative count reaches p · N)."""
    cdf = hist.cumsum(0)
    i = int(torch.searchsorted(cdf, p * float(cdf[-1]) - 1e-9))
    return math.exp(-LOG_RANGE + min(i, BINS - 1) * BIN_WIDTH)


def _means(sums: torch.Tensor) -> dict[str, float]:
    """The token count and the per-token means of one row of the four sums (`_SUMS`)."""
    n = float(sums[0])
    return {"tokens": n} | {m: float(sums[i]) / n for i, m in enumerate(_MEANS, 1)}


def _describe(sums: torch.Tensor, hist: torch.Tensor) -> dict[str, float]:
    return _means(sums) | {name: _quantile(hist, p) for name, p in QUANTILES.items()}


def bucket_name(b: int) -> str:
    """ "0" … "7", and "8+" for the last bucket."""
    return f"{b}+" if b == STALENESS_BUCKETS - 1 else str(b)


def mismatch_metrics(total: torch.Tensor) -> dict:
    """The step's mismatch metrics from the summed `mismatch_sums` vectors (on the host):
    `mismatch_<name>` over every token, `mismatch_by_staleness` {bucket: {name: value}} for
    each bucket that has tokens, and `mismatch_by_span` {"single" | "spanned": {tokens,
    abs_dlogp, kl, out_of_band_frac}} for each span that has tokens ({} and no overall values
    when there are none)."""
    total = total.detach().double().cpu()
    k = STALENESS_BUCKETS
    n = len(_SUMS)
    sums = total[: k * n].view(k, n)
    hist = total[k * n : k * (n + BINS)].view(k, BINS)
    spans = total[k * (n + BINS) :].view(len(SPANS), n)
    if float(sums[:, 0].sum()) == 0:
        return {"mismatch_by_staleness": {}, "mismatch_by_span": {}}
    overall = _describe(sums.sum(0), hist.sum(0))
    by = {bucket_name(b): _describe(sums[b], hist[b]) for b in range(k) if float(sums[b, 0]) > 0}
    out = {f"mismatch_{name}": v for name, v in overall.items() if name != "tokens"}
    by_span = {
        name: _means(row) for name, row in zip(SPANS, spans, strict=True) if float(row[0]) > 0
    }
    return out | {"mismatch_by_staleness": by, "mismatch_by_span": by_span}
