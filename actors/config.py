"""Config of the generator pool (section `[generator]`), and the settings an actor receives when
it needs more sections than a constructor should take (built by the launcher from the root
config, launch/run/actor_settings.py; never a copy of the whole root)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import Field, field_validator

from microcoder.actors.engines.args import check_engine_args
from microcoder.actors.environments.config import EnvironmentConfig
from microcoder.buffer.config import BufferConfig
from microcoder.config import Section
from microcoder.data.config import PromptConfig
from microcoder.learner.config import AlgorithmConfig, LearnerConfig
from microcoder.resources import CustomResources

InflightKV = Literal["recompute", "reuse"]
"""`generator.inflight_kv`: what an in-flight update does with the kept requests' KV."""


class GeneratorConfig(Section):
    num_engines: int = Field(1, ge=0)
    """Generator actors, one vLLM engine each. Scale a live run with `microcoder scale generators N`."""
    gpus_per_engine: float = Field(0.0, ge=0)
    """GPUs per engine (tensor parallel size on CUDA: its whole part); 0 on CPU machines. An
    engine of 2 or more runs vLLM's "mp" executor, its workers on the GPUs the generator holds
    in its placement group (actors/engines/build.py `executor_backend`)."""
    cpus_per_engine: float = Field(1.0, gt=0)
    """Ray CPUs reserved per engine."""
    resources: CustomResources = {}
    """Ray custom resources each engine takes, {NAME = AMOUNT} (e.g. {second = 1}): its
    replicas run only on nodes that advertise them (`ray start --resources '{"second": 4}'`),
    which pins the pool to those nodes; the placement plan checks the cluster has enough.
    Empty = any node."""
    max_response_tokens: int = Field(512, ge=1)
    """Generation stops here; such a response is flagged truncated. With a multi-turn
    environment (`environment.kind` other than "single") it caps each model turn, and the
    engine's context grows to hold `environment.max_turns` turns and the feedback between them
    (actors/trajectory.py `context_tokens`)."""
    max_prompt_tokens: int = Field(1024, ge=1)
    """Longest prompt in tokens (chat template applied, the run's tokenizer). Prompts over it are
    skipped when the data is loaded (launch/run/problems.py `prepare_run_problems`, training and
    held-out alike): never sent to an engine, not counted in the buffer, listed in
    RUN_DIR/skipped_prompts.jsonl with one warning. The engine's context is this plus
    max_response_tokens."""
    max_inflight_prompts: int = Field(16, ge=1)
    """Groups (prompts, G requests each) an engine keeps in flight at once: the generator leases
    a new prompt from the buffer as soon as one of its groups finishes (admission control may
    give fewer or none), so the engine streams instead of sampling in waves."""
    weight_update: Literal["inflight", "between_groups"] = "inflight"
    """How a generator takes the learner's new weights. "inflight" (the default): pause the
    engine with its requests kept, load, resume; a response may then span two versions (its
    first and last are recorded; staleness is counted from the first, the oldest) and the
    per-token behaviour log-probs with the truncated importance weight correct the mixed tokens.
    It never stalls the engine on the longest response and makes no group staler than
    "between_groups" would. "between_groups": stop admitting, let the requests in flight finish
    on the old weights, then load (every response has one version; for debugging and for
    comparing with waves)."""
    inflight_kv: InflightKV = "reuse"
    """What an "inflight" update does with the KV of the requests it keeps. "reuse" (the
    default): the kept requests go on with the KV computed under the old weights (PipelineRL's
    choice), and new requests get a fresh prefix-cache salt so none reads an old block; the
    tokens after the update are sampled from the new weights over old KV, and their recorded
    log-probs are those of that mix, which the learner's recomputed pi_old and the truncated
    importance weight correct (`learner.recompute_old_logprobs`, `algorithm.off_policy`).
    "recompute": the pause clears the caches and vLLM recomputes each kept request's prompt and
    tokens so far under the new weights, so every token after the update is exactly the new
    policy's, at the cost of one prefill of everything in flight per update. Chosen from
    `microcoder bench generation --update-cost` (bench/RESULTS.md, 2026-12-03): with 128
    sequences in flight at ~97 tokens of context, "recompute" re-prefilled ~12,400 tokens and
    its kept sequences took 5-18 s (4-9 decode steps) to sample again after the resume, against
    one step (1.0-1.4 s) for "reuse"; that re-prefill grows with sequences x context (512 x
    several thousand tokens in the recipe), at every update of every generator. Its price in
    correctness, measured on tiny runs (bench/RESULTS.md, "reuse vs recompute in mismatch",
    2026-12-04; the step record's `mismatch_by_span`): a response that straddles an update has
    a behaviour/learner mismatch of k3 3.6e-4 with "reuse" against 3e-11 (exact) with
    "recompute", a fifth of what one step of staleness costs (2.0e-3), on 4-6 % of responses at
    max_staleness 1; at max_staleness 3 (3 pairs) the run-to-run spread, 2x either way,
    hides any difference. Ignored with "between_groups"."""
    weight_poll_s: float = Field(0.5, gt=0)
    """Seconds between two asks of the learner's newest version (one cheap Ray call each)."""
    max_failed_syncs: int = Field(3, ge=1)
    """Weight updates that may fail in a row before a generator's loop gives up on its channel.
    A failed update (learner rank 0 did not answer within learner.sync_timeout_s, the channel
    broke) is logged, counted (`sync_failures` in the generator's stats) and retried at the next
    poll while the groups in flight go on; after this many in a row the generator leases nothing
    more, hands in its groups in flight as they finish and stops its loop with an error naming
    the peer, and the pool restarts it with a new channel (actors/generate_loop.py)."""
    dtype: Literal["auto", "float32", "bfloat16"] = "auto"
    """Engine precision; auto = float32 on CPU (matches the learner), bfloat16 on GPU."""
    kv_cache_gib: float = Field(2.0, gt=0)
    """CPU KV cache size in GiB (VLLM_CPU_KVCACHE_SPACE); on GPU see gpu_memory_utilization."""
    gpu_memory_utilization: float = Field(0.85, gt=0, le=1)
    """Fraction of GPU memory the engine may take (CUDA only)."""
    enforce_eager: bool = False
    """Run the engine's model eagerly: no torch.compile (and no CUDA graphs on GPU). The engine
    then starts sooner and generates slower. On the 2-core CPU machine, tiny model (measured
    2026-12-03, bench/RESULTS.md "Test tiers"): start 13 s eager vs 24 s compiled with a warm
    compile cache (50 s cold), generation ~0.85x of compiled. The test suite's short launches
    and engine tests set it; a training run keeps the default (compiled)."""
    ignore_eos: bool = False
    """Sample past the end-of-sequence token up to max_response_tokens (fixed-size work for
    `microcoder bench generation`; keep false for training)."""
    engine_args: dict[str, Any] = {}
    """More vLLM engine arguments, passed as they are to every generator's engine (both the
    `LLM` and the async engine), e.g. {max_num_seqs = 64, max_num_batched_tokens = 8192}.
    Model config changes (the RoPE scaling of a long context) go in model.config_overrides,
    which reaches the learner too; `hf_overrides` here may only repeat them (a key given to the
    generators alone is refused at config load). The names are the fields of vLLM's
    `EngineArgs`, checked when the config loads (against the installed vLLM's source, without
    importing it) and again at engine start: an unknown name is refused with the nearest one, and
    a name microcoder sets from this config (model, seed, dtype, max_model_len, enforce_eager,
    tensor_parallel_size, gpu_memory_utilization, ...) is refused with the field to set instead
    (actors/engines/args.py). Prefix caching is on unless {enable_prefix_caching = false}."""

    @field_validator("engine_args")
    @classmethod
    def _known_engine_args(cls, value: dict[str, Any]) -> dict[str, Any]:
        return check_engine_args(value)


