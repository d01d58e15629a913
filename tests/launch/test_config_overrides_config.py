"""model.config_overrides at config load: the one place for model config changes. A key given to
the generators alone (generator.engine_args.hf_overrides) is refused with the reason and what to
set; one that repeats model.config_overrides is kept; both the generators' and the learner
ranks' settings carry the overrides."""

from __future__ import annotations

import pytest

from microcoder.config import ConfigError
from microcoder.launch.config import load_config
from microcoder.launch.run.actor_settings import generator_settings, learner_rank_settings

ROPE = '{rope_type = "linear", factor = 4.0}'


@pytest.mark.parametrize(
    "key, value",
    [("rope_scaling", ROPE), ("rope_theta", "1000000.0"), ("max_position_embeddings", "65536")],
)
def test_a_rope_override_for_the_generators_alone_is_refused_naming_the_model_section(key, value):
    with pytest.raises(ConfigError) as err:
        load_config(None, [f"generator.engine_args={{hf_overrides={{{key}={value}}}}}"])
    text = str(err.value)
    assert f"hf_overrides.{key} is a RoPE setting given to the generators alone" in text
    assert f"set model.config_overrides.{key}" in text


def test_any_other_generator_only_config_key_is_refused_too():
    with pytest.raises(ConfigError, match="hf_overrides.num_hidden_layers is a model config key"):
        load_config(None, ["generator.engine_args={hf_overrides={num_hidden_layers=2}}"])


def test_an_hf_override_that_differs_from_the_models_is_refused():
    with pytest.raises(ConfigError, match="model.config_overrides.rope_theta = 1000.0"):
        load_config(
            None,
            [
                "model.config_overrides={rope_theta=2000.0}",
                "generator.engine_args={hf_overrides={rope_theta=1000.0}}",
            ],
        )


def test_an_hf_override_repeating_the_models_is_kept():
    cfg = load_config(
        None,
        [
            f"model.config_overrides={{rope_scaling={ROPE}}}",
            f"generator.engine_args={{hf_overrides={{rope_scaling={ROPE}}}}}",
        ],
    )
    assert cfg.model.config_overrides == {"rope_scaling": {"rope_type": "linear", "factor": 4.0}}


def test_the_overrides_reach_the_generators_and_the_learner_ranks():
    cfg = load_config(None, [f"model.config_overrides={{rope_scaling={ROPE}}}"])
    want = {"rope_scaling": {"rope_type": "linear", "factor": 4.0}}
    assert generator_settings(cfg, 1).config_overrides == want
    assert learner_rank_settings(cfg).config_overrides == want


def test_model_check_reads_config_overrides_as_key_equals_json():
    from microcoder.launch.cli.cmd_model import parse_config_overrides

    got = parse_config_overrides(['rope_scaling={"rope_type": "linear", "factor": 4.0}', "x=7"])
    assert got == {"rope_scaling": {"rope_type": "linear", "factor": 4.0}, "x": 7}
    with pytest.raises(ValueError, match="write KEY=JSON"):
        parse_config_overrides(["rope_scaling"])
