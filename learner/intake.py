"""The learner's intake: one typed batch record, packed on rank 0 and broadcast to every rank.

Rank 0 pulls scored groups from the buffer (actors/learner_rank.py: `fetch_batch`), applies the
one dynamic filter (`signal_filter`), and packs what it keeps into a `PackedBatch`: a few flat
tensors made from the codec's numpy arrays with `np.concatenate` + `torch.from_numpy`, no Python
lists. `broadcast` sends it over the learner's own process group (gloo on CPU, NCCL on GPU, as
learner/distributed.py chose), so the batch never goes through the Ray driver or its object
store. Every rank then builds its training batch from the same record (learner/batch.py).

learner/ does not import buffer/: `GroupArrays` is the field copy of a `ScoredGroup`
(microcoder/protocol.py) that actors/convert.py makes (the arrays by reference), and
`pack_samples` makes one from the list-based `SampleGroup`s that benchmarks and tests build.
`PackedBatch`, which crosses to the other ranks, is defined with the other cross-process types
in microcoder/protocol.py; `_SPEC` here is its wire form (each field's dtype and size).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass, fields, replace

import numpy as np
import torch
import torch.distributed as dist

from microcoder.learner.algorithm import grpo
from microcoder.learner.sample import SampleGroup
from microcoder.protocol import PackedBatch

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class GroupArrays:
    """One scored group's G responses as numpy arrays (responses with no tokens left out)."""

    group_id: int
    """The buffer's group id (a position for `pack_samples`)."""
    prompt_ids: np.ndarray
    """[P] int32: the prompt every response continues."""
    response_ids: Sequence[np.ndarray]
    """G × [R_i] int32, each non-empty."""
    logprobs: Sequence[np.ndarray]
    """G × [R_i] float32: behaviour log-probs, one per response token."""
    rewards: np.ndarray
    """[G] float64."""
    temperatures: np.ndarray
    """[G] float32: the temperature each response was sampled at."""
    truncated: np.ndarray
    """[G] bool: stopped at max_response_tokens."""
    non_incorrect: np.ndarray
    """[G] bool: the verdict is not a failed test (grpo.is_non_incorrect)."""
    policy_versions: np.ndarray
    """[G] int64: the version that sampled each response's first token."""
    last_policy_versions: np.ndarray
    """[G] int64: the version that sampled its last token (= first when not recorded)."""
    response_index: np.ndarray
    """[G] int64: each response's position in its buffer group (responses left out before,
    such as empty ones, leave gaps): what ties a trained sequence back to its text and verdict
    (the rollouts log, actors/rollouts.py)."""
    generator: str = ""
    """The generator that sampled the group (its owner id; "" when not known), for logs."""
    loss_masks: Sequence[np.ndarray | None] | None = None
    """G × ([R_i] uint8 or bool, 1 = a model token, or None = every token the model's): a
    multi-turn trajectory's loss mask (Response.loss_mask); None: no response has one."""


# Each field's dtype and the size it has (a key of PackedBatch.sizes), in broadcast order.
_SPEC = {
    "group_ids": (torch.int64, "G"),
    "group_index": (torch.int64, "S"),
    "tokens": (torch.int32, "T"),
    "prompt_lens": (torch.int64, "S"),
    "response_lens": (torch.int64, "S"),
    "behaviour_logprobs": (torch.float32, "R"),
    "rewards": (torch.float32, "S"),
    "temperatures": (torch.float32, "S"),
    "truncated": (torch.bool, "S"),
    "non_incorrect": (torch.bool, "S"),
    "policy_versions": (torch.int64, "S"),
    "last_policy_versions": (torch.int64, "S"),
    "response_mask": (torch.bool, "R"),
}
assert list(_SPEC) == [f.name for f in fields(PackedBatch)]


def signal_filter(
    groups: Sequence[GroupArrays], on: bool
) -> tuple[list[GroupArrays], list[GroupArrays]]:
    """THE dynamic filter (DAPO): (kept, dropped); with `on`, a group whose rewards are all equal
    has no signal (every advantage 0) and is dropped. It runs once per batch, on rank 0 while it
    fetches (so it can fetch more), or in `Learner.train_step` for a caller's SampleGroups."""
    if not on:
        return list(groups), []
    kept = []
    dropped = []
    for g in groups:
        (kept if grpo.group_has_signal(g.rewards.tolist()) else dropped).append(g)
    return kept, dropped


