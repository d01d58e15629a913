"""The supervised warm start of the tiny model: tokenizer, model, SFT to the window, save.

    warm_start(out_dir, seed=0, cfg=WarmStartConfig()) -> WarmStartResult

Builds the byte-level BPE tokenizer on the training corpus of the synthetic family
`cfg.family` (data/sources.py SYNTHETIC_VARIANTS; rendered as the run's
prompt config renders stdin problems, plus the system prompt and the reply fence, so the
rendered prompt and reply are short), a random-weight tiny Qwen2
for `seed`, and fine-tunes it on (prompt → fenced canonical solution) pairs of the training
split until the held-out sampled pass rate (T = 1.0, judged in the sandbox) enters the target
window. The kept model is saved to `out_dir` as a Hugging Face folder with a manifest
(`warmstart.json`, written last); a later call with the same seed and settings finds it and
returns at once (`cached=True`).

Held-out evaluation problems and training pairs come from the task family with data seed
`TASK_SEED` (fixed), so every model seed is measured on the same held-out subset; the model
seed sets the initial weights, the batch order and the evaluation samples.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from tqdm import tqdm

from microcoder.data.config import PromptConfig
from microcoder.data.problem import Problem
from microcoder.data.prompting.render import PromptRenderer, render_messages
from microcoder.data.prompting.templates import STDIN_SYSTEM
from microcoder.data.sources import synthetic_variant
from microcoder.learner.heldout import heldout_eval
from microcoder.learner.models.tiny_model import TINY_ARCH, build_tiny_model, is_tiny_model_dir
from microcoder.learner.warmstart.config import WarmStartConfig

MANIFEST = "warmstart.json"
"""Written last into the output folder; its presence marks a finished warm start."""
MANIFEST_VERSION = 1
"""Bump when the recipe changes so old caches are rebuilt."""
TASK_SEED = 0
"""Data seed of the training pairs and of the fixed held-out evaluation subset."""


@dataclass
class WarmStartResult:
    """A finished warm start (fresh or found in the cache)."""

    path: str
    """The Hugging Face model folder."""
    seed: int
    """Model seed (initial weights, batch order, evaluation samples)."""
    step: int
    """SFT step of the kept checkpoint."""
    pass_rate: float
    """Held-out sampled pass rate (T = eval_temperature) of the kept checkpoint."""
    seconds: float
    """Wall time of the warm start that produced it."""
    evals: list[tuple[int, float]] = field(default_factory=list)
    """Every (step, held-out pass rate) measured on the way."""
    cached: bool = False
    """True when this call found the finished folder and did nothing."""


def default_system_prompt() -> str:
    """The system prompt of the default rendering of stdin problems (the synthetic family)."""

    return STDIN_SYSTEM


def _stdin_problem(statement: str):
    return Problem(id="warmstart-corpus", kind="stdin", prompt=statement, tests=[])


def stdin_system_prompt(prompt: PromptConfig) -> str:
    """The system prompt `prompt` gives stdin problems ("" = none)."""

    messages = render_messages(_stdin_problem(""), prompt)
    return messages[0]["content"] if messages[0]["role"] == "system" else ""


def warmstart_corpus(prompt: PromptConfig, family: str = "synthetic") -> list[str]:
    """Tokenizer corpus: training prompts of the synthetic `family` (their user messages under
    `prompt`) and fenced solutions, and the system prompt. Under the default config the user
    message is the statement itself, so this is the corpus the cache was first built with."""
    from microcoder.learner.warmstart.examples import response_text

    def user(statement: str) -> str:
        return render_messages(_stdin_problem(statement), prompt)[-1]["content"]

    texts = synthetic_variant(family).tokenizer_corpus()
    # tokenizer_corpus() alternates prompt, solution; the policy replies with the fenced form.
    rendered = [user(t) if i % 2 == 0 else response_text(t) for i, t in enumerate(texts)]
    return [stdin_system_prompt(prompt), *rendered]


def settings_of(seed: int, cfg: WarmStartConfig, prompt: PromptConfig | None = None) -> dict:
    """Everything that determines the result; the cache is valid only for equal settings.
    The default prompt config gives the key the cache has always had (its system prompt); any
    other template adds its rendering of a stdin statement. The default family (`synthetic`)
    is left out of the key, so the caches built before `family` existed stay valid."""
    prompt = prompt if prompt is not None else PromptConfig()
    settings = {
        "manifest_version": MANIFEST_VERSION,
        "seed": seed,
        "task_seed": TASK_SEED,
        "system_prompt": stdin_system_prompt(prompt),
        "config": cfg.model_dump(exclude={"threads", "family"}),
    }
    if cfg.family != "synthetic":
        settings["family"] = cfg.family
    if prompt.template != "default":
        settings["stdin_rendering"] = render_messages(_stdin_problem("{statement}"), prompt)
    return settings


def find_finished(out_dir: str | Path, settings: dict) -> WarmStartResult | None:
    """The cached result in `out_dir` for exactly these settings, else None."""

    path = Path(out_dir) / MANIFEST
    try:
        manifest = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if manifest.get("settings") != settings or not is_tiny_model_dir(out_dir):
        return None
    r = manifest["result"]
    r["evals"] = [tuple(e) for e in r.get("evals", [])]
    return WarmStartResult(**{**r, "cached": True})


def warm_start(
    out_dir: str | Path,
    seed: int = 0,
    cfg: WarmStartConfig | None = None,
    *,
    prompt: PromptConfig | None = None,
    judge: Callable | None = None,
    progress: bool = True,
    log: Callable[[str], None] = print,
) -> WarmStartResult:
    """Warm-start into `out_dir` (or return the cached result); raises WarmStartError on failure.

    `prompt` is the run's prompt config (the synthetic family is rendered with it; default
    PromptConfig()). `judge` (pairs -> rewards) defaults to a sandboxed JudgePool with the
    default ExecutorConfig.
    """
    cfg = cfg or WarmStartConfig()
    prompt = prompt if prompt is not None else PromptConfig()
    settings = settings_of(seed, cfg, prompt)
    found = find_finished(out_dir, settings)
    if found is not None:
        return found
    check_out_dir(Path(out_dir))
    import torch

    t0 = time.time()
    threads_before = torch.get_num_threads()
    threads = choose_threads(cfg.threads)
    torch.set_num_threads(threads)
    try:
        if judge is not None:
            outcome, model, tokenizer = _train(seed, cfg, prompt, judge, progress, log)
        else:
            from microcoder.sandbox import JudgePool

            with JudgePool() as pool:
                outcome, model, tokenizer = _train(
                    seed, cfg, prompt, _pool_judge(pool), progress, log
                )
    finally:
        torch.set_num_threads(threads_before)
    result = WarmStartResult(
        path=str(out_dir),
        seed=seed,
        step=outcome.step,
        pass_rate=outcome.pass_rate,
        seconds=round(time.time() - t0, 1),
        evals=outcome.evals,
    )
    _save(out_dir, model, tokenizer, settings, result, outcome, threads)
    return result


def choose_threads(threads: int) -> int:
    """`threads`, or for 0: all cores on a quiet machine, 1 on a busy one (see WarmStartConfig)."""
    if threads > 0:
        return threads
    cores = os.cpu_count() or 1
    return cores if os.getloadavg()[0] < 1.0 else 1


def _pool_judge(pool) -> Callable:
    return lambda pairs: [v.reward for v in pool.judge_many(pairs)]


def _train(seed, cfg, prompt, judge, progress, log):
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    from microcoder.learner.warmstart.examples import encode_example
    from microcoder.learner.warmstart.hf_sample import sample_replies
    from microcoder.learner.warmstart.sft import train_sft

    hf_logging.disable_progress_bar()  # per-shard bars of save/load are noise here
    with tempfile.TemporaryDirectory(prefix="microcoder-warm-") as tmp:
        corpus = warmstart_corpus(prompt, cfg.family)
        build_tiny_model(tmp, seed=seed, corpus=corpus, vocab_size=cfg.vocab_size)
        tokenizer = AutoTokenizer.from_pretrained(tmp)
        model = AutoModelForCausalLM.from_pretrained(tmp)
    renderer = PromptRenderer(tokenizer, prompt)  # the tiny template reads no variables
    generate_tasks = synthetic_variant(cfg.family).generate_tasks
    examples = [encode_example(renderer, p) for p in generate_tasks(TASK_SEED, "train")]
    heldout = generate_tasks(TASK_SEED, "heldout", cfg.eval_problems)
    longest = max(len(e.response_ids) for e in examples)
    if longest > cfg.eval_max_new_tokens:
        log(
            f"warm start: warning: the longest canonical reply is {longest} tokens but "
            f"eval_max_new_tokens = {cfg.eval_max_new_tokens} cuts evaluation replies there "
            f"(judged wrong); set eval_max_new_tokens >= {longest} for family {cfg.family}"
        )
    n_params = sum(p.numel() for p in model.parameters())
    mean_len = sum(len(e.input_ids) for e in examples) / len(examples)
    log(
        f"warm start ({cfg.family}): {n_params / 1e6:.2f} M params, vocab {len(tokenizer)}, "
        f"{len(examples)} training pairs (mean {mean_len:.0f} tokens), "
        f"{len(heldout)} held-out problems, window [{cfg.target_low}, {cfg.target_high}]"
    )

    say = log
    if progress:
        say = tqdm.write  # keeps the progress bar intact

    def evaluate(m, step: int) -> float:
        def generate(problems):
            return sample_replies(
                m,
                renderer,
                problems,
                temperature=cfg.eval_temperature,
                max_new_tokens=cfg.eval_max_new_tokens,
                seed=seed * 1_000_003 + step,
                batch_size=cfg.eval_batch_size,
            )

        r = heldout_eval(generate, heldout, judge)
        say(
            f"warm start: step {step}: held-out pass rate {r.pass_rate:.3f} "
            f"(generate {r.generate_s:.1f} s, judge {r.judge_s:.1f} s)"
        )
        return r.pass_rate

    outcome = train_sft(
        model, examples, cfg, evaluate, seed=seed, pad_id=tokenizer.pad_token_id, progress=progress
    )
    return outcome, model, tokenizer


def check_out_dir(out: Path) -> None:
    """Refuse to write into a non-empty folder that does not hold a model (someone else's)."""

    if out.is_file() or (out.exists() and any(out.iterdir()) and not is_tiny_model_dir(out)):
        raise FileExistsError(
            f"{out} exists and does not hold a model; choose another --out or remove it"
        )


def _save(out_dir, model, tokenizer, settings, result, outcome, threads: int) -> None:
    out = Path(out_dir)
    check_out_dir(out)
    (out / MANIFEST).unlink(missing_ok=True)
    for stale in out.glob("*.safetensors") if out.exists() else []:
        stale.unlink()
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    arch = {k: getattr(model.config, k) for k in TINY_ARCH}
    (out / "microcoder_tiny.json").write_text(json.dumps({"seed": result.seed, "arch": arch}))
    manifest = {
        "settings": settings,
        "result": {**asdict(result), "cached": False},
        "sft": {
            "steps_run": outcome.steps_run,
            "threads": threads,
            "train_s": round(outcome.train_s, 1),
            "eval_s": round(outcome.eval_s, 1),
            "losses": [round(x, 4) for x in outcome.losses],
        },
    }
    (out / MANIFEST).write_text(json.dumps(manifest, indent=1))
