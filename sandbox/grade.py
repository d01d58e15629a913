"""Judge one solution on one fork server: send the program and inputs, compare in the host.

The expected outputs never leave this process: the fork server (and so every forked program)
only ever receives the program, the prelude and the test inputs.
"""

from __future__ import annotations

import json
import signal
import time
from dataclasses import dataclass, field

from microcoder.data.problem import Problem
from microcoder.sandbox.checker import run_checker
from microcoder.sandbox.compare import canonical_json, compare_output, compare_value
from microcoder.sandbox.config import ExecutorConfig
from microcoder.sandbox.frames import MAX_PAYLOAD, NEXT, STOP
from microcoder.sandbox.languages import COMPILED, program_request
from microcoder.sandbox.verdict import Verdict, score
from microcoder.sandbox.worker import WorkerCrash, WorkerProcess

OUT_OF_MEMORY = ("std::bad_alloc", "java.lang.OutOfMemoryError")
"""What a C++ or a Java program that ran out of memory writes on stderr (the tail the fork
server returns: a Java stack trace follows the error's name): MLE. Python: a MemoryError on the
last line."""
REPLY_SLACK_S = 10.0
"""Extra seconds the host waits for a fork server beyond the program's own wall limit."""
PROFILE: list | None = None
"""Dev-only (`microcoder bench judge --profile`): when a list, stdin runs ask their fork server
for stage stamps, and one dict per run (server and host stamps, CLOCK_MONOTONIC) is appended."""


@dataclass
class Outcome:
    """Running tally while a solution's tests come in."""

    total: int
    passed: int = 0
    time_s: float = 0.0
    cpu_s: float = 0.0
    verdict: str = "AC"
    first_failed: int | None = None
    message: str = ""
    stdout: str = ""
    stderr: str = ""
    extra: dict = field(default_factory=dict)

    def fail(self, index: int, verdict: str, message: str) -> None:
        if self.first_failed is None:
            self.first_failed = index
            self.verdict = verdict
            self.message = message[:500]


def output_cap(expected_bytes: int, cfg: ExecutorConfig) -> int:
    """Bytes a program may write where the expected output has `expected_bytes` (the formula is
    documented at ExecutorConfig.output_limit_kb); a frame carries at most MAX_PAYLOAD bytes."""
    cap = (cfg.output_limit_kb << 10) + int(cfg.output_limit_factor * expected_bytes)
    return min(cap, MAX_PAYLOAD - 1)


def _expected_bytes(problem: Problem) -> list[int]:
    cached = problem.meta.get("_expected_bytes")
    if cached is None or len(cached) != len(problem.tests):
        cached = [len(t.get("output", "").encode()) for t in problem.tests]
        problem.meta["_expected_bytes"] = cached
    return cached


def limits_for(problem: Problem, cfg: ExecutorConfig) -> dict:
    time_s = problem.time_limit_s or cfg.time_limit_s
    return {
        "time_s": time_s,
        "wall_s": time_s * cfg.wall_factor + 0.5,
        "cpu_s": time_s + 1,
        "memory_mb": problem.memory_mb or cfg.memory_mb,
        "output_bytes": cfg.output_limit_kb << 10,  # prints of functional / assert programs
        "result_bytes": output_cap(sum(_expected_bytes(problem)), cfg),  # their return values
        "open_files": cfg.open_files,
        "max_processes": cfg.max_processes if cfg.isolation == "bwrap" else 0,
    }


def compile_limits(cfg: ExecutorConfig) -> dict:
    """The limits a C++ or Java compiler runs under (ExecutorConfig.compile_time_s and
    compile_memory_mb; its output is bounded by the private /tmp's size)."""
    return {
        "time_s": cfg.compile_time_s,
        "wall_s": cfg.compile_time_s * cfg.wall_factor + 0.5,
        "cpu_s": cfg.compile_time_s + 1,
        "memory_mb": cfg.compile_memory_mb,
        "output_bytes": cfg.tmpfs_mb << 20,
        "open_files": max(cfg.open_files, 256),
        "max_processes": cfg.max_processes if cfg.isolation == "bwrap" else 0,
    }


