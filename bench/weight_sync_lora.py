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


def _engine_syncs(folder, lora, state: dict, repeats: int) -> dict:
    from microcoder.actors.config import GeneratorConfig
    from microcoder.actors.engines.adapters import served_adapter_config
    from microcoder.actors.engines.async_llm import build_async_engine
    from microcoder.actors.engines.build import WORKER_EXTENSION
    from microcoder.actors.weights.publisher import WeightPublisher, update_adapter, update_engine
    from microcoder.actors.weights.pull import receive_round

    cfg = GeneratorConfig(
        max_prompt_tokens=64, max_response_tokens=64, kv_cache_gib=1, enforce_eager=True
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
        engine.collective_rpc("mc_open_channel", args=(publisher.open_channel("bench"),))
        times, pauses, sent = [], [], {}
        for k in range(repeats + 1):  # round 0 opens the channel's group: not timed
            publisher.publish(k + 1, state)
            t0 = time.perf_counter()
            sender = threading.Thread(target=lambda: sent.update(publisher.send("bench")))
            sender.start()

            def load() -> dict:
                (version, _, _, _), adapter_folder = receive_round(engine)
                return {"version": version, "adapter_folder": adapter_folder}

            if lora is None:
                _, pause_s = update_engine(engine, "keep", load, "bench: full sync")
            else:
                _, pause_s = update_adapter(engine, load, "bench: adapter sync")
            sender.join(120)
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
