"""Splitting a batch over ranks and micro-batches, and collating a micro-batch into tensors.

Packed: the sequences of a micro-batch are concatenated into one row of at most
`micro_batch_tokens` tokens; positions restart at 0 for each sequence and the attention kernel
gets the sequence boundaries (cu_seq_lens), so no token attends across sequences and no compute
is spent on padding. Padded (the baseline): right-padded rows, rows × longest ≤ the budget.

Every rank receives the whole batch and computes the same plan, so every rank knows how many
micro-batches the others run; ranks with fewer get empty micro-batches (a zero-weight dummy),
because FSDP's collectives need every rank in every forward/backward.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from microcoder.learner.batch import TrainBatch

Plan = list[list[list[int]]]
"""plan[rank][micro] = indices of the batch's sequences in that micro-batch."""


def balance_ranks(lengths: Sequence[int], world: int) -> list[list[int]]:
    """Longest-first greedy split of sequence indices over `world` ranks, balancing tokens."""
    loads = [0] * world
    shards: list[list[int]] = [[] for _ in range(world)]
    for i in sorted(range(len(lengths)), key=lambda k: (-lengths[k], k)):
        r = min(range(world), key=lambda q: (loads[q], q))
        shards[r].append(i)
        loads[r] += lengths[i]
    return [sorted(s) for s in shards]


def pack_bins(indices: Sequence[int], lengths: Sequence[int], budget: int) -> list[list[int]]:
    """First-fit-decreasing bins of at most `budget` tokens (a longer sequence gets its own bin)."""
    bins: list[list[int]] = []
    room: list[int] = []
    for i in sorted(indices, key=lambda k: (-lengths[k], k)):
        for b, free in enumerate(room):
            if lengths[i] <= free:
                bins[b].append(i)
                room[b] -= lengths[i]
                break
        else:
            bins.append([i])
            room.append(budget - lengths[i])
    return bins


def padded_rows(indices: Sequence[int], lengths: Sequence[int], budget: int) -> list[list[int]]:
    """In-order rows for padding: add sequences while rows × longest stays within `budget`."""
    out: list[list[int]] = []
    cur: list[int] = []
    longest = 0
    for i in indices:
        new_longest = max(longest, lengths[i])
        if cur and (len(cur) + 1) * new_longest > budget:
            out.append(cur)
            cur = []
            new_longest = lengths[i]
        cur.append(i)
        longest = new_longest
    if cur:
        out.append(cur)
    return out


def plan_micro_batches(
    lengths: Sequence[int], world: int, budget: int, packed: bool = True
) -> Plan:
    """plan[rank][micro]: ranks balanced by tokens, the same number of micro-batches on each."""
    shards = balance_ranks(lengths, world)
    split = pack_bins if packed else padded_rows
    plan = [split(s, lengths, budget) for s in shards]
    count = max(1, max(len(p) for p in plan))
    for p in plan:
        p.extend([] for _ in range(count - len(p)))
    return plan


@dataclass(frozen=True)
class MicroBatch:
    """Model inputs and per-token loss inputs of one micro-batch (n = response tokens in it)."""

    input_ids: torch.Tensor  # [R, L] long (R = 1 when packed)
    position_ids: torch.Tensor  # [R, L] long, restarting at 0 for each sequence
    cu_seq_lens: (
        torch.Tensor | None
    )  # [k + 1] int32 sequence boundaries in the packed row; None if padded
    max_len: int  # longest sequence in the micro-batch
    logit_index: (
        torch.Tensor
    )  # [n] long: flat position (row·L + col) whose logits predict each target
    targets: torch.Tensor  # [n] long
    temperature: torch.Tensor  # [n] float32
    behaviour_logp: torch.Tensor  # [n] float32
    advantages: torch.Tensor  # [n] float32
    weight: torch.Tensor  # [n] float64: aggregation weight of each token (0 for a dummy)
    seq_index: torch.Tensor  # [n] long: index of each token's sequence in the batch
    tokens: int  # real tokens (prompt + response) in the micro-batch
    seq_lens: tuple[int, ...] = ()  # host lengths of the packed sequences (for attention.plan)
    loss_mask: torch.Tensor | None = None  # [n] bool: the model's tokens (False: a multi-turn
    # trajectory's feedback tokens, which add nothing to the loss or its sums); None = all

    @property
    def packed(self) -> bool:
        return self.cu_seq_lens is not None

    def to(self, device: torch.device) -> MicroBatch:
        """A copy with every tensor on `device`; to CUDA from pinned memory without blocking the
        host (the copies queue on the stream ahead of the forward that reads them)."""
        cuda = device.type == "cuda"

        def move(v: torch.Tensor) -> torch.Tensor:
            return v.pin_memory().to(device, non_blocking=True) if cuda else v.to(device)

        fields = {k: (move(v) if isinstance(v, torch.Tensor) else v) for k, v in vars(self).items()}
        return MicroBatch(**fields)


