"""The synthetic task family's vocabulary: input families and the operations on them.

A task = family (how input is read) + operation (what to print) + a constant + variable names +
a phrasing. Prompts are plain words and short; every canonical solution has the same shape:
the family's one read line, then `print(<expression>)`.
"""

from __future__ import annotations

import random
import string
from dataclasses import dataclass

INTS = tuple(range(2, 10))
"""Integer constants an operation may use."""
SMALL = (2, 3, 4, 5)
"""Constants for string repetition / slicing."""
LETTERS = tuple("aeinorst")
"""Letters an operation may count, test or append."""


@dataclass(frozen=True)
class Family:
    """How a task's input is read (prompt lead, solution read line) and random inputs for it."""

    name: str
    leads: tuple[str, ...]
    """Prompt openings; `{a}`/`{b}` are the variable names."""
    read: str
    """The solution's first line, e.g. `{a}, {b} = map(int, input().split())`."""
    var_sets: tuple[tuple[str, ...], ...]
    """Variable-name choices (one name per read variable)."""


@dataclass(frozen=True)
class Op:
    """One operation: the printed expression and the ways to say it."""

    name: str
    family: str
    expr: str
    """Python expression over `{a}`, `{b}` (variables) and `{c}` (the constant)."""
    phrasings: tuple[str, ...]
    consts: tuple = INTS


FAMILIES = {
    f.name: f
    for f in (
        Family(
            "two",
            ("Read two integers {a} and {b}.", "Given integers {a} and {b} on one line."),
            "{a}, {b} = map(int, input().split())",
            (("a", "b"), ("x", "y"), ("u", "v"), ("m", "n"), ("p", "q"), ("i", "j")),
        ),
        Family(
            "one",
            ("Read an integer {a}.", "Given an integer {a}."),
            "{a} = int(input())",
            (("n",), ("x",), ("k",), ("a",), ("t",), ("m",)),
        ),
        Family(
            "list",
            ("Read a list of integers {a}.", "Given integers {a} on one line."),
            "{a} = list(map(int, input().split()))",
            (("a",), ("xs",), ("nums",), ("v",), ("arr",), ("s",)),
        ),
        Family(
            "string",
            ("Read a string {a}.", "Given a string {a}."),
            "{a} = input()",
            (("s",), ("w",), ("t",), ("word",), ("x",), ("z",)),
        ),
    )
}


def _ops(family: str, rows: list[tuple]) -> list[Op]:
    return [Op(r[0], family, r[1], r[2], *(r[3:] or ())) for r in rows]


