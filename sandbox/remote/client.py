"""The `http` judge backend: programs are judged by remote judge services (`microcoder judge
serve`, sandbox/remote/server.py), so judge nodes serve many trainers, and a trainer whose
containers deny user namespaces can judge elsewhere.

The protocol (JSON over HTTP/1.1, version `PROTOCOL`; every call has a timeout that names the
server):

    GET  /health          -> 200 {"ok": true, "protocol": 2, "workers": N,
                                  "isolation": "bwrap" | "none", "cache": {...}, "judged": N}
    PUT  /problems/<ref>  {"problem": {...}}
                          -> 200 {"ref": "<ref>", "bytes": B}
    POST /judge           {"problem_ref": "<ref>", "program": "..." | null}
                          -> 200 {"verdict": "AC", "passed": 3, "total": 3, "reward": 1.0,
                                  "first_failed": null, "message": "", "time_s": ..., ...}
                          -> 409 {"error": "...", "unknown_ref": "<ref>"}

A problem's tests travel to a server once: the client PUTs what the server needs to judge it
(`judged_fields`: id, kind, tests, entry point, comparison mode, checker, prelude and the
per-problem limits `time_limit_s` / `memory_mb`, in our JSONL schema, data/problem.py) under
its `ref` (`problem_ref`: a SHA-256 of those fields, id included), and then judges each program
by that ref alone. The server checks that the ref is the hash of what it got (400 otherwise) and
keeps problems in an LRU cache bounded by bytes (`executor.judge_cache_mb`). A server that no
longer has a ref (restarted, evicted) answers 409; the client uploads again and retries once.
`program` is the extracted code, null for none (judged WA). The limits a problem does not set,
and every other sandbox setting (isolation, output caps, `max_processes`, `partial_credit`),
are the server's own `[executor]` config. The answer is a Verdict (sandbox/verdict.py,
`Verdict.to_dict`). Errors: 400 {"error": ...} for a request that is not what the path takes
(an old client's `{"problem", "program"}` included, with what to do), 401 without the right
token, 404 for another path.

Several servers (`executor.judge_url` a list): a problem is assigned to one server when first
seen (the one with the fewest programs outstanding per worker, ties in turn), and its programs
go there while it answers, so its tests are uploaded once; different problems spread. A
server that fails (no answer within `http_timeout_s`, refused, an error status 5xx) is marked
down for `DOWN_S` seconds and the program retried on the next server (the problem moves there);
when every server failed the program's verdict is SE with every server's error: its group is
failed, never trained on (actors/scoring.py), and the executor goes on. A 4xx answer is the
request's fault, the same everywhere: SE at once.

At start every server's /health is read: one that speaks another protocol version is an error
saying to run the same microcoder on both sides; one that does not answer is warned about and
tried again later; none answering is an error naming every URL.

Authentication: when the environment variable MICROCODER_JUDGE_TOKEN is set on the server, it
accepts only requests with `Authorization: Bearer <token>`, and the client sends the same
variable's value. The service runs untrusted programs for whoever can reach it and carries no
TLS: keep it on a private network (bind `--host` to a private address), token or not.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import sys
import threading
import time
import urllib.error
import urllib.request
from collections import OrderedDict
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from microcoder.data.problem import Problem
from microcoder.sandbox.config import ExecutorConfig
from microcoder.sandbox.pool import JudgeChannel, check_judged
from microcoder.sandbox.verdict import Verdict

PROTOCOL = 2
"""The protocol version; /health reports the server's. 1 (before issue 45) sent the whole
problem with every program."""
TOKEN_ENV = "MICROCODER_JUDGE_TOKEN"
"""The shared token of the judge service (server and clients), if set."""
DOWN_S = 10.0
"""Seconds a server that failed is passed over (tried only when every other one failed too)."""
_HOMES_MAX = 1 << 16
"""Problems whose server the client remembers (least recently used forgotten first)."""
_KNOWN_MAX = 1 << 16
"""Refs per server the client remembers as uploaded (forgetting one costs one 409 and upload)."""
_ENCODED_MAX = 4096
"""Problems whose ref the client keeps (by object; one more costs a JSON encoding and a hash)."""
_VERDICT_FIELDS = set(Verdict.__dataclass_fields__) - {"tag", "job_id", "solution_id"}
_MISMATCH_FIX = (
    "run the same microcoder version on the judge nodes (`microcoder judge serve`) and the trainers"
)


class JudgeServerUnavailable(RuntimeError):
    """The judge service did not answer; the message names its URL and how to fix it."""


class JudgeRequestRefused(JudgeServerUnavailable):
    """The service answered 4xx: the request is wrong for it (the same on any server)."""


class UnknownProblemRef(JudgeRequestRefused):
    """409: the server has no problem under that ref (restarted, or dropped it from its cache)."""


def judged_fields(problem: Problem) -> dict[str, Any]:
    """What a server needs to judge `problem` (in our JSONL schema), normalised as
    `validate_problem` would, so that client and server hash the same fields the same way."""
    keys = ("code",) if problem.kind == "assert" else ("input", "output")
    # a Python problem has no `language` key: its ref is the one it had before languages
    language = {} if problem.language == "python" else {"language": problem.language}
    return {
        **language,
        "id": str(problem.id),
        "kind": problem.kind,
        "tests": [{k: t[k] for k in keys} for t in problem.tests],
        "fn_name": problem.fn_name or "",
        "time_limit_s": problem.time_limit_s,
        "memory_mb": problem.memory_mb,
        "compare": problem.compare or "default",
        "checker": problem.checker or "",
        "prelude": problem.prelude or "",
    }


def canonical(fields: dict[str, Any]) -> bytes:
    """The bytes a ref hashes (and the client uploads): sorted keys, no spaces, UTF-8."""
    return json.dumps(fields, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode()


def problem_ref(encoded: bytes) -> str:
    """The ref of a problem's `canonical(judged_fields(...))`: its SHA-256, hex."""
    return hashlib.sha256(encoded).hexdigest()


