"""A tiny family of arithmetic word problems for the `answer` kind, generated deterministically.

    rows(n=40, seed=0) -> [{"id", "question", "answer"}]     (data/formats/answer.py rows)
    python -m microcoder.data.synthetic.arithmetic > configs/answer-tiny.jsonl

Five shapes (add, take away, groups of, share equally, fraction eaten); answers are small
integers, and the fraction shape's answer is a reduced fraction `p/q` (so `0.5` and `1/2`
both count, sandbox/rewards/answer.py). The shipped configs/answer-tiny.jsonl is `rows()` as written by
the command above; the tests check it still is.
"""

from __future__ import annotations

import json
import random
import sys
from fractions import Fraction

NAMES = ("Ana", "Ben", "Cy", "Dee", "Eli", "Fay")
ITEMS = ("apple", "pen", "card", "cup", "egg", "box")


def _one(rng: random.Random, i: int) -> tuple[str, str]:
    name = rng.choice(NAMES)
    item = rng.choice(ITEMS)
    shape = i % 5
    a = rng.randint(2, 9)
    b = rng.randint(1, 9)
    if shape == 0:
        return f"{name} has {a} {item}s and gets {b} more. How many {item}s now?", str(a + b)
    if shape == 1:
        a += b
        return f"{name} has {a} {item}s and gives away {b}. How many {item}s are left?", str(a - b)
    if shape == 2:
        return f"{name} buys {a} bags of {b} {item}s. How many {item}s in all?", str(a * b)
    if shape == 3:
        return f"{a * b} {item}s are shared by {a} friends. How many {item}s each?", str(b)
    b = rng.randint(1, a - 1)
    frac = Fraction(b, a)
    return f"{name} cuts a cake into {a} slices and eats {b}. What fraction is eaten?", str(frac)


def rows(n: int = 40, seed: int = 0) -> list[dict[str, str]]:
    """`n` problems, the same for the same seed."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        question, answer = _one(rng, i)
        out.append({"id": f"arith-{i:03d}", "question": question, "answer": answer})
    return out


if __name__ == "__main__":
    for row in rows():
        sys.stdout.write(json.dumps(row) + "\n")
