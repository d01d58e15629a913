"""The `microcoder` command line as a user runs it (real subprocesses)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from import_probe import heavy_imports


def microcoder(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "microcoder", *args], capture_output=True, text=True, check=check
    )


def test_help_lists_the_commands_that_exist():
    out = microcoder("--help").stdout
    for name in ("config", "tiny-model", "smoke", "prompts"):
        assert name in out


def test_help_does_not_import_heavy_libraries():
    assert (
        heavy_imports("from microcoder.launch.cli.main import build_parser; build_parser()") == []
    )


def test_config_show_prints_overridden_value():
    out = microcoder(
        "config", "show", "configs/tiny-cpu.toml", "--set", "learner.lr=0.00042"
    ).stdout
    assert "lr = 0.00042" in out


def test_config_show_bad_key_exits_2_with_suggestion():
    res = microcoder("config", "show", "--set", "buffer.max_stalenes=3", check=False)
    assert res.returncode == 2
    assert "did you mean 'buffer.max_staleness'" in res.stderr


@pytest.mark.parametrize("argv", [["config", "show", "--docs"]])
def test_config_docs_lists_fields_with_meaning(argv):
    out = microcoder(*argv).stdout
    assert "buffer.max_staleness = 1" in out
    assert "policy versions" in out


FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "data"


@pytest.fixture(scope="module")
def small_model_dir(tmp_path_factory):
    from family_models import tokenizer_model

    return tokenizer_model(tmp_path_factory.mktemp("prompts-model"))


def test_prompts_show_json_prints_each_problem_with_its_token_count(small_model_dir):
    from transformers import AutoTokenizer

    from microcoder.data.formats.loaders import load_problems
    from microcoder.data.prompting.render import PromptRenderer

    data = FIXTURES / "prompts_mixed.jsonl"
    res = microcoder(
        "prompts",
        "show",
        str(data),
        "--json",
        "--set",
        f'model.path="{small_model_dir}"',
        "--set",
        "model.build_tiny=false",
        "--set",
        "generator.max_prompt_tokens=100",
    )
    rows = [json.loads(line) for line in res.stdout.splitlines()]
    renderer = PromptRenderer(AutoTokenizer.from_pretrained(small_model_dir))
    problems = load_problems(data)
    assert [r["problem_id"] for r in rows] == [p.id for p in problems]
    assert [r["text"] for r in rows] == [renderer.text(p) for p in problems]
    tokens = [len(renderer.ids(p)) for p in problems]
    assert [r["tokens"] for r in rows] == tokens
    over = sum(t > 100 for t in tokens)
    assert f"{over} of {len(problems)} over generator.max_prompt_tokens = 100" in res.stderr


def test_prompts_show_text_prints_the_first_n_with_the_template_asked_for(small_model_dir):
    res = microcoder(
        "prompts",
        "show",
        str(FIXTURES / "prompts_mixed.jsonl"),
        "--n",
        "1",
        "--set",
        f'model.path="{small_model_dir}"',
        "--set",
        "prompt.template=lcb",
    )
    assert res.stdout.count("--- [") == 1
    assert "--- [1/5] sum (stdin, " in res.stdout and "### Question:\n" in res.stdout
    assert "extraction: prompt.reasoning = 'auto' -> 'none': the final answer is the whole" in (
        res.stdout.replace("\n", " ")
    )


def test_prompts_show_missing_file_exits_2_saying_what_to_give():
    res = microcoder("prompts", "show", "no/such/problems.jsonl", check=False)
    assert res.returncode == 2
    assert "no/such/problems.jsonl: no such problem file" in res.stderr


def test_prompts_show_unknown_template_exits_2_listing_the_templates():
    res = microcoder(
        "prompts",
        "show",
        str(FIXTURES / "own.jsonl"),
        "--set",
        "prompt.template=lbc",
        check=False,
    )
    assert res.returncode == 2
    assert "built-in template (default, lcb)" in res.stderr


def test_launch_with_a_bad_problem_row_exits_2_naming_its_line_before_anything_starts(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a", "prompt": "x"}\n')
    run_dir = tmp_path / "run"
    res = microcoder(
        "launch",
        "configs/tiny-cpu.toml",
        "--set",
        f"data.source={bad}",
        "--run-dir",
        str(run_dir),
        check=False,
    )
    assert res.returncode == 2
    assert f"{bad}:1" in res.stdout and "data.format" in res.stdout
    assert not run_dir.exists()  # no run directory, model or Ray was made for it


def test_launch_with_a_missing_problem_file_exits_2_saying_what_to_set(tmp_path):
    res = microcoder(
        "launch",
        "configs/tiny-cpu.toml",
        "--set",
        f"data.source={tmp_path / 'none.jsonl'}",
        check=False,
    )
    assert res.returncode == 2
    assert "no such problem file" in res.stdout and "set data.source" in res.stdout
