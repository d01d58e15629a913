"""The `http` judge backend (sandbox/remote/client.py) against the real judge service
(sandbox/remote/server.py, the real bwrap pool) on loopback: verdicts come back as the local
pool gives them, through the executor's scoring too; a token is enforced; a server that is down
is an error naming its URL at start and an SE naming it per program afterwards."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from microcoder.actors.scoring import score_groups
from microcoder.data.problem import validate_problem
from microcoder.protocol import Group, Response
from microcoder.sandbox import ExecutorConfig
from microcoder.sandbox.backends import make_judge
from microcoder.sandbox.remote.client import (
    TOKEN_ENV,
    HttpJudgePool,
    JudgeRequestRefused,
    JudgeServerUnavailable,
    UnknownProblemRef,
    call,
    canonical,
    judged_fields,
    problem_ref,
)
from microcoder.sandbox.remote.server import make_server

SUM = validate_problem(
    {"id": "sum", "kind": "stdin", "tests": [{"input": "1 2\n", "output": "3\n"}]}
)
AC = "a, b = map(int, input().split())\nprint(a + b)\n"
WA = "print(0)\n"


def serve(cfg: ExecutorConfig):
    server = make_server(cfg, "127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.fixture(scope="module")
def server():
    s = serve(ExecutorConfig(workers=2))
    yield s
    s.shutdown()
    s.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_ac_and_wa_come_back_through_the_http_backend(server):
    cfg = ExecutorConfig(backend="http", judge_url=server.url)
    with make_judge(cfg) as pool:
        assert isinstance(pool, HttpJudgePool) and pool.size == 2  # the server's workers
        pool.submit(SUM, AC, "ok", tag="a")
        pool.submit(SUM, WA, "bad", tag="b")
        got = {v.tag: (v.verdict, v.reward, v.passed, v.problem_id) for v in pool.as_completed()}
        assert got == {"a": ("AC", 1.0, 1, "sum"), "b": ("WA", 0.0, 0, "sum")}


def test_the_executors_scoring_runs_on_the_http_backend(server):
    texts = [f"```python\n{AC}```", f"```python\n{WA}```", ""]
    group = Group(4, "sum", responses=[Response(None, None, t) for t in texts])
    with HttpJudgePool(judge_url=server.url, workers=3) as pool:
        out = score_groups(pool.channel(), {"sum": SUM}, [group], "ex")
    assert out.failed == []
    assert [(s.verdict, s.reward) for s in out.scored[0].scores] == [
        ("AC", 1.0),
        ("WA", 0.0),
        ("WA", 0.0),
    ]


def test_bad_requests_are_refused_with_the_reason(server):
    bad = {"problem": {"id": "x", "tests": []}}
    ref = "0" * 64
    with pytest.raises(JudgeRequestRefused, match="HTTP 400.*field 'kind'"):
        call(server.url, f"/problems/{ref}", bad, 10, "PUT")
    fields = judged_fields(SUM)
    with pytest.raises(JudgeRequestRefused, match="HTTP 400.*not the SHA-256.*same microcoder"):
        call(server.url, f"/problems/{ref}", {"problem": fields}, 10, "PUT")
    with pytest.raises(UnknownProblemRef, match="HTTP 409.*unknown problem_ref"):
        call(server.url, "/judge", {"problem_ref": ref, "program": "1"}, 10)
    # a protocol-1 client (the whole problem with each program) is told what to do
    with pytest.raises(JudgeRequestRefused, match="HTTP 400.*protocol 2.*same microcoder"):
        call(server.url, "/judge", {"problem": fields, "program": AC}, 10)
    with pytest.raises(JudgeRequestRefused, match="HTTP 404"):
        call(server.url, "/nothing", None, 10)
    ok = call(
        server.url, f"/problems/{problem_ref(canonical(fields))}", {"problem": fields}, 10, "PUT"
    )
    got = call(server.url, "/judge", {"problem_ref": ok["ref"], "program": AC}, 10)
    assert got["verdict"] == "AC"


def test_a_server_that_is_down_is_named_at_start_and_per_program_after():
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(JudgeServerUnavailable, match=rf"judge server {re.escape(url)}/health"):
        make_judge(ExecutorConfig(backend="http", judge_url=url))
    with pytest.raises(ValueError, match="needs executor.judge_url"):
        make_judge(ExecutorConfig(backend="http"))
    gone = serve(ExecutorConfig(workers=1))
    pool = HttpJudgePool(judge_url=gone.url, http_timeout_s=5)
    gone.shutdown()  # the server goes away after the executor started
    gone.close()
    pool.submit(SUM, AC)
    (v,) = list(pool.as_completed())
    assert v.verdict == "SE" and v.reward is None and gone.url in v.message
    pool.close()


def test_with_a_token_the_server_refuses_requests_without_it(monkeypatch):
    monkeypatch.setenv(TOKEN_ENV, "s3cret")
    guarded = serve(ExecutorConfig(workers=1))
    try:
        assert HttpJudgePool(judge_url=guarded.url).judge(SUM, AC).verdict == "AC"
        monkeypatch.setenv(TOKEN_ENV, "wrong")
        with pytest.raises(JudgeServerUnavailable, match="HTTP 401"):
            HttpJudgePool(judge_url=guarded.url)
    finally:
        guarded.shutdown()
        guarded.close()


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def test_judge_serve_is_a_command_that_serves_until_interrupted():
    root = Path(__file__).parents[2]
    env = {**os.environ, "PYTHONPATH": str(root)}
    env.pop(TOKEN_ENV, None)
    cmd = [sys.executable, "-m", "microcoder", "judge", "serve", "--port", "0", "--workers", "1"]
    # SIGINT starts ignored in the child, as under a test runner's worker or a script's
    # background job (it hung there: Python raises nothing on an inherited SIG_IGN)
    proc = subprocess.Popen(
        cmd, env=env, stderr=subprocess.PIPE, text=True, preexec_fn=_ignore_sigint
    )
    try:
        line = proc.stderr.readline()  # the banner names the URL to set
        url = re.search(r"(http://127\.0\.0\.1:\d+)", line).group(1)
        assert f"executor.judge_url = '{url}'" in line
        assert HttpJudgePool(judge_url=url).judge(SUM, WA).verdict == "WA"
    finally:
        proc.send_signal(2)  # Ctrl-C
        assert proc.wait(timeout=30) == 0