OPS: tuple[Op, ...] = tuple(
    _ops(
        "two",
        [
            (
                "add_c",
                "{a} + {b} + {c}",
                ("Print {a}+{b}+{c}.", "Print the sum of {a}, {b} and {c}."),
            ),
            ("sub_c", "{a} - {b} + {c}", ("Print {a}-{b}+{c}.", "Print {a} minus {b} plus {c}.")),
            (
                "mul_add",
                "{a} * {b} + {c}",
                ("Print {a}*{b}+{c}.", "Print the product of {a} and {b} plus {c}."),
            ),
            (
                "sum_mul",
                "({a} + {b}) * {c}",
                ("Print ({a}+{b})*{c}.", "Print the sum of {a} and {b} times {c}."),
            ),
            (
                "max_add",
                "max({a}, {b}) + {c}",
                ("Print max({a},{b})+{c}.", "Print the larger of {a} and {b} plus {c}."),
            ),
            (
                "min_mul",
                "min({a}, {b}) * {c}",
                ("Print min({a},{b})*{c}.", "Print the smaller of {a} and {b} times {c}."),
            ),
            ("lin", "{c} * {a} + {b}", ("Print {c}*{a}+{b}.", "Print {c} times {a} plus {b}.")),
            (
                "absdiff",
                "abs({a} - {b}) + {c}",
                ("Print |{a}-{b}|+{c}.", "Print the distance between {a} and {b} plus {c}."),
            ),
            (
                "sum_mod",
                "({a} + {b}) % {c}",
                ("Print ({a}+{b}) mod {c}.", "Print the remainder of {a}+{b} divided by {c}."),
            ),
            (
                "mul_sub",
                "{a} * {c} - {b}",
                ("Print {a}*{c}-{b}.", "Print {a} times {c} minus {b}."),
            ),
        ],
    )
    + _ops(
        "one",
        [
            ("add", "{a} + {c}", ("Print {a}+{c}.", "Print {a} plus {c}.")),
            ("mul", "{a} * {c}", ("Print {a}*{c}.", "Print {a} times {c}.")),
            ("sub", "{a} - {c}", ("Print {a}-{c}.", "Print {a} minus {c}.")),
            (
                "sq_add",
                "{a} * {a} + {c}",
                ("Print {a}*{a}+{c}.", "Print the square of {a} plus {c}."),
            ),
            (
                "mod",
                "{a} % {c}",
                ("Print {a} mod {c}.", "Print the remainder of {a} divided by {c}."),
            ),
            ("div", "{a} // {c}", ("Print {a}//{c}.", "Print {a} divided by {c}, rounded down.")),
            ("rsub", "{c} - {a}", ("Print {c}-{a}.", "Print {c} minus {a}.")),
            ("max", "max({a}, {c})", ("Print max({a},{c}).", "Print the larger of {a} and {c}.")),
            ("dbl_add", "2 * {a} + {c}", ("Print 2*{a}+{c}.", "Print twice {a} plus {c}.")),
        ],
    )
    + _ops(
        "list",
        [
            (
                "sum_mul",
                "sum({a}) * {c}",
                ("Print the sum times {c}.", "Print {c} times the sum of {a}."),
            ),
            (
                "sum_add",
                "sum({a}) + {c}",
                ("Print the sum plus {c}.", "Print the sum of {a} plus {c}."),
            ),
            (
                "max_add",
                "max({a}) + {c}",
                ("Print the largest number plus {c}.", "Print max({a})+{c}."),
            ),
            (
                "min_mul",
                "min({a}) * {c}",
                ("Print the smallest number times {c}.", "Print min({a})*{c}."),
            ),
            (
                "len_add",
                "len({a}) + {c}",
                ("Print how many numbers there are plus {c}.", "Print len({a})+{c}."),
            ),
            (
                "range_add",
                "max({a}) - min({a}) + {c}",
                ("Print the largest minus the smallest plus {c}.",),
            ),
            (
                "count",
                "{a}.count({c})",
                ("Print how many times {c} occurs in {a}.", "Count the {c}s in {a}."),
            ),
            ("gt", "sum(x > {c} for x in {a})", ("Print how many numbers are greater than {c}.",)),
            (
                "first_add",
                "{a}[0] + {c}",
                ("Print the first number plus {c}.", "Print {a}[0]+{c}."),
            ),
            (
                "last_mul",
                "{a}[-1] * {c}",
                ("Print the last number times {c}.", "Print {a}[-1]*{c}."),
            ),
        ],
    )
    + _ops(
        "string",
        [
            (
                "count",
                "{a}.count('{c}')",
                (
                    "Print how many times the letter {c} occurs in {a}.",
                    "Count the letter {c} in {a}.",
                ),
                LETTERS,
            ),
            (
                "len_add",
                "len({a}) + {c}",
                ("Print the length of {a} plus {c}.", "Print len({a})+{c}."),
            ),
            ("upper", "{a}.upper()", ("Print {a} in upper case.", "Print {a} in capitals."), ("",)),
            ("reverse", "{a}[::-1]", ("Print {a} reversed.", "Print {a} backwards."), ("",)),
            (
                "repeat",
                "{a} * {c}",
                ("Print {a} repeated {c} times.", "Print {c} copies of {a}."),
                SMALL,
            ),
            (
                "append",
                "{a} + '{c}'",
                ("Print {a} followed by the letter {c}.", "Print {a} with {c} added at the end."),
                LETTERS,
            ),
            (
                "prefix",
                "{a}[:{c}]",
                ("Print the first {c} letters of {a}.", "Print {a}[:{c}]."),
                SMALL,
            ),
            ("has", "'{c}' in {a}", ("Print True if {c} occurs in {a}, else False.",), LETTERS),
            (
                "drop",
                "{a}.replace('{c}', '')",
                ("Print {a} without the letter {c}.", "Print {a} with every {c} removed."),
                LETTERS,
            ),
        ],
    )
)


def random_input(family: str, rng: random.Random, const) -> str:
    """One random stdin for a family; string inputs favour the task's letter so counts vary."""
    if family == "two":
        return f"{rng.randint(0, 99)} {rng.randint(0, 99)}\n"
    if family == "one":
        return f"{rng.randint(0, 99)}\n"
    if family == "list":
        return " ".join(str(rng.randint(0, 12)) for _ in range(rng.randint(1, 6))) + "\n"
    letters = [
        const
        if (isinstance(const, str) and const and rng.random() < 0.25)
        else rng.choice(string.ascii_lowercase)
        for _ in range(rng.randint(1, 8))
    ]
    return "".join(letters) + "\n"
