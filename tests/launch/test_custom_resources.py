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


@pytest.mark.parametrize(
    "setting, match",
    [
        ('generator.resources={"" = 1}', r"generator.resources.*empty name.*second = 1"),
        ('learner.resources={" " = 1}', "empty name"),  # a blank name is empty too
    ],
)
def test_an_empty_resource_name_is_an_error_showing_a_named_one(setting, match):
    with pytest.raises(ConfigError, match=match):
        load_config(TINY, [setting])


@pytest.mark.parametrize(("name", "field"), [("CPU", "cpus_per_"), ("GPU", "gpus_per_")])
def test_rays_own_resources_are_refused_naming_the_field_to_set(name, field):
    with pytest.raises(ConfigError, match=rf"'{name}' is Ray's own resource.*{field}"):
        load_config(TINY, [f"generator.resources={{{name} = 1}}"])


def test_a_pinned_cpu_replica_asks_ray_for_its_custom_resources():
    from microcoder.launch.run.placement import replica_options

    assert replica_options(1.0, 0.0, "cpu", "executor-0", resources={"second": 1}) == {
        "resources": {"second": 1}
    }
    assert replica_options(1.0, 0.0, "cpu", "executor-0") == {}


def test_a_placement_group_bundle_carries_the_custom_resources(monkeypatch):
    from microcoder.launch.run import placement

    bundles = {}
    monkeypatch.setattr(placement.GROUPS, "create", lambda name, b: bundles.update({name: b}))
    monkeypatch.setattr(
        "ray.util.scheduling_strategies.PlacementGroupSchedulingStrategy", lambda pg, **kw: "pg"
    )
    opts = placement.replica_options(2.0, 1.0, "cuda", "generator-0", resources={"second": 1})
    assert bundles["generator-0"] == {"CPU": 2.0, "GPU": 1.0, "second": 1}
    assert opts == {"scheduling_strategy": "pg"}  # the bundle holds them: not asked twice


def _plan(custom, *overrides, address='"10.0.0.7:6379"'):
    from microcoder.launch.run.placement import make_plan

    cfg = load_config(TINY, [f"cluster.address={address}", *overrides])
    return make_plan(cfg, "cpu", 64, 0, custom)


PINNED = ("generator.resources={second = 1}", "executor.resources={second = 1}")


def test_the_plan_fits_when_the_cluster_advertises_enough_of_each_custom_resource():
    plan = _plan({"second": 4.0}, *PINNED)
    assert plan.errors == [] and plan.custom_needed() == {"second": 2.0}
    assert "custom resources: the pools take second=2; the cluster has second=4" in plan.format()


def test_too_little_of_a_custom_resource_is_an_error_naming_the_sections_to_change():
    errors = _plan({"second": 1.0}, *PINNED).errors
    assert len(errors) == 1
    assert "2 of custom resource 'second'" in errors[0] and "advertises 1" in errors[0]
    assert "generator.resources.second / executor.resources.second" in errors[0]
    assert "ray start --resources '{\"second\": 2}'" in errors[0]


def test_a_custom_resource_no_node_advertises_is_an_error():
    errors = _plan({"node:10.0.0.7": 1.0}, "learner.resources={fast = 1}").errors
    assert errors and "learner.resources.fast" in errors[0] and "advertises 0" in errors[0]


def test_a_local_run_with_a_pinned_pool_is_an_error_saying_to_join_a_cluster():
    errors = _plan(None, *PINNED, address="local").errors
    assert errors and "a local run's Ray advertises no custom resources" in errors[0]


def test_a_dry_run_that_does_not_know_the_clusters_custom_resources_shows_them_unchecked():
    plan = _plan(None, *PINNED)
    assert plan.errors == [] and "second=1" in plan.format()
    assert "the cluster's are not known here (not checked)" in plan.format()


def test_the_joined_plan_reads_the_custom_resources_ray_counts():
    from microcoder.launch.run.placement import cluster_custom

    ray_counts = {"CPU": 8.0, "memory": 1e9, "object_store_memory": 1e9, "second": 4.0}
    assert cluster_custom({**ray_counts, "node:127.0.0.2": 1.0}) == {
        "second": 4.0,
        "node:127.0.0.2": 1.0,
    }
