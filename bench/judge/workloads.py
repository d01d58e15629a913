"""Workloads of `microcoder bench judge`: problems + solutions, as Problem records and code.

- overhead: a generated family of short stdin tasks (10 templates), 8 programs per problem
  (3 correct in different I/O styles, 5 wrong in typical ways), 3 small tests each.
- compute: LeetCodeDataset's functional problems with their reference solutions.
- humaneval: HumanEval's canonical solutions (assert tests).
- tricky: correct-but-tricky and wrong-but-close stdin programs with the truth known.
- overhead in C++ (`--language cpp`): the overhead family's tasks written in C++, 4 programs per
  problem (2 correct in different I/O styles, 2 wrong), 3 small tests each; every program is
  compiled once (`g++ -O2 -std=c++17`), which dominates its cost.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from microcoder.data.formats.loaders import load_problems
from microcoder.data.problem import Problem


@dataclass
class Item:
    """One solution to judge, with the truth when it is known by construction."""

    problem: Problem
    code: str
    solution_id: str
    truth: bool | None = None


TEMPLATES = [
    ("sum", "str(sum(a))"),
    ("max", "str(max(a))"),
    ("reverse", "' '.join(map(str, a[::-1]))"),
    ("evens", "str(sum(1 for x in a if x % 2 == 0))"),
    ("sorted", "'YES' if all(a[i] <= a[i + 1] for i in range(len(a) - 1)) else 'NO'"),
    ("digits", "str(sum(int(c) for x in a for c in str(abs(x))))"),
    ("prod", "str(__import__('math').prod(a) % 1000000007)"),
    ("distinct", "str(len(set(a)))"),
    ("prefix", "' '.join(map(str, __import__('itertools').accumulate(a)))"),
    ("minmax", "f'{min(a)} {max(a)}'"),
]
READ_INPUT = "n = int(input())\na = list(map(int, input().split()))\n"
READ_STDIN = (
    "import sys\nd = sys.stdin.read().split()\nn = int(d[0])\na = list(map(int, d[1:1 + n]))\n"
)
READ_BUFFER = "import sys\nd = sys.stdin.buffer.read().split()\nn = int(d[0])\na = [int(x) for x in d[1:1 + n]]\n"


def _programs(expr: str, other: str) -> list[tuple[str, object]]:
    """(code, what it prints for list `a`: a function, or None when it can never be right)."""

    def ev(e, a):
        return eval(e, {"a": a})  # noqa: S307 - our own templates

    return [
        (READ_INPUT + f"print({expr})\n", lambda a: ev(expr, a)),
        (READ_STDIN + f"print({expr})\n", lambda a: ev(expr, a)),
        (READ_BUFFER + f"print({expr})\n", lambda a: ev(expr, a)),
        (
            "n = int(input())\na = list(map(int, input().split()))[:-1]\n" + f"print({expr})\n",
            lambda a: ev(expr, a[:-1]),
        ),
        (READ_INPUT + f"print('n =', n)\nprint({expr})\n", None),
        (
            READ_INPUT + f"print({expr} if n < 6 else a[n])\n",
            lambda a: ev(expr, a) if len(a) < 6 else None,
        ),
        (
            READ_INPUT + f"print({expr} if n < 6 else 0)\n",
            lambda a: ev(expr, a) if len(a) < 6 else "0",
        ),
        (READ_INPUT + f"print({other})\n", lambda a: ev(other, a)),
    ]


def overhead_workload(n_solutions: int = 1000, seed: int = 0, n_tests: int = 3) -> list[Item]:
    """~n_solutions stdin programs, 8 per problem (3 correct by construction, 5 mutants whose
    truth is computed from what they print on each test), `n_tests` tests per problem (3, the
    bench's default, draws the same workload as before the option existed; more tests add
    arrays of 20-30 numbers)."""
    if n_tests < 1:
        raise ValueError(f"n_tests must be at least 1, got {n_tests}")
    rng = random.Random(seed)
    items: list[Item] = []
    for k in range((n_solutions + 7) // 8):
        name, expr = TEMPLATES[k % len(TEMPLATES)]
        other = TEMPLATES[(k + 1) % len(TEMPLATES)][1]
        tests = []
        data = []
        sizes = [rng.randint(3, 5), rng.randint(8, 12), rng.randint(15, 20)]
        sizes = sizes[:n_tests] + [rng.randint(20, 30) for _ in range(n_tests - 3)]
        for t, size in enumerate(sizes):
            a = [rng.randint(-100, 1000) for _ in range(size)]
            if name == "sorted" and t != 1:
                a.sort()
            data.append(a)
            tests.append(
                {
                    "input": f"{size}\n{' '.join(map(str, a))}\n",
                    "output": eval(expr, {"a": a}) + "\n",
                }
            )  # noqa: S307
        problem = Problem(
            id=f"{name}-{k}", kind="stdin", prompt="", tests=tests, source="generated"
        )
        for j, (code, prints) in enumerate(_programs(expr, other)):
            ok = prints is not None and all(
                prints(a) is not None and prints(a) + "\n" == t["output"]
                for a, t in zip(data, tests, strict=True)
            )
            items.append(Item(problem, code, f"{problem.id}/{j}", ok))
    return items[:n_solutions]


def compute_workload(path: str, n_problems: int) -> list[Item]:
    """LeetCodeDataset functional problems with their reference solution (truth unknown)."""

    problems = [p for p in load_problems(path) if p.kind == "functional"][:n_problems]
    return [Item(p, p.meta["solution"], f"{p.id}/ref") for p in problems]


def humaneval_workload(path: str) -> list[Item]:
    return [Item(p, p.meta["solution"], f"{p.id}/canonical") for p in load_problems(path)]


TRICKY_TESTS = [
    {"input": "3\n1\n2\n3\n", "output": "6\n"},
    {"input": "2\n10\n-4\n", "output": "6\n"},
]
SUM_TAIL = "print(sum(int(input()) for _ in range(n)))"
TRICKY = [
    (
        "stdin-buffer",
        "import sys\nd = sys.stdin.buffer.read().split()\nprint(sum(map(int, d[1:])))",
        True,
    ),
    (
        "os-read",
        "import os\nd = b''\nwhile c := os.read(0, 3):\n    d += c\nprint(sum(map(int, d.split()[1:])))",
        True,
    ),
    (
        "os-write",
        "import os\nn = int(input())\nos.write(1, str(sum(int(input()) for _ in range(n))).encode() + b'\\n')",
        True,
    ),
    (
        "for-line-in-stdin",
        "import sys\nit = iter(sys.stdin)\nnext(it)\nprint(sum(int(l) for l in it))",
        True,
    ),
    (
        "input-then-read",
        "import sys\nn = int(input())\nprint(sum(map(int, sys.stdin.read().split())))",
        True,
    ),
    ("exit-after-print", "import sys\nn = int(input())\n" + SUM_TAIL + "\nsys.exit()", True),
    ("quit-after-print", "n = int(input())\n" + SUM_TAIL + "\nquit()", True),
    (
        "global",
        "t = 0\ndef add(x):\n    global t\n    t += x\nfor _ in range(int(input())):\n    add(int(input()))\nprint(t)",
        True,
    ),
    (
        "main-guard",
        "def main():\n    n = int(input())\n    "
        + SUM_TAIL
        + "\nif __name__ == '__main__':\n    main()",
        True,
    ),
    (  # an integer answer printed as a float: WA on Codeforces (testlib), AC in LiveCodeBench
        "float-for-integer",
        "n = int(input())\nprint(f'{float(sum(int(input()) for _ in range(n))):.6f}')",
        False,
    ),
    ("extra-debug-line", "n = int(input())\nprint('debug')\n" + SUM_TAIL, False),
    ("off-by-one", "n = int(input())\nprint(sum(int(input()) for _ in range(n)) + 1)", False),
    ("float-1e-3", "n = int(input())\nprint(sum(int(input()) for _ in range(n)) + 0.001)", False),
    ("reordered", "n = int(input())\nprint(0)\n" + SUM_TAIL, False),
]


def tricky_workload() -> list[Item]:
    problem = Problem(id="tricky-sum", kind="stdin", prompt="", tests=TRICKY_TESTS)
    return [Item(problem, code, name, ok) for name, code, ok in TRICKY]


CPP_TEMPLATES = [
    ("sum", "long long r = 0; for (auto x : a) r += x; cout << r;"),
    ("max", "cout << *max_element(a.begin(), a.end());"),
    (
        "minmax",
        "cout << *min_element(a.begin(), a.end()) << ' ' << *max_element(a.begin(), a.end());",
    ),
    ("distinct", "cout << set<long long>(a.begin(), a.end()).size();"),
    ("evens", "cout << count_if(a.begin(), a.end(), [](long long x) { return x % 2 == 0; });"),
]
"""(name, C++ statements printing the answer for `vector<long long> a`), the Python TEMPLATES'
tasks of the same names."""
CPP_HEAD = "#include <bits/stdc++.h>\nusing namespace std;\nint main() {\n"
CPP_READS = (
    "int n; cin >> n; vector<long long> a(n); for (auto &x : a) cin >> x;\n",
    'int n; scanf("%d", &n); vector<long long> a(n); for (auto &x : a) scanf("%lld", &x);\n',
)


def cpp_overhead_workload(n_solutions: int = 200, seed: int = 0) -> list[Item]:
    """~n_solutions C++ stdin programs, 4 per problem: 2 correct (cin, scanf), 2 mutants (drops
    the last number: right only where that does not change the answer, computed; prints n
    first: never right), truth known by construction."""
    rng = random.Random(seed)
    python = dict(TEMPLATES)
    items: list[Item] = []
    for k in range((n_solutions + 3) // 4):
        name, body = CPP_TEMPLATES[k % len(CPP_TEMPLATES)]
        tests = []
        cut_right = True  # whether the program that drops the last number is right anyway
        for size in (rng.randint(3, 5), rng.randint(8, 12), rng.randint(15, 20)):
            a = [rng.randint(-100, 1000) for _ in range(size)]
            out = eval(python[name], {"a": a}) + "\n"  # noqa: S307 - our own templates
            cut_right &= eval(python[name], {"a": a[:-1]}) + "\n" == out  # noqa: S307
            tests.append({"input": f"{size}\n{' '.join(map(str, a))}\n", "output": out})
        problem = Problem(
            id=f"cpp-{name}-{k}", kind="stdin", prompt="", tests=tests, language="cpp"
        )
        programs = [
            (CPP_HEAD + CPP_READS[0] + body + " cout << endl;\n}\n", True),
            (CPP_HEAD + CPP_READS[1] + body + ' puts("");\n}\n', True),
            (CPP_HEAD + CPP_READS[0] + "a.pop_back();\n" + body + " cout << endl;\n}\n", cut_right),
            (CPP_HEAD + CPP_READS[0] + "cout << n << endl;\n" + body + "\n}\n", False),
        ]
        for j, (code, ok) in enumerate(programs):
            items.append(Item(problem, code, f"{problem.id}/{j}", ok))
    return items[:n_solutions]