@dataclass(frozen=True)
class DroppedSample:
    """A response the non-finite guard took out of its group (`drop_nonfinite`)."""

    group_id: int
    index: int
    """Its position in the group."""
    generator: str
    policy_version: int
    token: int
    """The response token of the first non-finite behaviour log-prob."""
    value: float
    """That log-prob (NaN, +inf or −inf)."""

    def describe(self) -> str:
        return (
            f"group {self.group_id} response {self.index} (generator {self.generator or '?'}, "
            f"policy version {self.policy_version}): behaviour log-prob {self.value} at response "
            f"token {self.token}; the response is dropped (a generator reporting NaN/Inf "
            "log-probs points at its engine: a weight update racing generation, or bad weights)"
        )


def drop_nonfinite(
    groups: Sequence[GroupArrays],
) -> tuple[list[GroupArrays], list[DroppedSample], list[int]]:
    """The non-finite guard at intake: a response with a NaN or infinite behaviour log-prob never
    reaches the loss (a NaN would make its importance weight NaN, a −inf one would be capped
    silently). Returns (the groups without those responses, each dropped response, logged as a
    warning, and the ids of the groups left with none: they are dropped whole). The group's
    advantages are then taken over the responses that remain."""
    kept: list[GroupArrays] = []
    dropped: list[DroppedSample] = []
    emptied: list[int] = []
    for g in groups:
        # only the model's tokens: a multi-turn trajectory's feedback log-probs are never read
        nonfinite = [~np.isfinite(lp) & _mask(g, i) for i, lp in enumerate(g.logprobs)]
        bad = [i for i, b in enumerate(nonfinite) if b.any()]
        if not bad:
            kept.append(g)
            continue
        for i in bad:
            t = int(np.flatnonzero(nonfinite[i])[0])
            d = DroppedSample(
                g.group_id, i, g.generator, int(g.policy_versions[i]), t, g.logprobs[i][t]
            )
            log.warning("non-finite guard: %s", d.describe())
            dropped.append(d)
        good = [i for i in range(len(g.response_ids)) if i not in bad]
        if not good:
            emptied.append(g.group_id)
            continue
        kept.append(_select(g, good))
    return kept, dropped, emptied


def _select(g: GroupArrays, keep: list[int]) -> GroupArrays:
    """The group with only the responses at `keep`."""
    per_response = {
        f.name: getattr(g, f.name)
        for f in fields(g)
        if f.name not in ("group_id", "prompt_ids", "generator") and getattr(g, f.name) is not None
    }
    return replace(
        g,
        **{
            k: (v[keep] if isinstance(v, np.ndarray) else [v[i] for i in keep])
            for k, v in per_response.items()
        },
    )


def pack(groups: Sequence[GroupArrays]) -> PackedBatch:
    """The groups as one PackedBatch: each field one `np.concatenate`, then `torch.from_numpy`."""
    n = [len(g.response_ids) for g in groups]
    prompt_lens = np.repeat(np.array([len(g.prompt_ids) for g in groups], np.int64), n)
    pieces = [a for g in groups for r in g.response_ids for a in (g.prompt_ids, r)]
    responses = [r for g in groups for r in g.response_ids]

    return PackedBatch(
        group_ids=torch.tensor([g.group_id for g in groups], dtype=torch.int64),
        group_index=torch.from_numpy(np.repeat(np.arange(len(groups), dtype=np.int64), n)),
        tokens=_tensor(pieces, np.int32),
        prompt_lens=torch.from_numpy(prompt_lens),
        response_lens=torch.from_numpy(np.array([len(r) for r in responses], np.int64)),
        behaviour_logprobs=_tensor([lp for g in groups for lp in g.logprobs], np.float32),
        rewards=_tensor([g.rewards for g in groups], np.float32),
        temperatures=_tensor([g.temperatures for g in groups], np.float32),
        truncated=_tensor([g.truncated for g in groups], np.bool_),
        non_incorrect=_tensor([g.non_incorrect for g in groups], np.bool_),
        policy_versions=_tensor([g.policy_versions for g in groups], np.int64),
        last_policy_versions=_tensor([g.last_policy_versions for g in groups], np.int64),
        response_mask=_tensor(
            [_mask(g, i) for g in groups for i in range(len(g.response_ids))], np.bool_
        ),
    )


def _mask(g: GroupArrays, i: int) -> np.ndarray:
    """Response i's loss mask as bools (all True where it has none: a single turn)."""
    m = None if g.loss_masks is None else g.loss_masks[i]
    return np.ones(len(g.response_ids[i]), np.bool_) if m is None else np.asarray(m) != 0


def _tensor(arrays: list[np.ndarray], dtype) -> torch.Tensor:
    if not arrays:
        return torch.from_numpy(np.zeros(0, dtype))
    return torch.from_numpy(np.concatenate(arrays).astype(dtype, copy=False))