@dataclass(frozen=True)
class GeneratorSettings:
    """What a generator reads: its engine, the prompt layer, the buffer, and the algorithm's
    sampling settings (group size, initial temperature) and the learner's weight-sync timeout."""

    generator: GeneratorConfig
    """The engine, its in-flight capacity and its weight-update mode."""
    prompt: PromptConfig
    """How prompts are rendered into token ids."""
    buffer: BufferConfig
    """The buffer client's settings."""
    algorithm: AlgorithmConfig
    """`group_size` and `temperature.initial`."""
    learner: LearnerConfig
    """`sync_timeout_s` of the weight pull (actors/weights/pull.py: `pull_weights`)."""
    device: str = "auto"
    """`cluster.device` (auto, cpu, cuda); resolved on the actor's own node."""
    seed: int = 0
    """The engine's sampling seed: this replica's own, derived from the run's seed and its index
    (launch/run/actor_settings.py `generator_seed`), so no two generators sample alike."""
    chat_template_kwargs: dict[str, Any] = field(default_factory=dict)
    """`model.chat_template_kwargs`: extra variables of the tokenizer's chat template."""
    config_overrides: dict[str, Any] = field(default_factory=dict)
    """`model.config_overrides`: the model config changes the engine gets as `hf_overrides`."""
    environment: EnvironmentConfig = field(default_factory=EnvironmentConfig)
    """The `[environment]` section: "single" samples a group as one request of n=G; any other
    kind runs each group's G trajectories through actors/trajectory.py."""
    store: str | None = None
    """The run's problem store (data/store.py, RUN_DIR/problems.sqlite), read by id: a
    multi-turn environment's `reset` needs the Problem of each leased prompt. None: no store
    (a single turn needs none; an evaluation passes its problems)."""
    reasoning: str = "none"
    """`prompt.reasoning` resolved for the model's tokenizer (none, think or marker:END): how a
    multi-turn environment extracts each turn's program, as the executor does."""


@dataclass(frozen=True)
class LearnerRankSettings:
    """What a learner rank reads: the learner and the algorithm, the buffer client (rank 0), the
    device, the seed and the run's length (the learning-rate schedule)."""

    learner: LearnerConfig
    """The FSDP2 learner."""
    algorithm: AlgorithmConfig
    """MicroCoder-GRPO."""
    buffer: BufferConfig
    """The buffer client's settings (rank 0 pulls batches)."""
    device: str = "auto"
    """`cluster.device` (auto, cpu, cuda)."""
    seed: int = 0
    """The run's seed."""
    total_steps: int = 1
    """`max_steps`: the length of the learning-rate schedule."""
    rollouts_every: int = 0
    """`monitor.rollouts_every`: rank 0 returns the rollouts rows of every N-th step (0 = off)."""
    rollouts_max: int = 64
    """`monitor.rollouts_max`: the most rows of one step's rollouts."""
    config_overrides: dict[str, Any] = field(default_factory=dict)
    """`model.config_overrides`: the model config changes the learner builds its model with."""
