"""The `microcoder` command line as a user runs it (real subprocesses)."""

from __future__ import annotations

import subprocess
import sys

import pytest


def microcoder(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "microcoder", *args], capture_output=True, text=True, check=check
    )


def test_help_lists_the_commands_that_exist():
    out = microcoder("--help").stdout
    for name in ("config", "tiny-model", "smoke"):
        assert name in out


def test_help_does_not_import_heavy_libraries():
    code = (
        "import sys; from microcoder.launch.cli import build_parser; build_parser(); "
        "heavy = [m for m in ('torch', 'vllm', 'ray', 'transformers', 'pydantic') if m in sys.modules]; "
        "print(','.join(heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


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
