"""`microcoder bench generation --workload longtail|uniform`: streaming vs waves on one engine.

One AsyncEngine (actors/engines/async_llm.py, the generator's engine and settings) on the tiny model,
the same seeded prompts and per-group lengths (bench/generation/workload.py) on both sides,
each group one request with n=G, per-request `max_tokens` and `ignore_eos` (the same tokens on
both sides), sampled by actors/generate_loop.py `sample_group`, the one request form of both:
  streaming  the product loop, actors/generate_loop.py `streaming_loop`, `capacity` groups in flight,
             a new group leased as soon as one finishes; every `update_every_s` seconds its
             `maybe_update` runs the in-flight weight update (pause keep -> reload_weights from
             the model folder -> fix the tied head -> version label -> reset prefix cache ->
             resume), timed as pause_s;
  waves      the old generator's blocking waves (the baseline, not a product path): lease
             `capacity` prompts, update the weights if `update_every_s` passed (the same
             sequence, on an idle engine: the old loop's sync between waves), submit them all
             at once and wait for the last, put, repeat.
Both sides pay the weight loads at the same cadence in time; streaming also pays the recompute
of the requests it keeps across a pause.
Figures: tokens/s = tokens / wall; engine_busy_fraction = time with >= 1 request running / wall;
engine_occupancy = mean groups running / capacity (the integral of each group's engine time,
from its start to its finish, over capacity x wall): where the wave stall shows.
"""

from __future__ import annotations

import asyncio
import statistics
import threading
import time

from microcoder.actors.config import GeneratorConfig
from microcoder.actors.engines.async_llm import build_async_engine
from microcoder.actors.engines.build import WORKER_EXTENSION
from microcoder.actors.generate_loop import sample_group, streaming_loop
from microcoder.actors.sampling import sampling_params
from microcoder.actors.timing import PoolTimer
from microcoder.actors.weights.publisher import update_engine
from microcoder.bench.generation.workload import MemoryClient, prompt_token_ids, response_lengths

PROMPT_TOKENS = 32


class Updater:
    """`maybe_update` for the streaming side: an in-flight weight update at its first call
    (groups are in flight by then) and every `every_s` seconds after (0: never), reloading the
    same weights from `model_path` (the cost is the point), through the generator's own
    sequence (actors/weights/publisher.py `update_engine`, pause "keep", `kv` its inflight_kv)."""

    def __init__(self, engine, model_path: str, every_s: float, kv: str = "recompute"):
        self.engine = engine
        self.model_path = model_path
        self.every_s = every_s
        self.kv = kv
        self.version = 0
        self.pauses = []
        self._next = 0.0

    def _load(self) -> dict:
        self.engine.collective_rpc("reload_weights", kwargs={"weights_path": self.model_path})
        self.engine.collective_rpc("_mc_fix_tied_lm_head")
        return {"version": self.version + 1}

    def maybe_update(self) -> None:
        if self.every_s <= 0 or time.monotonic() < self._next:
            return
        result, pause_s = update_engine(self.engine, "keep", self._load, "bench", kv=self.kv)
        self.version = result["version"]
        self.pauses.append(pause_s)
        self._next = time.monotonic() + self.every_s


def _params(group_size: int, temperature: float = 1.0):
    def params_for(tokens: int):
        return sampling_params(
            group_size=group_size, temperature=temperature, max_tokens=tokens, ignore_eos=True
        )

    return params_for


def streaming_side(engine, prompts, lengths, group_size, capacity, updater) -> dict:
    client = MemoryClient(len(prompts))
    params = _params(group_size)
    stats = streaming_loop(
        client,
        engine,
        capacity=capacity,
        params_for=lambda a: params(lengths[a.group_id]),
        prompt_ids=lambda text: prompts[int(text[1:])],
        version=lambda: updater.version,
        maybe_update=updater.maybe_update,
        timer=PoolTimer(),
        stop=threading.Event(),
        owner="bench-stream",
    )
    groups = [g for _, g in client.puts]
    mixed = sum(r.last_policy_version != r.policy_version for g in groups for r in g.responses)
    return {
        "tokens": client.tokens(),
        "wall_s": stats.wall_s,
        "busy_s": stats.busy_s,
        "group_engine_s": sum(g.responses[0].gen_time_s for g in groups if g.responses),
        "groups": len(groups),
        "mixed_version_responses": int(mixed),
        "updates": len(updater.pauses),
    }


def waves_side(engine, prompts, lengths, group_size, capacity, updater) -> dict:
    client = MemoryClient(len(prompts))
    params = _params(group_size)
    busy = 0.0
    engine_s = 0.0
    t_start = time.monotonic()
    while True:
        wave = client.get_prompts(capacity).assignments
        if not wave:
            break
        updater.maybe_update()  # the wave loop's order: lease -> sync -> generate -> put

        async def one_wave(wave=wave):
            return await asyncio.gather(
                *(
                    sample_group(
                        engine.llm,
                        a,
                        prompts[a.group_id],
                        params(lengths[a.group_id]),
                        0,
                        lambda: 0,
                        "bench-waves",
                        engine.cache_salt,
                    )
                    for a in wave
                )
            )

        t0 = time.monotonic()
        groups = engine.submit(one_wave()).result()
        busy += time.monotonic() - t0
        engine_s += sum(g.responses[0].gen_time_s for g in groups if g.responses)
        client.put_unscored(list(groups))
    return {
        "tokens": client.tokens(),
        "wall_s": time.monotonic() - t_start,
        "busy_s": busy,
        "group_engine_s": engine_s,
        "groups": len(client.puts),
        "updates": len(updater.pauses),
    }


