"""`microcoder eval --max-turns N` refuses N outside 1..16 before anything starts, exit 2 with the
range; 0 and negatives included (they once ran a single-turn eval silently)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

MIXED = Path(__file__).parents[1] / "fixtures" / "data" / "eval_mixed.jsonl"


@pytest.mark.parametrize("turns", ["0", "-1", "17"])
def test_a_turn_count_outside_the_range_is_refused(tmp_path, turns):
    cmd = [sys.executable, "-m", "microcoder", "eval", "--model", str(tmp_path / "none")]
    cmd += ["--problems", str(MIXED), f"--max-turns={turns}", "--out", str(tmp_path / "out")]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert res.returncode == 2, res.stdout + res.stderr
    assert f"--max-turns {turns}: must be between 1 and 16" in res.stderr
