"""`microcoder tiny-model --warmstart`: flag checking and messages (no training here)."""

from __future__ import annotations

import subprocess
import sys


def microcoder(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "microcoder", "tiny-model", *args], capture_output=True, text=True
    )


def test_inverted_window_is_a_config_error_naming_the_fields(tmp_path):
    r = microcoder(
        "--warmstart", "--out", str(tmp_path), "--target-low", "0.5", "--target-high", "0.2"
    )
    assert r.returncode == 2
    assert "target_low (0.5) must be <= target_high (0.2)" in r.stderr


def test_unknown_setting_lists_the_valid_ones(tmp_path):
    r = microcoder("--warmstart", "--out", str(tmp_path), "--set", "learning_rate=1e-3")
    assert r.returncode == 2
    assert "unknown warm-start setting" in r.stderr and "lr" in r.stderr


def test_warmstart_options_without_warmstart_are_refused(tmp_path):
    r = microcoder("--out", str(tmp_path), "--max-steps", "10")
    assert r.returncode == 2 and "need --warmstart" in r.stderr


def test_refuses_to_write_into_a_folder_that_is_not_a_model(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    r = microcoder("--warmstart", "--out", str(tmp_path))
    assert r.returncode == 1 and "does not hold a model" in r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


def test_every_synthetic_family_has_its_own_default_warm_folder():
    from microcoder.data.sources import SYNTHETIC_VARIANTS
    from microcoder.launch.cli.cmd_tiny_model import DEFAULT_WARM_OUT, WARM_OUTS

    assert set(WARM_OUTS) == set(SYNTHETIC_VARIANTS)
    assert len(set(WARM_OUTS.values())) == len(WARM_OUTS)
    assert WARM_OUTS["synthetic"] == DEFAULT_WARM_OUT


def test_unknown_family_is_a_config_error_naming_the_families(tmp_path):
    r = microcoder("--warmstart", "--out", str(tmp_path), "--family", "synthetic-huge")
    assert r.returncode == 2 and "synthetic-long" in r.stderr
