"""A small real warm start (the real tiny model, a few steps, the sandboxed judge) and its cache."""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from microcoder.data.config import PromptConfig
from microcoder.learner.warmstart.build import (
    MANIFEST,
    default_system_prompt,
    find_finished,
    settings_of,
    warm_start,
)
from microcoder.learner.warmstart.config import WarmStartConfig

# A window of [0, 1] accepts the first evaluation: this checks the machinery, not the learning.
SMALL = WarmStartConfig(
    max_steps=12,
    eval_from=12,
    eval_every=12,
    target_low=0.0,
    target_high=1.0,
    eval_problems=8,
    eval_max_new_tokens=16,
    threads=1,
)


@pytest.fixture(scope="module")
def small_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("warm")
    result = warm_start(out, seed=0, cfg=SMALL, progress=False, log=lambda line: None)
    return out, result


@pytest.mark.slow  # shares the ~30-50 s small real run
def test_small_run_keeps_the_evaluated_step(small_run):
    _, r = small_run
    assert (r.step, r.cached) == (12, False)
    assert r.evals == [(12, r.pass_rate)]


@pytest.mark.slow  # shares the ~30-50 s small real run
def test_small_run_loss_goes_down(small_run):
    import json

    out, _ = small_run
    losses = json.loads((out / MANIFEST).read_text())["sft"]["losses"]
    assert len(losses) == 12
    assert statistics.mean(losses[-3:]) < statistics.mean(losses[:3]) - 1.0


@pytest.mark.slow  # shares the ~30-50 s small real run
def test_saved_folder_loads_in_transformers_and_generates(small_run):
    out, _ = small_run
    tok = AutoTokenizer.from_pretrained(out)
    model = AutoModelForCausalLM.from_pretrained(out)
    assert model.config.tie_word_embeddings is False
    assert model.config.hidden_size == 256 and model.config.num_hidden_layers == 4
    assert tok.eos_token == "<|im_end|>"
    ids = tok.apply_chat_template(
        [{"role": "system", "content": default_system_prompt()}, {"role": "user", "content": "x"}],
        add_generation_prompt=True,
        return_dict=True,
    )["input_ids"]
    with torch.no_grad():
        gen = model.generate(torch.tensor([ids]), max_new_tokens=4, do_sample=False)
    assert gen.shape[1] > len(ids)


@pytest.mark.slow  # shares the ~30-50 s small real run
def test_same_seed_and_settings_are_served_from_the_cache(small_run):
    out, first = small_run

    def no_judging(pairs):
        raise AssertionError("a cached warm start must not evaluate")

    again = warm_start(out, seed=0, cfg=SMALL, judge=no_judging, progress=False)
    assert again.cached and (again.step, again.pass_rate) == (first.step, first.pass_rate)


@pytest.mark.slow  # shares the ~30-50 s small real run
def test_other_seed_or_settings_are_not_served_from_the_cache(small_run):
    out, _ = small_run
    sp = PromptConfig(system={"stdin": default_system_prompt() + " "})
    assert find_finished(out, settings_of(0, SMALL)) is not None
    assert find_finished(out, settings_of(1, SMALL)) is None
    assert find_finished(out, settings_of(0, SMALL.model_copy(update={"lr": 5e-4}))) is None
    assert find_finished(out, settings_of(0, SMALL, sp)) is None
    assert find_finished(out, settings_of(0, SMALL, PromptConfig(template="lcb"))) is None


def test_thread_count_does_not_invalidate_the_cache():
    other = SMALL.model_copy(update={"threads": 2})
    assert settings_of(0, SMALL) == settings_of(0, other)


def test_default_prompt_config_keeps_the_cache_key_of_the_old_system_prompt():
    """Warm starts cached before the prompt layer (keyed on GeneratorConfig.system_prompt) stay
    valid: the default config gives exactly that key."""
    old = "Write a Python program that solves the problem. Reply with one ```python code block."
    assert settings_of(0, SMALL, PromptConfig()) == {
        "manifest_version": 1,
        "seed": 0,
        "task_seed": 0,
        "system_prompt": old,
        "config": SMALL.model_dump(exclude={"threads", "family"}),
    }


