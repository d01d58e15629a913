"""The output cap, through the real sandbox: derived from the expected output, exceeding it is OLE.

A pool with a small floor makes the boundaries cheap to hit; the cap of a test is computed here
by hand from the documented formula (floor KiB + factor × expected bytes), so a change of the
formula fails these tests.
"""

from __future__ import annotations

import pytest

from microcoder.data.problem import validate_problem
from microcoder.sandbox import ExecutorConfig, JudgePool
from microcoder.sandbox.grade import limits_for
from microcoder.sandbox.worker import WorkerProcess

FLOOR_KB, FACTOR = 16, 2.0


def cap_of(expected: str) -> int:
    return (FLOOR_KB << 10) + int(FACTOR * len(expected.encode()))


@pytest.fixture(scope="module")
def pool():
    p = JudgePool(workers=2, time_limit_s=2.0, output_limit_kb=FLOOR_KB, output_limit_factor=FACTOR)
    yield p
    p.close()


def stdin_problem(expected: str, time_limit_s: float = 2.0):
    test = {"input": "", "output": expected}
    return validate_problem(
        {"id": "out", "kind": "stdin", "time_limit_s": time_limit_s, "tests": [test]}
    )


ONE_OUT = "1\n"
ONE = stdin_problem(ONE_OUT)


def padded(n: int) -> str:
    """A program that prints the answer `1` padded with trailing blanks to exactly n bytes."""
    return f"import sys\nsys.stdout.write('1' + ' ' * {n - 2} + '\\n')"


def test_output_exactly_at_the_cap_is_accepted(pool):
    v = pool.judge(ONE, padded(cap_of(ONE_OUT)))
    assert v.verdict == "AC", v


def test_one_byte_over_the_cap_is_ole(pool):
    v = pool.judge(ONE, padded(cap_of(ONE_OUT) + 1))
    assert v.verdict == "OLE" and "stdout" in v.message, v


def test_the_cap_grows_with_the_expected_output(pool):
    expected = "7\n" * 20_000  # 40 KB: over the 16 KiB floor
    code = "import sys\nsys.stdout.write('7\\n' * 20_000)"
    assert pool.judge(stdin_problem(expected), code).verdict == "AC"


def test_output_over_a_derived_cap_is_ole(pool):
    expected = "7\n" * 20_000
    code = f"import sys\nsys.stdout.write('7\\n' * 20_000 + ' ' * {cap_of(expected) - 40_000 + 1})"
    assert pool.judge(stdin_problem(expected), code).verdict == "OLE"


def test_printing_forever_is_ole_not_tle(pool):
    v = pool.judge(stdin_problem(ONE_OUT, time_limit_s=10.0), "while True:\n    print(1)")
    assert v.verdict == "OLE", v


def test_a_program_that_ignores_sigxfsz_is_still_ole(pool):
    code = (
        "import os, signal\nsignal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        "while True:\n    try:\n        os.write(1, b'1' * 4096)\n    except OSError:\n        break\n"
    )
    v = pool.judge(ONE, code)
    assert v.verdict == "OLE", v


def test_stderr_over_the_cap_is_ole(pool):
    code = f"import sys\nsys.stderr.write('d' * {2 * cap_of(ONE_OUT)})\nprint(1)"
    v = pool.judge(ONE, code)
    assert v.verdict == "OLE" and "stderr" in v.message, v


def test_an_over_cap_output_never_reaches_the_host():
    """The fork server stops the program at cap + 1 bytes and sends the host only the head."""
    cfg = ExecutorConfig(output_limit_kb=FLOOR_KB, output_limit_factor=FACTOR)
    worker = WorkerProcess(cfg, slot=0)
    worker.start()
    try:
        request = {"op": "stdin", "kind": "stdin", "code": "while True:\n    print('x' * 999)"}
        request.update(prelude="", fn_name="", limits=limits_for(ONE, cfg), sizes=[0])
        request.update(out_caps=[cap_of(ONE_OUT)], lockstep=False)
        worker.send(request)
        done, payload = worker.recv(30.0)
    finally:
        worker.close()
    assert (done["out_bytes"], payload) == (cap_of(ONE_OUT) + 1, b"")
    assert done["out_head"].startswith("x" * 100)


FN = "def f(n):\n"


def functional(outputs: list[str]):
    tests = [{"input": str(i), "output": o} for i, o in enumerate(outputs)]
    return validate_problem({"id": "fn", "kind": "functional", "fn_name": "f", "tests": tests})


def test_functional_prints_over_the_fixed_cap_are_ole(pool):
    code = FN + f"    print('x' * {FLOOR_KB << 10})\n    return n"
    assert pool.judge(functional(["0"]), code).verdict == "OLE"


def test_functional_large_return_value_within_its_cap_is_accepted(pool):
    big = "[" + ", ".join(["7"] * 20_000) + "]"  # 60 KB of JSON: over the floor
    assert pool.judge(functional([big]), FN + "    return [7] * 20_000").verdict == "AC"


def test_functional_return_value_over_its_cap_is_ole(pool):
    v = pool.judge(functional(["0"]), FN + f"    return 'x' * {2 * cap_of('0')}")
    assert v.verdict == "OLE" and "return values" in v.message, v


def test_endless_writes_on_the_result_channel_are_ole(pool):
    code = FN + "    import os\n    while True:\n        os.write(3, b'x' * 65536)"
    assert pool.judge(functional(["0"]), code).verdict == "OLE"
