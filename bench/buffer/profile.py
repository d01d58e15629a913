"""`microcoder bench buffer --profile`: where the server's time goes on the buffer road.

The buffer road is run once more with the server under cProfile; its time is split into
    recv        polling and receiving frames (zmq),
    decode      header decode, size checks, group/scores checks (wire.py, codec.py),
    state       BufferState calls made by the server (queues, leases, admission, staleness),
    send        encoding and sending replies (BufferServer._send),
    other       the rest of the loop (dispatch, parked requests, expiry, the profiler itself),
as CPU milliseconds of the serving thread per group (thread_time: waiting in poll costs nothing;
zmq's I/O thread is not in it), from the profiled run (cProfile inflates each call: read the
shares, not the absolute figures).
"""

from __future__ import annotations

import cProfile
import os
import pstats
import signal
import tempfile
import time

from microcoder.bench.buffer import road
from microcoder.bench.buffer.road import bench_server

SPLIT = ("recv", "decode", "state", "send", "other")


def profiled_serve(
    conn, n: int, batch: int, max_staleness: int, path: str, keys_dir: str | None = None
) -> None:
    """road.serve under cProfile (`keys_dir`: curve on); SIGTERM ends the loop, writes `path`."""

    from microcoder.buffer.server import dedicate_process

    server = bench_server(n, batch, max_staleness, keys_dir)
    signal.signal(signal.SIGTERM, lambda *_: server._stop.set())
    conn.send(server.address)
    dedicate_process()
    profiler = cProfile.Profile(time.thread_time)  # the loop's own CPU, not waits
    profiler.runcall(server.serve_forever)
    profiler.dump_stats(path)
    conn.send("done")


def split(stats) -> dict[str, float]:
    """Seconds per SPLIT part from a pstats.Stats of `profiled_serve` (see the module doc)."""
    table = stats.stats  # (file, line, name) -> (cc, nc, tottime, cumtime, callers)

    def where(key) -> str:
        return f"{os.path.basename(key[0])}:{key[2]}"

    def cum(pred) -> float:
        return sum(v[3] for k, v in table.items() if pred(where(k), k))

    def cum_from(pred, caller) -> float:
        """Cumulative time of functions matching `pred`, counted over calls from `caller`."""
        total = 0.0
        for k, v in table.items():
            if pred(where(k), k):
                total += sum(c[3] for ck, c in v[4].items() if caller(where(ck)))
        return total

    total = cum(lambda w, k: w == "server.py:serve_forever")
    recv = cum_from(
        lambda w, k: "recv" in k[2] or "poll" in k[2], lambda c: c.startswith("server.py")
    )
    decode = cum(lambda w, k: w in ("wire.py:decode_header", "wire.py:check_size"))
    decode += cum_from(
        lambda w, k: w in ("codec.py:check_group", "codec.py:check_scores", "wire.py:unpack"),
        lambda c: c.startswith("server.py"),
    )
    state = cum_from(lambda w, k: w.startswith("state.py"), lambda c: c.startswith("server.py"))
    send = cum(lambda w, k: w == "server.py:_send")
    parts = {"recv": recv, "decode": decode, "state": state, "send": send}
    parked = cum(lambda w, k: w == "server.py:_serve_parked")  # re-tried long polls (in state)
    other = max(0.0, total - sum(parts.values()))
    return {**parts, "other": other, "total": total, "of_which_parked": parked}


def profile_road(mp, n: int, g: int, t: int, args) -> dict[str, float]:
    """The plain buffer road of one payload with a profiled server: ms per group by part."""

    k = max(0, args.in_flight // args.batch - 1) if args.in_flight else 10**6
    fd, path = tempfile.mkstemp(suffix=".prof")
    os.close(fd)
    parent, child = mp.Pipe()
    server = mp.Process(target=profiled_serve, args=(child, n, args.batch, k, path), daemon=True)
    server.start()
    address = parent.recv()
    try:
        road.timed_road(
            mp,
            [
                (road.buffer_executor, (address, n, g, args.per_get, False)),
                (road.buffer_generator, (address, n, g, t, args.wave, args.window)),
            ],
            lambda: road.buffer_learner(address, n, args.batch, args.in_flight > 0),
        )
        server.terminate()
        if not parent.poll(60):
            raise RuntimeError("the profiled buffer server wrote no profile within 60 s")
        parent.recv()
        parts = split(pstats.Stats(path))
    finally:
        server.join(10)
        if server.is_alive():
            server.kill()
        os.unlink(path)
    return {k: v / n * 1000 for k, v in parts.items()}
