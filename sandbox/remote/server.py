"""The judge service behind the `http` backend: `microcoder judge serve [--host --port
--workers]` runs a local sandbox pool (JudgePool, bubblewrap) and answers the protocol of
sandbox/remote/client.py, so one judge node serves many trainers.

    server = make_server(ExecutorConfig(workers=8), "10.0.0.5", 8790)   # binds; pool started
    server.serve_forever()                                             # until shutdown()
    server.close()                                                     # the pool too

Each request is handled on a thread of its own and waits for its verdict on a channel of the
shared pool (sandbox/pool.py), so at most `workers` programs run at once and the rest queue in
arrival order. Problems arrive once each (`PUT /problems/<ref>`) and are kept in a
`ProblemCache`, least recently used dropped first past `executor.judge_cache_mb`; a judge
request names its problem by ref. No TLS, and a token only when MICROCODER_JUDGE_TOKEN is set:
a private network.
"""

from __future__ import annotations

import hmac
import json
import os
import re
import sys
import threading
from collections import OrderedDict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from microcoder.data.problem import JUDGED_KINDS, Problem, ProblemFormatError, validate_problem
from microcoder.sandbox.config import ExecutorConfig
from microcoder.sandbox.pool import JudgePool
from microcoder.sandbox.remote.client import (
    PROTOCOL,
    TOKEN_ENV,
    canonical,
    judged_fields,
    problem_ref,
)

MAX_BODY = 64 << 20
"""The largest request accepted (bytes): a problem's upload (its tests), or a program."""
_REF_PATH = re.compile(r"/problems/([0-9a-f]{64})")
PER_TEST_BYTES = 320
"""What a test costs in memory beyond its text (its dict and str headers; measured with
tracemalloc: 100 tiny tests, 3.9 KB of JSON, hold 34 KB), added to a problem's upload size
when the cache counts it."""


class ProblemCache:
    """Problems by ref, bounded by bytes (each counted as its upload's size plus
    PER_TEST_BYTES per test): least recently used dropped first; one larger than the bound is
    kept alone. Thread-safe."""

    def __init__(self, max_bytes: int):
        self.max_bytes = max_bytes
        self._items: OrderedDict[str, tuple[Problem, int]] = OrderedDict()
        self._lock = threading.Lock()
        self.bytes = self.hits = self.misses = self.evictions = self.uploads = 0

    def get(self, ref: str) -> Problem | None:
        with self._lock:
            item = self._items.get(ref)
            if item is None:
                self.misses += 1
                return None
            self._items.move_to_end(ref)
            self.hits += 1
            return item[0]

    def put(self, ref: str, problem: Problem, nbytes: int) -> None:
        with self._lock:
            self.uploads += 1
            old = self._items.pop(ref, None)
            if old is not None:
                self.bytes -= old[1]
            self._items[ref] = (problem, nbytes)
            self.bytes += nbytes
            while self.bytes > self.max_bytes and len(self._items) > 1:
                _, (_, dropped) = self._items.popitem(last=False)
                self.bytes -= dropped
                self.evictions += 1

    def __len__(self) -> int:
        return len(self._items)

    def stats(self) -> dict[str, int]:
        with self._lock:
            return {
                "problems": len(self._items),
                "bytes": self.bytes,
                "max_bytes": self.max_bytes,
                "uploads": self.uploads,
                "hits": self.hits,
                "misses": self.misses,
                "evictions": self.evictions,
            }