def _headers() -> dict[str, str]:
    token = os.environ.get(TOKEN_ENV, "")
    head = {"Content-Type": "application/json"}
    return head | ({"Authorization": f"Bearer {token}"} if token else {})


def call(
    url: str, path: str, body: dict | bytes | None, timeout_s: float, method: str | None = None
) -> dict[str, Any]:
    """One JSON request to the judge service (`body`: a dict, or bytes already JSON). Raises
    JudgeServerUnavailable naming `url` when it does not answer or answers 5xx,
    JudgeRequestRefused for 4xx, UnknownProblemRef for 409 (the answer's `unknown_ref`)."""
    data = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
    req = urllib.request.Request(url + path, data=data, headers=_headers(), method=method)
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as resp:
            return json.loads(resp.read())
    except urllib.error.HTTPError as e:
        raw = e.read()
        detail = raw[:300].decode(errors="replace")
        message = f"judge server {url}{path}: HTTP {e.code}: {detail}"
        if e.code == 409:
            raise UnknownProblemRef(message) from e
        if e.code in (405, 501):  # a server without this method: an older one
            message += f" (the server is older than this client: {_MISMATCH_FIX})"
        raise (JudgeRequestRefused if 400 <= e.code < 500 else JudgeServerUnavailable)(
            message
        ) from e
    except (urllib.error.URLError, OSError, ValueError) as e:
        reason = getattr(e, "reason", e)
        raise JudgeServerUnavailable(
            f"judge server {url}{path}: no answer within {timeout_s:g} s ({reason}); start it with "
            "`microcoder judge serve` on that host, or check executor.judge_url"
        ) from e


class _Server:
    """The client's view of one judge server: its load, its health and what it was sent."""

    def __init__(self, url: str):
        self.url = url.rstrip("/")
        self.workers = 1
        self.outstanding = 0
        """Programs routed here and not answered yet (the pool's lock guards it)."""
        self.down_until = 0.0
        self.known: OrderedDict[str, int] = OrderedDict()
        """Refs uploaded here -> the upload's serial (a 409 forgets only the upload it saw)."""
        self.upload_locks = [threading.Lock() for _ in range(64)]
        """Striped by ref: one upload of a problem at a time, the others wait and reuse it."""
        self.judged = self.uploads = self.reuploads = self.bytes_sent = 0

    def stats(self) -> dict[str, Any]:
        return {
            "url": self.url,
            "judged": self.judged,
            "uploads": self.uploads,
            "reuploads": self.reuploads,
            "bytes_sent": self.bytes_sent,
            "down": self.down_until > time.monotonic(),
        }


class _Encoded:
    """A problem and its ref (computed once per Problem object; the upload body, as big as the
    tests, is built again for each upload instead of being kept)."""

    __slots__ = ("problem", "ref")

    def __init__(self, problem: Problem):
        self.problem = problem
        self.ref = problem_ref(canonical(judged_fields(problem)))

    def body(self) -> bytes:
        return b'{"problem":' + canonical(judged_fields(self.problem)) + b"}"


