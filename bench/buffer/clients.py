"""`microcoder bench buffer --clients N`: N simulated generators and N/4 executors, each with its
own DEALER socket, through the real BufferServer (CurveZMQ on, admission control on, as a run).

Each generator leases 1 prompt (get_prompts, long poll 0.5 s as actors/generator.py), "samples"
for a lognormal time (mean --sample-s, sigma 0.5, capped at 4x the mean) and puts one G8x512
group; each executor leases up to --per-get groups (text only, long poll 0.5 s as
actors/executor.py), "scores" each for --score-s and puts the scores; one learner (a thread of
this process, a plain BufferClient) takes batches of --batch and announces a version after each,
so admission control is live (--in-flight groups issued and not yet trained at most; default
1.5 N rounded up to a whole batch, so the bench measures the server and not a held-back lease).
The clients run as asyncio tasks (zmq.asyncio) in --client-procs worker processes; the wire
messages are microcoder/protocol.py's records framed by buffer/wire.py, and put requests are
built by BufferClient's own request builders, so the bytes are those of the actors. Clients
start spread over --ramp-s (Curve handshakes cost CPU), latencies count from 2 s after the ramp
to the end of --duration-s (the steady state); then generators finish the group they hold,
executors and the learner drain, and the server's accounting is read: invariant, failures,
drops, what is left.
Server memory: VmRSS from /proc/PID/status (before the clients, max of 4 samples/s, end).
"""

from __future__ import annotations

import argparse
import math
import random
import resource
import signal
import sys
import time
from dataclasses import replace

from microcoder import protocol as m

SETTLE_S = 2.0
"""Latencies count from this long after the ramp ends."""
G = 8
TOKENS = 512


def add_client_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--clients",
        type=int,
        default=0,
        help="N simulated generators (+ N/4 executors) through "
        "the real server with curve and admission control on; 0 = the payload roads instead",
    )
    parser.add_argument("--client-procs", type=int, default=4, help="worker processes for them")
    parser.add_argument("--duration-s", type=float, default=30.0, help="steady state timed")
    parser.add_argument("--ramp-s", type=float, default=8.0, help="clients start spread over it")
    parser.add_argument("--sample-s", type=float, default=3.0, help="mean seconds per group")
    parser.add_argument("--score-s", type=float, default=0.2, help="seconds per group judged")


def raise_nofile() -> tuple[int, int]:
    """Raise this process's soft RLIMIT_NOFILE to the hard limit; returns (soft, hard)."""

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)


class TimingLog:
    """Per-request (monotonic time, wall ms, CPU ms) in arrays allocated and written once at
    start, so recording costs the server no memory while it is measured (a list of tuples grew
    ~150 bytes a request, ~1.7 KB a group at 1,024 clients, and read as a server leak).
    Records past `capacity` are counted in `lost`, not kept."""

    def __init__(self, capacity: int):
        import numpy as np

        self.at = np.full(capacity, np.nan)  # np.full writes every page now: resident from start
        self.ms = np.full((capacity, 2), np.nan, dtype=np.float32)
        self.n = self.lost = 0

    def add(self, at: float, wall_s: float, cpu_s: float) -> None:
        if self.n >= len(self.at):
            self.lost += 1
            return
        self.at[self.n] = at
        self.ms[self.n] = (wall_s * 1000, cpu_s * 1000)
        self.n += 1

    def rows(self) -> list[tuple[float, float, float]]:
        """The recorded (time, wall ms, CPU ms), oldest first."""
        n = self.n
        return list(zip(self.at[:n].tolist(), *self.ms[:n].T.tolist(), strict=True))


def serve_loaded(conn, prompts: int, batch: int, max_staleness: int, keys_dir: str) -> None:
    """road.serve's server (curve on) with the file limit raised (one descriptor per client),
    each request's handling timed in the server (wall and thread CPU ms, and the re-try of
    parked long polls per step); SIGTERM ends the loop and sends the timings on `conn`."""

    from microcoder.buffer.config import BufferConfig
    from microcoder.buffer.prompts import DatasetPrompts
    from microcoder.buffer.server import BufferServer, dedicate_process

    raise_nofile()
    cfg = BufferConfig(
        max_staleness=max_staleness,
        high_water_groups=10**6,
        max_frame_mb=1024,
        curve=True,
        keys_dir=keys_dir,
    )
    server = BufferServer(cfg, DatasetPrompts([f"p{i}" for i in range(prompts)]), batch)
    timings = {"handle": TimingLog(2_000_000), "parked": TimingLog(1_000_000)}

    def timed(kind: str, method):
        log = timings[kind]

        def run(*args):
            w0 = time.perf_counter()
            c0 = time.thread_time()
            method(*args)
            log.add(time.monotonic(), time.perf_counter() - w0, time.thread_time() - c0)

        return run

    server._handle = timed("handle", server._handle)
    server._serve_parked = timed("parked", server._serve_parked)
    signal.signal(signal.SIGTERM, lambda *_: server._stop.set())
    conn.send(server.address)
    dedicate_process()
    server.serve_forever()
    for kind, log in timings.items():
        if log.lost:
            print(
                f"server timings: {log.lost} {kind} records past capacity not kept", file=sys.stderr
            )
    conn.send({kind: log.rows() for kind, log in timings.items()})


