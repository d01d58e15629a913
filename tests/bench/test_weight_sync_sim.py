"""The weight-sync event model (bench/weight_sync_sim.py): its closed forms, a plain event-by-event
reference it must agree with, the relay's flat cost in N against serial's linear one, and the
bench's JSON and table from a saved calibration."""

from __future__ import annotations

import argparse
import json
import math
import random

import pytest

from microcoder.bench import weight_sync_sim as sim
from microcoder.bench.weight_sync_calib import link_costs

MIB = 1 << 20
SEVEN_B = int(15.2e9)  # a 7B model in bf16 (Qwen2.5-Coder-7B: 7.6 B parameters x 2 bytes)
# costs of the order calibrated on the 2-core CPU machine (bench/RESULTS.md)
CPU_LIKE = sim.Costs(
    pack_fixed_s=2e-5,
    pack_gb_s=2.7,
    post_s=3e-4,
    load_fixed_s=2e-5,
    load_gb_s=1.6,
    sync_fixed_s=3e-4,
    store_op_s=2e-5,
)


def gbps(g: float, latency_us: float = 5.0) -> sim.Link:
    return sim.Link(g * 1e9 / 8, latency_us * 1e-6)


def reference_chain(n, model_bytes, chunk_bytes, link, costs, slots):
    """The same model event by event, chunk k then hop h, with no vector tricks."""
    sizes = sim.chunk_sizes(model_bytes, chunk_bytes)
    tx = [[0.0] * n for _ in sizes]  # tx[k][h]: hop h finished sending chunk k
    load = [[0.0] * n for _ in sizes]  # load[k][h]: receiver h + 1 finished loading chunk k
    pack_end = 0.0
    for k, size in enumerate(sizes):
        staging = tx[k - slots][0] if slots and k >= slots else 0.0
        pack_end = max(pack_end, staging) + costs.pack_s(size)
        ready = pack_end  # chunk k is at node 0
        for h in range(n):
            start = ready + costs.post_s
            if k:
                start = max(start, tx[k - 1][h])
            if slots and k >= slots:
                old = k - slots
                forwarded = tx[old][h + 1] if h + 1 < n else 0.0
                start = max(start, max(load[old][h], forwarded) + link.latency_s)
            tx[k][h] = start + size / link.bytes_per_s
            arrive = tx[k][h] + link.latency_s
            load[k][h] = max(arrive, load[k - 1][h] if k else 0.0) + costs.load_s(size)
            ready = arrive
    return max(load[-1])


@pytest.mark.parametrize("n", [1, 3, 64])
def test_with_no_overheads_the_relay_is_the_store_and_forward_closed_form(n):
    chunk, chunks, link = 4 * MIB, 10, gbps(50, latency_us=20)
    got = sim.relay_seconds(n, chunks * chunk, chunk, link, sim.Costs(), slots=None)
    want = (chunks + n - 1) * chunk / link.bytes_per_s + n * link.latency_s
    assert got == pytest.approx(want, rel=1e-12)


def test_two_buffers_per_receiver_cost_at_most_a_latency_per_chunk():
    chunk, chunks, link = 4 * MIB, 10, gbps(50, latency_us=20)
    free = sim.relay_seconds(8, chunks * chunk, chunk, link, sim.Costs(), slots=None)
    bounded = sim.relay_seconds(8, chunks * chunk, chunk, link, sim.Costs(), slots=2)
    assert free < bounded <= free + chunks * link.latency_s


@pytest.mark.parametrize("slots", [None, 1, 2, 3])
def test_the_vectorised_chain_agrees_with_the_event_by_event_reference(slots):
    rng = random.Random(slots or 0)
    for _ in range(6):
        costs = sim.Costs(
            pack_fixed_s=rng.uniform(0, 1e-3),
            pack_gb_s=rng.uniform(0.5, 20),
            post_s=rng.uniform(0, 1e-3),
            load_fixed_s=rng.uniform(0, 1e-3),
            load_gb_s=rng.uniform(0.5, 20),
        )
        link = gbps(rng.choice([10, 50, 400]), latency_us=rng.uniform(0, 200))
        n = rng.randint(1, 9)
        model, chunk = rng.randint(1, 40) * MIB + rng.randint(0, MIB), rng.randint(1, 6) * MIB
        got = sim.chain_seconds(n, model, chunk, link, costs, slots)
        assert got == pytest.approx(reference_chain(n, model, chunk, link, costs, slots), rel=1e-12)


def test_serial_is_n_one_receiver_syncs_and_grows_linearly():
    bucket, link = 256 * MIB, gbps(50)
    out = sim.simulate([1, 8, 64, 256], SEVEN_B, 16 * MIB, bucket, link, CPU_LIKE)
    one = sim.relay_seconds(1, SEVEN_B, bucket, link, CPU_LIKE)
    assert {n: r["serial_s"] / one for n, r in out.items()} == pytest.approx(
        {"1": 1, "8": 8, "64": 64, "256": 256}, rel=1e-12
    )
    assert sim.serial_seconds(64, SEVEN_B, bucket, link, CPU_LIKE) == pytest.approx(64 * one)