class HttpJudgePool:
    """A JudgePool's surface (submit / as_completed / channel / size / close) over the judge
    services at `executor.judge_url`: `size` programs are in flight at once (`workers`, 0 = the
    answering servers' worker counts summed)."""

    def __init__(self, config: ExecutorConfig | None = None, **overrides):
        cfg = (config or ExecutorConfig()).model_copy(update=overrides)
        urls = judge_urls(cfg.judge_url)
        if not urls:
            raise ValueError(
                "executor.backend = 'http' needs executor.judge_url, e.g. "
                "'http://judge-node:8790' or a list of them (each a `microcoder judge serve`)"
            )
        self.cfg = cfg
        self.servers = [_Server(u) for u in urls]
        self._lock = threading.Lock()
        self._homes: OrderedDict[str, _Server] = OrderedDict()
        self._turn = 0
        self._serial = itertools.count(1)
        self._encoded: OrderedDict[int, _Encoded] = OrderedDict()
        self._check_servers()
        up = [s for s in self.servers if s.down_until == 0.0]
        self.size = cfg.workers or sum(s.workers for s in up)
        self._threads = ThreadPoolExecutor(self.size, thread_name_prefix="http-judge")
        self._ids = itertools.count()
        self._own = HttpChannel(self)

    @property
    def url(self) -> str:
        """The first server's URL (the only one with a single judge_url)."""
        return self.servers[0].url

    def _check_servers(self) -> None:
        """Read every server's /health at once: a protocol mismatch is an error, a server that
        does not answer is marked down (and warned about), none answering is an error."""
        timeout = self.cfg.http_timeout_s
        with ThreadPoolExecutor(len(self.servers)) as ex:
            answers = list(ex.map(lambda s: _health(s.url, timeout), self.servers))
        errors = []
        for server, got in zip(self.servers, answers, strict=True):
            if isinstance(got, JudgeServerUnavailable):
                errors.append(str(got))
                server.down_until = time.monotonic() + DOWN_S
                continue
            if got.get("protocol") != PROTOCOL:
                raise JudgeServerUnavailable(
                    f"judge server {server.url} speaks protocol {got.get('protocol', 1)}, this "
                    f"client {PROTOCOL}: {_MISMATCH_FIX}"
                )
            server.workers = max(1, int(got.get("workers") or 1))
        if len(errors) == len(self.servers):
            raise JudgeServerUnavailable("; ".join(errors))
        for e in errors:
            print(f"microcoder judge: WARNING: {e}; judging on the others", file=sys.stderr)

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

    def stats(self) -> list[dict[str, Any]]:
        """Per server: programs judged, uploads (and re-uploads after a 409), body bytes sent."""
        return [s.stats() for s in self.servers]

    # -- routing ------------------------------------------------------------------------------
    def _encode(self, problem: Problem) -> _Encoded:
        with self._lock:
            hit = self._encoded.get(id(problem))
            if hit is not None and hit.problem is problem:
                self._encoded.move_to_end(id(problem))
                return hit
        enc = _Encoded(problem)  # outside the lock: a big problem's JSON and hash take a while
        with self._lock:
            self._encoded[id(problem)] = enc  # holds the problem: its id stays its own
            while len(self._encoded) > _ENCODED_MAX:
                self._encoded.popitem(last=False)
        return enc

    def _route(self, ref: str, skip: set[_Server] = frozenset()) -> _Server | None:
        """The server for `ref`'s next program, counted as outstanding there: its home while
        that is up, else the up server least loaded per worker (ties in turn), which becomes
        its home; down servers only when no other is left; None when all are in `skip`."""
        now = time.monotonic()
        with self._lock:
            home = self._homes.get(ref)
            if home is None or home in skip or home.down_until > now:
                n = len(self.servers)
                order = [self.servers[(self._turn + i) % n] for i in range(n)]
                left = [s for s in order if s not in skip]
                if not left:
                    return None
                up = [s for s in left if s.down_until <= now]
                pick = up or sorted(left, key=lambda s: s.down_until)
                home = min(pick, key=lambda s: s.outstanding / s.workers)
                self._turn = (self.servers.index(home) + 1) % n
                self._homes[ref] = home
                while len(self._homes) > _HOMES_MAX:
                    self._homes.popitem(last=False)
            self._homes.move_to_end(ref)
            home.outstanding += 1
            return home

    def _release(self, server: _Server, outcome: str) -> None:
        """A program routed to `server` is done there: `judged`, `refused` (4xx), `failed`
        (no answer, 5xx: passed over for DOWN_S) or `moved` (not sent: it was down)."""
        with self._lock:
            server.outstanding -= 1
            if outcome == "failed":
                server.down_until = time.monotonic() + DOWN_S
            elif outcome != "moved":
                server.judged += outcome == "judged"
                server.down_until = 0.0

    def _judge_one(self, problem: Problem, enc: _Encoded, code: str | None, first) -> Verdict:
        """Judge on `first` (another server if `first` failed since the program was routed
        there), then on each other server in turn while they fail; SE naming every server's
        error when all did."""
        server = first
        tried = set()
        errors = []
        if first.down_until > time.monotonic() and len(self.servers) > 1:
            self._release(first, "moved")
            server = self._route(enc.ref)
        while server is not None:
            tried.add(server)
            try:
                got = self._judge_on(server, enc, code)
                verdict = Verdict(**{k: v for k, v in got.items() if k in _VERDICT_FIELDS})
                self._release(server, "judged")
                return verdict
            except (JudgeRequestRefused, TypeError) as e:
                self._release(server, "refused")
                return _system_error(problem, str(e))
            except JudgeServerUnavailable as e:
                self._release(server, "failed")
                errors.append(str(e))
            server = self._route(enc.ref, skip=tried)
        return _system_error(problem, f"every judge server failed: {'; '.join(errors)}")

    def _judge_on(self, server: _Server, enc: _Encoded, code: str | None) -> dict[str, Any]:
        serial = self._upload(server, enc)
        body = json.dumps({"problem_ref": enc.ref, "program": code}).encode()
        try:
            self._sent(server, len(body))
            return call(server.url, "/judge", body, self.cfg.http_timeout_s)
        except UnknownProblemRef:  # restarted or evicted: upload again, retry once
            with self._lock:
                if server.known.get(enc.ref) == serial:
                    del server.known[enc.ref]
            self._upload(server, enc, again=True)
            self._sent(server, len(body))
            try:
                return call(server.url, "/judge", body, self.cfg.http_timeout_s)
            except UnknownProblemRef as e:
                raise JudgeServerUnavailable(
                    f"{e}: the server dropped the problem right after its upload; raise its "
                    "executor.judge_cache_mb above the problems judged at once"
                ) from e

    def _sent(self, server: _Server, nbytes: int) -> None:
        with self._lock:
            server.bytes_sent += nbytes

    def _upload(self, server: _Server, enc: _Encoded, again: bool = False) -> int:
        """PUT the problem to `server` unless it was (one upload at a time per ref; `again`:
        after a 409); returns the upload's serial."""
        with self._lock:
            serial = server.known.get(enc.ref)
        if serial is not None:
            return serial
        with server.upload_locks[hash(enc.ref) % len(server.upload_locks)]:
            with self._lock:
                serial = server.known.get(enc.ref)
            if serial is not None:  # another thread uploaded it meanwhile
                return serial
            body = enc.body()
            self._sent(server, len(body))
            call(server.url, f"/problems/{enc.ref}", body, self.cfg.http_timeout_s, "PUT")
            with self._lock:
                server.uploads += 1
                server.reuploads += int(again)
                serial = server.known[enc.ref] = next(self._serial)
                while len(server.known) > _KNOWN_MAX:
                    server.known.popitem(last=False)
            return serial

    def close(self) -> None:
        self._threads.shutdown(wait=False, cancel_futures=True)