def serve_profiled(conn, prompts, batch, max_staleness, path: str, keys_dir: str) -> None:
    """serve_loaded under cProfile (bench/buffer/profile.py)."""
    from microcoder.bench.buffer.profile import profiled_serve

    raise_nofile()
    profiled_serve(conn, prompts, batch, max_staleness, path, keys_dir)


class SimClient:
    """One DEALER socket (own identity, curve keys) speaking the buffer protocol with asyncio."""

    def __init__(self, ctx, endpoint: str, keys_dir, owner: str, timeout_s: float = 30.0):
        import zmq

        from microcoder.buffer.keys import secure_client

        self.owner = owner
        self.timeout_s = timeout_s
        self._rid = 0
        self.sock = ctx.socket(zmq.DEALER)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.sock.setsockopt(zmq.IDENTITY, owner.encode())
        secure_client(self.sock, keys_dir)
        self.sock.connect(endpoint)

    async def call(self, msg, blobs=(), timeout_s: float | None = None):
        """(reply, blob frames) of `msg`; BufferError on an error reply, TimeoutError."""
        import zmq

        from microcoder.buffer.client import BufferError
        from microcoder.buffer.wire import decode_header, encode

        self._rid += 1
        await self.sock.send_multipart(encode(msg, self._rid, list(blobs)), copy=False)
        deadline = time.monotonic() + (timeout_s or self.timeout_s)
        while True:
            left = int((deadline - time.monotonic()) * 1000)
            if left <= 0 or not await self.sock.poll(left, zmq.POLLIN):
                raise TimeoutError(f"{self.owner}: no reply to {msg.KIND}")
            frames = await self.sock.recv_multipart(copy=False)
            rid, reply = decode_header(frames[0])
            if rid != self._rid:
                continue
            if isinstance(reply, m.Error):
                raise BufferError(reply.code, reply.message)
            return reply, frames[1:]


class Tally:
    """What one worker's clients saw: (time, ms) per call kind, and counts."""

    def __init__(self):
        self.lat: dict[str, list[tuple[float, float]]] = {
            k: [] for k in ("lease", "put", "ex_lease", "ex_put", "loop_lag")
        }
        self.counts = dict.fromkeys(
            (
                "leased",
                "put_accepted",
                "put_full",
                "rejected",
                "held_back",
                "dropped_on_put",
                "dropped_after_scoring",
                "groups_judged",
                "scores_accepted",
                "timeouts",
                "errors",
            ),
            0,
        )

    def timed(self, kind: str, t0: float) -> None:
        self.lat[kind].append((time.monotonic(), (time.perf_counter() - t0) * 1000))


async def _put(client, tally: Tally, kind: str, msg, blobs=()) -> None:
    """One put request, resent (backoff) while the server answers `full`."""
    delay = 0.01
    while True:
        t0 = time.perf_counter()
        reply, _ = await client.call(msg, blobs)
        tally.timed(kind, t0)
        stale = sum("dropped" in why for why in reply.rejected)  # state.put_unscored's words
        tally.counts["dropped_on_put" if kind == "put" else "dropped_after_scoring"] += stale
        tally.counts["rejected"] += len(reply.rejected) - stale
        if not reply.full:
            return reply
        tally.counts["put_full"] += len(reply.full)
        await _sleep(delay)
        delay = min(2 * delay, 0.5)


async def _sleep(s: float) -> None:
    import asyncio

    await asyncio.sleep(s)


