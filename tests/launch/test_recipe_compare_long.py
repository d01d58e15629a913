"""configs/compare-long.toml: the comparison's recipe on the long-answer synthetic family."""

from pathlib import Path

import pytest

from microcoder.launch.config import load_config
from microcoder.learner.algorithm.presets import PRESETS

RECIPE = Path(__file__).resolve().parents[2] / "configs" / "compare-long.toml"


def test_recipe_trains_and_evaluates_on_the_long_family():
    cfg = load_config(RECIPE)
    assert cfg.data.source == "synthetic-long"
    assert cfg.eval.every > 0 and cfg.eval.max_tokens == cfg.generator.max_response_tokens


def test_recipe_model_is_warm_started_on_the_long_family_into_its_own_folder():
    cfg = load_config(RECIPE)
    assert cfg.model.warmstart and cfg.warmstart.family == cfg.data.source
    assert Path(cfg.model.path) == Path("runs/tiny-model-long")
    assert cfg.warmstart.eval_max_new_tokens == cfg.generator.max_response_tokens


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_recipe_pins_nothing_a_preset_sets(preset):
    """A value pinned in the recipe would beat the preset (defaults < preset < TOML)."""
    cfg = load_config(RECIPE, [f"algorithm.preset={preset}"])
    values = PRESETS[preset].values
    assert cfg.algorithm.truncation_mask == values["truncation_mask"]
    assert cfg.algorithm.kl_coef == values["kl_coef"]
    assert cfg.algorithm.eps_high == values["eps_high"]
