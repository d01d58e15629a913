"""Correct-but-tricky programs get AC; wrong-but-close ones do not (through the real sandbox)."""

from __future__ import annotations

import pytest

from microcoder.data.problem import validate_problem


def stdin_problem(tests, pid="p"):
    rows = [{"input": i, "output": o} for i, o in tests]
    return validate_problem({"id": pid, "kind": "stdin", "tests": rows})


LINES = stdin_problem([("3\n1\n2\n3\n", "6\n"), ("2\n10\n-4\n", "6\n")], pid="lines")

CORRECT = {
    "sys.stdin.buffer": "import sys\ndata = sys.stdin.buffer.read().split()\nprint(sum(map(int, data[1:])))",
    "os.read(0)": "import os\nd = b''\nwhile c := os.read(0, 3):\n    d += c\nprint(sum(map(int, d.split()[1:])))",
    "os.write(1)": "import os, sys\nn = int(input())\nos.write(1, str(sum(int(input()) for _ in range(n))).encode() + b'\\n')",
    "for line in sys.stdin": "import sys\nit = iter(sys.stdin)\nnext(it)\nprint(sum(int(l) for l in it))",
    "input() then sys.stdin.read()": "import sys\nn = int(input())\nprint(sum(map(int, sys.stdin.read().split())))",
    "sys.exit() after printing": "import sys\nn = int(input())\nprint(sum(int(input()) for _ in range(n)))\nsys.exit()",
    "quit() after printing": "n = int(input())\nprint(sum(int(input()) for _ in range(n)))\nquit()",
    "sys.exit(0) inside a function": "import sys\ndef main():\n    n = int(input())\n    print(sum(int(input()) for _ in range(n)))\n    sys.exit(0)\nmain()",
    "module-level global": "total = 0\ndef add(x):\n    global total\n    total += x\nfor _ in range(int(input())):\n    add(int(input()))\nprint(total)",
    "if __name__ == '__main__'": "def main():\n    n = int(input())\n    print(sum(int(input()) for _ in range(n)))\nif __name__ == '__main__':\n    main()",
    "sys.stdout.write without newline": "import sys\nn = int(input())\nsys.stdout.write(str(sum(int(input()) for _ in range(n))))",
    "readline with trailing newline": "import sys\nn = int(sys.stdin.readline())\nprint(sum(int(sys.stdin.readline()) for _ in range(n)))",
    "threading main": "import threading\nr = []\ndef main():\n    n = int(input())\n    r.append(sum(int(input()) for _ in range(n)))\nt = threading.Thread(target=main)\nt.start(); t.join()\nprint(r[0])",
    "print to stderr too": "import sys\nn = int(input())\nprint('debug', file=sys.stderr)\nprint(sum(int(input()) for _ in range(n)))",
}
WRONG = {
    "extra debug line": "n = int(input())\nprint('debug')\nprint(sum(int(input()) for _ in range(n)))",
    "off by one": "n = int(input())\nprint(sum(int(input()) for _ in range(n)) + 1)",
    "nothing printed": "pass",
    "exit status 1 after correct output": "import sys\nn = int(input())\nprint(sum(int(input()) for _ in range(n)))\nsys.exit(1)",
}


@pytest.mark.parametrize("name", list(CORRECT))
def test_correct_tricky_program_is_accepted(pool, name):
    v = pool.judge(LINES, CORRECT[name])
    assert v.verdict == "AC", v


@pytest.mark.parametrize("name", list(WRONG))
def test_wrong_program_is_not_accepted(pool, name):
    assert pool.judge(LINES, WRONG[name]).verdict != "AC"


FLOAT = stdin_problem([("1 3\n", "0.333333333333\n")], pid="div")
BIG = stdin_problem([("2 100\n", "1267650600228229401496703205376\n")], pid="pow")
YESNO = stdin_problem([("4\n", "YES\n"), ("3\n", "NO\n")], pid="even")


