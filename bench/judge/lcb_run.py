"""Host side of the LiveCodeBench comparison: its venv, sample conversion, and one run."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

LCB_PACKAGES = ["nvidia-livecodebench==26.3", "numpy", "tqdm", "sortedcontainers"]
"""Installed with --no-deps for the first: its evaluator needs only numpy and tqdm (the rest of
its dependencies are API clients for generation); sortedcontainers because LeetCode provides it
and reference solutions use it (our sandbox's interpreter has it)."""


def ensure_lcb_venv(venv: Path) -> Path:
    """The venv's python, creating the venv on first use (one-off, about a minute)."""
    python = venv / "bin" / "python"
    probe = [str(python), "-c", "import livecodebench.evaluation.testing_util"]
    if python.exists() and subprocess.run(probe, capture_output=True).returncode == 0:
        return python
    print(
        f"bench judge: creating {venv} with LiveCodeBench's evaluator (one-off)...", file=sys.stderr
    )
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(python), "-m", "pip", "install", "-q"]
    subprocess.run([*pip, "--no-deps", LCB_PACKAGES[0]], check=True)
    subprocess.run([*pip, *LCB_PACKAGES[1:]], check=True)
    return python


def to_lcb(item) -> tuple[dict, str]:
    """(LCB sample, code) for one item; assert problems become a call-based wrapper."""
    p = item.problem
    if p.kind == "stdin":
        io = {"inputs": [t["input"] for t in p.tests], "outputs": [t["output"] for t in p.tests]}
        return {"input_output": json.dumps(io)}, item.code
    if p.kind == "functional":
        io = {
            "inputs": [t["input"] for t in p.tests],
            "outputs": [t["output"] for t in p.tests],
            "fn_name": p.fn_name,
        }
        return {"input_output": json.dumps(io)}, p.prelude + "\n" + item.code
    n = len(p.tests)
    io = {"inputs": [str(i) for i in range(n)], "outputs": ["true"] * n, "fn_name": "lcb_run_test"}
    wrapper = (
        f"\n__TESTS__ = {[t['code'] for t in p.tests]!r}\n"
        "def lcb_run_test(i):\n    exec(__TESTS__[i], globals())\n    return True\n"
    )
    if "class Solution" in item.code:  # LCB then calls Solution().lcb_run_test(i): make it one
        wrapper += "Solution.lcb_run_test = lambda self, i: globals()['lcb_run_test'](i)\n"
    return {"input_output": json.dumps(io)}, p.prelude + "\n" + item.code + wrapper


def run_lcb(
    python: Path, items: list, workers: int, timeout: int
) -> tuple[list[bool], float, list]:
    """(accepted per item, wall seconds of evaluate_generations, metadata per item)."""
    pairs = [to_lcb(it) for it in items]
    with tempfile.TemporaryDirectory(prefix="microcoder-lcb-") as tmp:
        src = Path(tmp, "in.json")
        dst = Path(tmp, "out.json")
        src.write_text(
            json.dumps({"samples": [s for s, _ in pairs], "generations": [[c] for _, c in pairs]})
        )
        script = Path(__file__).with_name("lcb.py")
        subprocess.run(
            [str(python), str(script), str(src), str(dst), str(workers), str(timeout)],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            cwd=tmp,
        )
        out = json.loads(dst.read_text())
    accepted = []
    meta = []
    for i in range(len(items)):
        res = out["results"][str(i)][0]
        accepted.append(bool(res) and all(r is True for r in res))
        meta.append(out["metadata"][str(i)][0])
    return accepted, out["wall_s"], meta