class JudgeServer(ThreadingHTTPServer):
    """A ThreadingHTTPServer that owns the pool it judges on and the problems it was sent."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], pool: JudgePool, token: str):
        super().__init__(address, _Handler)
        self.pool = pool
        self.token = token
        self.problems = ProblemCache(pool.cfg.judge_cache_mb << 20)
        self.judged = 0
        self._judged_lock = threading.Lock()

    def count_judged(self) -> None:
        with self._judged_lock:
            self.judged += 1

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}"

    def close(self) -> None:
        self.server_close()
        self.pool.close()


def make_server(cfg: ExecutorConfig, host: str = "127.0.0.1", port: int = 8790) -> JudgeServer:
    """Start the pool and bind the service (port 0: any free one; see `server.url`)."""
    pool = JudgePool(cfg.model_copy(update={"backend": "local"}))
    try:
        return JudgeServer((host, port), pool, os.environ.get(TOKEN_ENV, ""))
    except BaseException:
        pool.close()
        raise


class _Handler(BaseHTTPRequestHandler):
    server: JudgeServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args) -> None:  # one line per error only
        if args and str(args[1] if len(args) > 1 else "").startswith(("4", "5")):
            print(f"judge serve: {self.address_string()} {format % args}", file=sys.stderr)

    def _reply(self, status: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _authorised(self) -> bool:
        token = self.server.token
        if not token:
            return True
        got = self.headers.get("Authorization", "")
        if hmac.compare_digest(got.encode(), f"Bearer {token}".encode()):
            return True
        self._reply(401, {"error": f"send Authorization: Bearer <the server's {TOKEN_ENV}>"})
        return False

    def _not_found(self) -> None:
        self._reply(404, {"error": "unknown path; GET /health, PUT /problems/<ref>, POST /judge"})

    def do_GET(self) -> None:
        if not self._authorised():
            return
        if self.path != "/health":
            return self._not_found()
        server = self.server
        self._reply(
            200,
            {
                "ok": True,
                "protocol": PROTOCOL,
                "workers": server.pool.size,
                "isolation": server.pool.cfg.isolation,
                "cache": server.problems.stats(),
                "judged": server.judged,
            },
        )

    def do_PUT(self) -> None:
        if not self._authorised():
            return
        match = _REF_PATH.fullmatch(self.path)
        if match is None:
            return self._not_found()
        try:
            raw = self._body()
            body = _json(raw)
            if not isinstance(body, dict) or not isinstance(body.get("problem"), dict):
                raise ValueError('expected {"problem": {...}}')
            problem = _problem(body["problem"])
        except ValueError as e:
            return self._reply(400, {"error": str(e)})
        ref = match.group(1)
        if problem_ref(canonical(judged_fields(problem))) != ref:
            return self._reply(
                400,
                {
                    "error": f"/problems/{ref}: the ref is not the SHA-256 of the problem's "
                    "judged fields as this server computes it (sandbox/remote/client.py "
                    "judged_fields): run the same microcoder version on the judge nodes and "
                    "the trainers"
                },
            )
        self.server.problems.put(ref, problem, len(raw) + PER_TEST_BYTES * len(problem.tests))
        self._reply(200, {"ref": ref, "bytes": len(raw)})

    def do_POST(self) -> None:
        if not self._authorised():
            return
        if self.path != "/judge":
            return self._not_found()
        try:
            ref, program = self._judge_request()
        except ValueError as e:
            return self._reply(400, {"error": str(e)})
        problem = self.server.problems.get(ref)
        if problem is None:
            return self._reply(
                409,
                {
                    "error": f"unknown problem_ref {ref} (never sent, or dropped from the cache "
                    "or lost in a restart): PUT /problems/<ref> first",
                    "unknown_ref": ref,
                },
            )
        channel = self.server.pool.channel()
        channel.submit(problem, program)
        verdict = next(channel.as_completed())
        self.server.count_judged()
        self._reply(200, verdict.to_dict())

    def _body(self) -> bytes:
        size = int(self.headers.get("Content-Length") or 0)
        if not 0 < size <= MAX_BODY:
            raise ValueError(f"a JSON body of 1..{MAX_BODY} bytes is needed, got {size}")
        return self.rfile.read(size)

    def _judge_request(self) -> tuple[str, str | None]:
        body = _json(self._body())
        if isinstance(body, dict) and "problem" in body and "problem_ref" not in body:
            raise ValueError(
                f"this judge server speaks protocol {PROTOCOL}: a problem is sent once with PUT "
                '/problems/<ref> and judged by {"problem_ref", "program"}; the client sent the '
                "whole problem (protocol 1, an older microcoder): run the same microcoder "
                "version on the judge nodes and the trainers"
            )
        if not isinstance(body, dict) or not isinstance(body.get("problem_ref"), str):
            raise ValueError('expected {"problem_ref": "<ref>", "program": "..." | null}')
        program = body.get("program")
        if program is not None and not isinstance(program, str):
            raise ValueError("program: expected a string or null")
        return body["problem_ref"], program


def _json(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"the body is not JSON: {e}") from None


def _problem(row: dict) -> Problem:
    try:
        problem = validate_problem(row, "request")
    except ProblemFormatError as e:
        raise ValueError(str(e)) from None
    if problem.kind not in JUDGED_KINDS:
        raise ValueError(f"problem kind {problem.kind!r} is not a program; kinds: {JUDGED_KINDS}")
    return problem
