"""The problem file `bench data` launches on: N judgeable rows of our own JSONL schema
(data/problem.py), each about `row_kb` KB, most of it reference programs in `solutions`.

Every row is a `stdin` problem in the synthetic family's words (a short prompt that fits the
tiny config's `generator.max_prompt_tokens`): read two integers, print a linear combination of
them. Three tests; four reference programs, each correct and padded with comment lines (cut
from one seeded block of made-up words at a per-row offset, so rows differ) up to the row size.
The file is written line by line to a temporary name and renamed when complete, so a file
already at the final name is whole and is reused.
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

SOLUTIONS = 4
"""Reference programs a row."""
PROGRAMS = (
    "a, b = map(int, input().split())\nprint(a * {x} + b * {y})\n",
    "x = [int(t) for t in input().split()]\nprint(x[0] * {x} + x[1] * {y})\n",
    "import sys\na, b = map(int, sys.stdin.read().split())\nprint({x} * a + {y} * b)\n",
    "def solve(a, b):\n    return a * {x} + b * {y}\n\n\nprint(solve(*map(int, input().split())))\n",
)
"""Correct programs for `a * x + b * y`, all different (their padding comes first)."""


def file_name(n: int, row_kb: float, seed: int) -> str:
    return f"problems-{n}-{row_kb:g}kb-seed{seed}.jsonl"


def padding_block(seed: int, size: int = 1 << 20) -> str:
    """About `size` characters of comment lines (`# ` and made-up words, at most 70 characters
    each, ASCII without quotes or backslashes, so JSON adds exactly one byte per newline)."""
    rng = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyz"
    words = ["".join(rng.choices(letters, k=rng.randint(2, 9))) for _ in range(4000)]
    lines = []
    total = 0
    while total < size:
        line = "#"
        while len(line) < 60:
            line += " " + rng.choice(words)
        lines.append(line)
        total += len(line) + 1
    return "\n".join(lines) + "\n"


def problem_row(i: int, row_bytes: int, block: str, rng: random.Random) -> dict:
    """Row `i`: its JSON line (newline included) is `row_bytes` long, give or take one line of
    padding, when `row_bytes` exceeds the row without padding (~620 bytes)."""
    x = rng.randint(2, 99)
    y = rng.randint(2, 99)
    tests = []
    for _ in range(3):
        a = rng.randint(-999, 999)
        b = rng.randint(-999, 999)
        tests.append({"input": f"{a} {b}\n", "output": f"{a * x + b * y}\n"})
    row = {
        "id": f"bench-{i}",
        "kind": "stdin",
        "prompt": f"Given integers a and b on one line. Print a times {x} plus b times {y}.",
        "tests": tests,
        "source": "bench-data",
        "solutions": [p.format(x=x, y=y) for p in PROGRAMS[:SOLUTIONS]],
    }
    bare = len(json.dumps(row)) + 1
    share = max(0, row_bytes - bare) // SOLUTIONS
    padded = []
    for program in row["solutions"]:
        start = block.index("\n", rng.randrange(len(block) - 2 * share - 200)) + 1
        # whole lines, each newline 2 bytes in JSON (lines average ~65 characters)
        end = start + share - share // 66 + 32
        end = block.rfind("\n", start, end) + 1 or start
        padded.append(block[start:end] + program)
    row["solutions"] = padded
    return row


def generate(path: Path, n: int, row_kb: float, seed: int = 0) -> None:
    """Write `n` rows of about `row_kb` KB to `path`, streamed (one row in memory at a time)."""
    rng = random.Random(seed)
    row_bytes = int(row_kb * 1024)
    block = padding_block(seed, max(1 << 20, 4 * row_bytes))
    tmp = path.with_name(path.name + f".tmp-{os.getpid()}")
    with tmp.open("w", buffering=1 << 20) as f:
        for i in range(n):
            f.write(json.dumps(problem_row(i, row_bytes, block, rng)) + "\n")
    os.replace(tmp, path)


def problems_file(workdir: Path, n: int, row_kb: float, seed: int = 0) -> tuple[Path, bool]:
    """(the file of `n` rows of `row_kb` KB under `workdir`, whether it was already there)."""
    workdir.mkdir(parents=True, exist_ok=True)
    path = workdir / file_name(n, row_kb, seed)
    if path.is_file():
        return path, True
    generate(path, n, row_kb, seed)
    return path, False