def judge_urls(value: str | list[str]) -> list[str]:
    """`executor.judge_url` as a list (one URL, or a config built without validation)."""
    urls = [value] if isinstance(value, str) else list(value)
    return [u.rstrip("/") for u in urls if u.strip()]


def _health(url: str, timeout_s: float) -> dict[str, Any] | JudgeServerUnavailable:
    try:
        return call(url, "/health", None, timeout_s)
    except JudgeRequestRefused:
        raise  # 401: a wrong token is an error at start
    except JudgeServerUnavailable as e:
        return e


def _system_error(problem: Problem, message: str) -> Verdict:
    return Verdict("SE", 0, len(problem.tests), message=message[:1000], reward=None)


class HttpChannel(JudgeChannel):
    """One thread's submit / as_completed on an HttpJudgePool: JudgeChannel's, with each job
    sent to a service on one of the pool's threads instead of a local worker's queue."""

    def submit(self, problem: Problem, code: str | None, solution_id: str = "", tag=None) -> int:
        check_judged(problem)
        pool = self.pool
        job_id = next(pool._ids)
        enc = pool._encode(problem)
        server = pool._route(enc.ref)

        def run() -> None:
            v = pool._judge_one(problem, enc, code, server)
            v.problem_id = problem.id
            v.solution_id = solution_id
            v.job_id = job_id
            v.tag = tag
            self._done.put(v)

        pool._threads.submit(run)
        self._pending += 1
        return job_id
