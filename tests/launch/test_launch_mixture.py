"""A launch with two weighted data sources (issue 45, mixtures): the bundled synthetic family
twice, under the names `first` (weight 0.8) and `second` (weight 0.2; its ids, which clash with
the first's, are renamed `second:<id>` by the problem store). Over 6 tiny steps 0.68-0.92 of
the rollouts come from the first, every step record carries the per-source metrics, and the
Prometheus page labels them by source.

The same run sets a generator aside for the eval (eval.generators = 1, issue 49 item 4): the
placement plan shows its pool, the run starts it beside the training generator, every eval beside
training samples on it alone at the learner's version of its step (the record names both), the
training generator's log never says it held a version (the set-aside one's says so at every
eval), and the run trains to its end meanwhile. The stand-in test
(tests/launch/test_eval_beside.py) checks the same of `hold_pool` without Ray; the staleness of
training samples with and without it is measured in bench/RESULTS.md ("Generators set aside for
the eval"). One launched run is shared by the tests of this module (one launch, not two: the
slow tier's time)."""

from __future__ import annotations

import json

import pytest
from launch_testing.batch import batched_launch
from launch_testing.launched import QUICK, SMALL_BATCH, assert_finished, tiny_args
from launch_testing.launched import metrics_records as records

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]  # the launch runs in the module fixture

STEPS = 6
SOURCES = (
    'data.sources=[{ path = "synthetic", name = "first", weight = 0.8 }, '
    '{ path = "synthetic", name = "second", weight = 0.2 }]'
)
SETTINGS = [
    *QUICK,
    SOURCES,
    f"max_steps={STEPS}",
    *SMALL_BATCH,
    "monitor.rollouts_every=1",
    "eval.every=3",
    "eval.problems=8",
    "eval.generators=1",
]
EVAL_STEPS = (0, 3, 6)


finished_run = batched_launch(__file__, "mixture", tiny_args(SETTINGS))
"""The module's one launch, run beside the other batched modules' (launch_testing.batch)."""


def test_the_run_finishes_its_steps(finished_run):
    assert_finished(*finished_run, steps=STEPS)


def test_the_first_source_gives_its_weights_share_of_the_rollouts(finished_run):
    _, run_dir = finished_run
    steps = records(run_dir, "step")
    assert len(steps) == STEPS
    groups = {"first": 0, "second": 0}
    for r in steps:
        data = r["data"]
        assert set(data) <= set(groups), data
        assert sum(v["share"] for v in data.values()) == pytest.approx(1.0)
        for name, v in data.items():
            groups[name] += v["groups"]
            assert 0.0 <= v["pass_rate"] <= 1.0
    share = groups["first"] / sum(groups.values())
    print(f"groups by source over {STEPS} steps: {groups}, share of the first {share:.3f}")
    assert 0.68 <= share <= 0.92, groups


def test_the_rollouts_come_from_both_sources_with_renamed_ids(finished_run):
    """The store renames the second source's clashing ids `second:<id>`: both sources' problems
    reach the learner (rollouts of every step, monitor.rollouts_every = 1)."""
    _, run_dir = finished_run
    files = sorted((run_dir / "rollouts").glob("*.jsonl"))
    assert files
    rows = [json.loads(x) for f in files for x in f.read_text().splitlines()]
    assert {r["source"] for r in rows} == {"first", "second"}
    for r in rows:  # the second source's ids all clash with the first's: all renamed
        assert r["prompt_id"].startswith("second:") == (r["source"] == "second")


def test_prometheus_labels_the_per_source_metrics(finished_run):
    from microcoder.launch.monitor.prometheus import prometheus_text

    _, run_dir = finished_run
    text = prometheus_text(records(run_dir, "step")[-1])
    assert 'microcoder_data_share{source="first"}' in text


def test_each_eval_samples_on_the_set_aside_generator_at_its_steps_version(finished_run):
    proc, run_dir = finished_run
    evals = records(run_dir, "eval")
    assert [r["step"] for r in evals] == list(EVAL_STEPS), proc.stdout[-3000:]
    for r in evals:
        assert r["eval_generators"] == ["eval-generator-0"]
        assert r["policy_version"] == r["step"] and r["policy_versions_seen"] == [r["step"]]
    assert "eval-gen" in proc.stdout  # the placement plan's row
    assert "starting 1 generator(s) set aside for the eval" in proc.stdout


def test_only_the_set_aside_generator_held_a_version(finished_run):
    """Each actor's log (RUN_DIR/logs) says when it held a version for an eval
    (actors/weights/follower.py `hold`): the set-aside generator at every eval, the training
    generator never."""
    _, run_dir = finished_run
    aside = (run_dir / "logs" / "eval-generator-0.log").read_text()
    training = (run_dir / "logs" / "generator-0.log").read_text()
    for step in EVAL_STEPS:
        assert f"eval-generator-0: holding version {step} for a held-out eval" in aside
    assert "holding version" not in training


def test_status_json_lists_the_set_aside_pool_with_its_version_and_memory(finished_run, capsys):
    """`microcoder status RUN_DIR --json` of the finished run: the eval's generators as a pool
    of their own (launch/monitor/status_view.py `eval_pool_section`), at the last eval's
    version, and their memory under their own pool in every step record (measured live by the
    launcher, launch/monitor/memory_view.py)."""
    from microcoder.launch.cli.main import main

    _, run_dir = finished_run
    assert main(["status", str(run_dir), "--json"]) == 0
    st = json.loads(capsys.readouterr().out)
    pool = st["pools"]["eval-generator"]
    assert (pool["count"], pool["state"]) == (1, "idle")
    assert (pool["step"], pool["version"]) == (EVAL_STEPS[-1], EVAL_STEPS[-1])
    assert list(st["memory"]["eval-generator"]) == ["eval-generator-0"]
    assert "eval-generator-0" not in st["memory"]["generator"]
    for r in records(run_dir, "step"):
        assert r["memory"]["eval-generator"]["eval-generator-0"]["rss_bytes"] > 0
