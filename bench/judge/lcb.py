"""Runs LiveCodeBench's evaluator (PyPI nvidia-livecodebench) in ITS OWN venv, side by side.

Usage (by bench/judge/lcb_run.py): LCB_PYTHON lcb.py IN.json OUT.json WORKERS TIMEOUT
IN.json: {"samples": [{"input_output": "..."}], "generations": [["code"], ...]}.
OUT.json: {"wall_s": ..., "results": {index: [per-test results]}, "metadata": {...}}.
Stdlib only at top level; livecodebench is imported inside main (it lives in the other venv).
"""

from __future__ import annotations

import json
import sys
import time


def main() -> None:
    src = sys.argv[1]
    dst = sys.argv[2]
    workers = int(sys.argv[3])
    timeout = int(sys.argv[4])
    from livecodebench.evaluation.compute_code_generation_metrics import evaluate_generations

    with open(src) as f:
        data = json.load(f)
    t0 = time.perf_counter()
    results, metadata = evaluate_generations(
        data["samples"], data["generations"], num_process_evaluate=workers, timeout=timeout
    )
    wall = time.perf_counter() - t0
    with open(dst, "w") as f:
        json.dump({"wall_s": wall, "results": results, "metadata": metadata}, f, default=str)


if __name__ == "__main__":
    main()
