"""The actors' settings, cut from the root config: each actor receives only the sections it
reads (actors/config.py), so actors/ never imports the root config."""

from __future__ import annotations

from dataclasses import replace

from microcoder.actors.config import GeneratorSettings, LearnerRankSettings
from microcoder.launch.config import Config, checkpointing_by_default

SEED_STRIDE = 1 << 16
"""Generator i's engine seed is the run's seed plus i * SEED_STRIDE (`generator_seed`)."""


def generator_seed(run_seed: int, index: int) -> int:
    """The vLLM engine seed of generator replica `index` (the i of its name `generator-i`):
    `(run_seed + index * 2**16) mod 2**32`. Deterministic (the same run seed gives every replica
    the same seed on every launch, and a restarted replica keeps its own); generator 0 keeps the
    run's seed, so a one-generator run samples as before; distinct for every replica of a run
    (up to 65,536 of them), and, for run seeds below 65,536, distinct from every replica of
    every other run seed: `compare --seeds 0,1,2` runs never share a sampling stream (with
    `run_seed + index`, seed 1's generator 0 would sample as seed 0's generator 1). vLLM needs
    it below 2**32 (numpy's seed range)."""
    if index < 0:
        raise ValueError(f"generator index {index} is negative")
    return (int(run_seed) + int(index) * SEED_STRIDE) % (1 << 32)


def replica_index(name: str) -> int:
    """The index of a pool replica from its name `{kind}-{i}` (launch/run/pools.py)."""
    tail = name.rsplit("-", 1)[-1]
    if not tail.isdigit():
        raise ValueError(f"replica name {name!r} does not end in -<index>")
    return int(tail)


def generator_settings(
    cfg: Config, index: int = 0, store: str | None = None, reasoning: str | None = None
) -> GeneratorSettings:
    """The sections of `cfg` that generator replica `index` reads (actors/generator.py:
    `Generator`); its engine seed is `generator_seed(cfg.seed, index)`; `store` the run's problem
    store path (a multi-turn environment reads each leased problem from it); `reasoning` the
    resolved `prompt.reasoning` (None: `cfg.prompt.reasoning`, already resolved by an eval)."""
    return GeneratorSettings(
        generator=cfg.generator,
        prompt=cfg.prompt,
        buffer=cfg.buffer,
        algorithm=cfg.algorithm,
        learner=cfg.learner,
        device=cfg.cluster.device,
        seed=generator_seed(cfg.seed, index),
        chat_template_kwargs=dict(cfg.model.chat_template_kwargs),
        config_overrides=dict(cfg.model.config_overrides),
        environment=cfg.environment,
        store=store,
        reasoning=reasoning or cfg.prompt.reasoning,
    )


def eval_generator_settings(cfg: Config, index: int = 0) -> GeneratorSettings:
    """The settings of generator `index` set aside for the eval (eval.generators,
    launch/run/eval_beside.py): a training generator's, with a seed of its own past the training
    replicas' and the weights always over its own channel: it syncs only at eval points, and as
    a relay member it would hold up every relay round the training generators are in until rank 0
    dropped it (learner.relay_join_s each time)."""
    settings = generator_settings(cfg, cfg.generator.num_engines + index)
    learner = settings.learner.model_copy(update={"weight_transport": "channels"})
    return replace(settings, learner=learner)


def learner_rank_settings(cfg: Config) -> LearnerRankSettings:
    """A learner rank's sections of `cfg` (actors/learner_rank.py: `LearnerRank.setup`)."""
    learner = cfg.learner
    if learner.activation_checkpointing is None:  # device "auto" in the config: resolved by now
        learner = learner.model_copy(
            update={"activation_checkpointing": checkpointing_by_default(cfg)}
        )
    return LearnerRankSettings(
        learner=learner,
        algorithm=cfg.algorithm,
        buffer=cfg.buffer,
        device=cfg.cluster.device,
        seed=cfg.seed,
        total_steps=cfg.max_steps,
        rollouts_every=cfg.monitor.rollouts_every,
        rollouts_max=cfg.monitor.rollouts_max,
        config_overrides=dict(cfg.model.config_overrides),
    )
