"""The long-answer variant of the synthetic family (issue 19): answers that fill most of the cap.

    generate_tasks(seed, split="train" | "heldout", n=None) -> list[Problem]

A long task chains `PARTS` tasks of the short family (data/synthetic/tasks.py), one from each of
`PARTS` different input families, in a drawn order: the statement is their statements one after
another, stdin has one line per part, and the canonical solution is their solutions one after
another (read, print; read, print; ...), so it prints one line per part. Every long canonical
solution therefore has the same shape and nearly the same length: `PARTS` read lines and
`PARTS` print lines, which under the variant's warm-start tokenizer is most of the recipe's
`generator.max_response_tokens` (configs/compare-long.toml). A sampled answer that adds or
repeats a statement runs into the cap and is truncated.

The tasks are a fixed pool of `POOL_SIZE` draws (the same on every machine); variable names
within a task are distinct. The split rule is the short family's: a stable hash of the
combination key (every part's operation, constant and names, in order; not the phrasing) puts
`HELDOUT_PERCENT` of them in `heldout`, so a held-out task's canonical solution never appears in
training under any phrasing (its parts do, in other combinations). Tests (`N_TESTS` random stdins)
get their outputs by running the canonical solution in-process; the solution is kept in
`meta["solution"]`. Everything is deterministic for a seed.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from functools import cache

from microcoder.data.problem import Problem
from microcoder.data.synthetic.ops import FAMILIES, OPS, random_input
from microcoder.data.synthetic.tasks import (
    HELDOUT_PERCENT,
    N_TESTS,
    Combo,
    corpus_of,
    make_problem,
    of_split,
    pick,
    render,
    split_of,
    tests_from,
)

PARTS = 4
"""Short tasks chained into one long task, each from a different input family."""
POOL_SIZE = 6000
"""Draws of the fixed task pool (before removing repeats); about 85 % of it is training."""
POOL_SEED = "synthetic-long:pool:v1"
"""Seed of the pool draw; changing it changes every task (and the split), so it is versioned."""
SOURCE = "synthetic-long"
"""The `data.source` value that selects this variant (data/sources.py SYNTHETIC_VARIANTS)."""

__all__ = ["HELDOUT_PERCENT", "LongCombo", "generate_tasks", "split_of", "tokenizer_corpus"]


@dataclass(frozen=True)
class LongCombo:
    """One long task's identity: its parts (short-family combinations), in order."""

    parts: tuple[Combo, ...]

    @property
    def key(self) -> str:
        """The split key: everything that determines the canonical solution."""
        return " + ".join(p.key for p in self.parts)

    @property
    def task_id(self) -> str:
        return "synlong/" + "+".join(p.task_id.removeprefix("syn/") for p in self.parts)


def _draw_part(rng: random.Random, family: str, taken: set[str]) -> Combo:
    fam = FAMILIES[family]
    op = rng.choice([o for o in OPS if o.family == family])
    names = rng.choice([n for n in fam.var_sets if not taken & set(n)])
    return Combo(
        op,
        rng.choice(op.consts),
        names,
        rng.randrange(len(fam.leads)),
        rng.randrange(len(op.phrasings)),
    )


def draw_combo(rng: random.Random) -> LongCombo:
    """One long task: `PARTS` distinct families in a random order, no variable name twice."""
    parts: list[Combo] = []
    taken: set[str] = set()
    for family in rng.sample(sorted(FAMILIES), PARTS):
        part = _draw_part(rng, family, taken)
        taken |= set(part.names)
        parts.append(part)
    return LongCombo(tuple(parts))


@cache
def all_combos() -> tuple[LongCombo, ...]:
    """The fixed pool, repeats (same task id) removed, in draw order."""
    rng = random.Random(POOL_SEED)
    seen: dict[str, LongCombo] = {}
    for _ in range(POOL_SIZE):
        combo = draw_combo(rng)
        seen.setdefault(combo.task_id, combo)
    return tuple(seen.values())


def render_long(combo: LongCombo) -> tuple[str, str]:
    """(prompt, canonical solution): the parts' statements and solutions, in order."""
    rendered = [render(p) for p in combo.parts]
    return " ".join(r[0] for r in rendered), "\n".join(r[1] for r in rendered)


def make_tests(combo: LongCombo, solution: str, rng: random.Random, n: int = N_TESTS) -> list:
    """`n` distinct random stdins (one line per part), retrying so not all outputs are equal."""

    def draw(r: random.Random) -> str:
        return "".join(random_input(p.op.family, r, p.const) for p in combo.parts)

    return tests_from(draw, solution, rng, n)


def combos_for(split: str) -> list[LongCombo]:
    """All long tasks of one split, in the pool's order."""
    return of_split(all_combos(), split)


def generate_tasks(seed: int, split: str = "train", n: int | None = None) -> list[Problem]:
    """Tasks of `split` in a seed-shuffled order: all of them (n=None) or the first `n`.

    Same seed → same tasks, same order, same tests; a smaller `n` gives a prefix of a larger one.
    """
    combos = pick(combos_for(split), f"order:{seed}:{SOURCE}:{split}", n, f"{SOURCE} {split}")
    return [
        make_problem(
            c,
            seed,
            render_long,
            make_tests,
            SOURCE,
            {"family": "long", "parts": [p.key for p in c.parts]},
        )
        for c in combos
    ]


def tokenizer_corpus() -> list[str]:
    """Prompts and canonical solutions of every training task, alternating (the warm start's
    tokenizer corpus, as data/synthetic/tasks.py's)."""
    return corpus_of(combos_for("train"), render_long)