async def generator(client, start: float, stop: float, sample_s: float, seed: int, tally: Tally):
    """Lease 1 prompt, sample a lognormal while, put its group; until `stop` (then the group in
    hand is finished and put)."""
    from microcoder.bench.buffer.road import make_group
    from microcoder.buffer.client import BufferClient
    from microcoder.buffer.codec import group_frames

    rng = random.Random(seed)
    template = make_group(0, "", G, TOKENS)
    at_version: dict[int, list] = {}
    await _sleep(max(0.0, start - time.monotonic()))
    while time.monotonic() < stop:
        t0 = time.perf_counter()
        reply, _ = await client.call(m.GetPrompts(client.owner, 1, wait_s=0.5))
        if not reply.assignments:
            tally.counts["held_back"] += 1
            continue
        tally.timed("lease", t0)
        tally.counts["leased"] += 1
        a = reply.assignments[0]
        sigma = 0.5
        mu = math.log(sample_s) - sigma**2 / 2
        await _sleep(min(4 * sample_s, rng.lognormvariate(mu, sigma)))
        if a.issued_version not in at_version:  # sampled at the version it was issued at
            v = a.issued_version
            at_version[v] = [replace(r, policy_version=v) for r in template.responses]
        group = replace(
            template,
            group_id=a.group_id,
            problem_id=a.problem_id,
            responses=at_version[a.issued_version],
        )
        msg, blobs = BufferClient._unscored_request(client, [group_frames(group)])
        reply = await _put(client, tally, "put", msg, blobs)
        tally.counts["put_accepted"] += len(reply.accepted)


async def executor(client, start: float, stop: float, per_get: int, score_s: float, tally):
    """Lease up to `per_get` unscored groups (text only), judge each for `score_s`, put the
    scores; until `stop`."""
    from microcoder.bench.buffer.road import make_scores
    from microcoder.buffer.client import BufferClient, _one_frame
    from microcoder.buffer.codec import read_group

    template = make_scores(0, G)
    await _sleep(max(0.0, start - time.monotonic()))
    while time.monotonic() < stop:
        t0 = time.perf_counter()
        reply, frames = await client.call(m.GetUnscored(client.owner, per_get, wait_s=0.5))
        if not reply.metas:
            continue
        tally.timed("ex_lease", t0)
        groups = [read_group(meta, frames[i]) for i, meta in enumerate(reply.metas)]
        tally.counts["groups_judged"] += len(groups)
        await _sleep(score_s * len(groups))
        scores = [_one_frame(replace(template, group_id=g.group_id)) for g in groups]
        msg, blobs = BufferClient._scored_request(client, scores)
        reply = await _put(client, tally, "ex_put", msg, blobs)
        tally.counts["scores_accepted"] += len(reply.accepted)


async def lag(tally: Tally, stop: float, every_s: float = 0.01) -> None:
    """How late this worker's event loop wakes a 10 ms sleep: the share of a client-seen latency
    that is the client process's own scheduling (recorded as kind `loop_lag`)."""
    while time.monotonic() < stop:
        t0 = time.perf_counter()
        await _sleep(every_s)
        late_ms = (time.perf_counter() - t0 - every_s) * 1000
        tally.lat["loop_lag"].append((time.monotonic(), late_ms))


def worker(address: str, index: int, gens: int, exes: int, plan: dict, queue) -> None:
    """One process of simulated clients: `gens` generators and `exes` executors as asyncio tasks
    on one zmq.asyncio context; puts its Tally's lat and counts on `queue`."""
    import asyncio

    import zmq
    import zmq.asyncio

    from microcoder.buffer.keys import split_address

    raise_nofile()
    endpoint, keys = split_address(address)
    tally = Tally()

    async def main():
        ctx = zmq.asyncio.Context()
        ctx.set(zmq.MAX_SOCKETS, gens + exes + 64)  # default 1,023
        rng = random.Random(index)
        t0 = plan["t0"]
        ramp = plan["ramp_s"]

        async def run(make, name):
            client = SimClient(ctx, endpoint, keys, f"{name}")
            try:
                await make(client)
            except TimeoutError:
                tally.counts["timeouts"] += 1
            except Exception:  # counted and reported, the run goes on
                tally.counts["errors"] += 1
            finally:
                client.sock.close(linger=0)

        tasks = [
            run(
                lambda c, i=i: generator(
                    c,
                    t0 + rng.random() * ramp,
                    plan["stop"],
                    plan["sample_s"],
                    index * 100_000 + i,
                    tally,
                ),
                f"gen-{index}-{i}",
            )
            for i in range(gens)
        ] + [
            run(
                lambda c: executor(
                    c,
                    t0 + rng.random() * ramp,
                    plan["drain"],
                    plan["per_get"],
                    plan["score_s"],
                    tally,
                ),
                f"ex-{index}-{i}",
            )
            for i in range(exes)
        ]
        await asyncio.gather(*tasks, lag(tally, plan["drain"]))
        ctx.term()

    cpu0 = time.process_time()
    wall0 = time.monotonic()
    asyncio.run(main())
    cpu = (time.process_time() - cpu0) / (time.monotonic() - wall0)  # of one core, all threads
    queue.put({"lat": tally.lat, "counts": tally.counts, "cpu_fraction": cpu})
