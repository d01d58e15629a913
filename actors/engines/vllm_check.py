"""`model check`'s vLLM stage: an engine loads the learner's published weights through the
project's reload path, and its greedy tokens equal transformers' on the folder. (Here in actors/
because it builds an engine; launch/cli/cmd_model.py hands `vllm_stage` to learner/models/model_check.py.)

The engine runs in a child process (`python -m microcoder.actors.engines.vllm_check SPEC`) with a
deadline, so nothing it does can hang the check, and it never shares torch.distributed with the
learner ranks of the parent. It is built as the generators build theirs (actors/engines/build.py:
`build_engine`, eager, the weight-loading worker extension) but with `load_format="dummy"`:
random weights, so its greedy tokens can only equal transformers' if the reload loaded every
tensor right. The parent publishes the learner's state on a weight channel
(actors/weights/publisher.py: `WeightPublisher`), the engine's worker joins it and loads the round
(actors/engines/worker_ext.py: `mc_open_channel`, `mc_receive_and_load`: vLLM's checkpoint-format
`reload_weights`), exactly as a generator pulls a new version. Both sides run in fp32.
"""

from __future__ import annotations

import importlib.util
import json
import random
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from microcoder.actors.config import GeneratorConfig
from microcoder.actors.engines.build import WORKER_EXTENSION, build_engine
from microcoder.actors.weights.publisher import WeightPublisher
from microcoder.learner.models.config_overrides import model_config
from microcoder.learner.models.families import vllm_cpu_errors

PROMPT_LENGTHS = (6, 9)
"""Token lengths of the seeded greedy prompts."""

MAX_TOKENS = 16
"""Greedy tokens generated per prompt (EOS ignored on both sides)."""

CHANNEL = "model-check"


def greedy_prompts(vocab_size: int, seed: int = 0) -> list[list[int]]:
    """Fixed random prompts (token ids) for the greedy comparison."""
    rng = random.Random(seed + 1)
    return [[rng.randrange(vocab_size) for _ in range(n)] for n in PROMPT_LENGTHS]


def transformers_greedy(
    model_dir, prompts: list[list[int]], max_tokens: int, device: str, config_overrides=None
):
    """transformers' greedy continuation of each prompt in fp32: `max_tokens` argmax steps, no
    EOS stop (vLLM's side runs with ignore_eos); the model config with `config_overrides`."""
    import torch
    from transformers import AutoModelForCausalLM

    config = model_config(model_dir, config_overrides)
    model = AutoModelForCausalLM.from_pretrained(model_dir, config=config, dtype=torch.float32)
    model = model.to(device).eval()
    out = []
    with torch.no_grad():
        for ids in prompts:
            x = torch.tensor([ids], device=device)
            res = model(x, use_cache=True)
            toks = []
            for _ in range(max_tokens):
                nxt = int(res.logits[0, -1].argmax())
                toks.append(nxt)
                res = model(
                    torch.tensor([[nxt]], device=device),
                    past_key_values=res.past_key_values,
                    use_cache=True,
                )
            out.append(toks)
    return out


def vllm_importable() -> str | None:
    """None when vLLM can be imported here, else why not."""
    if importlib.util.find_spec("vllm") is None:
        return "vLLM not importable (no module named 'vllm')"
    return None


def vllm_stage(
    model_dir: str | Path,
    config: dict,
    published: dict,
    device: str,
    seed: int = 0,
    timeout_s: float = 900.0,
    config_overrides: dict | None = None,
) -> dict:
    """Run the stage; {"status": "ok" | "failed" | "skipped", "reason", ...} with, when an engine
    ran, the engine's and transformers' greedy tokens and the engine's timings. Both sides get
    `config_overrides` (model.config_overrides: the engine as vLLM's hf_overrides)."""

    if device == "cpu":
        errors = vllm_cpu_errors(config)
        if errors:
            return {"status": "failed", "reason": "; ".join(errors), "engine_started": False}
    why = vllm_importable()
    if why:
        return {"status": "skipped", "reason": why}
    prompts = greedy_prompts(int(config["vocab_size"]), seed)
    engine = _engine_greedy(model_dir, published, device, prompts, timeout_s, config_overrides)
    if engine["status"] != "ok":
        return engine
    want = transformers_greedy(model_dir, prompts, MAX_TOKENS, device, config_overrides)
    equal = engine["after"] == want
    return {
        **engine,
        "status": "ok" if equal else "failed",
        "reason": "" if equal else "the engine's greedy tokens differ from transformers'",
        "transformers_greedy": want,
        "greedy_equal": equal,
    }


