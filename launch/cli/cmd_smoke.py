"""`microcoder smoke [CONFIG]`: build the model if needed and generate with vLLM (proves the stack)."""

from __future__ import annotations

import argparse
import time

from microcoder.launch.cliargs import add_recipe_arguments

PROMPTS = [
    "Read two integers a and b. Print a+b.",
    "Read a string s. Print it reversed.",
    "Read a list of integers. Print their maximum.",
    "Read an integer n. Print n squared.",
]


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "smoke", help="build the model if needed and sample from it with vLLM (a stack check)"
    )
    add_recipe_arguments(p, "generator.max_response_tokens=32")
    p.add_argument("-n", type=int, default=2, help="samples per prompt (default 2)")
    p.add_argument("--max-tokens", type=int, default=48, help="new tokens per sample (default 48)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from microcoder.device import resolve_device
    from microcoder.launch.config import load_config
    from microcoder.launch.run.model_dir import ensure_model

    cfg = load_config(args.config, args.overrides)
    model_path = ensure_model(cfg.model, cfg)
    device = resolve_device(cfg.cluster.device)
    print(f"smoke: starting vLLM on {device} with {model_path} ...", flush=True)
    from transformers import AutoTokenizer
    from vllm import SamplingParams

    from microcoder.actors.engines.build import build_engine
    from microcoder.data.problem import Problem
    from microcoder.data.prompting.render import PromptRenderer

    t0 = time.time()
    llm = build_engine(
        str(model_path),
        cfg.generator,
        device,
        seed=cfg.seed,
        config_overrides=dict(cfg.model.config_overrides),
    )
    print(f"smoke: engine ready in {time.time() - t0:.1f} s", flush=True)
    tok = AutoTokenizer.from_pretrained(model_path)
    renderer = PromptRenderer(tok, cfg.prompt, cfg.model.chat_template_kwargs)
    prompts = [
        {
            "prompt_token_ids": renderer.ids(
                Problem(id=f"smoke-{i}", kind="stdin", prompt=p, tests=[])
            )
        }
        for i, p in enumerate(PROMPTS)
    ]
    params = SamplingParams(
        n=args.n,
        temperature=cfg.algorithm.temperature.initial,
        max_tokens=args.max_tokens,
        logprobs=0,
    )
    t0 = time.time()
    outs = llm.generate(prompts, params, use_tqdm=False)
    dt = time.time() - t0
    n_tok = sum(len(c.token_ids) for o in outs for c in o.outputs)
    for prompt, out in zip(PROMPTS, outs, strict=True):
        print(f"\n### {prompt}")
        for c in out.outputs:
            print(f"--- ({len(c.token_ids)} tokens) {c.text!r}")
    print(
        f"\nsmoke: vLLM generated {n_tok} tokens in {dt:.2f} s ({n_tok / dt:.0f} tok/s) on {device}"
    )
    if n_tok == 0:
        print("smoke: FAILED: no tokens generated", flush=True)
        return 1
    return 0
