"""Config of the learner (section `[learner]`) and of MicroCoder-GRPO (section `[algorithm]`)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, PrivateAttr, field_validator, model_validator

from microcoder.config import Section
from microcoder.learner.algorithm import loss_names
from microcoder.learner.algorithm.presets import apply_preset
from microcoder.resources import CustomResources

VLLM_LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)
"""The ranks vLLM 0.32 serves an adapter at: its `max_lora_rank` takes one of these
(vllm/config/lora.py: MaxLoRARanks; tests/learner/test_lora.py checks the installed vLLM's)."""

DENSE_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
"""The projections an adapter may target: the dense linear layers every supported family names
so, which vLLM 0.32 serves as LoRA (its qkv/gate_up packing maps them). Embeddings, the LM head
and MoE experts are not among them (learner/models/families.py: lora_errors)."""


class LoraConfig(Section):
    """LoRA (`learner.lora`): train low-rank adapters on the frozen base model
    (learner/lora/adapters.py). Absent = full fine-tuning."""

    rank: int = 16
    """r: the adapters' rank. One vLLM serves: 1, 8, 16, 32, 64, 128, 256, 320 or 512."""
    alpha: int = Field(32, gt=0)
    """lora_alpha: the adapter's output is scaled by alpha / rank."""
    targets: list[str] = list(DENSE_TARGETS)
    """Module names the adapters wrap in every decoder layer (peft target_modules), among
    q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj. On MoE families the expert
    projections are refused (learner/models/families.py: lora_errors)."""
    dropout: float = Field(0.0, ge=0, lt=1)
    """Dropout on the adapters' input while training (peft lora_dropout)."""
    versions_kept: int = Field(2, ge=1)
    """Adapter versions a generator keeps loaded: requests already running finish on the
    version they started with, new ones take the newest."""

    @field_validator("rank")
    @classmethod
    def _rank_vllm_serves(cls, v: int) -> int:
        if v not in VLLM_LORA_RANKS:
            served = ", ".join(map(str, VLLM_LORA_RANKS))
            raise ValueError(
                f"learner.lora.rank = {v} is not a rank vLLM serves an adapter at (its "
                f"max_lora_rank is one of {served}); set learner.lora.rank to one of those"
            )
        return v

    @field_validator("targets")
    @classmethod
    def _targets_vllm_serves(cls, v: list[str]) -> list[str]:
        unknown = [t for t in v if t not in DENSE_TARGETS]
        if unknown or not v:
            raise ValueError(
                f"learner.lora.targets {unknown or v} cannot be trained and served as a vLLM "
                f"adapter here; choose among {', '.join(DENSE_TARGETS)}"
            )
        return list(dict.fromkeys(v))


class LearnerConfig(Section):
    removed_keys = {
        "sync_bucket_mb": "it did nothing (the weight broadcast packs 256 MiB buckets); delete it"
    }

    lora: LoraConfig | None = None
    """LoRA: `{ rank = 16, alpha = 32, targets = [...], dropout = 0.0, versions_kept = 2 }`
    trains adapters only, the base frozen in the compute dtype (learner/lora/adapters.py). Absent (the
    default) = full fine-tuning."""
    world_size: int = Field(1, ge=1)
    """FSDP2 ranks (one Ray actor each; one GPU each on CUDA, gloo processes on CPU)."""
    gpus_per_rank: float = Field(0.0, ge=0)
    """GPUs per learner rank; 0 on CPU machines."""
    resources: CustomResources = {}
    """Ray custom resources each rank takes, {NAME = AMOUNT} (e.g. {second = 1}): its
    replicas run only on nodes that advertise them (`ray start --resources '{"second": 4}'`),
    which pins the pool to those nodes; the placement plan checks the cluster has enough.
    Empty = any node."""
    sequence_parallel: int = Field(1, ge=1)
    """Ulysses sequence parallelism: each packed micro-batch is split along the sequence over
    this many ranks of the learner group (consecutive ranks form one group), with an all-to-all
    over attention heads around attention, so a rank holds 1/N of a long sequence's
    activations. 1 = off. Must divide world_size / replicas; the model's attention heads must
    divide by it (key/value heads it does not divide are repeated), packing must be on and the
    off-policy correction token-level (learner/sequence_parallel.py: model_errors)."""
    offload: Literal["none", "optimizer", "params"] = "none"
    """What lives in host memory instead of on the GPU: "optimizer" = AdamW's moments (the
    step streams them to the device and back), "params" = the fp32 master weights, their
    gradients and the moments too (FSDP2's CPU offload; the optimizer step runs on the host).
    "optimizer" gives the same weights, bit for bit, as "none" (the step runs on the device);
    "params" too on a CPU learner, while on CUDA its host step may round differently. Costs
    host memory (the plan prints it per node) and transfer time (learner/offload.py)."""
    replicas: int = Field(1, ge=1)
    """HSDP: R replicas × (world_size / R) shards on a 2-D mesh. Each replica holds a full
    sharded copy; gradients are reduce-scattered inside a replica and all-reduced across
    replicas, so parameter all-gathers stay inside a replica (one node, say). 1 = plain FSDP
    over every rank. Must divide world_size."""
    batch_size: int = Field(8, ge=1)
    """Scored groups (prompts × G responses) per optimizer step."""
    mini_batches: int = Field(1, ge=1)
    """Optimizer steps per batch (PPO-style mini-batches); the policy version advances once per batch."""
    micro_batch_tokens: int = Field(4096, ge=64)
    """Token budget of one packed micro-batch (sequence packing, no padding); gradients accumulate."""
    logprob_chunk_tokens: int = 1024
    """Response tokens per chunk of the log-prob (and entropy) computation: the model body runs
    to the final hidden states once, then the LM head, /temperature and log_softmax run on this
    many tokens at a time, each chunk recomputed in backward, so at most one [chunk, vocab] block
    of logits exists (fp32: chunk × vocab × 4 bytes, 0.6 GB at 1024 × Qwen's 151,936). 0 = no
    chunking: the head on the whole micro-batch at once ([tokens, vocab] logits, the baseline
    `bench learner --memory` compares against)."""
    lr: float = Field(1e-6, ge=0)
    """AdamW learning rate (peak, after warmup)."""
    weight_decay: float = Field(0.0, ge=0)
    """AdamW weight decay."""
    betas: tuple[float, float] = (0.9, 0.999)
    """AdamW betas."""
    warmup_steps: int = Field(0, ge=0)
    """Linear warmup length in optimizer steps."""
    schedule: Literal["constant", "cosine"] = "constant"
    """Learning-rate schedule after warmup."""
    schedule_steps: int = Field(0, ge=0)
    """Optimizer steps over which the cosine decays (0 = max_steps × mini_batches of the run)."""
    min_lr_ratio: float = Field(0.0, ge=0, le=1)
    """Cosine floor as a fraction of lr."""
    grad_clip: float = Field(1.0, gt=0)
    """Max global gradient norm."""
    dtype: Literal["auto", "float32", "bfloat16"] = "auto"
    """Training precision; auto = float32 on CPU, bfloat16 on GPU (FSDP2 mixed precision: bf16
    compute, fp32 master weights and gradient reduction)."""
    packing: bool = True
    """Sequence packing: concatenate sequences into one row per micro-batch with per-sequence
    causal attention (no padding). False = right-padded rows (the baseline `bench learner` uses)."""
    attn_implementation: str = "auto"
    """Attention kernel: auto = flash_attention_2 on CUDA when flash-attn is installed, else
    microcoder's varlen attention (SDPA per packed sequence). Any transformers name works."""
    activation_checkpointing: bool | None = None
    """Recompute each decoder layer's activations in the backward pass instead of keeping them
    (transformers' gradient checkpointing, non-reentrant, under FSDP2): activation memory of one
    layer instead of all layers, for about one extra forward pass per step. Same loss and
    gradients either way. Unset (the default) = derived: on when the run's device is cuda or
    `generator.max_response_tokens` >= 8192, off otherwise (launch/config.py:
    `checkpointing_by_default`; a LearnerConfig used alone treats unset as off). An explicit
    true or false always wins."""
    grad_sync: Literal["every_micro_batch", "last_micro_batch"] = "every_micro_batch"
    """When FSDP2 reduce-scatters gradients during accumulation. "every_micro_batch" (default):
    after each micro-batch, so gradients stay sharded (params / ranks × 4 bytes each). Costs
    one reduce-scatter per micro-batch. "last_micro_batch": only after a step's last
    micro-batch, one reduce-scatter per step, but every rank keeps an unsharded fp32 gradient
    (params × 4 bytes) until then; only for a slow interconnect with memory to spare."""
    recompute_old_logprobs: bool = True
    """Recompute pi_old with the learner's weights before the update (off: pi_old = the
    generator's behaviour log-probs, so every off-policy weight would be 1: it then needs
    algorithm.off_policy = "none", and the config says so)."""
    max_filtered_batches: int = Field(4, ge=1)
    """With dynamic filtering, fetch at most this many batches' worth of groups per step; if all
    of them had equal rewards, the step is skipped (no update) and the run says so."""
    max_skipped_steps: int = Field(3, ge=1)
    """The non-finite guard: an optimizer step whose global gradient norm is NaN or Inf is
    skipped (weights and AdamW state unchanged, `update_skipped` in its step record); this many
    skipped in a row stop the run (exit 3, an `event = stopped` record) with a checkpoint of the
    last good weights."""
    batch_wait_s: float = Field(3600.0, ge=0)
    """Longest wait for one batch in seconds before the run stops with what the buffer and the
    pools were doing (0 = no limit). The launcher prints a waiting notice every 30 s before."""
    checkpoint_every: int = Field(0, ge=0)
    """Save a checkpoint every N policy versions (0 = only at the end and on Ctrl-C)."""
    keep_checkpoints: int = Field(0, ge=0)
    """Keep only the newest N complete checkpoints of the run (older ones are deleted right
    after a new one is COMPLETE); 0 (the default) = keep all. One checkpoint holds the model in
    the serving dtype plus fp32 masters and AdamW state (about 14 bytes per parameter with bf16:
    21 GB for a 1.5B model), so set it for long runs with learner.checkpoint_every."""
    keep_best: bool = False
    """With learner.keep_checkpoints: also keep the checkpoint with the best held-out pass rate
    (the `eval` record's heldout_pass_rate at its step in metrics.jsonl; only checkpoints at
    a step that was evaluated count, so make learner.checkpoint_every a multiple of
    eval.every). A checkpoint whose eval still runs beside training (eval.beside_training) is
    kept until its score lands, even past keep_checkpoints."""
    sync_timeout_s: float = Field(120.0, gt=0)
    """Weight broadcast timeout; a peer that does not answer in time is named in the error."""
    weight_transport: Literal["channels", "relay"] = "channels"
    """How rank 0 sends each new version to the generators. "channels": one broadcast group per
    generator, sent in turn (actors/weights/publisher.py; a sync's cost grows with the generator
    count). "relay": one chain relay over every member generator's workers (actors/weights/relay_hub.py,
    learner/sync/relay.py): about one transfer for N generators, a receiver holding two chunks
    above its model. With "relay" a generator still catches up on its own channel first (at
    start, after a restart or a `scale` add), joins the relay at the next version, and falls
    back to its channel for a version a relay round misses it. Default "channels": on CPU
    loopback the relay measured no faster (bench/RESULTS.md, "Weights to N receivers": each
    hop is a copy on the same cores) and its NCCL path has not run on GPUs yet; choose "relay"
    where the links, not the CPU, bound a sync (many generators on their own GPUs)."""
    relay_join_s: float = Field(10.0, gt=0)
    """weight_transport = "relay": how long rank 0 waits at each round for the member
    generators to be ready (and, in a new epoch, to join its group) before it goes on without
    the missing ones; those catch up on their own channels and join again at a later version."""
    collective_timeout_s: float = Field(600.0, gt=0)
    """Seconds one collective of the learner's process group (gloo/NCCL: its rendezvous at
    setup, each all-gather/reduce of a step) waits for the other ranks before it fails; the
    driver then names the rank that did not arrive."""
    step_timeout_s: float = Field(3600.0, gt=0)
    """Seconds the driver waits for every rank to finish one train, publish (the weight gather)
    or checkpoint save before it stops the run naming the rank that did not; raise it above
    the slowest step (compute_s + sync_s)."""

    @model_validator(mode="after")
    def _parallel_shape_divides(self) -> LearnerConfig:
        """replicas divides world_size, and sequence_parallel divides a replica's ranks."""
        w = self.world_size
        r = self.replicas
        sp = self.sequence_parallel
        if w % r:
            raise ValueError(
                f"learner.replicas = {r} does not divide learner.world_size = {w}; HSDP needs "
                "R replicas of world_size / R ranks each: set world_size to a multiple of replicas"
            )
        if (w // r) % sp:
            raise ValueError(
                f"learner.sequence_parallel = {sp} does not divide the {w // r} ranks of a "
                "replica (learner.world_size / learner.replicas); set world_size to a multiple "
                "of replicas × sequence_parallel"
            )
        return self

    @model_validator(mode="after")
    def _lora_goes_by_channels(self) -> LearnerConfig:
        """Under learner.lora an adapter sync goes by each generator's channel (actors/weights/:
        the relay's chain carries whole models); refused rather than silently replaced."""
        if self.lora is not None and self.weight_transport == "relay":
            raise ValueError(
                'learner.weight_transport = "relay" does not carry LoRA adapters: under '
                "learner.lora each generator takes the adapter (a few MB) on its own channel. "
                'Set learner.weight_transport = "channels" (the default)'
            )
        return self

    @field_validator("logprob_chunk_tokens")
    @classmethod
    def _chunk_not_negative(cls, v: int) -> int:
        if v < 0:
            raise ValueError(
                f"learner.logprob_chunk_tokens = {v} is negative; set it to the tokens per log-prob "
                "chunk (e.g. 1024, the default) or to 0 to compute log-probs unchunked"
            )
        return v


class TemperatureConfig(Section):
    initial: float = Field(1.0, gt=0)
    """Sampling temperature before calibration (and when calibration is off)."""
    calibrate: bool = False
    """Before step 1, sample a probe batch at each candidate and pick the lowest T reaching the target."""
    candidates: list[float] = [0.6, 0.8, 1.0, 1.2, 1.4, 1.6, 1.8]
    """Candidate temperatures for calibration, also the stages the online monitor steps through."""
    target_diversity: float = Field(0.5, ge=0, le=1)
    """Diversity (1 − mean pairwise token-3-gram Jaccard) a group should keep."""
    schedule: list[tuple[int, float]] = []
    """Staged schedule: [[step, temperature], ...]; from each step on, that temperature."""
    probe_prompts: int = Field(8, ge=1)
    """Prompts in the calibration probe batch (each sampled G times per candidate)."""
    monitor_window: int | Literal["auto"] = 0
    """Online monitor: step T up one stage after this many consecutive steps below target (0 =
    off). "auto" = a tenth of max_steps, at least 5 (learner/algorithm/temperature.py: resolve_window):
    5 in the toy recipes' 16-40 steps, 50 in a 500-step run."""
    monitor_max_changes: int = Field(0, ge=0)
    """Step-ups the online monitor may make in a run (0 = no limit); after the last it only
    watches. Diversity falls at any fixed T over a long run, so without a limit the monitor
    ramps T up the whole ladder; the paper recommends staged steps, rarely."""

    @field_validator("monitor_window")
    @classmethod
    def _window_not_negative(cls, v: int | str) -> int | str:
        if v != "auto" and v < 0:
            raise ValueError(
                f"algorithm.temperature.monitor_window = {v} is negative; set it to a number of "
                'steps, 0 (monitor off) or "auto" (a tenth of max_steps)'
            )
        return v


OffPolicy = Literal["tis", "seq-tis", "mask", "geo-reject", "none"]
"""The off-policy corrections; each names a function in learner/algorithm/off_policy.py: OFF_POLICY."""

TruncationMask = Literal["none", "all", "conditional"]
"""The truncation arms; each names a mask function in learner/algorithm/grpo.py: TRUNCATION_MASKS."""


class AlgorithmConfig(Section):
    removed_keys = {
        "partial_credit": "it did nothing here (the judge computes rewards); set "
        "executor.partial_credit instead",
        "mask_prob": "renamed: set algorithm.rho (the probability a qualifying truncated "
        "response is masked)",
    }
    legacy_keys = {"use_tis": 'algorithm.off_policy ("tis" for true, "none" for false)'}

    preset: str = ""
    """Algorithm preset filling every field of it the config does not set: `grpo`, `dapo`,
    `microcoder` or `paper` (learner/algorithm/presets.py: PRESETS; values in docs/architecture.md §5,
    their sources in docs/fidelity.md). Empty = the field defaults (the `microcoder` preset
    without the calibrated temperature)."""
    preset_values: dict[str, Any] = {}
    """Recorded by the config loader, not set by hand: every value the preset set (dotted keys,
    e.g. `temperature.calibrate`), i.e. the preset's fields the config left unset."""
    group_size: int = Field(8, ge=2)
    """G: responses sampled per prompt."""
    eps_low: float = Field(0.2, ge=0)
    """Lower clip range: ratio is clipped at 1 − eps_low."""
    eps_high: float = Field(0.28, ge=0)
    """Upper clip range (clip-higher): ratio is clipped at 1 + eps_high."""
    kl_coef: float = Field(0.0, ge=0)
    """KL penalty coefficient; MicroCoder-GRPO uses none (0)."""
    policy_loss: str = "clip"
    """The per-token policy loss (learner/algorithm/policy_loss.py, docs/fidelity.md): `clip`
    (PPO's clipped ratio with clip-higher, eps_low / eps_high: MicroCoder-GRPO's), `dual-clip`
    (clip, and a negative-advantage token's loss bounded at dual_clip_c·|A|), `gspo` (one
    length-normalised ratio per sequence, clipped with gspo_eps_low / gspo_eps_high), `cispo`
    (−sg(clip(ratio, 1 − eps_low, 1 + eps_high))·A·log pi: every token keeps a gradient), or a
    user loss "module:function" taking (LossInput, LossParams) and returning a LossOutput,
    imported when the config is read. The off-policy weight, the truncation mask and the
    aggregation apply to each alike."""
    dual_clip_c: float = Field(3.0, gt=1)
    """c of `dual-clip` (Ye et al. 2020 use 3): a negative-advantage token's loss is at most c·|A|."""
    gspo_eps_low: float = Field(3e-4, ge=0)
    """Lower clip range of `gspo`'s sequence ratio, clipped at 1 − gspo_eps_low (the GSPO paper's 3e-4)."""
    gspo_eps_high: float = Field(4e-4, ge=0)
    """Upper clip range of `gspo`'s sequence ratio, clipped at 1 + gspo_eps_high (the GSPO paper's 4e-4)."""
    off_policy: OffPolicy = "tis"
    """The off-policy correction of each token's surrogate by rho = pi_old / pi_behaviour
    (learner/algorithm/off_policy.py, docs/architecture.md §5): `tis` (token-level truncated IS, min(rho,
    C)), `seq-tis` (one truncated weight per sequence, min(Π rho, C)), `mask` (IcePop-style:
    tokens with rho outside [1/C, C] get no gradient, the others rho), `geo-reject` (sequences
    whose geometric-mean rho leaves [1/C, C] are dropped whole) or `none`. Every one but `none`
    needs learner.recompute_old_logprobs = true. Replaces the old `use_tis` (true = "tis",
    false = "none"; still read, with a note)."""
    tis_cap: float = Field(2.0, gt=1)
    """C: the cap of `tis` and `seq-tis`, and the band [1/C, C] of `mask` and `geo-reject` (and
    of the `mismatch_out_of_band_frac` metric)."""
    aggregation: Literal["token-mean", "seq-mean-token-mean", "constant-normaliser"] = "token-mean"
    """Loss aggregation over tokens: DAPO token mean, per-sequence mean, or Dr.GRPO constant."""
    loss_constant: int = Field(0, ge=0)
    """Dr.GRPO normaliser in tokens per sequence for constant-normaliser (0 = the generator's
    max response tokens, times environment.max_turns for a multi-turn environment: a
    trajectory's most model tokens; filled in by the launcher)."""
    adv_eps: float = Field(1e-6, gt=0)
    """eps in A = (r − mean) / (std + eps)."""
    truncation_mask: TruncationMask = "conditional"
    """Which truncated responses get advantage 0: `conditional` (the paper's mask: truncated,
    non-incorrect, not looping, with probability rho), `all` (DAPO's overlong filtering: every
    truncated response, whatever its verdict) or `none`."""
    repeat_window: int = Field(128, ge=1)
    """m: a truncated response whose last m tokens equal the m before them is looping and NOT
    masked (conditional mask only)."""
    rho: float = Field(0.1, ge=0, le=1)
    """rho: a qualifying truncated response is masked with this probability (conditional mask)."""
    overlong_buffer_tokens: int = Field(0, ge=0)
    """L_cache of DAPO's soft overlong punishment in tokens (0 = off): a response longer than
    L_max − L_cache gets reward += overlong_penalty · (L_max − L_cache − length) / L_cache,
    down to −overlong_penalty at L_max, before the group advantages."""
    overlong_penalty: float = Field(1.0, ge=0)
    """Factor of the soft overlong punishment (DAPO uses 1.0); used when overlong_buffer_tokens > 0."""
    overlong_max_tokens: int = Field(0, ge=0)
    """L_max of the soft overlong punishment in tokens (0 = the generator's max response tokens,
    filled in by the launcher)."""
    dynamic_filtering: bool = True
    """Skip groups whose rewards are all equal (no signal) and keep sampling to fill the batch."""
    all_filtered_patience: int = Field(20, ge=1)
    """Consecutive learner steps on which dynamic filtering rejected every group fetched (each
    step fetches up to learner.max_filtered_batches batches) before `all_filtered_action`."""
    all_filtered_action: Literal["stop", "train-unfiltered"] = "stop"
    """Then: `stop` ends the run, naming the measured pass rate (data too hard or too easy for
    the model); `train-unfiltered` says so and trains on every group from then on (dynamic
    filtering off; all-equal groups have zero advantage, so only the loss's other terms act)."""
    temperature: TemperatureConfig = TemperatureConfig()
    """Diversity-determined temperature."""

    _legacy_notes: list[str] = PrivateAttr(default_factory=list)
    """Notes about legacy_keys this config set (Config.notes() prints them)."""

    @model_validator(mode="wrap")
    @classmethod
    def _legacy_use_tis(cls, data: Any, handler: Any) -> Any:
        """use_tis (a bool, before off_policy existed) still loads: false becomes off_policy =
        "none", true the default "tis"; a note says to replace it."""
        if not (isinstance(data, dict) and "use_tis" in data):
            return handler(data)
        data = dict(data)
        use = data.pop("use_tis")
        if not isinstance(use, bool):
            raise ValueError(
                f"algorithm.use_tis = {use!r} is not true or false; better, replace it with "
                'algorithm.off_policy ("tis" for true, "none" for false)'
            )
        given = data.get("off_policy")
        if not use and given not in (None, "none"):
            raise ValueError(
                f'algorithm.use_tis = false contradicts algorithm.off_policy = "{given}": use_tis '
                "became off_policy; delete use_tis"
            )
        if not use:
            data["off_policy"] = "none"
        self = handler(data)
        now = f'off_policy = "{self.off_policy}"'
        self._legacy_notes = [
            f"algorithm.use_tis = {str(use).lower()} is read as algorithm.{now} (use_tis became "
            f"off_policy: tis, seq-tis, mask, geo-reject or none); replace it with {now}"
        ]
        return self

    @model_validator(mode="before")
    @classmethod
    def _apply_preset(cls, data: Any) -> Any:
        """defaults < preset < TOML / --set: the preset fills the fields the config left unset."""

        if not isinstance(data, dict):
            return data
        return apply_preset(data, complete=set(cls.model_fields) <= data.keys())

    @field_validator("truncation_mask", mode="before")
    @classmethod
    def _mask_is_a_mode(cls, v: Any) -> Any:
        if isinstance(v, bool):
            raise ValueError(
                "algorithm.truncation_mask is a mode now, not a bool: set it to "
                f'"{"conditional" if v else "none"}" ("conditional" was true, "none" was false; '
                '"all" masks every truncated response)'
            )
        return v

    @field_validator("policy_loss")
    @classmethod
    def _policy_loss_resolves(cls, v: str) -> str:
        """A built-in name, or a user `module:function` that imports (loss_names.check)."""
        loss_names.check(v)
        return v

    @model_validator(mode="after")
    def _buffer_fits_the_cap(self) -> AlgorithmConfig:
        cap = self.overlong_max_tokens
        if self.overlong_buffer_tokens and cap and self.overlong_buffer_tokens >= cap:
            raise ValueError(
                f"algorithm.overlong_buffer_tokens = {self.overlong_buffer_tokens} is not below "
                f"L_max = {cap} (overlong_max_tokens, default generator.max_response_tokens); "
                "set it to a fraction of L_max, e.g. a fifth as in DAPO"
            )
        return self


def check_off_policy_rule(off_policy: str, recompute_old_logprobs: bool) -> None:
    """The rule: a correction needs pi_old recomputed by the learner. Without it pi_old is the
    behaviour policy itself, every ratio pi_old / pi_behaviour is 1 and no correction can act."""
    if off_policy != "none" and not recompute_old_logprobs:
        raise ValueError(
            f'algorithm.off_policy = "{off_policy}" needs learner.recompute_old_logprobs = true '
            "(without it pi_old is the behaviour policy and every off-policy weight is 1); set "
            'learner.recompute_old_logprobs = true, or algorithm.off_policy = "none" to train '
            "with the clipped ratio against the behaviour log-probs alone"
        )