def run_workload(args, model_path: str, device: str) -> dict:
    """Build the engine, warm it, run waves then streaming (`args.pairs` pairs), summarise."""
    from transformers import AutoConfig

    vocab = AutoConfig.from_pretrained(model_path).vocab_size
    lengths = response_lengths(args.workload, args.groups, args.max_tokens, seed=args.seed)
    prompts = prompt_token_ids(args.groups, PROMPT_TOKENS, vocab, seed=args.seed)
    cfg = GeneratorConfig(
        max_response_tokens=args.max_tokens,
        max_prompt_tokens=PROMPT_TOKENS,
        max_inflight_prompts=args.capacity,
        kv_cache_gib=1.0,
    )
    engine = build_async_engine(
        model_path, cfg, device, seed=0, worker_extension_cls=WORKER_EXTENSION
    )
    try:
        warm = args.capacity
        no_updates = Updater(engine, model_path, 0.0)
        waves_side(engine, prompts[:warm], [8] * warm, args.group_size, args.capacity, no_updates)
        runs = []
        for _ in range(args.pairs):
            updater = Updater(engine, model_path, args.update_every, args.inflight_kv)
            w = waves_side(engine, prompts, lengths, args.group_size, args.capacity, updater)
            w["pauses_s"] = updater.pauses
            updater = Updater(engine, model_path, args.update_every, args.inflight_kv)
            s = streaming_side(engine, prompts, lengths, args.group_size, args.capacity, updater)
            s["pauses_s"] = updater.pauses
            runs.append({"waves": w, "streaming": s})
    finally:
        engine.shutdown()
    return summarize_workload(args, lengths, runs, device)


def _q(xs: list[float], q: float) -> float:
    if not xs:
        return 0.0
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def summarize_workload(args, lengths: list[int], runs: list[dict], device: str) -> dict:
    """Medians over the pairs; ratio = median of the per-pair ratios."""

    def per(side: str, f) -> float:
        return statistics.median(f(r[side]) for r in runs)

    def tps(x):
        return x["tokens"] / x["wall_s"]

    def busy(x):
        return x["busy_s"] / x["wall_s"]

    def occupancy(x):
        return x["group_engine_s"] / (args.capacity * x["wall_s"])

    pauses = [p for r in runs for p in r["streaming"]["pauses_s"]]
    return {
        "workload": {
            "kind": args.workload,
            "groups": args.groups,
            "group_size": args.group_size,
            "capacity": args.capacity,
            "max_tokens": args.max_tokens,
            "mean_tokens": statistics.mean(lengths),
            "max_length": max(lengths),
            "update_every_s": args.update_every,
            "inflight_kv": args.inflight_kv,
            "pairs": args.pairs,
            "device": device,
        },
        "streaming_tokens_per_s": per("streaming", tps),
        "waves_tokens_per_s": per("waves", tps),
        "ratio": statistics.median(tps(r["streaming"]) / tps(r["waves"]) for r in runs),
        "engine_busy_fraction": {"streaming": per("streaming", busy), "waves": per("waves", busy)},
        "engine_occupancy": {
            "streaming": per("streaming", occupancy),
            "waves": per("waves", occupancy),
        },
        "streaming_tokens": runs[0]["streaming"]["tokens"],
        "waves_tokens": runs[0]["waves"]["tokens"],
        "updates": sum(r["streaming"]["updates"] for r in runs),
        "waves_updates": sum(r["waves"]["updates"] for r in runs),
        "mixed_version_responses": sum(r["streaming"]["mixed_version_responses"] for r in runs),
        "pause_s_p50": _q(pauses, 0.5),
        "pause_s_p99": _q(pauses, 0.99),
        "runs": runs,
    }


def format_workload_table(result: dict) -> str:
    w = result["workload"]
    busy = result["engine_busy_fraction"]
    occ = result["engine_occupancy"]
    rows = [
        f"generation --workload {w['kind']}: {w['groups']} groups x G={w['group_size']}, "
        f"capacity {w['capacity']}, lengths mean {w['mean_tokens']:.0f} max {w['max_length']} "
        f"(cap {w['max_tokens']}), {w['device']}, median of {w['pairs']}",
        f"{'':12}{'tokens/s':>10}{'busy':>8}{'occupancy':>11}",
        f"{'waves':12}{result['waves_tokens_per_s']:>10.0f}{busy['waves']:>8.3f}"
        f"{occ['waves']:>11.3f}",
        f"{'streaming':12}{result['streaming_tokens_per_s']:>10.0f}{busy['streaming']:>8.3f}"
        f"{occ['streaming']:>11.3f}",
        f"ratio streaming/waves: {result['ratio']:.3f}; tokens {result['streaming_tokens']} vs "
        f"{result['waves_tokens']}",
        f"weight updates every {w['update_every_s']} s (inflight_kv {w['inflight_kv']}): streaming {result['updates']} in flight "
        f"(pause p50 {result['pause_s_p50']:.3f} s, p99 {result['pause_s_p99']:.3f} s; "
        f"{result['mixed_version_responses']} responses span two versions), waves "
        f"{result['waves_updates']} between waves",
    ]
    return "\n".join(rows)