@pytest.mark.parametrize("costs", [sim.Costs(), CPU_LIKE], ids=["no-overheads", "cpu-like"])
@pytest.mark.parametrize("link_gbps", [25, 50, 400])
def test_the_relay_to_256_receivers_costs_at_most_1_5x_its_sync_to_one(costs, link_gbps):
    out = sim.simulate([1, 256], SEVEN_B, 16 * MIB, 256 * MIB, gbps(link_gbps), costs)
    assert out["256"]["scheme_s"] <= 1.5 * out["1"]["scheme_s"], out
    assert out["256"]["serial_s"] > 100 * out["256"]["scheme_s"], out


def test_the_fill_grows_with_the_chunk_so_64_mib_chunks_pass_1_5x_at_256():
    # link-bound: relay(256) / relay(1) ~ (B + 255) / B, B = 906 at 16 MiB, 227 at 64 MiB
    ratios, link = {}, gbps(400)
    for mib in (16, 32, 64):
        one, many = (
            sim.relay_seconds(n, SEVEN_B, mib * MIB, link, sim.Costs(), slots=None)
            for n in (1, 256)
        )
        ratios[mib] = many / one
    b = {m: math.ceil(SEVEN_B / (m * MIB)) for m in ratios}
    assert ratios == pytest.approx({m: (b[m] + 255) / b[m] for m in ratios}, rel=0.01)
    assert ratios[16] < 1.5 < ratios[64]


def test_the_last_chunk_may_be_short_and_bad_sizes_are_refused():
    assert sim.chunk_sizes(10, 4) == [4, 4, 2]
    with pytest.raises(ValueError, match="--chunk-mib"):
        sim.chunk_sizes(10, 0)
    with pytest.raises(SystemExit, match="--receivers"):
        sim.parse_receivers("1,x")
    assert sim.parse_receivers(None) == [1, 8, 64, 256]


def _args(tmp_path, **over) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    from microcoder.bench import weight_sync

    weight_sync.add_arguments(parser)
    cal = {"calibration": {"values": CPU_LIKE.__dict__ | {"loopback_gb_s": 1.0}, "source": "t"}}
    path = tmp_path / "cal.json"
    path.write_text(json.dumps(cal))
    argv = ["--simulate", "--calibration", str(path), "--model-gb", "1"]
    argv += [] if "receivers" in over else ["--receivers", "1,8"]
    for k, v in over.items():
        argv += [f"--{k.replace('_', '-')}", str(v)]
    return parser.parse_args(argv)


def test_the_bench_reports_each_count_with_its_parameters_and_calibration(tmp_path):
    from microcoder.bench import weight_sync

    result = weight_sync.run(_args(tmp_path))
    assert set(result["simulated"]) == {"1", "8"}
    assert set(result["simulated"]["8"]) == {"scheme_s", "serial_s"}
    assert result["calibration"]["source"] == "t"
    assert result["parameters"]["chunks"] == math.ceil(1e9 / (16 * MIB))
    json.dumps(result)  # the --json output
    table = weight_sync.format_table(result)
    assert [line.split()[0] for line in table.splitlines()[2:4]] == ["1", "8"]


def test_a_third_buffer_takes_the_slot_round_trip_out_of_the_period(tmp_path):
    # with 2 buffers: period = wire + latency + post / 2 (the slot's release travels back)
    from microcoder.bench import weight_sync

    two, three = (
        weight_sync.run(_args(tmp_path, receivers="1,2", gbps=400, slots=k, copy_gb_s=1000))[
            "simulated"
        ]
        for k in (2, 3)
    )
    assert two["2"]["scheme_s"] > 1.2 * two["1"]["scheme_s"]
    assert three["2"]["scheme_s"] < 1.05 * three["1"]["scheme_s"]  # one chunk of 60 to fill


def test_receivers_registered_by_another_part_of_the_bench_is_read_the_same(tmp_path):
    parser = argparse.ArgumentParser()
    parser.add_argument("--receivers", default="")  # as the measured bench declares it
    sim.add_arguments(parser)
    args = parser.parse_args(["--simulate", "--model-gb", "0.1", "--calibration", "x"])
    assert sim.parse_receivers(args.receivers) == [1, 8, 64, 256]


def test_copy_rate_and_post_replace_only_their_calibrated_values(tmp_path):
    from microcoder.bench import weight_sync

    costs = weight_sync.run(_args(tmp_path, copy_gb_s=1000))["parameters"]["costs"]
    assert (costs["pack_gb_s"], costs["load_gb_s"]) == (1000, 1000)
    assert costs["post_s"] == CPU_LIKE.post_s
    costs = weight_sync.run(_args(tmp_path, post_us=20))["parameters"]["costs"]
    assert (costs["post_s"], costs["load_gb_s"]) == (pytest.approx(2e-5), CPU_LIKE.load_gb_s)


@pytest.mark.slow  # ~17 s on the loaded 2-core machine: a second process imports torch
def test_the_calibration_measures_positive_costs_with_a_peer_process():
    values = link_costs(1 * MIB, pings=5, rounds=3)
    assert all(v > 0 for v in values.values()), values
