"""`microcoder bench weight-sync --simulate`: an event model of one weight sync to N receivers.

Two schemes move the same model (`model_bytes`, in the serving dtype) from learner rank 0:
- **relay** (the chosen scheme, issue 33): one group over rank 0 and every receiver (every vLLM
  worker of every generator), arranged as a chain. The model travels as fixed-size chunks; rank 0
  packs chunk k into one of `slots` staging buffers and sends it to receiver 1; receiver i, once
  chunk k has arrived, forwards it to receiver i + 1 while it loads it into its model. A receiver
  holds at most `slots` chunk buffers: it takes chunk k only once chunk k - slots is loaded and
  forwarded, and its sender learns so one link latency later.
- **serial** (today's scheme, learner/sync/transport.py): one channel per receiver, sent in turn,
  each the same pipeline with one receiver (pack, wire, load overlapped), in its own bucket size.

Every link has the same bandwidth and latency. Per-chunk costs (`Costs`): packing on the sender
and loading on each receiver (a fixed part plus bytes at a copy rate), and posting a send (a
fixed delay before a chunk goes on a link; the link may still carry the previous chunk). Per
sync: a fixed handshake (ready keys, header, done keys) plus one key set and one key checked in
rank 0's store per receiver. The values come from a CPU measurement (bench/weight_sync_calib.py)
or a saved one (`--calibration FILE`).

The model is deterministic: each event's time is the latest of the events it waits for plus its
own duration, worked out chunk by chunk (for one chunk, the hops along the chain are one running
maximum, `chain_seconds`). With no per-chunk costs and unbounded buffers it reduces to the
closed form of a store-and-forward chain: (B + N - 1) x chunk / bandwidth + N x latency for B
equal chunks (tests/bench/test_weight_sync_sim.py).

The chunk size sets the fill: the last receiver starts loading N - 1 chunk times after the first,
so the relay's time at N receivers over its time at 1 is about (B + N - 1) / B when the link is
the bottleneck. The default, 16 MiB, keeps that at 1.3 for a 7B bf16 model (15.2 GB, B = 906) at
256 receivers; 64 MiB chunks would make it 2.1 (B = 227). Keeping it under 1.5 needs
chunk <= model / (2 (N - 1)). Smaller chunks cost more fixed overhead per byte (a pack, a post
and a load each), but a post only delays each hop, it does not lengthen the pipeline's period,
and 16 MiB still spends 0.34 ms on a 400 Gb/s link.
"""

from __future__ import annotations

import argparse
import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path

MIB = 1 << 20
DEFAULT_RECEIVERS = "1,8,64,256"
SERIAL_BUCKET_MIB = 256.0
"""Today's bucket size (learner/sync/transport.py `WeightSender`'s default)."""


@dataclass(frozen=True)
class Link:
    """Every hop of the chain (and each serial channel): bytes per second and one-way latency."""

    bytes_per_s: float
    latency_s: float = 0.0


@dataclass(frozen=True)
class Costs:
    """Per-chunk and per-sync costs in seconds (rates in GB/s, 1e9 bytes; inf = free)."""

    pack_fixed_s: float = 0.0
    """Sender: packing one chunk into a staging buffer, the part that does not grow with bytes."""
    pack_gb_s: float = math.inf
    """Sender: the packing copy's rate."""
    post_s: float = 0.0
    """Any node: from "chunk ready" to its first byte on the link (posting one send)."""
    load_fixed_s: float = 0.0
    """Receiver: loading one chunk into the model's tensors, the fixed part."""
    load_gb_s: float = math.inf
    """Receiver: the loading copy's rate."""
    sync_fixed_s: float = 0.0
    """Per sync and channel: ready handshake, header broadcast, done handshake."""
    store_op_s: float = 0.0
    """One key operation in rank 0's store; each receiver costs two per sync (ready, done)."""

    def pack_s(self, nbytes: int) -> float:
        return self.pack_fixed_s + nbytes / (self.pack_gb_s * 1e9)

    def load_s(self, nbytes: int) -> float:
        return self.load_fixed_s + nbytes / (self.load_gb_s * 1e9)


def chunk_sizes(model_bytes: int, chunk_bytes: int) -> list[int]:
    """The model cut into chunks of `chunk_bytes` (the last one smaller)."""
    if model_bytes <= 0 or chunk_bytes <= 0:
        raise ValueError("model and chunk sizes must be positive (set --model-gb, --chunk-mib)")
    full, rest = divmod(int(model_bytes), int(chunk_bytes))
    return [int(chunk_bytes)] * full + ([rest] if rest else [])