@pytest.mark.parametrize(
    "problem,code,ok",
    [
        (FLOAT, "a, b = map(int, input().split())\nprint(f'{a / b:.9f}')", True),
        (FLOAT, "a, b = map(int, input().split())\nprint(a / b)", True),
        (FLOAT, "a, b = map(int, input().split())\nprint(f'{a / b:.3f}')", False),
        (BIG, "a, b = map(int, input().split())\nprint(a ** b)", True),
        (BIG, "a, b = map(int, input().split())\nprint(a ** b - 1)", False),
        (BIG, "a, b = map(int, input().split())\nprint(float(a ** b))", False),
        (YESNO, "print('YES' if int(input()) % 2 == 0 else 'NO')", True),
        (YESNO, "print('yes' if int(input()) % 2 == 0 else 'no')", False),
        (YESNO, "print('NO' if int(input()) % 2 == 0 else 'YES')", False),
    ],
    ids=[
        "float .9f",
        "float repr",
        "float 1e-3 off",
        "bigint",
        "bigint-1",
        "bigint as float",
        "YES/NO",
        "yes/no undeclared",
        "swapped",
    ],
)
def test_float_bigint_and_yesno_outputs(pool, problem, code, ok):
    assert (pool.judge(problem, code).verdict == "AC") is ok


FUNCTIONAL = validate_problem(
    {
        "id": "sorted",
        "kind": "functional",
        "fn_name": "sortDesc",
        "tests": [{"input": "[3, 1, 2]", "output": "[3, 2, 1]"}, {"input": "[]", "output": "[]"}],
    }
)


@pytest.mark.parametrize(
    "code,verdict",
    [
        (
            "class Solution:\n    def sortDesc(self, a: List[int]) -> List[int]:\n        return sorted(a, reverse=True)",
            "AC",
        ),
        (
            "class Solution:\n    def sortDesc(self, a):\n        return tuple(sorted(a, reverse=True))",
            "AC",
        ),
        ("def sortDesc(a):\n    print('noise')\n    return sorted(a)[::-1]", "AC"),
        (
            "class Solution:\n    def __init__(self):\n        self.calls = 0\n    def sortDesc(self, a):\n        self.calls += 1\n        assert self.calls == 1\n        return sorted(a, reverse=True)",
            "AC",
        ),
        ("class Solution:\n    def sortDesc(self, a):\n        return sorted(a)", "WA"),
        ("class Solution:\n    def sortDesc(self, a):\n        return a[10]", "RE"),
        ("class Solution:\n    def other(self, a):\n        return a", "RE"),
        ("class Solution:\n    def sortDesc(self, a):\n        return set(a)", "WA"),
    ],
    ids=[
        "List annotation without import",
        "tuple equals list",
        "printing is ignored",
        "fresh Solution per test",
        "wrong order",
        "exception",
        "missing method",
        "set",
    ],
)
def test_functional_kind(pool, code, verdict):
    assert pool.judge(FUNCTIONAL, code).verdict == verdict


def test_assert_kind_runs_tests_in_the_solution_namespace(pool):
    problem = validate_problem(
        {
            "id": "sq",
            "kind": "assert",
            "prelude": "K = 2",
            "tests": [{"code": "assert sq(3) == 9"}, {"code": "assert sq(K) == 4"}],
        }
    )
    assert pool.judge(problem, "def sq(x):\n    return x * x").verdict == "AC"
    wrong = pool.judge(problem, "def sq(x):\n    return x + x")
    assert (wrong.verdict, wrong.first_failed) == ("WA", 0)


def test_the_whole_standard_library_is_importable(pool):
    code = "import hashlib, json, decimal, fractions, sqlite3, ssl, threading\nprint('ok')"
    problem = stdin_problem([("", "ok\n")], pid="stdlib")
    v = pool.judge(problem, code)
    assert v.verdict == "AC", v.stderr


def test_functional_time_limit_is_per_test_not_per_solution(pool):
    busy = "def spin(x):\n    import time\n    t = time.process_time()\n    while time.process_time() - t < 0.3:\n        pass\n    return x"
    tests = [{"input": str(i), "output": str(i)} for i in range(8)]  # 2.4 s in all, 0.3 s each
    problem = validate_problem(
        {"id": "spin", "kind": "functional", "fn_name": "spin", "time_limit_s": 0.5, "tests": tests}
    )
    assert pool.judge(problem, busy).verdict == "AC"
