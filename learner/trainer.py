"""The learner rank: an FSDP2-sharded policy and one MicroCoder-GRPO optimizer step per batch.

Every rank of the learner group builds a `Learner` and calls `train_step(batch)` with the SAME
batch (rank 0's PackedBatch, broadcast to every rank: learner/intake.py); each rank trains on
its token-balanced share (see packing.py), and the per-token aggregation weights are computed
over the whole batch, so W ranks × K micro-batches give the gradient of one big batch. FSDP2 averages gradients over ranks, hence the × W on each
rank's loss.

Everything a collective of the step touches lives on the compute device (`Learner.device`): the
metric sums are accumulated there and leave it once per step (one all-gather, one host sync),
never once per micro-batch.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from functools import partial
from pathlib import Path

import torch
import torch.distributed as dist

from microcoder.learner import attention, sequence_parallel
from microcoder.learner.algorithm import grpo, mismatch, off_policy, policy_loss
from microcoder.learner.batch import TrainBatch, build_batch, mask_generator
from microcoder.learner.checkpoint import load_training_state
from microcoder.learner.config import AlgorithmConfig, LearnerConfig, check_off_policy_rule
from microcoder.learner.distributed import (
    full_state_dict,
    init_distributed,
    load_sharded_policy,
    pick_device,
    resolve_dtype,
)
from microcoder.learner.forward import target_logprobs
from microcoder.learner.intake import (
    PackedBatch,
    drop_nonfinite,
    pack,
    sample_group_arrays,
    signal_filter,
)
from microcoder.learner.lora import adapter_state_dict, merge_into
from microcoder.learner.models.families import head_transform
from microcoder.learner.optim import build_optimizer
from microcoder.learner.packing import MicroBatch, collate, plan_micro_batches
from microcoder.learner.sample import SampleGroup
from microcoder.learner.step_sums import SUMS, log_nonfinite, micro_batch_sums, off_policy_metrics

log = logging.getLogger(__name__)


class Learner:
    """One rank of the learner group: model, optimizer, schedule, policy version."""

    def __init__(
        self,
        model_path: str | Path,
        learner: LearnerConfig,
        algorithm: AlgorithmConfig,
        *,
        seed: int = 0,
        device: str = "auto",
        total_steps: int = 1,
        config_overrides: dict | None = None,
    ) -> None:
        """`config_overrides`: model.config_overrides, applied to the model's config.json
        (learner/models/config_overrides.py); a checkpoint saved here carries them."""
        check_off_policy_rule(algorithm.off_policy, learner.recompute_old_logprobs)
        self.cfg = learner
        self.algo = algorithm
        self.policy_loss = policy_loss.PolicyLoss.of(algorithm)
        """algorithm.policy_loss, resolved (learner/algorithm/policy_loss.py)."""
        self.loss_metrics = policy_loss.MetricSums()
        """The step's sums of the policy loss's named metrics (reset each step)."""
        self.seed = seed
        self.model_path = Path(model_path)
        self.device = pick_device(device)
        """The compute device: the model's shards, the micro-batches, and every tensor this class
        passes to a collective (the group's NCCL half serves only these on CUDA)."""
        self.rank, self.world = init_distributed(self.device)
        torch.manual_seed(seed + self.rank)
        self.dtype = resolve_dtype(learner.dtype, self.device)
        self.attn = attention.choose(learner.attn_implementation, self.device)
        load = partial(
            load_sharded_policy,
            self.model_path,
            self.device,
            self.dtype,
            self.attn,
            replicas=learner.replicas,
            offload=learner.offload,
            config_overrides=config_overrides,
        )
        self.model = load(
            activation_checkpointing=learner.activation_checkpointing, lora=learner.lora, seed=seed
        )
        self.sp = sequence_parallel.setup(learner, algorithm, self.model.config, self.attn)
        """This rank's sequence-parallel layout: its data-parallel share, its slice of a row."""
        self.head_transform = head_transform(self.model.config)
        """(scale, softcap) of the model's own final logit processing (learner/models/families.py),
        applied by the chunked head as the model's forward would."""
        self.ref_model = None
        if algorithm.kl_coef > 0:
            self.ref_model = load(train=False)
        self.optimizer, self.scheduler = build_optimizer(
            self.model.parameters(), learner, total_steps * learner.mini_batches
        )
        self.version = 0
        """Policy version: optimizer batches completed (0 = the initial weights)."""
        self.updates_skipped = 0
        """Optimizer steps skipped by the non-finite guard in this process (_clip_and_step)."""
        self.skipped_in_a_row = 0
        """Optimizer steps skipped in a row, up to the latest; 0 after an update."""
        self.weights_finite = True
        """Every rank's parameters were finite after the latest step (checked with its metrics);
        publishing refuses weights that are not (`full_state_dict`)."""

    # --- training -------------------------------------------------------------------------------

    def train_step(self, batch: PackedBatch | Sequence[SampleGroup]) -> dict[str, float]:
        """Build the training batch (advantages, mask) and train on it; returns the step's metrics.

        A PackedBatch (a run: rank 0 filtered it while fetching, learner/intake.py) is trained on
        as it is; a caller's SampleGroups (benchmarks, tests) pass the one dynamic filter first.
        """
        extra = {}
        if not isinstance(batch, PackedBatch):
            groups, bad, _ = drop_nonfinite(
                [sample_group_arrays(g, k) for k, g in enumerate(batch)]
            )
            kept, _ = signal_filter(groups, self.algo.dynamic_filtering)
            batch = pack(kept)
            extra = {"nonfinite_dropped": float(len(bad))}
        built = build_batch(batch, self.algo, mask_generator(self.seed, self.version))
        return {**self.train_on_batch(built), **extra}

    def train_on_batch(self, batch: TrainBatch) -> dict[str, float]:
        """`mini_batches` optimizer steps over `batch`, then version += 1. Collective.

        Metrics about the fetch (reward_mean, staleness_*, filtered_groups) are not computed
        here: rank 0 computes each once while fetching (learner/intake.py: IntakeStats).
        """
        start = time.perf_counter()
        stats = batch.stats
        base = {
            "groups": float(stats.groups),
            "responses": float(stats.responses),
            "masked_frac": stats.masked / max(stats.responses, 1),
            "truncated_frac": stats.truncated / max(stats.responses, 1),
            "looping_frac": stats.looping / max(stats.responses, 1),
            "overlong_penalised_frac": stats.overlong_penalised / max(stats.responses, 1),
            "mixed_version_frac": stats.mixed_versions / max(stats.responses, 1),
        }
        if len(batch) == 0:
            return {**base, "skipped": 1.0, "version": float(self.version)}
        minis = [
            batch.select(ix.tolist())
            for ix in torch.arange(len(batch)).tensor_split(self.cfg.mini_batches)
        ]
        minis = [m for m in minis if len(m)]
        plans = [self._micro_batches(m) for m in minis]
        old = (
            self._old_logprobs(plans)
            if len(minis) > 1 and self.cfg.recompute_old_logprobs
            else None
        )
        size = len(SUMS) + mismatch.SIZE
        self.loss_metrics = policy_loss.MetricSums()
        acc = torch.zeros(size + 1, dtype=torch.float64, device=self.device)  # + IS max
        grad_norms = []
        skipped_before = self.updates_skipped
        # staleness of each sequence (the buffer's: learner version − its policy version), and the
        # sequences the non-finite guard dropped, per mini-batch
        stale = [(self.version - m.policy_versions).clamp(min=0).to(self.device) for m in minis]
        spans = [m.spanned.to(self.device) for m in minis]  # split by an in-flight update
        bad = [torch.zeros(len(m), dtype=torch.bool, device=self.device) for m in minis]
        for k, micros in enumerate(plans):
            for j, mb in enumerate(micros):
                self._set_sync(j == len(micros) - 1)
                old_logp = None if old is None else old[k][j]
                part, m = self._loss_and_stats(
                    mb, old_logp, len(minis[k]), stale[k], bad[k], spans[k]
                )
                (part * self.world).backward()
                acc[:-1] += m[:-1]
                torch.maximum(acc[-1:], m[-1:], out=acc[-1:])
            grad_norms.append(self._clip_and_step())
        self.version += 1
        acc[SUMS.index("nonfinite")] = self._nonfinite_shards()
        acc = torch.cat([acc[:-1], self.loss_metrics.vector(acc.device), acc[-1:]])
        reduced = self._reduce_over_ranks(acc).cpu()  # the step's one host sync
        totals = reduced.tolist()
        grad_norms = torch.stack(grad_norms).tolist()
        s = dict(zip(SUMS, totals[: len(SUMS)], strict=True))
        self.weights_finite = s["nonfinite"] == 0
        if s["nonfinite_seqs"]:
            log_nonfinite(self.rank, self.version, [m.policy_versions for m in minis], bad)
        rt = max(s["response_tokens"], 1.0)
        elapsed = time.perf_counter() - start
        return {
            **base,
            "response_len_mean": float(batch.response_lens.double().mean()),
            "loss": s["loss"] / len(plans),
            "clip_frac": s["clipped"] / rt,
            "entropy": s["entropy"] / rt,
            "kl": s["kl"] / rt,
            **off_policy_metrics(s, totals[-1]),
            **mismatch.mismatch_metrics(reduced[len(SUMS) : size]),
            **self.loss_metrics.metrics(reduced[size:-1], rt),
            "grad_norm": sum(grad_norms) / len(grad_norms),
            "update_skipped": float(self.updates_skipped - skipped_before),
            "skipped_in_a_row": float(self.skipped_in_a_row),
            "lr": self.scheduler.get_last_lr()[0],
            "tokens": s["tokens"],
            "tokens_per_s": s["tokens"] / elapsed,
            "step_seconds": elapsed,
            "version": float(self.version),
        }

    def _reduce_over_ranks(self, acc: torch.Tensor) -> torch.Tensor:
        """Every rank's [sums..., IS max] combined (sums added, max taken) in one collective."""
        if self.world == 1:
            return acc
        parts = [torch.empty_like(acc) for _ in range(self.world)]
        dist.all_gather(parts, acc)
        every = torch.stack(parts)
        return torch.cat([every[:, :-1].sum(0), every[:, -1:].amax(0)])

    def _micro_batches(self, batch: TrainBatch) -> list[MicroBatch]:
        weights = grpo.sequence_weights(  # over model tokens: feedback tokens are not counted
            self.algo.aggregation, batch.model_lens, float(self.algo.loss_constant)
        )
        plan = plan_micro_batches(
            batch.lengths.tolist(), self.sp.dp_size, self.cfg.micro_batch_tokens, self.cfg.packing
        )
        return [
            sequence_parallel.shard(collate(batch, ix, weights, self.cfg.packing), self.sp).to(
                self.device
            )
            for ix in plan[self.sp.dp_rank]
        ]

    def _logp(self, model: torch.nn.Module, mb: MicroBatch) -> tuple[torch.Tensor, torch.Tensor]:
        """Log-probs of the targets at their sampling temperature, and the entropy (detached):
        learner/forward.py: `target_logprobs` with this learner's attention, device, chunking."""
        chunk = self.cfg.logprob_chunk_tokens
        transform = self.head_transform
        return target_logprobs(model, mb, self.attn, self.device, chunk, transform, self.sp)

    @torch.no_grad()
    def _old_logprobs(self, plans: list[list[MicroBatch]]) -> list[list[torch.Tensor]]:
        return [[self._logp(self.model, mb)[0] for mb in micros] for micros in plans]

    def _loss_and_stats(
        self,
        mb: MicroBatch,
        old_logp: torch.Tensor | None,
        num_seqs: int | None = None,
        staleness: torch.Tensor | None = None,
        bad_out: torch.Tensor | None = None,
        spanned: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """This micro-batch's share of the loss, and its metric sums (SUMS order, the mismatch
        vector, then IS max). `num_seqs`: sequences in the mini-batch (mb.seq_index's range;
        None = from mb, one host sync); `staleness` [num_seqs] of each (None = 0); `bad_out`
        [num_seqs] bool: the sequences the non-finite guard drops are or-ed into it; `spanned`
        [num_seqs] bool: the sequences an in-flight update split (None = none)."""
        algo = self.algo
        logp, entropy = self._logp(self.model, mb)
        learner_logp = logp.detach() if old_logp is None else old_logp  # the step's start policy
        if old_logp is None:
            # One optimizer step per batch: pi_old is the current policy, identical to this forward.
            old_logp = logp.detach() if self.cfg.recompute_old_logprobs else mb.behaviour_logp
        if num_seqs is None:  # from the micro-batch (its SP group's slices agree on it)
            num_seqs = sequence_parallel.sequence_count(self.sp, mb.seq_index)
        seq = mb.seq_index
        if mb.loss_mask is not None:
            # A multi-turn trajectory's feedback tokens belong to no sequence here: they add
            # nothing to the guard, the correction, the loss or any sum (a dummy's index, −1).
            seq = seq.where(mb.loss_mask, -1)
        # The guard: a sequence with a non-finite log-prob is dropped whole, before the loss.
        keep, bad = off_policy.finite_sequences(seq, num_seqs, logp, old_logp, mb.behaviour_logp)
        keep, bad = sequence_parallel.agree_on_dropped(self.sp, seq, keep, bad)  # SP: as a whole
        if mb.loss_mask is not None:
            keep = keep & mb.loss_mask
        if bad_out is not None:
            bad_out |= bad
        logp = logp.where(keep, 0.0)
        old_logp = old_logp.where(keep, 0.0)
        behaviour = mb.behaviour_logp.where(keep, 0.0)
        learner_logp = learner_logp.where(keep, 0.0)
        corr = off_policy.correct(
            algo.off_policy, old_logp - behaviour, seq, num_seqs, algo.tis_cap
        )
        ref_logp = None
        if self.ref_model is not None:
            with torch.no_grad():
                ref_logp = self._logp(self.ref_model, mb)[0].where(keep, 0.0)
        real = (seq >= 0) & keep  # False for a dummy micro-batch's token and a dropped one
        x = policy_loss.LossInput(logp, old_logp, behaviour, mb.advantages, real, seq, num_seqs)
        surrogate = self.policy_loss(x)
        terms = grpo.weigh(
            surrogate.loss, surrogate.clipped, logp, corr.weight, ref_logp, algo.kl_coef
        )
        loss = (terms.loss * (mb.weight * keep).to(terms.loss.dtype)).sum()
        self.loss_metrics.add(surrogate.metrics, real)
        with torch.no_grad():
            if staleness is None:
                staleness = torch.zeros(num_seqs, dtype=torch.long, device=seq.device)
            stale_tok = staleness[seq.clamp(min=0)] if num_seqs else torch.zeros_like(seq)
            span_tok = None
            if spanned is not None and num_seqs:
                span_tok = spanned[seq.clamp(min=0)]
            shift = mismatch.mismatch_sums(
                learner_logp, behaviour, stale_tok, real, algo.tis_cap, span_tok
            )
            sums = micro_batch_sums(loss, terms, corr, entropy, real, bad, seq, num_seqs, mb.tokens)
        return loss, torch.cat([sums[:-1], shift, sums[-1:]])

    def _set_sync(self, last: bool) -> None:
        """Reduce-scatter this micro-batch's gradients: always with learner.grad_sync =
        "every_micro_batch" (gradients stay sharded), else only on the step's last micro-batch
        (FSDP2 keeps unsharded fp32 gradients until then). HSDP all-reduces across replicas
        on the last micro-batch only (each replica sums its reduce-scattered shards until then)."""
        self.model.set_requires_gradient_sync(last or self.cfg.grad_sync == "every_micro_batch")
        if self.cfg.replicas > 1:
            self.model.set_requires_all_reduce(last)

    def _clip_and_step(self) -> torch.Tensor:
        """Clip, step, zero; returns the pre-clip gradient norm, left on the device.

        The non-finite guard: the norm is the global one (every rank's shards), so every rank
        takes the same decision. When it is NaN or Inf the optimizer does not step: parameters
        and AdamW state (moments, step count) stay bit-equal; the gradients are dropped. The LR
        scheduler still advances, so the learning rate at a step does not depend on how many
        steps before it were skipped. Costs one host sync per optimizer step (the decision).
        """
        norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg.grad_clip)
        if hasattr(norm, "full_tensor"):
            norm = norm.full_tensor()
        if bool(torch.isfinite(norm)):
            self.optimizer.step()
            self.skipped_in_a_row = 0
        else:
            self.updates_skipped += 1
            self.skipped_in_a_row += 1
            log.warning(
                "learner rank %d: step %d: gradient norm %s is not finite; update skipped "
                "(%d in a row, learner.max_skipped_steps = %d)",
                self.rank,
                self.version + 1,
                float(norm),
                self.skipped_in_a_row,
                self.cfg.max_skipped_steps,
            )
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        return norm.detach()

    def _nonfinite_shards(self) -> torch.Tensor:
        """How many of this rank's parameter shards hold a NaN or Inf (a float64 on the device)."""
        local = [p.to_local() if hasattr(p, "to_local") else p for p in self.model.parameters()]
        bad = [torch.logical_not(torch.isfinite(t).all()) for t in local]
        return torch.stack(bad).sum().double().to(self.device)  # on the host with offload

    def check_finite(self, what: str) -> None:
        """Collective: raise NonFiniteWeights naming `what` and the step when any rank's
        parameters hold a NaN or Inf (every rank raises, so no rank waits in a collective)."""
        bad = self._nonfinite_shards()
        if self.world > 1:
            dist.all_reduce(bad)
        self.weights_finite = bool(bad == 0)
        self._refuse_nonfinite(what)

    def _refuse_nonfinite(self, what: str) -> None:
        if not self.weights_finite:
            raise NonFiniteWeights(
                f"not {what} policy version {self.version}: the learner's weights hold NaN or "
                "Inf (an update the non-finite guard could not catch). Resume from the newest "
                "checkpoint (every saved one is finite) with a lower learner.lr or "
                "learner.grad_clip"
            )

    # --- weights --------------------------------------------------------------------------------

    def full_state_dict(self, masters: bool = False) -> dict[str, torch.Tensor]:
        """Collective: the full weights on CPU on rank 0 ({} on the others), in the serving dtype
        (the compute dtype `learner.dtype`: bf16 on GPU), one host copy, for publishing; with
        `masters`, the fp32 master weights instead. Refuses (NonFiniteWeights, on every rank)
        when the latest step left a NaN or Inf in any rank's parameters. Under learner.lora: the
        policy's weights, the base with the adapters merged in (learner/lora/adapters.py: merge_into), so
        a whole-model weight sync serves the policy being trained."""
        self._refuse_nonfinite("publishing")
        weights = self.base_state_dict(masters)
        if self.cfg.lora is not None:
            merge_into(weights, adapter_state_dict(self.model), self.cfg.lora)
        return weights

    def base_state_dict(self, masters: bool = False) -> dict[str, torch.Tensor]:
        """Collective: `full_state_dict` without merging: under learner.lora the frozen base
        alone (in the compute dtype it trains in, whatever `masters`), else the same."""
        return full_state_dict(self.model, None if masters else self.dtype)

    def published_state(self) -> dict[str, torch.Tensor]:
        """Collective: what a weight sync sends the generators (actors/learner_rank.py
        `publish`): under `learner.lora` the adapter alone (learner/lora/adapters.py:
        `adapter_state_dict`, PEFT's names, fp32), which the generators serve as a vLLM adapter
        (actors/engines/adapters.py); else `full_state_dict()`. Refuses non-finite weights."""
        if self.cfg.lora is None:
            return self.full_state_dict()
        self._refuse_nonfinite("publishing")
        return adapter_state_dict(self.model)

    def save_checkpoint(self, path: str | Path) -> Path:
        """Collective: HF folder + optimizer/scheduler/RNG/version at `path` (see checkpoint.py)."""
        from microcoder.learner.checkpoint import save_checkpoint

        return save_checkpoint(self, Path(path))

    @classmethod
    def from_checkpoint(
        cls, path: str | Path, learner: LearnerConfig, algorithm: AlgorithmConfig, **kwargs
    ) -> Learner:
        """Collective: a Learner with the weights and training state saved at `path`."""

        self = cls(path, learner, algorithm, **kwargs)
        load_training_state(self, Path(path))
        return self


class NonFiniteWeights(RuntimeError):
    """The learner's weights hold a NaN or Inf: they are neither published nor saved."""
