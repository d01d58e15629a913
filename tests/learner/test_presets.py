"""Algorithm presets: the documented values, the layering defaults < preset < TOML / --set, and
what the resolved config records about them."""

from __future__ import annotations

import argparse
import tomllib
from pathlib import Path

import pytest

from microcoder.config import ConfigError
from microcoder.launch.cli.cmd_config import run_show
from microcoder.launch.config import load_config
from microcoder.learner.algorithm.presets import PRESETS, flat_values, overridden
from microcoder.learner.config import AlgorithmConfig

REPO = Path(__file__).resolve().parents[2]

FIXED_T = {
    "temperature.calibrate": False,
    "temperature.monitor_window": 0,
    "temperature.schedule": [],
}
EXPECTED = {
    "grpo": {
        "eps_low": 0.2,
        "eps_high": 0.2,
        "kl_coef": 0.001,
        "aggregation": "seq-mean-token-mean",
        "dynamic_filtering": False,
        "truncation_mask": "none",
        "overlong_buffer_tokens": 0,
        **FIXED_T,
    },
    "dapo": {
        "eps_low": 0.2,
        "eps_high": 0.28,
        "kl_coef": 0.0,
        "aggregation": "token-mean",
        "dynamic_filtering": True,
        "truncation_mask": "all",
        "overlong_buffer_tokens": 0,
        **FIXED_T,
    },
    "microcoder": {
        "eps_low": 0.2,
        "eps_high": 0.28,
        "kl_coef": 0.0,
        "aggregation": "token-mean",
        "dynamic_filtering": True,
        "truncation_mask": "conditional",
        "rho": 0.1,
        "repeat_window": 128,
        "overlong_buffer_tokens": 0,
        "temperature.calibrate": True,
        "temperature.monitor_window": "auto",
        "temperature.monitor_max_changes": 1,
    },
    "paper": {
        "eps_low": 0.2,
        "eps_high": 0.28,
        "kl_coef": 0.0,
        "aggregation": "token-mean",
        "dynamic_filtering": False,
        "truncation_mask": "conditional",
        "rho": 0.1,
        "repeat_window": 128,
        "overlong_buffer_tokens": 0,
        **FIXED_T,
        "temperature.initial": 1.2,
    },
}
"""The values docs/architecture.md §5 documents, written out: a registry change without a docs
change fails here."""


def resolved(cfg: AlgorithmConfig, dotted: str):
    head, _, sub = dotted.partition(".")
    return getattr(getattr(cfg, head), sub) if sub else getattr(cfg, head)


def test_the_registry_holds_exactly_the_documented_presets():
    assert {name: flat_values(name) for name in PRESETS} == EXPECTED


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_preset_resolves_to_its_documented_values(name):
    cfg = load_config(None, [f"algorithm.preset={name}"]).algorithm
    assert {key: resolved(cfg, key) for key in EXPECTED[name]} == EXPECTED[name]


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_the_docs_table_lists_each_preset_value(name):
    page = (REPO / "docs/architecture.md").read_text()
    section = page.split("### Algorithm presets")[1].split("\n#")[0]
    rows = {line.split("|")[1].strip(" `"): line for line in section.splitlines() if "|" in line}
    column = rows["field"].split("|").index(f" `{name}` ")
    for key, value in EXPECTED[name].items():
        cell = rows[key].split("|")[column].strip(" `")
        assert cell == _doc_form(value), (name, key)


def _doc_form(value) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def test_a_toml_value_beats_the_preset(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text('[algorithm]\npreset = "grpo"\neps_high = 0.3\n')
    cfg = load_config(path).algorithm
    assert cfg.eps_high == 0.3 and cfg.eps_low == 0.2


def test_a_set_value_beats_the_preset():
    cfg = load_config(None, ["algorithm.preset=dapo", "algorithm.truncation_mask=none"]).algorithm
    assert cfg.truncation_mask == "none" and cfg.eps_high == 0.28


def test_a_nested_temperature_value_beats_the_preset_and_the_rest_is_filled():
    cfg = load_config(
        None, ["algorithm.preset=microcoder", "algorithm.temperature.calibrate=false"]
    ).algorithm
    assert cfg.temperature.calibrate is False and cfg.temperature.monitor_window == "auto"


def test_the_resolved_config_records_every_value_the_preset_set():
    cfg = load_config(None, ["algorithm.preset=microcoder", "algorithm.rho=0.5"]).algorithm
    expected = {k: v for k, v in EXPECTED["microcoder"].items() if k != "rho"}
    assert cfg.preset == "microcoder" and cfg.preset_values == expected


def test_the_saved_toml_names_the_preset_and_reads_back_equal(tmp_path):
    cfg = load_config(None, ["algorithm.preset=grpo", "algorithm.kl_coef=0.01"])
    text = cfg.to_toml()
    assert 'preset = "grpo"' in text and '"temperature.calibrate" = false' in text
    path = tmp_path / "config.toml"
    path.write_text(text)
    assert load_config(path) == cfg


def test_without_a_preset_the_field_defaults_apply_and_nothing_is_recorded():
    cfg = load_config(None).algorithm
    assert cfg.preset == "" and cfg.preset_values == {}
    assert cfg.truncation_mask == "conditional" and cfg.rho == 0.1


def test_an_unknown_preset_names_the_nearest_one():
    with pytest.raises(ConfigError, match="unknown algorithm.preset 'dapoo'.*did you mean 'dapo'"):
        load_config(None, ["algorithm.preset=dapoo"])


def test_hand_written_preset_values_that_the_preset_does_not_set_are_refused():
    with pytest.raises(ConfigError, match="preset_values is recorded by the config loader"):
        load_config(None, ["algorithm.preset=grpo", "algorithm.preset_values={eps_high = 0.5}"])


def test_changing_a_field_after_loading_drops_it_from_the_record():
    cfg = AlgorithmConfig(preset="dapo")
    cfg.eps_high = 0.4
    assert "eps_high" not in cfg.preset_values and "eps_low" in cfg.preset_values


def test_overridden_lists_the_preset_fields_the_config_set_otherwise():
    cfg = load_config(None, ["algorithm.preset=grpo", "algorithm.temperature.calibrate=true"])
    assert overridden(cfg.algorithm) == {"temperature.calibrate": (False, True)}


def test_config_show_names_the_overrides_on_stderr_and_keeps_stdout_toml(capsys):
    args = argparse.Namespace(
        config=None, overrides=["algorithm.preset=dapo", "algorithm.eps_high=0.3"], docs=False
    )
    assert run_show(args) == 0
    out, err = capsys.readouterr()
    assert tomllib.loads(out)["algorithm"]["preset"] == "dapo"
    assert "eps_high = 0.3 (preset 0.28)" in err
