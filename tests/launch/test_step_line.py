"""The launcher's per-step console line (launch/run/command.py: progress_line)."""

from __future__ import annotations

from launch_testing.synthetic_metrics import synthetic_mismatch, synthetic_step

from microcoder.launch.run.command import progress_line


def test_step_line_shows_the_mismatch_kl():
    rec = synthetic_step(3) | synthetic_mismatch(3)
    line = progress_line(rec, 20)
    assert line.startswith("step    3/20 |")
    assert f"| mismatch k3 {rec['mismatch_kl']:.1e} |" in line and rec["mismatch_kl"] > 0


def test_step_line_of_a_step_without_mismatch_metrics():
    assert "| mismatch k3 0.0e+00 |" in progress_line(synthetic_step(3), 20)