def _overflow(done: dict, cap: int) -> str:
    """What went over the output cap in this run ("" when nothing did)."""
    if done.get("reason") == "ole":
        return "its return values"
    if done["out_bytes"] > cap:
        return "stdout"
    if done.get("err_bytes", 0) > cap:
        return "stderr"
    return "a file" if done["exit"] == -signal.SIGXFSZ else ""


def _crash_kind(done: dict, limits: dict, cap: int) -> tuple[str, str]:
    """Verdict for a run that did not end normally or wrote more than `cap` bytes."""
    code = done["exit"]
    tail = done.get("err_tail", "")
    if what := _overflow(done, cap):
        cap = limits["result_bytes"] if done.get("reason") == "ole" else cap
        return "OLE", (
            f"output limit exceeded: {what} over {cap:,} bytes (if a correct program needs "
            "more, raise executor.output_limit_kb or executor.output_limit_factor)"
        )
    if done.get("reason") == "tle" or code == -signal.SIGXCPU:
        return "TLE", f"time limit {limits['time_s']:g} s exceeded"
    last = tail.strip().splitlines()[-1] if tail.strip() else ""
    if (
        "MemoryError" in last
        or any(sign in tail for sign in OUT_OF_MEMORY)
        or done.get("maxrss_kb", 0) >= limits["memory_mb"] * 1024 * 0.95
    ):
        return "MLE", f"memory limit {limits['memory_mb']} MiB exceeded"
    if code < 0:
        return "RE", f"killed by signal {-code} ({signal.Signals(-code).name})"
    return "RE", f"exit status {code}: {last[:200]}"


def _excerpts(out: Outcome, done: dict) -> None:
    out.stdout = done.get("out_head", "")[:300]
    out.stderr = done.get("err_tail", "")[-300:]


def _run_stdin(worker: WorkerProcess, request: dict, problem: Problem, out: Outcome, early: bool):
    """One request runs the tests; with early exit the server waits after each run for `next`
    (this one passed) or `stop`, so a failing solution costs no run beyond its first failure."""
    limits = request["limits"]
    tests = problem.tests
    caps = request["out_caps"]
    if not tests:
        return
    inputs = [t["input"].encode() for t in tests]
    request.update(op="stdin", sizes=[len(b) for b in inputs], lockstep=early)
    profile = PROFILE
    if profile is not None:
        request["profile"] = True
    sent = time.monotonic()
    worker.send(request, b"".join(inputs))
    build = request.get("compile_limits", {}).get("wall_s", 0.0)  # C++/Java: compiled first
    for expected_i in range(len(tests)):
        done, stdout = worker.recv(limits["wall_s"] + REPLY_SLACK_S + build)
        build = 0.0
        got = time.monotonic()
        if done["op"] == "ce":
            out.fail(0, "CE", done["msg"])
            return
        if done["op"] != "done" or done["i"] != expected_i:
            raise WorkerCrash(f"unexpected frame {done['op']!r} while running tests")
        i = expected_i
        test = tests[expected_i]
        out.time_s += done["wall"]
        out.cpu_s += done["cpu"]
        _excerpts(out, done)
        if done["exit"] != 0 or done.get("reason") or done["out_bytes"] > caps[i]:
            out.fail(i, *_crash_kind(done, limits, caps[i]))
        else:
            actual = stdout.decode("utf-8", "replace")
            if problem.compare == "checker":
                ok, why = run_checker(problem.checker, test["input"], test["output"], actual)
            else:
                ok, why = compare_output(test["output"], actual, problem.compare)
            if ok:
                out.passed += 1
            else:
                out.fail(i, "WA", why)
        if profile is not None and "prof" in done:
            stamps = dict(done["prof"], host_sent=sent, host_got=got, compared=time.monotonic())
            profile.append(dict(stamps, cpu=done["cpu"], first=i == 0))
        if early and i + 1 < len(tests):
            if out.first_failed is not None:
                worker.send_encoded(STOP)
                return
            sent = time.monotonic()
            worker.send_encoded(NEXT)


def _expected_for(problem: Problem) -> list[str]:
    cached = problem.meta.get("_canonical_outputs")
    if cached is None or len(cached) != len(problem.tests):
        cached = [canonical_json(t["output"]) for t in problem.tests]
        problem.meta["_canonical_outputs"] = cached
    return cached


