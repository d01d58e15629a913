"""The judge service behind the `http` backend: `microcoder judge serve [--host --port
--workers]` runs a local sandbox pool (JudgePool, bubblewrap) and answers the protocol of
sandbox/remote/client.py, so one judge node serves many trainers.

    server = make_server(ExecutorConfig(workers=8), "10.0.0.5", 8790)   # binds; pool started
    server.serve_forever()                                             # until shutdown()
    server.close()                                                     # the pool too

Each request is handled on a thread of its own and waits for its verdict on a channel of the
shared pool (sandbox/pool.py), so at most `workers` programs run at once and the rest queue in
arrival order. No TLS, and a token only when MICROCODER_JUDGE_TOKEN is set: a private network.
"""

from __future__ import annotations

import hmac
import json
import os
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from microcoder.data.problem import JUDGED_KINDS, ProblemFormatError, validate_problem
from microcoder.sandbox.config import ExecutorConfig
from microcoder.sandbox.pool import JudgePool
from microcoder.sandbox.remote.client import TOKEN_ENV

MAX_BODY = 64 << 20
"""The largest request accepted (bytes): a problem's tests plus a program."""


class JudgeServer(ThreadingHTTPServer):
    """A ThreadingHTTPServer that owns the pool it judges on."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], pool: JudgePool, token: str):
        super().__init__(address, _Handler)
        self.pool, self.token = pool, token

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

    def _serves(self, path: str) -> bool:
        """The request is authorised and for `path`; else its error reply has gone (401, 404)."""
        if not self._authorised():
            return False
        if self.path != path:
            self._reply(404, {"error": "unknown path; GET /health, POST /judge"})
            return False
        return True

    def do_GET(self) -> None:
        if not self._serves("/health"):
            return
        pool = self.server.pool
        self._reply(200, {"ok": True, "workers": pool.size, "isolation": pool.cfg.isolation})

    def do_POST(self) -> None:
        if not self._serves("/judge"):
            return
        try:
            problem, program = self._request()
        except ValueError as e:
            self._reply(400, {"error": str(e)})
            return
        channel = self.server.pool.channel()
        channel.submit(problem, program)
        verdict = next(channel.as_completed())
        self._reply(200, verdict.to_dict())

    def _request(self):
        size = int(self.headers.get("Content-Length") or 0)
        if not 0 < size <= MAX_BODY:
            raise ValueError(f"a JSON body of 1..{MAX_BODY} bytes is needed, got {size}")
        try:
            body = json.loads(self.rfile.read(size))
        except json.JSONDecodeError as e:
            raise ValueError(f"the body is not JSON: {e}") from None
        if not isinstance(body, dict) or "problem" not in body:
            raise ValueError('expected {"problem": {...}, "program": "..." | null}')
        program = body.get("program")
        if program is not None and not isinstance(program, str):
            raise ValueError("program: expected a string or null")
        try:
            problem = validate_problem(body["problem"], "request")
        except ProblemFormatError as e:
            raise ValueError(str(e)) from None
        if problem.kind not in JUDGED_KINDS:
            raise ValueError(
                f"problem kind {problem.kind!r} is not a program; kinds: {JUDGED_KINDS}"
            )
        return problem, program
