"""`microcoder bench judge-http`: what the `http` judge backend sends for a problem with big tests.

A real judge service (`make_server`, the real sandbox pool) sits behind a TCP proxy that counts
every byte the client writes to it (request lines, headers and bodies: what crosses the
network). One group of G programs of a problem whose tests weigh `--test-mb` MiB is judged, then
a second group of the same problem; each group's bytes on the wire are reported next to what
protocol 1 (before issue 45: the whole problem in every request, HEAD's body, computed exactly)
would have sent. A second part spreads `--spread-problems` small problems over two servers and
reports how many programs each judged.

    microcoder bench judge-http [--test-mb 5] [--programs 8] [--isolation bwrap|none]
"""

from __future__ import annotations

import argparse
import json
import socket
import threading
import time
from typing import Any

DESCRIPTION = "http judge: bytes sent per group for a problem with big tests; spread over servers"
MIB = 1 << 20


class CountingProxy:
    """A TCP proxy on 127.0.0.1 to `target` (host, port) that counts the bytes clients send
    through it (`sent`); `url` is its address as an http URL."""

    def __init__(self, target: tuple[str, int]):
        self.target = target
        self.sent = 0
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True, name="proxy-accept").start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:  # closed
                return
            try:
                upstream = socket.create_connection(self.target, timeout=30)
            except OSError:
                client.close()
                continue
            for src, dst, counted in ((client, upstream, True), (upstream, client, False)):
                threading.Thread(target=self._pump, args=(src, dst, counted), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, counted: bool) -> None:
        try:
            while data := src.recv(1 << 16):
                if counted:
                    with self._lock:
                        self.sent += len(data)
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def take(self) -> int:
        """Bytes sent since the last take (the pumps have finished: requests are answered)."""
        with self._lock:
            n = self.sent
            self.sent = 0
        return n

    def close(self) -> None:
        self._listener.close()


def big_problem(test_mb: float, tests: int = 10, pid: str = "big"):
    """A stdin problem whose tests' inputs weigh `test_mb` MiB: each input one line of `x`s,
    its output that line's length."""
    from microcoder.data.problem import validate_problem

    each = int(test_mb * MIB) // tests
    rows = [{"input": "x" * (each - i) + "\n", "output": f"{each - i}\n"} for i in range(tests)]
    return validate_problem({"id": pid, "kind": "stdin", "tests": rows})


AC = "s = input()\nprint(len(s))  # {i}\n"
WA = "s = input()\nprint(len(s) + 1)  # {i}\n"


def programs(n: int) -> list[str]:
    """n distinct programs, the even ones right."""
    return [(AC if i % 2 == 0 else WA).format(i=i) for i in range(n)]


def protocol1_bytes(problem, codes: list[str]) -> int:
    """The bodies protocol 1 posted for these programs: the whole problem with each
    (`json.dumps({"problem": ..., "program": ...})`, HEAD's client before issue 45)."""
    row = json.loads(problem.to_json())
    return sum(len(json.dumps({"problem": row, "program": c}).encode()) for c in codes)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--test-mb", type=float, default=5.0, help="MiB of test inputs (5)")
    p.add_argument("--tests", type=int, default=10, help="tests of the big problem (10)")
    p.add_argument("--programs", type=int, default=8, help="programs per group (8)")
    p.add_argument("--workers", type=int, default=2, help="sandbox workers per server (2)")
    p.add_argument("--isolation", default="bwrap", choices=["bwrap", "none"])
    p.add_argument("--spread-problems", type=int, default=16, help="problems over 2 servers")


def _serve(cfg):
    from microcoder.sandbox.remote.server import make_server

    server = make_server(cfg, "127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def _stop(server) -> None:
    server.shutdown()
    server.close()


def _group(pool, problem, codes: list[str]) -> tuple[list[str], float]:
    t0 = time.perf_counter()
    for i, c in enumerate(codes):
        pool.submit(problem, c, tag=i)
    verdicts = sorted(pool.as_completed(), key=lambda v: v.tag)
    return [v.verdict for v in verdicts], time.perf_counter() - t0


def run(args: argparse.Namespace) -> dict[str, Any]:
    from microcoder.data.problem import validate_problem
    from microcoder.sandbox.config import ExecutorConfig
    from microcoder.sandbox.remote.client import HttpJudgePool

    cfg = ExecutorConfig(workers=args.workers, isolation=args.isolation)
    problem = big_problem(args.test_mb, args.tests)
    codes = programs(args.programs)
    want = ["AC" if i % 2 == 0 else "WA" for i in range(args.programs)]
    server = _serve(cfg)
    proxy = CountingProxy(server.server_address[:2])
    try:
        with HttpJudgePool(judge_url=proxy.url, http_timeout_s=300) as pool:
            health = proxy.take()
            first, first_s = _group(pool, problem, codes)
            first_bytes = proxy.take()
            second, second_s = _group(pool, problem, codes)
            second_bytes = proxy.take()
    finally:
        proxy.close()
        _stop(server)
    result: dict[str, Any] = {
        "test_mib": args.test_mb,
        "tests": args.tests,
        "programs": args.programs,
        "tests_json_bytes": len(problem.to_json().encode()),
        "protocol1_bytes_per_group": protocol1_bytes(problem, codes),
        "health_bytes": health,
        "group1_bytes": first_bytes,
        "group2_bytes": second_bytes,
        "group1_s": first_s,
        "group2_s": second_s,
        "verdicts_right": first == want and second == want,
    }
    small = [
        validate_problem(
            {"id": f"p{k}", "kind": "stdin", "tests": [{"input": "1\n", "output": f"{k}\n"}]}
        )
        for k in range(args.spread_problems)
    ]
    one = cfg.model_copy(update={"workers": 1})
    servers = [_serve(one), _serve(one)]
    try:
        with HttpJudgePool(judge_url=[s.url for s in servers]) as pool:
            for p in small:
                for i, c in enumerate(programs(args.programs)):
                    pool.submit(p, c, tag=i)
            spread_verdicts = list(pool.as_completed())
        result["spread_judged"] = [s.judged for s in servers]
        result["spread_uploads"] = [s.problems.uploads for s in servers]
        result["spread_se"] = sum(v.verdict == "SE" for v in spread_verdicts)
    finally:
        for s in servers:
            _stop(s)
    return result


def format_table(r: dict) -> str:
    mb = 1e6
    before = r["protocol1_bytes_per_group"]
    return "\n".join(
        [
            f"one problem, {r['tests']} tests weighing {r['test_mib']:g} MiB of input "
            f"({r['tests_json_bytes'] / mb:.2f} MB as JSON), groups of {r['programs']} programs",
            f"{'':<34} {'bytes sent':>12} {'MB':>8} {'seconds':>8}",
            f"{'protocol 1 (whole problem each)':<34} {before:>12} {before / mb:>8.2f}"
            f" {'':>8}   (computed: HEAD's bodies)",
            f"{'group 1 (uploads the problem)':<34} {r['group1_bytes']:>12} "
            f"{r['group1_bytes'] / mb:>8.2f} {r['group1_s']:>8.2f}   (on the wire)",
            f"{'group 2 (same problem)':<34} {r['group2_bytes']:>12} "
            f"{r['group2_bytes'] / mb:>8.2f} {r['group2_s']:>8.2f}   (on the wire)",
            f"group 1 / protocol 1: {r['group1_bytes'] / before:.3f}; verdicts right: "
            f"{r['verdicts_right']}",
            f"spread: {r['spread_judged']} programs judged and {r['spread_uploads']} problems "
            f"uploaded per server, {r['spread_se']} SE",
        ]
    )
