"""The tiny local model: deterministic per seed, loads in transformers, generates in vLLM CPU."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from microcoder.learner.models.tiny_model import build_tiny_model


def weights(path: Path) -> bytes:
    return (path / "model.safetensors").read_bytes()


def test_same_seed_gives_identical_weights_and_tokenizer(tiny_model_dir, tmp_path):
    again = build_tiny_model(tmp_path / "again", seed=0)
    assert weights(again) == weights(tiny_model_dir)
    assert (again / "tokenizer.json").read_text() == (tiny_model_dir / "tokenizer.json").read_text()


def test_other_seed_gives_other_weights(tiny_model_dir, tmp_path):
    other = build_tiny_model(tmp_path / "other", seed=1)
    assert weights(other) != weights(tiny_model_dir)


def test_loads_in_transformers_with_chat_template(tiny_model_dir):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    enc = tok.apply_chat_template(
        [{"role": "user", "content": "Print 42."}], add_generation_prompt=True, return_dict=True
    )
    ids = enc["input_ids"]
    assert tok.decode(ids).endswith("<|im_start|>assistant\n")
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits
    assert logits.shape == (1, len(ids), len(tok))
    assert model.config.tie_word_embeddings is False


VLLM_VS_HF = r"""
import json, sys
from microcoder.device import set_cpu_engine_env
set_cpu_engine_env(1.0)
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
from vllm import LLM, SamplingParams
path = sys.argv[1]
tok = AutoTokenizer.from_pretrained(path)
ids = tok("def main():\n    x = ")["input_ids"]
hf = AutoModelForCausalLM.from_pretrained(path)
with torch.no_grad():
    ref = hf.generate(torch.tensor([ids]), max_new_tokens=16, do_sample=False,
                      eos_token_id=None)[0, len(ids):].tolist()
llm = LLM(model=path, dtype="float32", max_model_len=256, seed=0, enforce_eager=True)
out = llm.generate([{"prompt_token_ids": ids}], SamplingParams(temperature=0, max_tokens=16,
                   ignore_eos=True), use_tqdm=False)[0].outputs[0]
print("RESULT" + json.dumps({"vllm": list(out.token_ids), "hf": ref, "text": out.text}))
"""


@pytest.mark.slow
def test_generates_in_vllm_cpu_matching_transformers_greedy(tiny_model_dir):
    res = subprocess.run(
        [sys.executable, "-c", VLLM_VS_HF, str(tiny_model_dir)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    line = next(x for x in res.stdout.splitlines() if x.startswith("RESULT"))
    got = json.loads(line[len("RESULT") :])
    assert len(got["vllm"]) == 16
    assert got["vllm"] == got["hf"]
