"""`microcoder bench generation`: the generator actor's tokens/s vs bare vLLM, and the full
weight-sync cycle time.

Side by side in one run, same workload (default 64 prompts x G=8 x 128 tokens on the tiny model,
`ignore_eos` so every response is exactly 128 tokens on both sides), alternating, never at once:
  (a) bare: one `LLM.generate` call on an engine built by `actors/engine.build_engine` with the
      generator's settings, prompts pre-rendered, in a plain Ray actor with the generator's
      resources (bench/generation/bare.py), timed around the call inside that actor;
  (b) actor: the real Generator Ray actor wired to a real buffer host, one wave
      (`run(max_waves=1)`: lease 64 prompts under admission control, render, sample, push the
      groups); timed on the driver around the Ray call (wall) and by the actor's own busy time.
Both sides draw the same prompts: the bench replays the buffer's seeded prompt order locally and
checks the problem ids of the groups that reached the buffer.
Then the weight-sync cycle (bench/generation/sync.py): a learner group of one rank trains a step
on synthetic groups, and the bench times publish (gather) -> generator pull (send/receive ->
reload -> prefix-cache reset) -> first token on the new weights.

With `--workload longtail|uniform` it is another bench (bench/generation/streaming.py):
streaming (actors/generate_loop.py's loop, with in-flight weight updates) vs blocking waves on one
AsyncEngine, the same prompts and per-group lengths (goals: longtail ratio >= 1.5, uniform
>= 0.95).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

from microcoder.bench.model_folder import add_model_argument, model_folder
from microcoder.protocol import TrainingPrompt

DESCRIPTION = "generator actor tokens/s vs bare vLLM (goal >= 0.95x) and the weight-sync cycle"
FIELDS = ("actor_tokens_per_s", "bare_tokens_per_s", "ratio", "sync_cycle_s")
USUAL_MODELS = ("runs/tiny-model",)
"""Where the bench looks for a model without --model."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--prompts", type=int, default=64, help="prompts per run (default 64)")
    parser.add_argument("--group-size", type=int, default=8, help="G samples per prompt (8)")
    parser.add_argument("--tokens", type=int, default=128, help="tokens per response (128)")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per side (default 3)")
    parser.add_argument("--sync-cycles", type=int, default=3, help="timed sync cycles (3)")
    add_model_argument(parser, USUAL_MODELS)
    parser.add_argument("--device", default="auto", help="cluster.device: auto | cpu | cuda")
    w = parser.add_argument_group("streaming vs waves (--workload)")
    w.add_argument(
        "--workload",
        choices=("longtail", "uniform"),
        default=None,
        help="run streaming vs waves instead: lognormal lengths capped at --max-tokens, or all "
        "the same (the longtail mean)",
    )
    w.add_argument("--groups", type=int, default=48, help="groups per side (48)")
    w.add_argument("--capacity", type=int, default=8, help="groups in flight / per wave (8)")
    w.add_argument("--max-tokens", type=int, default=512, help="length cap (512)")
    w.add_argument(
        "--update-every", type=float, default=3.0, help="in-flight update every S s (0: none)"
    )
    w.add_argument(
        "--inflight-kv",
        choices=("recompute", "reuse"),
        default="recompute",
        help="generator.inflight_kv of the in-flight updates (default recompute)",
    )
    w.add_argument("--pairs", type=int, default=1, help="timed waves+streaming pairs (1)")
    w.add_argument(
        "--update-cost",
        action="store_true",
        help="instead: the cost of one in-flight update to --capacity x G sequences under each "
        "inflight_kv (recompute, reuse), --pairs trials each (bench/generation/update_cost.py)",
    )
    w.add_argument("--seed", type=int, default=0, help="workload seed (0)")


def bench_config(args: argparse.Namespace, model_path: str):
    """The run config both sides share: admission wide open for every timed run."""
    from microcoder.launch.config import load_config

    waves = 2 * (args.repeats + 1)
    return load_config(
        None,
        [
            f'model.path="{model_path}"',
            f"cluster.device={args.device}",
            f"generator.max_response_tokens={args.tokens}",
            f"generator.max_inflight_prompts={args.prompts}",
            "generator.ignore_eos=true",
            f"algorithm.group_size={args.group_size}",
            f"learner.batch_size={args.prompts}",
            f"buffer.max_staleness={waves + 2}",
            "learner.world_size=1",
        ],
    )


def _model_path(args: argparse.Namespace, tmp: str) -> str:
    return model_folder(args.model, USUAL_MODELS, tmp)


