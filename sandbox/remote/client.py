"""The `http` judge backend: programs are judged by a remote judge service (`microcoder judge
serve`, sandbox/remote/server.py), so one judge node can serve many trainers, and a trainer
whose containers deny user namespaces can judge elsewhere.

The protocol (JSON over HTTP/1.1, one request per program; every call has a timeout that names
the server):

    GET  /health  -> 200 {"ok": true, "workers": N, "isolation": "bwrap" | "none"}
    POST /judge   {"problem": {...}, "program": "..." | null}
                  -> 200 {"verdict": "AC", "passed": 3, "total": 3, "reward": 1.0,
                          "first_failed": null, "message": "", "time_s": ..., "cpu_s": ...,
                          "stdout": "", "stderr": "", "attempts": 1, ...}

`problem` is a Problem record in our own JSONL schema (data/problem.py, `Problem.to_json`):
the tests, the kind, the entry point, the comparison mode and the per-problem limits
(`time_limit_s`, `memory_mb`). `program` is the extracted code, null for none (judged WA). The
limits a problem does not set, and every other sandbox setting (isolation, output caps,
`max_processes`, `partial_credit`), are the server's own `[executor]` config. The answer is a
Verdict (sandbox/verdict.py, `Verdict.to_dict`). Errors: 400 {"error": ...} for a request that
is not a problem and a program, 401 without the right token, 404 for another path.

Authentication: when the environment variable MICROCODER_JUDGE_TOKEN is set on the server, it
accepts only requests with `Authorization: Bearer <token>`, and the client sends the same
variable's value. The service runs untrusted programs for whoever can reach it and carries no
TLS: keep it on a private network (bind `--host` to a private address), token or not.

A program the server could not judge (unreachable, timed out, an error status) gets verdict SE
with a message naming the URL: its group is failed, never trained on (actors/scoring.py), and
the executor goes on. A server down at executor start is an error naming the URL.
"""

from __future__ import annotations

import itertools
import json
import os
import urllib.error
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from microcoder.data.problem import Problem
from microcoder.sandbox.config import ExecutorConfig
from microcoder.sandbox.pool import JudgeChannel, check_judged
from microcoder.sandbox.verdict import Verdict

TOKEN_ENV = "MICROCODER_JUDGE_TOKEN"
"""The shared token of the judge service (server and clients), if set."""
_VERDICT_FIELDS = set(Verdict.__dataclass_fields__) - {"tag", "job_id", "solution_id"}


class JudgeServerUnavailable(RuntimeError):
    """The judge service did not answer; the message names its URL and how to fix it."""


def _headers() -> dict[str, str]:
    token = os.environ.get(TOKEN_ENV, "")
    head = {"Content-Type": "application/json"}
    return head | ({"Authorization": f"Bearer {token}"} if token else {})


def call(url: str, path: str, body: dict | None, timeout_s: float) -> dict[str, Any]:
    """One JSON request to the judge service; JudgeServerUnavailable naming `url` on any failure."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url + path, data=data, headers=_headers())
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as resp:
            return json.loads(resp.read())
    except urllib.error.HTTPError as e:
        detail = e.read()[:300].decode(errors="replace")
        raise JudgeServerUnavailable(f"judge server {url}{path}: HTTP {e.code}: {detail}") from e
    except (urllib.error.URLError, OSError, ValueError) as e:
        reason = getattr(e, "reason", e)
        raise JudgeServerUnavailable(
            f"judge server {url}{path}: no answer within {timeout_s:g} s ({reason}); start it with "
            "`microcoder judge serve` on that host, or check executor.judge_url"
        ) from e


class HttpJudgePool:
    """A JudgePool's surface (submit / as_completed / channel / size / close) over the judge
    service at `executor.judge_url`: `size` programs are in flight at once (`workers`, 0 = the
    server's own worker count)."""

    def __init__(self, config: ExecutorConfig | None = None, **overrides):
        cfg = (config or ExecutorConfig()).model_copy(update=overrides)
        if not cfg.judge_url:
            raise ValueError(
                "executor.backend = 'http' needs executor.judge_url, e.g. "
                "'http://judge-node:8790' (a `microcoder judge serve`)"
            )
        self.cfg, self.url = cfg, cfg.judge_url.rstrip("/")
        health = call(self.url, "/health", None, cfg.http_timeout_s)  # down: an error naming it
        self.size = cfg.workers or int(health.get("workers") or 1)
        self._threads = ThreadPoolExecutor(self.size, thread_name_prefix="http-judge")
        self._ids = itertools.count()
        self._own = HttpChannel(self)

    def __enter__(self) -> HttpJudgePool:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def channel(self) -> HttpChannel:
        return HttpChannel(self)

    def submit(self, problem: Problem, code: str | None, solution_id: str = "", tag=None) -> int:
        return self._own.submit(problem, code, solution_id, tag)

    @property
    def pending(self) -> int:
        return self._own.pending

    def as_completed(self, timeout: float | None = None) -> Iterator[Verdict]:
        return self._own.as_completed(timeout)

    def judge(self, problem: Problem, code: str | None) -> Verdict:
        """Judge one solution (blocking)."""
        ch = self.channel()
        ch.submit(problem, code)
        return next(ch.as_completed())

    def _judge_one(self, problem: Problem, code: str | None) -> Verdict:
        body = {"problem": json.loads(problem.to_json()), "program": code}
        timeout = self.cfg.http_timeout_s
        try:
            got = call(self.url, "/judge", body, timeout)
            return Verdict(**{k: v for k, v in got.items() if k in _VERDICT_FIELDS})
        except (JudgeServerUnavailable, TypeError) as e:
            return Verdict("SE", 0, len(problem.tests), message=str(e)[:500], reward=None)

    def close(self) -> None:
        self._threads.shutdown(wait=False, cancel_futures=True)


class HttpChannel(JudgeChannel):
    """One thread's submit / as_completed on an HttpJudgePool: JudgeChannel's, with each job
    sent to the service on one of the pool's threads instead of a local worker's queue."""

    def submit(self, problem: Problem, code: str | None, solution_id: str = "", tag=None) -> int:
        check_judged(problem)
        job_id = next(self.pool._ids)

        def run() -> None:
            v = self.pool._judge_one(problem, code)
            v.problem_id, v.solution_id, v.job_id, v.tag = problem.id, solution_id, job_id, tag
            self._done.put(v)

        self.pool._threads.submit(run)
        self._pending += 1
        return job_id