def chain_seconds(
    n: int, model_bytes: int, chunk_bytes: int, link: Link, costs: Costs, slots: int | None = 2
) -> float:
    """Seconds from the first pack until every one of `n` receivers in a chain has loaded the
    last chunk; `slots` chunk buffers per receiver and on the sender (None: unbounded)."""
    import numpy as np

    if n < 1:
        raise ValueError(f"receivers must be >= 1, got {n}")
    if slots is not None and slots < 1:
        raise ValueError(f"slots must be >= 1 or None, got {slots}")
    lat = link.latency_s
    post = costs.post_s
    hops = np.arange(n, dtype=np.float64)  # hop h: node h -> node h + 1 (node 0 is rank 0)
    tx_prev = np.zeros(n)  # when each hop finished sending the previous chunk
    load_prev = np.zeros(n)  # when each receiver (node h + 1) finished loading it
    ring = slots or 1
    released = np.zeros((ring, n))  # receiver h + 1 let go of chunk k - slots (loaded, forwarded)
    staging_free = [0.0] * ring  # the sender's staging buffer for chunk k is free again
    pack_end = 0.0
    for k, size in enumerate(chunk_sizes(model_bytes, chunk_bytes)):
        j = k % ring
        bounded = slots is not None and k >= slots
        pack_end = max(pack_end, staging_free[j] if bounded else 0.0) + costs.pack_s(size)
        wire = size / link.bytes_per_s
        # earliest start on each hop apart from its upstream: link free, downstream slot free
        earliest = np.maximum(tx_prev, released[j] + lat) if bounded else tx_prev.copy()
        earliest[0] = max(earliest[0], pack_end + post)
        # upstream: hop h may start once hop h - 1 delivered it (+ wire + latency) and posted
        step = wire + lat + post
        start = hops * step + np.maximum.accumulate(earliest - hops * step)
        tx_end = start + wire
        load_end = np.maximum(tx_end + lat, load_prev) + costs.load_s(size)
        if slots is not None:
            forwarded = np.append(tx_end[1:], 0.0)  # the last receiver forwards nothing
            released[j] = np.maximum(load_end, forwarded)
            staging_free[j] = float(tx_end[0])
        tx_prev = tx_end
        load_prev = load_end
    return float(load_prev.max())


def relay_seconds(
    n: int, model_bytes: int, chunk_bytes: int, link: Link, costs: Costs, slots: int | None = 2
) -> float:
    """One sync to n receivers over the chain: one handshake, 2 store keys per receiver."""
    chain = chain_seconds(n, model_bytes, chunk_bytes, link, costs, slots)
    return chain + costs.sync_fixed_s + 2 * n * costs.store_op_s


def serial_seconds(
    n: int, model_bytes: int, bucket_bytes: int, link: Link, costs: Costs, slots: int | None = 2
) -> float:
    """One sync to n receivers, one channel after the other: n x the one-receiver sync."""
    return n * relay_seconds(1, model_bytes, bucket_bytes, link, costs, slots)


def simulate(
    receivers: list[int],
    model_bytes: int,
    chunk_bytes: int,
    serial_bucket_bytes: int,
    link: Link,
    costs: Costs,
    slots: int | None = 2,
) -> dict[str, dict[str, float]]:
    """{N: {scheme_s, serial_s}} for each receiver count (keys as strings, as JSON has them);
    `slots` bounds the relay's buffers (serial keeps today's two)."""
    serial_one = relay_seconds(1, model_bytes, serial_bucket_bytes, link, costs)
    out = {}
    for n in receivers:
        out[str(n)] = {
            "scheme_s": relay_seconds(n, model_bytes, chunk_bytes, link, costs, slots),
            "serial_s": n * serial_one,
        }
    return out


MODEL_OPTIONS: dict[str, tuple[type, float | None, str]] = {
    "gbps": (float, 50.0, "link bandwidth, Gbit/s (default 50)"),
    "latency_us": (float, 5.0, "one-way latency of a link, microseconds (default 5)"),
    "model_gb": (
        float,
        15.2,
        "bytes each receiver gets, GB (1e9; default 15.2, a 7B model in bf16)",
    ),
    "chunk_mib": (float, 16.0, "relay chunk, MiB (default 16)"),
    "serial_bucket_mib": (
        float,
        SERIAL_BUCKET_MIB,
        f"serial scheme's bucket, MiB (default {SERIAL_BUCKET_MIB:.0f}, today's)",
    ),
    "slots": (
        int,
        2,
        "chunk buffers per relay receiver and on the sender (default 2); with 2, each chunk "
        "waits for its slot's release to travel back, and the period grows by a latency and "
        "half a post",
    ),
    "copy_gb_s": (
        float,
        None,
        "rate of packing and loading, GB/s, instead of the CPU calibration's (copies on a "
        "GPU); the fixed parts stay calibrated",
    ),
    "post_us": (
        float,
        None,
        "a hop's fixed cost per chunk, microseconds, instead of the CPU calibration's (gloo on "
        "loopback); for another transport's per-message cost",
    ),
}
"""The model's parameters: each an option `--NAME` (type, default, help after "--simulate: ")
and, as given, a key of the result's `parameters`."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of `--simulate`; `--receivers` too, unless the measured bench of N receivers
    (bench/weight_relay.py) registered it already: both read it as comma-separated counts."""
    try:
        parser.add_argument(
            "--receivers",
            default=None,
            help=f"receiver counts, comma-separated (--simulate: default {DEFAULT_RECEIVERS})",
        )
    except argparse.ArgumentError:  # "conflicting option string": already there, same meaning
        pass
    parser.add_argument(
        "--simulate",
        action="store_true",
        help="run the event model of the chain relay and of serial sync instead of a measurement",
    )
    for name, (kind, default, text) in MODEL_OPTIONS.items():
        flag = "--" + name.replace("_", "-")
        parser.add_argument(flag, type=kind, default=default, help="--simulate: " + text)
    parser.add_argument(
        "--calibration",
        default=None,
        metavar="FILE",
        help="--simulate: reuse the calibration of a saved --json output (or its calibration "
        "block) instead of measuring this machine",
    )


