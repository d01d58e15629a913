"""A run asked to evaluate (eval.every > 0) whose held-out set came out empty (every held-out
prompt over generator.max_prompt_tokens, or no held-out source) says so at its start, instead of
training without the curve the user asked for (seen on LeetCodeDataset at a 600-token limit)."""

from __future__ import annotations

from microcoder.launch.config import load_config
from microcoder.launch.run.problems import empty_heldout_warning


def test_an_empty_held_out_set_with_eval_every_is_warned_about_with_the_remedies():
    cfg = load_config("configs/tiny-cpu.toml", ["eval.every=3"])
    warning = empty_heldout_warning(cfg, [])
    assert warning.startswith("WARNING: eval.every = 3 but no held-out problem is left")
    assert "generator.max_prompt_tokens" in warning and "eval.problems_file" in warning


def test_no_warning_with_held_out_problems_or_without_eval():
    assert empty_heldout_warning(load_config("configs/tiny-cpu.toml"), ["a problem"]) == ""
    assert empty_heldout_warning(load_config("configs/tiny-cpu.toml", ["eval.every=0"]), []) == ""
