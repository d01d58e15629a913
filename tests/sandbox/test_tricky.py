"""Correct-but-tricky programs get AC; wrong-but-close ones do not (through the real sandbox)."""

from __future__ import annotations

import pytest

from microcoder.data.problem import validate_problem

from .conftest import functional_problem, stdin_problem

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
    "annotations evaluated as in CPython": "def f(x: int) -> int:\n    return x\nassert f.__annotations__['x'] is int\nn = int(input())\nprint(sum(int(input()) for _ in range(n)))",
}
WRONG = {
    "extra debug line": "n = int(input())\nprint('debug')\nprint(sum(int(input()) for _ in range(n)))",
    "off by one": "n = int(input())\nprint(sum(int(input()) for _ in range(n)) + 1)",
    "nothing printed": "pass",
    "exit status 1 after correct output": "import sys\nn = int(input())\nprint(sum(int(input()) for _ in range(n)))\nsys.exit(1)",
    "annotation naming an undefined class": "def f(x: Undefined) -> int:\n    return x\nn = int(input())\nprint(sum(int(input()) for _ in range(n)))",
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


FUNCTIONAL = functional_problem(
    "sortDesc", [("[3, 1, 2]", "[3, 2, 1]"), ("[]", "[]")], pid="sorted"
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


def test_programs_and_tests_compile_without_the_judges_future_flags(pool):
    """The fork server's own `from __future__ import annotations` must not reach the programs
    (nor an assert problem's tests): an annotation naming nothing fails as it does in CPython."""
    problem = validate_problem(
        {
            "id": "ann",
            "kind": "assert",
            "tests": [{"code": "assert sq(3) == 9"}, {"code": "y: Undefined = 1\nassert y == 1"}],
        }
    )
    v = pool.judge(problem, "def sq(x):\n    return x * x")
    assert (v.verdict, v.first_failed) == ("RE", 1), v
    assert "NameError" in v.message


def test_the_whole_standard_library_is_importable(pool):
    code = "import hashlib, json, decimal, fractions, sqlite3, ssl, threading\nprint('ok')"
    problem = stdin_problem([("", "ok\n")], pid="stdlib")
    v = pool.judge(problem, code)
    assert v.verdict == "AC", v.stderr


def test_functional_time_limit_is_per_test_not_per_solution(pool):
    busy = "def spin(x):\n    import time\n    t = time.process_time()\n    while time.process_time() - t < 0.3:\n        pass\n    return x"
    tests = [(str(i), str(i)) for i in range(8)]  # 2.4 s in all, 0.3 s each
    problem = functional_problem("spin", tests, pid="spin", time_limit_s=0.5)
    assert pool.judge(problem, busy).verdict == "AC"


PRODUCT = stdin_problem([("1000000000 1000000000\n", "1000000000000000000\n")], pid="mul")
ZERO = stdin_problem([("5 5\n", "0\n")], pid="diff")
MEAN = stdin_problem([("5 2\n", "2.500000\n"), ("6 2\n", "3.000000\n")], pid="mean")
INTEGER_ANSWERS = {
    # (problem, program, accepted): integers compare as integers (testlib), floats with 1e-6
    "integer": (PRODUCT, "a, b = map(int, input().split())\nprint(a * b)", True),
    "1e+18 (a float)": (PRODUCT, "a, b = map(int, input().split())\nprint(float(a * b))", False),
    "true division": (PRODUCT, "a, b = map(int, input().split())\nprint(a * b / 1)", False),
    "with .0": (PRODUCT, "a, b = map(int, input().split())\nprint(f'{a * b:.1f}')", False),
    "leading +": (PRODUCT, "a, b = map(int, input().split())\nprint(f'{a * b:+d}')", False),
    "leading zeros": (PRODUCT, "a, b = map(int, input().split())\nprint(f'{a * b:021d}')", False),
    "-0": (ZERO, "a, b = map(int, input().split())\nprint(f'{(a - b) * -1.0:.0f}')", False),
    "0": (ZERO, "a, b = map(int, input().split())\nprint(a - b)", True),
    "float answer, other format": (MEAN, "a, b = map(int, input().split())\nprint(a / b)", True),
    "float answer as integer": (
        MEAN,
        "a, b = map(int, input().split())\nprint(a // b if a % b == 0 else a / b)",
        True,
    ),
    "float answer off by 1e-3": (
        MEAN,
        "a, b = map(int, input().split())\nprint(a / b + 1e-3)",
        False,
    ),
}


@pytest.mark.parametrize("name", list(INTEGER_ANSWERS))
def test_integer_answers_compare_as_integers(pool, name):
    problem, code, accepted = INTEGER_ANSWERS[name]
    v = pool.judge(problem, code)
    assert v.verdict == ("AC" if accepted else "WA"), v


PRODUCT_FN = functional_problem(
    "mul", [("1000000000\n1000000000", "1000000000000000000")], pid="mulfn"
)
HALF_FN = functional_problem("half", [("4", "2.0"), ("5", "2.5")], pid="halffn")


@pytest.mark.parametrize(
    "problem,code,verdict",
    [
        (PRODUCT_FN, "def mul(a, b):\n    return a * b", "AC"),
        (PRODUCT_FN, "def mul(a, b):\n    return float(a * b)", "WA"),
        (PRODUCT_FN, "def mul(a, b):\n    return a * b / 1", "WA"),
        (HALF_FN, "def half(a):\n    return a / 2", "AC"),
        (HALF_FN, "def half(a):\n    return a // 2 if a % 2 == 0 else a / 2", "AC"),
    ],
    ids=["int", "float for int", "true division for int", "float", "int for whole float"],
)
def test_functional_int_answers_need_an_int(pool, problem, code, verdict):
    assert pool.judge(problem, code).verdict == verdict


LINES_200K = "\n".join(str(i * 10007) for i in range(200_000)) + "\n"  # 1.9 MB
# A 5 s limit: the property is the output cap, not speed under load.
LARGE = stdin_problem([("200000\n", LINES_200K)], pid="large", time_limit_s=5.0)


@pytest.mark.parametrize(
    "code",
    [
        "for i in range(int(input())):\n    print(i * 10007)",
        "print('\\n'.join(str(i * 10007) for i in range(int(input()))))",
        "for i in range(int(input())):\n    print(i * 10007, end=' \\r\\n')",
    ],
    ids=["print per line", "one join", "trailing blank and CRLF"],
)
def test_correct_large_output_is_accepted_under_the_default_cap(pool, code):
    assert len(LINES_200K) > 1 << 20  # over the floor, so only the expected-size term admits it
    v = pool.judge(LARGE, code)
    assert v.verdict == "AC", v