def _prompt_batches(cfg, prompts: list[TrainingPrompt], n: int, batches: int) -> list[list]:
    """The buffer's first `batches` x `n` prompts (rendered prompt texts), in the order it will
    hand them out: the same source over the same (problem_id, text) pairs the host serves."""
    from microcoder.actors.buffer_host import open_prompt_table, prompt_source

    source = prompt_source(cfg.data, cfg.seed, open_prompt_table(prompts, cfg.data))
    return [[source.next() for _ in range(n)] for _ in range(batches)]


def _actor_run(ray, gen, address: str, expect_ids: list[str]) -> dict:
    from microcoder.buffer.client import BufferClient

    s0 = ray.get(gen.stats.remote())
    t0 = time.perf_counter()
    s1 = ray.get(gen.run.remote(max_waves=1))
    wall = time.perf_counter() - t0
    with BufferClient(address, owner="bench-drain") as c:  # keep admission open; check prompts
        groups = []
        while len(groups) < len(expect_ids):
            groups += c.get_unscored(len(expect_ids) - len(groups), wait_s=5)
        for g in groups:
            c.fail_group(g.group_id, "bench: drained")
    got = sorted(g.problem_id for g in groups)
    if got != sorted(expect_ids):
        raise RuntimeError("bench: the actor sampled other prompts than the bare run")
    d = {k: s1[k] - s0[k] for k in ("tokens", "busy_s", "idle_s", "io_s", "sync_s")}
    gen_s = max((r.gen_time_s for g in groups for r in g.responses), default=0.0)
    return {
        "tokens": d["tokens"],
        "wall_s": wall,
        "tokens_per_s": d["tokens"] / wall,
        "busy_tokens_per_s": d["tokens"] / d["busy_s"],
        "engine_generate_s": gen_s,
        "busy_s": d["busy_s"],
        "prompt_fetch_s": d["idle_s"],
        "put_s": d["io_s"],
        "sync_check_s": d["sync_s"],
        "other_s": wall - d["busy_s"] - d["idle_s"] - d["io_s"] - d["sync_s"],
    }


def _median(runs: list[dict], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def run(args: argparse.Namespace) -> dict:
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)  # vLLM logs to stdout: keep it for the table / JSON alone
    try:
        with tempfile.TemporaryDirectory(prefix="mc-bench-gen-") as tmp:
            if args.update_cost:
                from microcoder.bench.generation.update_cost import run_update_cost
                from microcoder.device import resolve_device

                device = resolve_device(args.device)
                return run_update_cost(args, _model_path(args, tmp), device)
            if args.workload:
                from microcoder.bench.generation.streaming import run_workload
                from microcoder.device import resolve_device

                device = resolve_device(args.device)
                return run_workload(args, _model_path(args, tmp), device)
            return _run(args, _model_path(args, tmp))
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def _run(args: argparse.Namespace, model_path: str) -> dict:
    import ray
    from transformers import AutoTokenizer

    from microcoder.bench.generation.bare import bare_engine_cls
    from microcoder.bench.generation.sync import measure_sync_cycles
    from microcoder.data.prompting.render import PromptRenderer
    from microcoder.device import resolve_device
    from microcoder.launch.run.problems import prepare_run_problems

    cfg = bench_config(args, model_path)
    device = resolve_device(cfg.cluster.device)
    load_start = os.getloadavg()
    tok = AutoTokenizer.from_pretrained(model_path)
    renderer = PromptRenderer(tok, cfg.prompt, cfg.model.chat_template_kwargs)
    prompts = prepare_run_problems(cfg, tok, None, log=lambda _m: None).prompts()
    batches = _prompt_batches(cfg, prompts, args.prompts, args.repeats + 1)  # +1: warm-up
    ids = [[renderer.encode_text(it.prompt) for it in b] for b in batches]

    own_ray = not ray.is_initialized()
    if own_ray:
        from microcoder.launch.run.cluster import init_local_ray  # a new instance, on loopback

        init_local_ray(
            num_cpus=6, include_dashboard=False, log_to_driver=False, configure_logging=False
        )
    try:
        from microcoder.actors.remote import buffer_host_cls, generator_cls
        from microcoder.launch.run.actor_settings import generator_settings
        from microcoder.launch.run.learner_group import LearnerGroup

        bare_engine = bare_engine_cls(cfg).remote(model_path, cfg, device)
        ray.get(bare_engine.generate.remote(ids[0][:1]))  # engine up before the actor starts
        host = buffer_host_cls().remote(
            cfg.buffer, cfg.data, cfg.learner.batch_size, prompts, seed=cfg.seed
        )
        address = ray.get(host.get_address.remote())
        group = LearnerGroup(cfg, model_path, address)
        gen = generator_cls(cfg.generator).remote(
            "gen-bench", generator_settings(cfg), model_path, address, group.rank0_name
        )
        ray.get(gen.ready.remote())
        bare = []
        actor = []
        for i, batch in enumerate(batches):  # alternate; run 0 is the warm-up of each side
            b = ray.get(bare_engine.generate.remote(ids[i]))
            a = _actor_run(ray, gen, address, [it.problem_id for it in batch])
            if i:
                bare.append(b)
                actor.append(a)
        sync = measure_sync_cycles(ray, group, gen, cfg, args.sync_cycles, batches[0][0].prompt)
        ray.get([gen.shutdown.remote(), bare_engine.shutdown.remote()])
        group.shutdown()
        ray.get(host.shutdown.remote())
    finally:
        if own_ray:
            ray.shutdown()
    return summarize(args, bare, actor, sync, load_start, os.getloadavg(), device)


