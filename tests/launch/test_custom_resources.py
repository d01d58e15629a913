"""`resources = {NAME = AMOUNT}` of the pool sections: the config rules, the Ray options and
placement-group bundles they become, and the plan's check that the cluster has enough."""

from __future__ import annotations

from pathlib import Path

import pytest

from microcoder.launch.config import ConfigError, load_config

TINY = Path(__file__).resolve().parents[2] / "configs" / "tiny-cpu.toml"
POOLS = ["generator", "executor", "learner"]


@pytest.mark.parametrize("section", POOLS)
def test_every_pool_section_takes_custom_resources(section):
    cfg = load_config(TINY, [f"{section}.resources={{second = 1, fast = 0.5}}"])
    assert getattr(cfg, section).resources == {"second": 1.0, "fast": 0.5}


@pytest.mark.parametrize("section", POOLS)
def test_a_pool_takes_no_custom_resources_by_default(section):
    assert getattr(load_config(TINY), section).resources == {}


@pytest.mark.parametrize("amount", ["0", "-1"])
def test_an_amount_that_is_not_positive_is_an_error_saying_what_to_set(amount):
    with pytest.raises(ConfigError, match=r"executor.resources.*must be > 0.*set it to 1"):
        load_config(TINY, [f"executor.resources={{second = {amount}}}"])


def test_an_empty_resource_name_is_an_error_showing_a_named_one():
    with pytest.raises(ConfigError, match=r"generator.resources.*empty name.*second = 1"):
        load_config(TINY, ['generator.resources={"" = 1}'])


def test_a_blank_resource_name_is_an_error():
    with pytest.raises(ConfigError, match="empty name"):
        load_config(TINY, ['learner.resources={" " = 1}'])


@pytest.mark.parametrize(("name", "field"), [("CPU", "cpus_per_"), ("GPU", "gpus_per_")])
def test_rays_own_resources_are_refused_naming_the_field_to_set(name, field):
    with pytest.raises(ConfigError, match=rf"'{name}' is Ray's own resource.*{field}"):
        load_config(TINY, [f"generator.resources={{{name} = 1}}"])
