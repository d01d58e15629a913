"""compare.json, compare.md and the plots from constructed metrics.jsonl files (unit):
launch/compare/metrics.py, launch/compare/report.py, launch/compare/plots.py."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from microcoder.launch.compare.arms import parse_arms
from microcoder.launch.compare.metrics import run_series, seed_band, spread, staleness_series
from microcoder.launch.compare.report import build_report, write_report
from microcoder.launch.compare.runner import make_job, run_jobs

CFG = SimpleNamespace(max_steps=3)
HELDOUT = {("no-mask", 0): 0.2, ("no-mask", 1): 0.4, ("no-mask", 2): 0.9}
HELDOUT |= {("mask-all", 0): 0.5, ("mask-all", 1): 0.5, ("mask-all", 2): 0.9}
"""Final held-out pass rate of each constructed run (mask-all seed 2 fails)."""


def records(arm: str, seed: int) -> list[dict]:
    out = [{"kind": "eval", "step": 0, "heldout_pass_rate": 0.1}]
    for step in (1, 2, 3):
        out.append(
            {
                "kind": "step",
                "step": step,
                "reward_mean": 0.1 * step + seed,
                "truncated_frac": 0.25,
                "diversity": 0.5,
                "entropy": 1.0,
                "clip_frac": 0.01,
                "response_len_mean": 10.0 * step,
                "mismatch_kl": 0.001 * step,
                "off_policy_dropped_frac": 0.02,
                "mismatch_by_staleness": {
                    "0": {"tokens": 100.0, "kl": 0.001, "abs_dlogp": 0.01},
                    # staleness 1 from step 2 on, with 3x the tokens at step 3
                    **(
                        {"1": {"tokens": 100.0 * (step - 1), "kl": 0.001 * step}}
                        if step > 1
                        else {}
                    ),
                },
            }
        )
    out.append({"kind": "eval", "step": 3, "heldout_pass_rate": HELDOUT[(arm, seed)]})
    if (arm, seed) == ("mask-all", 2):  # the one that fails says why, as a launch does
        out.append({"kind": "event", "event": "stopped", "message": "BufferDied: it died"})
    return out


def fake_launch(job, env, on_step, on_quiet):
    with (job.run_dir / "metrics.jsonl").open("w") as f:
        for rec in records(job.arm, job.seed):
            f.write(json.dumps(rec) + "\n")
    return 1 if (job.arm, job.seed) == ("mask-all", 2) else 0


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    out = tmp_path_factory.mktemp("compare")
    recipe = out / "recipe.toml"
    recipe.write_text("max_steps = 3\n")
    arms = parse_arms("no-mask,mask-all")
    jobs = [make_job(recipe, a.name, s, [], out, CFG) for s in (0, 1, 2) for a in arms]
    said = (out / "said.txt").open("w")
    results = run_jobs(
        jobs, fake_launch, resume=False, envs=[{}], say=lambda s: said.write(s + "\n")
    )
    said.close()
    by_label = {f"{r.arm} seed{r.seed}": r for r in results}
    overrides = {a.name: list(a.overrides) for a in arms}
    variance = ["the ± over seeds covers the prompt order; not the initial weights"]
    report = build_report(recipe, arms, overrides, [0, 1, 2], [], jobs, by_label, variance=variance)
    return out, write_report(out, report)


def test_the_report_says_what_the_spread_over_seeds_covers(written):
    out, _ = written
    assert json.loads((out / "compare.json").read_text())["variance"] == [
        "the ± over seeds covers the prompt order; not the initial weights"
    ]
    head = (out / "compare.md").read_text().split("## Final held-out pass@1")[0]
    assert "The ± over seeds covers the prompt order; not the initial weights." in head


def test_compare_json_has_the_arms_seeds_runs_versions_and_summary(written):
    out, _ = written
    data = json.loads((out / "compare.json").read_text())
    assert [a["name"] for a in data["arms"]] == ["no-mask", "mask-all"]
    assert data["seeds"] == [0, 1, 2] and len(data["runs"]) == 6
    assert "microcoder" in data["versions"] and "python" in data["versions"]
    assert data["runs"][0]["command"].startswith("microcoder launch ")


def test_compare_json_holds_each_runs_per_step_series(written):
    out, _ = written
    run = json.loads((out / "compare.json").read_text())["runs"][0]
    assert run["series"]["reward_mean"] == [[1, 0.1], [2, 0.2], [3, pytest.approx(0.3)]]
    assert run["series"]["heldout_pass_rate"] == [[0, 0.1], [3, 0.2]]


def test_a_failed_run_is_listed_and_left_out_of_its_arms_final(written):
    out, _ = written
    data = json.loads((out / "compare.json").read_text())
    row = data["summary"]["mask-all"]
    assert (row["seeds"], row["failed"]) == ([0, 1], [2])
    assert row["heldout_pass_rate"]["mean"] == 0.5
    assert (
        "mask-all seed 2: failed (exit 1: BufferDied: it died)" in (out / "compare.md").read_text()
    )
    assert [r["stopped"] for r in data["runs"]].count("") == 5
    assert (
        "mask-all seed2: failed in 00:00 (exit 1: BufferDied: it died; log"
        in (out / "said.txt").read_text()
    )


def test_the_table_gives_the_mean_plus_minus_sample_std_over_seeds(written):
    out, _ = written
    md = (out / "compare.md").read_text()
    # no-mask: seeds 0.2, 0.4, 0.9 -> mean 0.5, sample std 0.36
    assert "| no-mask | 0.500 ± 0.361 | 0.200 – 0.900 | 3 |" in md


def test_every_metric_with_points_gets_a_valid_png(written):
    out, paths = written
    pngs = sorted(p.name for p in paths if p.suffix == ".png")
    assert "heldout_pass_rate.png" in pngs and "response_len_mean.png" in pngs
    assert "curves.png" in pngs and "temperature.png" not in pngs  # nothing logged it
    for p in paths:
        if p.suffix == ".png":
            assert Path(p).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_series_take_step_fields_from_step_records_and_heldout_from_eval_records():
    series = run_series(records("no-mask", 0))
    assert series["response_len_mean"] == [(1, 10.0), (2, 20.0), (3, 30.0)]
    assert series["heldout_pass_rate"] == [(0, 0.1), (3, 0.2)]
    # a step record's field of the same name as an eval metric is not a held-out point
    recs = [{"kind": "step", "step": 1, "heldout_pass_rate": 0.9}]
    assert run_series(recs)["heldout_pass_rate"] == []


def test_the_last_record_of_a_step_logged_twice_wins():
    recs = [{"kind": "step", "step": 1, "reward_mean": 0.1}]
    recs.append({"kind": "step", "step": 1, "reward_mean": 0.3})
    assert run_series(recs)["reward_mean"] == [(1, 0.3)]


def test_seed_band_is_the_mean_and_range_at_each_step():
    band = seed_band([[(1, 0.0), (2, 1.0)], [(1, 2.0)]])
    assert (band.steps, band.mean, band.low, band.high) == (
        [1, 2],
        [1.0, 1.0],
        [0.0, 1.0],
        [2.0, 1.0],
    )


def test_spread_of_one_seed_has_zero_std():
    s = spread([0.4, None])
    assert (s.mean, s.std, s.n) == (0.4, 0.0, 1)


def test_compare_json_holds_the_mismatch_curves_and_the_dropped_fraction(written):
    out, _ = written
    run = json.loads((out / "compare.json").read_text())["runs"][0]
    assert run["series"]["mismatch_kl"] == [[1, 0.001], [2, 0.002], [3, 0.003]]
    assert run["series"]["off_policy_dropped_frac"] == [[1, 0.02], [2, 0.02], [3, 0.02]]
    by = run["mismatch_by_staleness"]
    assert list(by) == ["0", "1"]
    assert by["1"]["kl"] == [[2, 0.002], [3, 0.003]] and by["1"]["tokens"] == [[2, 100], [3, 200]]
    assert "abs_dlogp" not in by["1"]  # not logged for that bucket: no made-up zeros


def test_compare_md_gives_the_mismatch_by_staleness_weighted_by_tokens(written):
    out, _ = written
    md = (out / "compare.md").read_text()
    assert "## Mismatch by staleness" in md
    # staleness 1: (0.002 * 100 + 0.003 * 200) / 300 = 2.67e-3; no |Δ log p| logged -> 0
    assert "| no-mask | 1.00e-03 / 0.0100 | 2.67e-03 / 0.0000 |" in md


def test_staleness_series_orders_buckets_numerically_and_skips_other_records():
    recs = [
        {"kind": "eval", "step": 1, "mismatch_by_staleness": {"0": {"kl": 9.0}}},
        {"kind": "step", "step": 1, "mismatch_by_staleness": {"8+": {"kl": 0.3}, "2": {"kl": 0.2}}},
        {"kind": "step", "step": 2, "mismatch_by_staleness": {"10": {"kl": float("nan")}}},
        {"kind": "step", "step": 3},
    ]
    assert staleness_series(recs) == {"2": {"kl": [(1, 0.2)]}, "8+": {"kl": [(1, 0.3)]}}