def summarize(args, bare: list[dict], actor: list[dict], sync: dict, load0, load1, device) -> dict:
    """The figures: medians over the timed runs; ratio = median of the per-pair ratios."""
    ratios = [a["tokens_per_s"] / b["tokens_per_s"] for a, b in zip(actor, bare, strict=True)]
    busy = [a["busy_tokens_per_s"] / b["tokens_per_s"] for a, b in zip(actor, bare, strict=True)]
    parts = ("engine_generate_s", "busy_s", "prompt_fetch_s", "put_s", "sync_check_s", "other_s")
    return {
        "workload": {
            "prompts": args.prompts,
            "group_size": args.group_size,
            "tokens": args.tokens,
            "repeats": args.repeats,
            "device": device,
        },
        "actor_tokens_per_s": _median(actor, "tokens_per_s"),
        "actor_busy_tokens_per_s": _median(actor, "busy_tokens_per_s"),
        "bare_tokens_per_s": _median(bare, "tokens_per_s"),
        "ratio": statistics.median(ratios),
        "busy_ratio": statistics.median(busy),
        # the actor's own overhead, immune to engine-to-engine differences: the share of the
        # actor's wall time (driver, around run()) spent inside LLM.generate
        "engine_share": statistics.median(a["engine_generate_s"] / a["wall_s"] for a in actor),
        "actor_tokens": actor[0]["tokens"],
        "bare_tokens": bare[0]["tokens"],
        "bare_wall_s": _median(bare, "wall_s"),
        "actor_wall_s": _median(actor, "wall_s"),
        "actor_parts_s": {p: _median(actor, p) for p in parts},
        **sync,
        "load_avg": [round(x, 2) for x in (*load0, *load1)],
        "runs": {"bare": bare, "actor": actor},
    }


def format_table(result: dict) -> str:
    w = result["workload"]
    if w.get("kind") == "update-cost":
        from microcoder.bench.generation.update_cost import format_update_cost

        return format_update_cost(result)
    if "kind" in w:
        from microcoder.bench.generation.streaming import format_workload_table

        return format_workload_table(result)
    rows = [
        f"generation: {w['prompts']} prompts x G={w['group_size']} x {w['tokens']} tokens, "
        f"{w['device']}, median of {w['repeats']} (load {result['load_avg']})",
        f"{'':28}{'tokens/s':>12}{'wall s':>10}{'ratio':>8}",
        f"{'bare vLLM (LLM.generate)':28}{result['bare_tokens_per_s']:>12.0f}"
        f"{result['bare_wall_s']:>10.2f}{1.0:>8.2f}",
        f"{'actor, wall (driver)':28}{result['actor_tokens_per_s']:>12.0f}"
        f"{result['actor_wall_s']:>10.2f}{result['ratio']:>8.3f}",
        f"{'actor, own busy time':28}{result['actor_busy_tokens_per_s']:>12.0f}"
        f"{result['actor_parts_s']['busy_s']:>10.2f}{result['busy_ratio']:>8.3f}",
        f"actor wall spent in LLM.generate: {result['engine_share']:.4f}",
        "actor wall parts (s): "
        + ", ".join(f"{k[:-2]} {v:.3f}" for k, v in result["actor_parts_s"].items()),
        f"weight-sync cycle: {result['sync_cycle_s']:.3f} s (median of {result['sync_cycles']};"
        f" first, opening the channel: {result['sync_first_cycle_s']:.3f} s)",
        "  parts (s): " + ", ".join(f"{k} {v:.3f}" for k, v in result["sync_parts_s"].items()),
    ]
    return "\n".join(rows)
