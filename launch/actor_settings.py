"""The actors' settings, cut from the root config: each actor receives only the sections it
reads (actors/config.py), so actors/ never imports the root config."""

from __future__ import annotations

from microcoder.actors.config import GeneratorSettings, LearnerRankSettings
from microcoder.launch.config import Config, checkpointing_by_default


def generator_settings(cfg: Config) -> GeneratorSettings:
    """A generator's sections of `cfg` (actors/generator.py: `Generator`)."""
    return GeneratorSettings(
        generator=cfg.generator,
        prompt=cfg.prompt,
        buffer=cfg.buffer,
        algorithm=cfg.algorithm,
        learner=cfg.learner,
        device=cfg.cluster.device,
        seed=cfg.seed,
        chat_template_kwargs=dict(cfg.model.chat_template_kwargs),
    )


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
    )
