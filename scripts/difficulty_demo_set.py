"""Write the difficulty filter's demo set: synthetic tasks whose difficulty is known by
construction (in `difficulty` and `meta.tier`), for `microcoder data filter` with the tiny model
(bench/RESULTS.md, "Training data (issue 18)").

- trivial: 10 train-split tasks with one test and a checker that accepts any output (any program
  that runs passes);
- real: 30 train-split + 30 held-out tasks of the synthetic family, unchanged;
- impossible: 10 held-out tasks whose expected output is a token no program prints.

Usage: .venv/bin/python scripts/difficulty_demo_set.py OUT.jsonl
"""

from __future__ import annotations

import sys
from dataclasses import replace

from microcoder.data.synthetic.tasks import generate_tasks

IMPOSSIBLE = "IMPOSSIBLE-7f3\n"


def main(out: str) -> None:
    train = generate_tasks(0, "train", 40)
    held = generate_tasks(0, "heldout", 40)
    rows = [
        replace(
            p,
            id=p.id + "/trivial",
            tests=p.tests[:1],
            compare="checker",
            checker="import sys\nsys.exit(0)\n",
            difficulty="trivial",
            meta={**p.meta, "tier": "trivial"},
        )
        for p in train[:10]
    ]
    rows += [
        replace(p, difficulty="real", meta={**p.meta, "tier": "real"})
        for p in train[10:] + held[:30]
    ]
    rows += [
        replace(
            p,
            id=p.id + "/impossible",
            tests=[{"input": t["input"], "output": IMPOSSIBLE} for t in p.tests],
            difficulty="impossible",
            meta={**p.meta, "tier": "impossible"},
        )
        for p in held[30:]
    ]
    with open(out, "w") as f:
        f.writelines(r.to_json() + "\n" for r in rows)
    print(f"{len(rows)} problems -> {out}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__.strip().splitlines()[-1])
    main(sys.argv[1])