def parse_receivers(text: str | None) -> list[int]:
    """'1,8,64' -> [1, 8, 64]; None -> the simulation's default counts."""
    try:
        counts = [int(x) for x in (text or DEFAULT_RECEIVERS).split(",") if x.strip()]
    except ValueError:
        counts = []
    if not counts or min(counts) < 1:
        raise SystemExit(
            f"--receivers takes counts >= 1 separated by commas, e.g. 1,8,64: {text!r}"
        )
    return counts


def costs_from(
    calibration: dict, copy_gb_s: float | None = None, post_us: float | None = None
) -> Costs:
    """The model's costs from a calibration block (`values`), the copy rates replaced by
    `copy_gb_s` and the post by `post_us` where given."""
    values = dict(calibration["values"])
    fields = {f for f in Costs.__dataclass_fields__}
    if copy_gb_s is not None:
        values["pack_gb_s"] = values["load_gb_s"] = copy_gb_s
    if post_us is not None:
        values["post_s"] = post_us * 1e-6
    return Costs(**{k: float(v) for k, v in values.items() if k in fields})


def run(args: argparse.Namespace) -> dict:
    from microcoder.bench.weight_sync_calib import calibrate

    receivers = parse_receivers(args.receivers)
    chunk = int(args.chunk_mib * MIB)
    if args.calibration:
        saved = json.loads(Path(args.calibration).read_text())
        calibration = saved.get("calibration", saved)
    else:
        calibration = calibrate(chunk)
    costs = costs_from(calibration, args.copy_gb_s, args.post_us)
    link = Link(args.gbps * 1e9 / 8, args.latency_us * 1e-6)
    model_bytes = int(args.model_gb * 1e9)
    serial_bucket = int(args.serial_bucket_mib * MIB)
    if args.slots < 1:
        raise SystemExit(f"--slots must be >= 1, got {args.slots}")
    simulated = simulate(receivers, model_bytes, chunk, serial_bucket, link, costs, args.slots)
    return {
        "simulated": simulated,
        "parameters": {
            **{name: getattr(args, name) for name in MODEL_OPTIONS},
            "chunks": len(chunk_sizes(model_bytes, chunk)),
            "costs": asdict(costs),
        },
        "calibration": calibration,
    }


def format_table(result: dict) -> str:
    p = result["parameters"]
    sim = result["simulated"]
    one = sim[min(sim, key=int)]["scheme_s"]
    lines = [
        f"simulated weight sync: {p['model_gb']:g} GB per receiver, links {p['gbps']:g} Gbit/s "
        f"and {p['latency_us']:g} us, relay chunks {p['chunk_mib']:g} MiB ({p['chunks']}), "
        f"{p['slots']} buffers a receiver, serial buckets {p['serial_bucket_mib']:g} MiB",
        f"{'receivers':>9} {'relay s':>9} {'serial s':>10} {'serial/relay':>12} "
        f"{'relay/first':>11} {'fill':>6}",
    ]
    for n, r in sorted(sim.items(), key=lambda kv: int(kv[0])):
        lines.append(
            f"{n:>9} {r['scheme_s']:>9.3f} {r['serial_s']:>10.3f} "
            f"{r['serial_s'] / r['scheme_s']:>12.1f} {r['scheme_s'] / one:>11.2f} "
            f"{(int(n) - 1) / p['chunks']:>6.2f}"
        )
    cal = result["calibration"]
    lines.append(
        "fill = (N - 1) / chunks, the relay's pipeline fill; relay/first = relay time over the "
        "first row's"
    )
    lines.append(
        f"costs from: {cal.get('source', '?')}"
        + (f"; pack and load at {p['copy_gb_s']:g} GB/s (--copy-gb-s)" if p["copy_gb_s"] else "")
    )
    return "\n".join(lines)