def _engine_greedy(
    model_dir, published: dict, device: str, prompts, timeout_s: float, config_overrides=None
) -> dict:
    """The child's engine: greedy before (dummy weights) and after loading `published`."""

    publisher = WeightPublisher(timeout_s=timeout_s, host="127.0.0.1")
    publisher.publish(1, {k: v.detach().contiguous() for k, v in published.items()})
    spec = publisher.open_channel(CHANNEL, receivers=1)
    sent: dict = {}

    def send() -> None:
        try:
            sent.update(publisher.send(CHANNEL))
        except Exception as err:  # reported with the child's result
            sent["error"] = f"{type(err).__name__}: {err}"

    with tempfile.TemporaryDirectory(prefix="microcoder-vllm-check-") as tmp:
        result_file = Path(tmp) / "result.json"
        job = {
            "model_dir": str(model_dir),
            "config_overrides": config_overrides or {},
            "device": device,
            "channel": spec,
            "prompts": prompts,
            "max_tokens": MAX_TOKENS,
            "result": str(result_file),
        }
        t0 = time.monotonic()
        child = subprocess.Popen(
            [sys.executable, "-m", "microcoder.actors.engines.vllm_check", json.dumps(job)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        thread = threading.Thread(target=send, daemon=True)
        thread.start()
        try:
            _, stderr = child.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            child.kill()
            _, stderr = child.communicate()
            return {
                "status": "failed",
                "reason": f"the vLLM engine did not finish within {timeout_s:.0f} s "
                "(--vllm-timeout); its last output: " + _tail(stderr),
                "engine_started": True,
            }
        wall = time.monotonic() - t0
        result = json.loads(result_file.read_text()) if result_file.is_file() else {}
    thread.join(5.0)
    if "import_error" in result:
        return {"status": "skipped", "reason": f"vLLM not importable: {result['import_error']}"}
    if child.returncode != 0 or "error" in result:
        reason = result.get("error") or f"exit status {child.returncode}: " + _tail(stderr)
        return {"status": "failed", "reason": f"the vLLM engine failed: {reason}"}
    if "error" in sent:
        return {"status": "failed", "reason": f"the weight send failed: {sent['error']}"}
    return {"status": "ok", "reason": "", "wall_s": round(wall, 1), **result}


def _tail(text: str | None, lines: int = 12) -> str:
    return "\n".join((text or "").strip().splitlines()[-lines:])


def _child(job: dict) -> dict:
    """In the child: build the engine on dummy weights, greedy, load the round from the
    channel, greedy again."""
    try:
        from vllm import SamplingParams
    except Exception as err:  # the parent reports the stage skipped
        return {"import_error": f"{type(err).__name__}: {err}"}

    longest = max(map(len, job["prompts"]))
    cfg = GeneratorConfig(
        max_prompt_tokens=longest,
        max_response_tokens=job["max_tokens"],
        kv_cache_gib=1,
        enforce_eager=True,
        dtype="float32",
    )
    t0 = time.perf_counter()
    llm = build_engine(
        job["model_dir"],
        cfg,
        job["device"],
        worker_extension_cls=WORKER_EXTENSION,
        config_overrides=job.get("config_overrides"),
        load_format="dummy",
        skip_tokenizer_init=True,
    )
    t1 = time.perf_counter()
    params = SamplingParams(
        max_tokens=job["max_tokens"], temperature=0, ignore_eos=True, detokenize=False
    )

    def greedy() -> list[list[int]]:
        outs = llm.generate(
            [{"prompt_token_ids": p} for p in job["prompts"]], params, use_tqdm=False
        )
        return [list(o.outputs[0].token_ids) for o in outs]

    before = greedy()
    llm.collective_rpc("mc_open_channel", args=(job["channel"],))
    version, count, receive_s, reload_s = llm.collective_rpc("mc_receive_and_load")[0]
    llm.reset_prefix_cache()
    after = greedy()
    return {
        "engine_start_s": round(t1 - t0, 1),
        "tensors_loaded": int(count),
        "version": int(version),
        "receive_s": round(receive_s, 2),
        "reload_s": round(reload_s, 2),
        "before": before,
        "after": after,
    }


def main(argv: list[str]) -> int:
    job = json.loads(argv[0])
    try:
        result = _child(job)
    except Exception as err:  # the parent reports it as the stage's failure
        result = {"error": f"{type(err).__name__}: {err}"}
    Path(job["result"]).write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
