"""`microcoder bench weight-sync --receivers 1,2,4`: weights to N receivers, today's serial sync
(one channel per receiver, sent in turn, as `WeightPublisher` does) against the chain relay
(learner/sync/relay.py), in one run, on CPU/gloo over loopback.

For each N, N receiver processes each join their own channel (a `WeightSender` per receiver on
rank 0) and the one relay group. Each round, in this order: serial (rank 0 sends to channel 1,
then 2, ...) and relay (relay first on odd rounds, so neither always follows the other), then
both again with a one-tensor state of 64 bytes (the fixed cost of a
round: handshakes, header, store keys). Times are taken on rank 0 from the start of the round
until every receiver confirmed it. State: a synthetic bf16 state dict of `--mb` MiB in 64
tensors (no tensor bigger than a bucket, as in a real model with buckets of 4 MiB or more).

Calibration for a simulation (per N): `hop_s` = (relay_s - relay_fixed_s) / (chunks + N - 1),
the time one chunk takes to cross one hop in the pipelined chain, and `hop_bytes_per_s`;
`serial_bucket_s` = (serial_s - serial_fixed_s) / (N x buckets), one bucket on one channel.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

_MEMBER = "microcoder.bench.weight_relay"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--receivers",
        default="",
        help="comma-separated receiver counts, e.g. 1,2,4: serial channels vs the chain relay",
    )
    parser.add_argument(
        "--mb", type=float, default=64.0, help="with --receivers: state size in MiB (default 64)"
    )


def _state(mb: float) -> dict:
    import torch

    per = max(1, int(mb * 2**20 / 2 / 64))  # bf16 elements per tensor
    return {
        f"layer.{i}.weight": torch.full((per,), 0.5 + i, dtype=torch.bfloat16) for i in range(64)
    }


def run_receivers(args: argparse.Namespace) -> dict:
    counts = [int(x) for x in args.receivers.split(",") if x.strip()]
    bucket = int((args.bucket_mb or 4.0) * 2**20)
    state = _state(args.mb)
    out = {
        "mb": args.mb,
        "bytes": sum(t.numel() * t.element_size() for t in state.values()),
        "tensors": len(state),
        "bucket_bytes": bucket,
        "repeats": args.repeats,
        "receivers": {},
    }
    for n in counts:
        out["receivers"][str(n)] = _measure(n, state, bucket, args.repeats)
    return out


def _measure(n: int, state: dict, bucket: int, repeats: int) -> dict:
    import torch

    from microcoder.learner.distributed import free_port
    from microcoder.learner.sync.relay import RelaySender
    from microcoder.learner.sync.transport import WeightSender, bucket_layout

    ports = [free_port() for _ in range(n)]
    relay_port = free_port()
    rounds = repeats + 1
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", _MEMBER, "member", str(ports[r - 1]), str(relay_port)]
            + [str(r), str(n), str(rounds)]
        )
        for r in range(1, n + 1)
    ]
    tiny = {"tiny": torch.zeros(32, dtype=torch.bfloat16)}
    times: dict[str, list[float]] = {k: [] for k in ("serial", "relay", "serial0", "relay0")}
    peaks = {"receiver": 0, "sender": 0}
    try:
        channels = [
            WeightSender("127.0.0.1", p, 1, timeout_s=300, bucket_bytes=bucket) for p in ports
        ]
        relay = RelaySender("127.0.0.1", relay_port, n, timeout_s=300, bucket_bytes=bucket)
        for k in range(rounds):  # round 0 warms up
            for label, sd in (("", state), ("0", tiny)):
                spent = {}
                for mode in ("serial", "relay") if k % 2 == 0 else ("relay", "serial"):
                    t0 = time.perf_counter()
                    if mode == "relay":
                        stats = relay.send(sd.items(), k)
                    else:
                        for ch in channels:
                            ch.send(sd.items(), k)
                    spent[mode] = time.perf_counter() - t0
                if k:
                    for mode, s in spent.items():
                        times[mode + label].append(s)
                if label == "":
                    chunks = stats.chunks
                    peaks["receiver"] = max(peaks["receiver"], stats.receiver_peak_extra_bytes)
                    peaks["sender"] = max(peaks["sender"], stats.sender_peak_extra_bytes)
        for p in procs:
            p.wait(timeout=300)
    finally:
        for p in procs:
            p.kill()
    med = {k: statistics.median(v) for k, v in times.items()}
    hop = max(med["relay"] - med["relay0"], 1e-9) / (chunks + n - 1)
    buckets = len(bucket_layout(list(state.items()), 0, bucket)[1])
    serial_bucket = max(med["serial"] - med["serial0"], 1e-9) / (n * buckets)
    return {
        "serial_s": med["serial"],
        "relay_s": med["relay"],
        "serial_over_relay": med["serial"] / med["relay"],
        "best_serial_s": min(times["serial"]),
        "best_relay_s": min(times["relay"]),
        "serial_fixed_s": med["serial0"],
        "relay_fixed_s": med["relay0"],
        "chunks": chunks,
        "serial_buckets_per_channel": buckets,
        "bucket_bytes": bucket,
        "hop_s": hop,
        "hop_bytes_per_s": bucket / hop,
        "serial_bucket_s": serial_bucket,
        "serial_bytes_per_s": bucket / serial_bucket,
        "receiver_peak_extra_bytes": peaks["receiver"],
        "sender_peak_extra_bytes": peaks["sender"],
        "receiver_peak_in_buckets": peaks["receiver"] / bucket,
    }


def member(serial_port: int, relay_port: int, rank: int, n: int, rounds: int) -> None:
    """A receiver process: its own channel (rank 1 of 2) and rank `rank` of the relay; per round
    serial, relay, serial (tiny), relay (tiny), each loaded as it comes (nothing kept)."""
    from microcoder.learner.sync.relay import RelayReceiver
    from microcoder.learner.sync.transport import WeightReceiver

    name = f"bench receiver {rank}"
    own = WeightReceiver("127.0.0.1", serial_port, 1, 2, timeout_s=300, name=name)
    relay = RelayReceiver("127.0.0.1", relay_port, rank, n + 1, timeout_s=300, name=name)
    for i in range(rounds * 2):  # round i // 2: serial first on even rounds, relay first on odd
        for rx in (own, relay) if (i // 2) % 2 == 0 else (relay, own):
            for _name, _tensor in rx.receive():
                pass


def format_table(result: dict) -> str:
    lines = [
        f"weights to N receivers over gloo (loopback), {result['bytes'] / 2**20:.0f} MiB bf16 in "
        f"{result['tensors']} tensors, buckets {result['bucket_bytes'] / 2**20:.0f} MiB, "
        f"median of {result['repeats']} rounds",
        f"{'N':>3} {'serial s':>9} {'relay s':>8} {'ser/rel':>7} {'fixed s':>8} {'hop s':>7} "
        f"{'hop GB/s':>8} {'rx peak':>8} {'tx peak':>8}",
    ]
    for n, r in result["receivers"].items():
        lines.append(
            f"{n:>3} {r['serial_s']:>9.3f} {r['relay_s']:>8.3f} {r['serial_over_relay']:>7.2f} "
            f"{r['relay_fixed_s']:>8.3f} {r['hop_s']:>7.4f} {r['hop_bytes_per_s'] / 1e9:>8.2f} "
            f"{r['receiver_peak_in_buckets']:>6.2f} b {r['sender_peak_extra_bytes'] / 2**20:>5.0f} MiB"
        )
    lines.append(
        "fixed = a 64-byte relay round; hop = one chunk over one link in the chain; rx peak in "
        "buckets above the model; tx peak = rank 0's staging"
    )
    return "\n".join(lines)


if __name__ == "__main__" and len(sys.argv) == 7 and sys.argv[1] == "member":
    member(*(int(x) for x in sys.argv[2:7]))