@dataclass(frozen=True)
class IntakeStats:
    """What rank 0 saw while it fetched one batch; each is logged once, under its field's name."""

    filtered_groups: int
    """Groups the dynamic filter dropped (all rewards equal); fetched and counted consumed."""
    reward_mean: float
    """Mean reward over every response of every fetched group, filtered ones included."""
    staleness_mean: float | None
    """Mean over the trained groups of the buffer's staleness (learner version − the oldest
    policy version in the group, buffer/staleness.py), at the version they were fetched at;
    None (not logged) when every group was filtered."""
    staleness_max: float | None
    """Largest staleness among the trained groups; None when every group was filtered."""
    diversity: float
    """Mean n-gram diversity over the fetched groups (learner/algorithm/diversity.py)."""
    pack_s: float
    """Seconds rank 0 spent packing the kept groups into the PackedBatch."""
    nonfinite_dropped: int = 0
    """Responses the non-finite guard dropped (a NaN/Inf behaviour log-prob: `drop_nonfinite`)."""

    def metrics(self) -> dict[str, float]:
        """The step's metrics, under the field names (None fields left out)."""
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        return {k: float(v) for k, v in values.items() if v is not None}


def sample_group_arrays(group: SampleGroup, position: int) -> GroupArrays:
    """A list-based SampleGroup (benchmarks, tests, SFT-style callers) as GroupArrays."""
    s = group.samples
    return GroupArrays(
        group_id=position,
        prompt_ids=np.asarray(s[0].prompt_ids if s else [], np.int32),
        response_ids=[np.asarray(x.response_ids, np.int32) for x in s],
        logprobs=[np.asarray(x.behaviour_logprobs, np.float32) for x in s],
        rewards=np.array([x.reward for x in s], np.float64),
        temperatures=np.array([x.temperature for x in s], np.float32),
        truncated=np.array([x.truncated for x in s], np.bool_),
        non_incorrect=np.array([grpo.is_non_incorrect(x.verdict) for x in s], np.bool_),
        policy_versions=np.array([x.policy_version for x in s], np.int64),
        last_policy_versions=np.array([_last(x) for x in s], np.int64),
        response_index=np.arange(len(s), dtype=np.int64),
        loss_masks=[_sample_mask(x) for x in s],
    )


def _sample_mask(sample) -> np.ndarray | None:
    mask = getattr(sample, "loss_mask", None)
    return None if mask is None else np.asarray(mask, np.uint8)


def _last(sample) -> int:
    last = getattr(sample, "last_policy_version", None)
    return sample.policy_version if last is None else last


def pack_samples(groups: Sequence[SampleGroup]) -> PackedBatch:
    """SampleGroups as a PackedBatch (no filter: see `signal_filter`)."""
    return pack([sample_group_arrays(g, k) for k, g in enumerate(groups)])


def broadcast(batch: PackedBatch | None, device: torch.device, src: int = 0) -> PackedBatch:
    """Collective: rank `src` passes its batch, every other rank None; all return equal records
    (on CPU). Over the default process group (the learner's): a header of the four sizes, then
    one broadcast per field, on `device` (NCCL needs CUDA tensors; gloo takes CPU ones). Bools
    travel as uint8 (gloo has no bool)."""
    rank = dist.get_rank()
    if (rank == src) != (batch is not None):
        raise ValueError(f"rank {rank}: only rank {src} passes a batch to broadcast, the rest None")
    header = torch.zeros(4, dtype=torch.int64)
    if batch is not None:
        header = torch.tensor(list(batch.sizes.values()), dtype=torch.int64)
    header = header.to(device)
    dist.broadcast(header, src)
    sizes = dict(zip("GSTR", header.tolist(), strict=True))
    out = {}
    for name, (dtype, dim) in _SPEC.items():
        wire = torch.uint8 if dtype == torch.bool else dtype
        if batch is not None:
            t = getattr(batch, name).to(device=device, dtype=wire)
        else:
            t = torch.empty(sizes[dim], dtype=wire, device=device)
        dist.broadcast(t, src)
        out[name] = t.cpu().to(dtype)
    return PackedBatch(**out)


def digest(batch: PackedBatch) -> dict:
    """What identifies a batch's content: its group ids, and SHA-256 of its tokens (int32) and of
    its behaviour log-probs (float32). Equal on every rank after `broadcast`."""

    def sha(t: torch.Tensor) -> str:
        return hashlib.sha256(t.contiguous().numpy().tobytes()).hexdigest()

    return {
        "group_ids": batch.group_ids.tolist(),
        "tokens": sha(batch.tokens.to(torch.int32)),
        "logprobs": sha(batch.behaviour_logprobs.to(torch.float32)),
        "sequences": len(batch),
    }