def _judge_line(line: bytes, kind: str, expected: list[str], out: Outcome) -> None:
    parts = line.decode("utf-8", "replace").split("\t", 4)
    if len(parts) != 5:
        out.fail(out.passed, "RE", "the program wrote garbage on the judge's result channel")
        return
    index = int(parts[0])
    tag = parts[1]
    cpu = parts[2]
    wall = parts[3]
    text = parts[4]
    out.cpu_s += float(cpu)
    out.time_s += float(wall)
    if index < 0 or index >= len(expected):
        out.fail(max(index, 0), "RE", f"loading the solution failed: {json.loads(text)}")
        return
    if tag == "OK":
        ok, why = compare_value(expected[index], text) if kind == "functional" else (True, "")
        if ok:
            out.passed += 1
        else:
            out.fail(index, "WA", why)
    elif tag in ("FAIL", "BAD"):
        out.fail(index, "WA", json.loads(text))
    else:
        message = json.loads(text)
        out.fail(index, "MLE" if message.startswith("MemoryError") else "RE", message)


def _run_tests(worker: WorkerProcess, request: dict, problem: Problem, out: Outcome, early: bool):
    key = "input" if problem.kind == "functional" else "code"
    expected = _expected_for(problem) if problem.kind == "functional" else []
    expected = expected or [""] * len(problem.tests)
    # one process runs every test: RLIMIT_CPU (a backstop; the server times each test) covers all
    limits = request["limits"]
    limits["cpu_s"] = limits["time_s"] * (len(problem.tests) + 1) + 1
    request.update(op="tests", tests=[t[key] for t in problem.tests], early_exit=early)
    worker.send(request)
    stopped = False
    seen = 0
    while True:
        header, payload = worker.recv(limits["wall_s"] + REPLY_SLACK_S)
        if header["op"] == "ce":
            out.fail(0, "CE", header["msg"])
            return
        if header["op"] == "results":
            for line in payload.splitlines():
                seen += 1
                if out.first_failed is None or not early:
                    _judge_line(line, problem.kind, expected, out)
            if out.first_failed is not None and early and not stopped:
                worker.send({"op": "stop"})
                stopped = True
            continue
        if header["op"] != "done":
            raise WorkerCrash(f"unexpected frame {header['op']!r} while running tests")
        _excerpts(out, header)
        reported = out.passed + (0 if out.first_failed is None else 1)
        over = _overflow(header, limits["output_bytes"])
        if out.first_failed is None and (over or reported < len(problem.tests)):
            index = min(seen, len(problem.tests) - 1)
            if over:  # the test it was on when it overflowed fails, even if it was reported
                out.passed = min(out.passed, index)
            if over or header.get("reason") == "tle" or header["exit"] != 0:
                out.fail(index, *_crash_kind(header, limits, limits["output_bytes"]))
            else:
                out.fail(index, "RE", "the program exited before all tests ran")
        return


def judge_solution(
    worker: WorkerProcess, problem: Problem, code: str, cfg: ExecutorConfig
) -> Verdict:
    """Judge `code` on `problem` with `worker`; WorkerCrash propagates (the pool retries)."""
    total = len(problem.tests)
    early = cfg.early_exit and not cfg.partial_credit
    out = Outcome(total=total)
    if len(code.encode()) > cfg.max_code_kb << 10:
        out.fail(0, "CE", f"source longer than {cfg.max_code_kb} KiB")
    else:
        request = {
            "kind": problem.kind,
            "code": code,
            "prelude": problem.prelude,
            "fn_name": problem.fn_name,
            "limits": limits_for(problem, cfg),
        }
        if problem.language in COMPILED:
            request.update(
                program_request(problem.language, code, request["limits"], compile_limits(cfg))
            )
        if problem.kind == "stdin":
            request["out_caps"] = [output_cap(n, cfg) for n in _expected_bytes(problem)]
            _run_stdin(worker, request, problem, out, early)
        else:
            _run_tests(worker, request, problem, out, early)
    return Verdict(
        verdict=out.verdict,
        passed=out.passed,
        total=total,
        time_s=round(out.time_s, 6),
        cpu_s=round(out.cpu_s, 6),
        first_failed=out.first_failed,
        message=out.message,
        stdout=out.stdout,
        stderr=out.stderr,
        reward=score(out.verdict, out.passed, total, cfg.partial_credit),
        problem_id=problem.id,
    )
