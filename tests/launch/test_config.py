"""Config layering (defaults < TOML < --set) and the errors a user sees."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from microcoder.config import ConfigError
from microcoder.launch.config import Config, load_config

REPO = Path(__file__).resolve().parents[2]


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "c.toml"
    p.write_text(text)
    return p


def test_defaults_apply_without_a_file():
    cfg = load_config(None)
    assert cfg.algorithm.eps_low == 0.2 and cfg.algorithm.eps_high == 0.28
    assert cfg.algorithm.kl_coef == 0.0


def test_toml_overrides_defaults(tmp_path):
    cfg = load_config(write(tmp_path, "[learner]\nlr = 0.5\n"))
    assert cfg.learner.lr == 0.5
    assert cfg.learner.batch_size == Config().learner.batch_size


def test_set_overrides_toml(tmp_path):
    cfg = load_config(write(tmp_path, "[learner]\nlr = 0.5\n"), ["learner.lr=1e-6"])
    assert cfg.learner.lr == 1e-6


def test_set_parses_toml_values_and_nested_sections():
    cfg = load_config(None, ["algorithm.temperature.candidates=[0.5, 1.5]", "cluster.device=cpu"])
    assert cfg.algorithm.temperature.candidates == [0.5, 1.5]
    assert cfg.cluster.device == "cpu"


def test_unknown_key_suggests_the_nearest_valid_key(tmp_path):
    with pytest.raises(ConfigError, match="learner.lrr.*did you mean 'learner.lr'"):
        load_config(write(tmp_path, "[learner]\nlrr = 0.5\n"))


@pytest.mark.parametrize(
    ("key", "value", "nearest"),
    [
        ("learner.weight_transport", "rellay", "relay"),
        ("generator.inflight_kv", "reus", "reuse"),
    ],
)
def test_a_value_outside_a_choice_names_the_nearest_choice(key, value, nearest):
    with pytest.raises(
        ConfigError, match=rf"{key}: .*did you mean '{nearest}'\? \(got '{value}'\)"
    ):
        load_config(None, [f"{key}={value}"])


def test_a_value_far_from_every_choice_names_the_choices_only():
    with pytest.raises(ConfigError) as err:
        load_config(None, ["learner.weight_transport=zzz"])
    assert "'channels' or 'relay'" in str(err.value) and "did you mean" not in str(err.value)


def test_removed_algorithm_partial_credit_points_at_the_executor_key(tmp_path):
    with pytest.raises(
        ConfigError, match="algorithm.partial_credit' was removed.*executor.partial_credit"
    ):
        load_config(write(tmp_path, "[algorithm]\npartial_credit = true\n"))


@pytest.mark.parametrize("key", ["learner.sync_bucket_mb=64", "monitor.log_every=5"])
def test_removed_keys_say_they_did_nothing_instead_of_guessing_a_key(key):
    with pytest.raises(ConfigError, match="was removed: it did nothing.*delete it") as err:
        load_config(None, [key])
    assert "did you mean" not in str(err.value)


def test_executor_partial_credit_is_the_working_key():
    assert load_config(None, ["executor.partial_credit=true"]).executor.partial_credit is True


@pytest.mark.parametrize(
    "setting, match",
    [
        ("generatr.num_engines=2", "did you mean 'generator'"),  # nearest section suggested
        ("learner.lr=abc", r"learner\.lr.*'abc'"),  # a wrong type names the field and value
        ("buffer.max_staleness=-1", "buffer.max_staleness"),  # out of range
        ("learner.lr", "key=value"),  # no equals sign: the syntax explained
    ],
)
def test_a_bad_set_is_an_error_saying_what_is_wrong(setting, match):
    with pytest.raises(ConfigError, match=match):
        load_config(None, [setting])


def test_missing_file_points_at_configs(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "nope.toml")


def test_invalid_toml_is_reported_with_the_file(tmp_path):
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(write(tmp_path, "[learner\n"))


def test_resolved_config_round_trips_through_toml(tmp_path):
    cfg = load_config(
        None, ["learner.lr=3e-4", "algorithm.temperature.schedule=[[0, 0.8], [10, 1.2]]"]
    )
    again = load_config(write(tmp_path, cfg.to_toml()))
    assert again == cfg


@pytest.mark.parametrize("recipe", sorted((REPO / "configs").glob("*.toml")), ids=lambda p: p.name)
def test_every_recipe_validates(recipe):
    load_config(recipe)
    tomllib.loads(recipe.read_text())


def test_every_field_is_documented():
    from microcoder.config import describe

    undocumented = [key for key, _, doc in describe(Config) if not doc]
    assert undocumented == []


def test_a_loop_window_longer_than_half_the_cap_is_noted_with_the_value_that_acts():
    from microcoder.launch.config import load_config

    cfg = load_config(None, ["generator.max_response_tokens=96", "algorithm.repeat_window=64"])
    (note,) = cfg.notes()
    assert "no truncated response counts as looping" in note and "at most 48" in note
    assert (
        load_config(
            None, ["generator.max_response_tokens=96", "algorithm.repeat_window=48"]
        ).notes()
        == []
    )
    off = ["generator.max_response_tokens=96", "algorithm.truncation_mask=all"]
    assert load_config(None, off).notes() == []  # only the conditional mask looks for loops


def test_the_default_run_has_no_config_notes():
    from microcoder.launch.config import load_config

    assert load_config("configs/tiny-cpu.toml").notes() == []


def test_eval_max_tokens_follows_the_response_cap_when_unset():
    cfg = load_config(None, ["generator.max_response_tokens=4096"])
    assert cfg.eval.max_tokens == 4096


def test_an_explicit_eval_max_tokens_wins_over_the_response_cap():
    cfg = load_config(None, ["generator.max_response_tokens=4096", "eval.max_tokens=128"])
    assert cfg.eval.max_tokens == 128


@pytest.mark.parametrize(
    ("device", "cap", "expected"),
    [("cpu", 512, False), ("cpu", 8192, True), ("cuda", 512, True), ("auto", 16384, True)],
)
def test_activation_checkpointing_defaults_on_for_gpus_and_long_responses(device, cap, expected):
    cfg = load_config(None, [f"cluster.device={device}", f"generator.max_response_tokens={cap}"])
    assert cfg.learner.activation_checkpointing is expected


@pytest.mark.parametrize("explicit", [True, False])
def test_an_explicit_activation_checkpointing_wins_over_the_rule(explicit):
    for device, cap in (("cpu", 512), ("cuda", 8192)):
        cfg = load_config(
            None,
            [
                f"cluster.device={device}",
                f"generator.max_response_tokens={cap}",
                f"learner.activation_checkpointing={str(explicit).lower()}",
            ],
        )
        assert cfg.learner.activation_checkpointing is explicit


@pytest.mark.parametrize(("resolved", "expected"), [("cuda", True), ("cpu", False)])
def test_an_auto_device_decides_activation_checkpointing_once_the_launch_knows_it(
    resolved, expected
):
    from microcoder.launch.run.actor_settings import learner_rank_settings

    cfg = load_config(None, ["cluster.device=auto", "generator.max_response_tokens=512"])
    assert cfg.learner.activation_checkpointing is None
    cfg.cluster.device = resolved  # what the launch does after resolving the device
    assert learner_rank_settings(cfg).learner.activation_checkpointing is expected


def test_a_rule_across_sections_is_said_once_without_dumping_the_whole_config():
    """A model-level check has no field location; its error is its own message (which names the
    keys and the fix), not the message plus `(got {...every key of the config...})`."""
    sets = ["algorithm.off_policy=mask", "learner.recompute_old_logprobs=false"]
    with pytest.raises(ConfigError) as err:
        load_config(Path("configs/tiny-cpu.toml"), sets)
    text = str(err.value)
    assert "needs learner.recompute_old_logprobs = true" in text
    assert "(got {" not in text and "max_steps" not in text