def collate(
    batch: TrainBatch, indices: Sequence[int], weights: torch.Tensor, packed: bool
) -> MicroBatch:
    """Tensors for the sequences `indices` of `batch`; `weights` [S] are per-sequence token weights.

    An empty `indices` gives a one-token dummy with weight 0 (keeps the rank in the collectives).
    """
    if not indices:
        return _dummy(packed)
    seqs = [batch.input_ids[i] for i in indices]
    lens = [int(s.numel()) for s in seqs]
    rows, width = (1, sum(lens)) if packed else (len(seqs), max(lens))
    input_ids = torch.zeros(rows, width, dtype=torch.long)
    position_ids = torch.zeros(rows, width, dtype=torch.long)
    logit_index = []
    targets = []
    seq_index = []
    offset = 0
    for k, (i, s, n) in enumerate(zip(indices, seqs, lens, strict=True)):
        row, col = (0, offset) if packed else (k, 0)
        input_ids[row, col : col + n] = s
        position_ids[row, col : col + n] = torch.arange(n)
        p = int(batch.prompt_lens[i])
        r = int(batch.response_lens[i])
        start = (
            row * width + col + p - 1
        )  # the logits at position p-1 predict the first response token
        logit_index.append(torch.arange(start, start + r))
        targets.append(s[p:])
        seq_index.append(torch.full((r,), i, dtype=torch.long))
        offset += n
    seq_index_t = torch.cat(seq_index)
    cu = (
        torch.tensor([0, *torch.tensor(lens).cumsum(0).tolist()], dtype=torch.int32)
        if packed
        else None
    )
    return MicroBatch(
        input_ids=input_ids,
        position_ids=position_ids,
        cu_seq_lens=cu,
        max_len=max(lens),
        logit_index=torch.cat(logit_index),
        targets=torch.cat(targets),
        temperature=batch.temperatures[seq_index_t],
        behaviour_logp=torch.cat([batch.behaviour_logprobs[i] for i in indices]),
        advantages=batch.advantages[seq_index_t],
        weight=weights[seq_index_t],
        seq_index=seq_index_t,
        tokens=sum(lens),
        seq_lens=tuple(lens) if packed else (),
        loss_mask=None
        if batch.loss_masks is None
        else torch.cat([batch.loss_masks[i] for i in indices]),
    )


def _dummy(packed: bool) -> MicroBatch:
    one = torch.zeros(1, 2, dtype=torch.long)
    return MicroBatch(
        input_ids=one,
        position_ids=torch.arange(2).unsqueeze(0),
        cu_seq_lens=torch.tensor([0, 2], dtype=torch.int32) if packed else None,
        max_len=2,
        logit_index=torch.tensor([0]),
        targets=torch.tensor([0]),
        temperature=torch.ones(1),
        behaviour_logp=torch.zeros(1),
        advantages=torch.zeros(1),
        weight=torch.zeros(1, dtype=torch.float64),
        seq_index=torch.tensor([-1]),
        tokens=0,
        seq_lens=(2,) if packed else (),
    )