def test_the_long_family_is_in_the_cache_key_and_the_default_family_is_not():
    """`family` came later: the default family leaves the key as it was (old caches stay valid);
    another family gives another key, so a short-family cache never serves a long-family run."""
    long = SMALL.model_copy(update={"family": "synthetic-long"})
    assert "family" not in settings_of(0, SMALL) and "family" not in settings_of(0, SMALL)["config"]
    assert settings_of(0, long)["family"] == "synthetic-long"
    assert settings_of(0, long) != settings_of(0, SMALL)


def test_an_unknown_family_is_refused_naming_the_registered_ones():
    with pytest.raises(ValueError, match="synthetic-long"):
        WarmStartConfig(family="synthetic-huge")


def test_a_folder_that_is_not_a_model_is_not_overwritten(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(FileExistsError, match="does not hold a model"):
        warm_start(tmp_path, seed=0, cfg=SMALL, progress=False, log=lambda line: None)


SUPPORT = Path(__file__).parents[1] / "support"
"""tests/support: the child process of the vLLM test imports engine_testing from it."""

VLLM_VS_HF = r"""
import json, sys
from microcoder.device import set_cpu_engine_env
set_cpu_engine_env(1.0)
import torch
torch.set_num_threads(1)
from transformers import AutoModelForCausalLM, AutoTokenizer
from vllm import LLM
from microcoder.data.synthetic.tasks import generate_tasks
from microcoder.learner.warmstart.hf_sample import sample_replies
sys.path.insert(0, sys.argv[2])  # tests/support, for engine_testing
from engine_testing.vllm_replies import vllm_replies
from microcoder.data.prompting.render import PromptRenderer
path = sys.argv[1]
tok = AutoTokenizer.from_pretrained(path)
renderer = PromptRenderer(tok)
problems = generate_tasks(0, "heldout", 8)
hf = sample_replies(AutoModelForCausalLM.from_pretrained(path), renderer, problems,
                    temperature=0, max_new_tokens=16, seed=0)
llm = LLM(model=path, dtype="float32", max_model_len=256, seed=0, enforce_eager=True)
vl = vllm_replies(llm, renderer, problems, temperature=0, max_tokens=16)
hot = vllm_replies(llm, renderer, problems, temperature=1.0, max_tokens=16)
print("RESULT" + json.dumps({"hf": hf, "vllm": vl, "hot": hot}))
"""


@pytest.mark.slow
def test_vllm_replies_render_like_the_sft_sampler(small_run):
    import json
    import subprocess
    import sys

    out, _ = small_run
    res = subprocess.run(
        [sys.executable, "-c", VLLM_VS_HF, str(out), str(SUPPORT)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    got = json.loads(next(x for x in res.stdout.splitlines() if x.startswith("RESULT"))[6:])
    assert got["vllm"] == got["hf"]
    assert len(got["hot"]) == 8


@pytest.mark.slow
@pytest.mark.timeout(600)  # the session's warm start is built by the first test that needs it
def test_default_warm_start_reaches_the_window(warm_model_dir):
    """The real recipe (defaults, seed 0, through `microcoder tiny-model --warmstart`: the
    session's shared warm start, tests/conftest.py) stops at its first evaluation inside the
    target window, and says so in its manifest."""
    import json

    cfg = WarmStartConfig()
    manifest = json.loads((warm_model_dir / MANIFEST).read_text())
    r = manifest["result"]
    evals = [tuple(e) for e in r["evals"]]
    assert cfg.target_low <= r["pass_rate"] <= cfg.target_high
    assert evals[-1] == (r["step"], r["pass_rate"])
    assert not any(cfg.target_low <= rate <= cfg.target_high for _, rate in evals[:-1])
    assert manifest["settings"] == settings_of(0, cfg)
