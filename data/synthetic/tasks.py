"""The synthetic stdin/stdout task family (issue 8): tiny problems a ~3M-parameter model can learn.

    generate_tasks(seed, split="train" | "heldout", n=None) -> list[Problem]

A *combination* is (operation, constant, variable names); each is in exactly one split, chosen
by a stable hash of its text (`HELDOUT_PERCENT` of them are held out), so a held-out task's
canonical solution never appears in training under any phrasing. A task is a combination plus a
phrasing (family lead + operation wording). Tests (`N_TESTS` random stdins) get their outputs by
running the canonical solution in-process (our own trusted two-line code); the solution is kept in
`meta["solution"]`. Everything is deterministic for a seed.
"""

from __future__ import annotations

import builtins
import hashlib
import io
import random
from contextlib import redirect_stdout
from dataclasses import dataclass

from microcoder.data.problem import Problem
from microcoder.data.synthetic.ops import FAMILIES, OPS, Op, random_input

HELDOUT_PERCENT = 15
"""Share of (operation, constant, variable names) combinations held out, in percent."""
N_TESTS = 5
"""Random tests per task."""
SPLITS = ("train", "heldout")


@dataclass(frozen=True)
class Combo:
    """One (operation, constant, variable names, phrasing) choice: one task's identity."""

    op: Op
    const: object
    names: tuple[str, ...]
    lead: int
    phrasing: int

    @property
    def key(self) -> str:
        """The split key: everything that determines the canonical solution."""
        return f"{self.op.family}.{self.op.name}|{self.const}|{','.join(self.names)}"

    @property
    def task_id(self) -> str:
        return f"syn/{self.key.replace('|', '/')}/{self.lead}{self.phrasing}"


def split_of(key: str) -> str:
    """`train` or `heldout` for a combination key; stable across runs, machines and versions."""
    bucket = int(hashlib.sha256(key.encode()).hexdigest()[:8], 16) % 100
    return "heldout" if bucket < HELDOUT_PERCENT else "train"


def all_combos() -> list[Combo]:
    """Every task identity, in a fixed order."""
    out = []
    for op in OPS:
        fam = FAMILIES[op.family]
        for const in op.consts:
            for names in fam.var_sets:
                for lead in range(len(fam.leads)):
                    for phr in range(len(op.phrasings)):
                        out.append(Combo(op, const, names, lead, phr))
    return out


def _fill(template: str, combo: Combo) -> str:
    names = dict(zip("ab", combo.names, strict=False))
    return template.format(c=combo.const, **names)


def render(combo: Combo) -> tuple[str, str]:
    """(prompt, canonical solution) of a combination."""
    fam = FAMILIES[combo.op.family]
    prompt = (
        f"{_fill(fam.leads[combo.lead], combo)} {_fill(combo.op.phrasings[combo.phrasing], combo)}"
    )
    solution = f"{_fill(fam.read, combo)}\nprint({_fill(combo.op.expr, combo)})"
    return prompt, solution


def run_solution(solution: str, stdin: str) -> str:
    """Run trusted canonical code on `stdin` in-process; return what it prints."""
    lines = iter(stdin.splitlines())
    out = io.StringIO()
    env = {"__builtins__": builtins, "input": lambda *_: next(lines)}
    with redirect_stdout(out):
        exec(compile(solution, "<canonical>", "exec"), env)
    return out.getvalue()


def tests_from(draw, solution: str, rng: random.Random, n: int = N_TESTS) -> list[dict]:
    """`n` distinct random tests, inputs from `draw(rng)`, outputs by running the canonical
    `solution`; retried so that not all expected outputs are equal."""
    best: list[dict] = []
    for _ in range(20):
        inputs: list[str] = []
        for _ in range(10 * n):
            x = draw(rng)
            if x not in inputs:
                inputs.append(x)
            if len(inputs) == n:
                break
        tests = [{"input": x, "output": run_solution(solution, x)} for x in inputs]
        if len({t["output"] for t in tests}) > 1 and len(tests) == n:
            return tests
        best = max(best, tests, key=lambda ts: len({t["output"] for t in ts}))
    return best


def make_tests(combo: Combo, solution: str, rng: random.Random, n: int = N_TESTS) -> list[dict]:
    """`n` distinct random tests of one combination."""
    return tests_from(lambda r: random_input(combo.op.family, r, combo.const), solution, rng, n)


def make_problem(
    combo,
    seed: int,
    render_one=render,
    tests_of=make_tests,
    source: str = "synthetic",
    meta: dict | None = None,
) -> Problem:
    """The Problem of one task of either synthetic family; its tests depend only on (seed, task
    id). The defaults are the short family's; the long one (data/synthetic/long_answers.py) passes its
    renderer, tests, source and `meta` (the fields between "solution" and "split"; None: a
    short combination's family, op, const and names)."""
    prompt, solution = render_one(combo)
    rng = random.Random(f"{seed}:{combo.task_id}")
    if meta is None:
        meta = {
            "family": combo.op.family,
            "op": combo.op.name,
            "const": combo.const,
            "names": list(combo.names),
        }
    return Problem(
        id=combo.task_id,
        kind="stdin",
        prompt=prompt,
        tests=tests_of(combo, solution, rng),
        difficulty="synthetic",
        platform="synthetic",
        source=source,
        meta={"solution": solution, **meta, "split": split_of(combo.key)},
    )


def of_split(combos, split: str) -> list:
    """The combinations (anything with a `.key`) of one split, in their given order."""
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    return [c for c in combos if split_of(c.key) == split]


def pick(combos: list, order_key: str, n: int | None, what: str) -> list:
    """`combos` shuffled by the seeded `order_key`, all of them (n=None) or the first `n` (a
    smaller `n` gives a prefix of a larger one); `what` names the split in the error."""
    random.Random(order_key).shuffle(combos)
    if n is not None:
        if not 0 <= n <= len(combos):
            raise ValueError(
                f"n={n}: the {what} split has {len(combos)} tasks; ask for at most that"
            )
        combos = combos[:n]
    return combos


def corpus_of(combos, render_one) -> list[str]:
    """Prompt and canonical solution of each combination, alternating (a tokenizer corpus)."""
    texts = []
    for combo in combos:
        prompt, solution = render_one(combo)
        texts += [prompt, solution]
    return texts


def combos_for(split: str) -> list[Combo]:
    """All combinations of one split, in the fixed order."""
    return of_split(all_combos(), split)


def generate_tasks(seed: int, split: str = "train", n: int | None = None) -> list[Problem]:
    """Tasks of `split` in a seed-shuffled order: all of them (n=None) or the first `n`.

    Same seed → same tasks, same order, same tests; a smaller `n` gives a prefix of a larger one.
    """
    combos = pick(combos_for(split), f"order:{seed}:{split}", n, split)
    return [make_problem(c, seed) for c in combos]


def tokenizer_corpus() -> list[str]:
    """Prompts and canonical solutions of every training combination (for the tiny tokenizer).

    Held-out combinations are left out; their words, names and constants all occur in training.
    """
    return corpus_of(combos_for("train"), render)
