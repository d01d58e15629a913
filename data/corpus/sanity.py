"""Sanity-load every problem file under a folder and print counts: `python -m microcoder.data.corpus.sanity DIR`.

For each `*.json[l][.gz]` file: format detected, problems loaded by kind, tests kept, rows
rejected (by field and reason) and tests dropped from kept rows (by reason).
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

from microcoder.data.formats.loaders import load_problems

PATTERNS = ("*.jsonl", "*.jsonl.gz", "*.json", "*.json.gz")


def problem_files(root: Path) -> list[Path]:
    """Every problem-looking file under `root`, sorted."""
    return sorted({p for pat in PATTERNS for p in root.rglob(pat)})


def sanity_report(root: Path) -> str:
    """A markdown table of load counts for every problem file under `root`, then the reasons."""
    lines = [
        "| file | format | loaded | kinds | tests | rejected | tests dropped |",
        "|---|---|---|---|---|---|---|",
    ]
    reasons: list[str] = []
    for path in problem_files(root):
        r = load_problems(path, strict=False)
        kinds = ", ".join(f"{k} {n}" for k, n in Counter(p.kind for p in r.problems).items())
        n_tests = sum(len(p.tests) for p in r.problems)
        name = path.relative_to(root)
        lines.append(
            f"| {name} | {r.format} | {len(r.problems)} | {kinds or '-'} | {n_tests} "
            f"| {len(r.rejects)} | {sum(r.dropped_tests.values())} |"
        )
        reasons += [f"- {name}: {n} rejected — {why}" for why, n in r.reject_reasons().items()]
        reasons += [f"- {name}: {n} tests dropped — {why}" for why, n in r.dropped_tests.items()]
    return "\n".join(lines + [""] + reasons)


if __name__ == "__main__":
    print(sanity_report(Path(sys.argv[1] if len(sys.argv) > 1 else ".")))
