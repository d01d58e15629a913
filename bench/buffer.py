"""`microcoder bench buffer`: the replay buffer vs raw pyzmq PUSH/PULL, side by side.

For each payload (G responses of T tokens, with int32 token ids, float32 log-probs and ~3 chars
of text per token, plus a 256-token prompt):
- throughput: a generator process puts N groups (chunks of --chunk per request) through a buffer
  server process to an executor client that leases them (put_unscored -> get_unscored, decoded
  into Group records at the end), vs a PUSH process sending the same encoded bytes, one group
  per message, to a PULL socket;
- the same bytes through a do-nothing PULL->PUSH relay process (two hops, like any broker), to
  separate the cost of having a middle process from the cost of what the buffer does in it;
- latency: one group at a time, put then get (two request/reply round trips through the server),
  vs one PUSH -> PULL hop of the same bytes.
Also reports encode/decode cost per group (where the time goes). Ratios, not absolute times:
the machine is shared.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from dataclasses import replace

DESCRIPTION = "replay buffer groups/s and round-trip latency vs raw pyzmq PUSH/PULL"
PAYLOADS = [(8, 512), (8, 4096), (16, 512), (16, 4096)]
PROMPT_TOKENS = 256


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--chunk", type=int, default=8, help="groups per put/get request")
    parser.add_argument(
        "--mb", type=float, default=150.0, help="MiB moved per throughput run (sets N per payload)"
    )
    parser.add_argument("--latency-samples", type=int, default=200, help="round trips timed")


def make_group(group_id: int, problem_id: str, g: int, tokens: int):
    import numpy as np

    from microcoder.buffer.messages import Group, Response

    rng = np.random.default_rng(tokens * 100 + g)
    responses = [
        Response(
            rng.integers(0, 150_000, tokens, dtype=np.int32),
            -rng.random(tokens, dtype=np.float32),
            "x" * (3 * tokens),
            1.0,
            0,
            tokens == 4096,
            "length" if tokens == 4096 else "stop",
        )
        for _ in range(g)
    ]
    prompt = np.arange(PROMPT_TOKENS, dtype=np.int32)
    return Group(group_id, problem_id, "p" * 4 * PROMPT_TOKENS, prompt, responses, "gen", {})


def _serve(conn, n: int) -> None:
    from microcoder.buffer.config import BufferConfig
    from microcoder.buffer.prompts import DatasetPrompts
    from microcoder.buffer.server import BufferServer

    cfg = BufferConfig(max_staleness=10**6, high_water_groups=10**6, max_frame_mb=1024)
    server = BufferServer(cfg, DatasetPrompts([f"p{i}" for i in range(n)]), batch_size=n)
    conn.send(server.address)
    server.serve_forever()


def _lease(client, n: int) -> list:
    out = []
    while len(out) < n:
        out += client.get_prompts(n - len(out)).assignments
    return out


def _buffer_producer(address: str, n: int, g: int, t: int, chunk: int, ready, go) -> None:
    from microcoder.buffer.client import BufferClient

    client = BufferClient(address, "gen", timeout_s=120)
    template = make_group(0, "", g, t)
    groups = [
        replace(template, group_id=a.group_id, problem_id=a.problem_id) for a in _lease(client, n)
    ]
    ready.set()
    go.wait()
    for i in range(0, n, chunk):
        client.put_unscored(groups[i : i + chunk])
    client.close()


def _raw_producer(address: str, frames: list[bytes], n: int, ready, go) -> None:
    import zmq

    ctx = zmq.Context()
    sock = ctx.socket(zmq.PUSH)
    sock.connect(address)
    ready.set()
    go.wait()
    for _ in range(n):
        sock.send_multipart(frames, copy=False)
    sock.close(linger=-1)
    ctx.term()  # flush: a multiprocessing child ends with os._exit, dropping queued messages


def _relay(conn) -> None:
    """The least a two-hop broker does: PULL a message, PUSH it on (Python loop, zero-copy)."""
    import zmq

    ctx = zmq.Context()
    pull, push = ctx.socket(zmq.PULL), ctx.socket(zmq.PUSH)
    ports = pull.bind_to_random_port("tcp://127.0.0.1"), push.bind_to_random_port("tcp://127.0.0.1")
    conn.send(ports)
    while True:
        push.send_multipart(pull.recv_multipart(copy=False), copy=False)


def _timed(mp, target, args, consume) -> float:
    """Start a producer process, wait until it is ready, then time `consume()` from 'go'."""
    ready, go = mp.Event(), mp.Event()
    proc = mp.Process(target=target, args=(*args, ready, go))
    proc.start()
    while not ready.wait(0.5):
        if not proc.is_alive():
            raise RuntimeError(f"benchmark producer {target.__name__} died (exit {proc.exitcode})")
    go.set()
    t0 = time.perf_counter()
    consume()
    elapsed = time.perf_counter() - t0
    proc.join(60)
    return elapsed


def _pct(samples: list[float], q: float) -> float:
    return statistics.quantiles(samples, n=100)[q - 1] * 1000 if len(samples) > 1 else 0.0


def bench_payload(mp, g: int, t: int, args: argparse.Namespace) -> dict:
    import zmq

    from microcoder.buffer.client import BufferClient
    from microcoder.buffer.messages import Group
    from microcoder.buffer.wire import pack_record, unpack_record

    group = make_group(1, "p0", g, t)
    frames = pack_record(group)
    size = sum(len(f) for f in frames)
    n = max(100, min(5000, int(args.mb * 2**20 / size)))
    n -= n % args.chunk
    reps = 20
    t0 = time.perf_counter()
    for _ in range(reps):
        pack_record(group)
    encode_ms = (time.perf_counter() - t0) / reps * 1000
    t0 = time.perf_counter()
    for _ in range(reps):
        unpack_record(Group, *frames)
    decode_ms = (time.perf_counter() - t0) / reps * 1000

    # ---- raw PUSH/PULL
    pull = zmq.Context.instance().socket(zmq.PULL)
    raw_addr = f"tcp://127.0.0.1:{pull.bind_to_random_port('tcp://127.0.0.1')}"
    raw_s = _timed(
        mp,
        _raw_producer,
        (raw_addr, frames, n),
        lambda: [pull.recv_multipart(copy=False) for _ in range(n)],
    )
    parent, child = mp.Pipe()
    relay = mp.Process(target=_relay, args=(child,), daemon=True)
    relay.start()
    in_port, out_port = parent.recv()
    relay_pull = zmq.Context.instance().socket(zmq.PULL)
    relay_pull.connect(f"tcp://127.0.0.1:{out_port}")
    relay_s = _timed(
        mp, _raw_producer, (f"tcp://127.0.0.1:{in_port}", frames, n),
        lambda: [relay_pull.recv_multipart(copy=False) for _ in range(n)],
    )  # fmt: skip
    relay_pull.close(linger=0)
    relay.terminate()
    push = zmq.Context.instance().socket(zmq.PUSH)
    push.connect(raw_addr)
    raw_lat = []
    for _ in range(args.latency_samples):
        s = time.perf_counter()
        push.send_multipart(frames, copy=False)
        pull.recv_multipart(copy=False)
        raw_lat.append(time.perf_counter() - s)
    push.close(linger=0)
    pull.close(linger=0)

    # ---- through the buffer
    parent, child = mp.Pipe()
    server = mp.Process(target=_serve, args=(child, n + args.latency_samples), daemon=True)
    server.start()
    address = parent.recv()
    ex = BufferClient(address, "ex", timeout_s=120)
    got: list = []

    def consume() -> None:
        while len(got) < n:
            got.extend(ex.get_unscored(args.chunk, wait_s=5))

    buf_s = _timed(mp, _buffer_producer, (address, n, g, t, args.chunk), consume)
    assert len(got) == n and len(got[-1].responses) == g
    gen = BufferClient(address, "gen2", timeout_s=120)
    lat = []
    for a in _lease(gen, args.latency_samples):
        grp = replace(group, group_id=a.group_id, problem_id=a.problem_id)
        s = time.perf_counter()
        gen.put_unscored(grp)
        ex.get_unscored(1)
        lat.append(time.perf_counter() - s)
    stats = gen.stats()
    gen.close()
    ex.close()
    server.terminate()
    server.join(10)
    assert stats["invariant_ok"], stats["invariant_violations"]
    return {
        "G": g, "tokens": t, "bytes_per_group": size, "groups": n, "chunk": args.chunk,
        "groups_per_s": n / buf_s, "raw_groups_per_s": n / raw_s, "ratio": raw_s / buf_s,
        "relay_groups_per_s": n / relay_s, "ratio_vs_relay": relay_s / buf_s,
        "mb_per_s": n * size / buf_s / 2**20, "raw_mb_per_s": n * size / raw_s / 2**20,
        "p50_ms": _pct(lat, 50), "p99_ms": _pct(lat, 99),
        "raw_p50_ms": _pct(raw_lat, 50), "raw_p99_ms": _pct(raw_lat, 99),
        "encode_ms": encode_ms, "decode_ms": decode_ms,
    }  # fmt: skip


def run(args: argparse.Namespace) -> dict:
    import multiprocessing

    mp = multiprocessing.get_context("spawn")
    results = {f"G{g}x{t}": bench_payload(mp, g, t, args) for g, t in PAYLOADS}
    return {
        "payloads": results,
        "cpu_count": os.cpu_count(),
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "min_ratio": min(r["ratio"] for r in results.values()),
    }


def format_table(result: dict) -> str:
    head = (
        f"{'payload':<10} {'KiB':>6} {'groups/s':>9} {'raw/s':>9} {'ratio':>6} {'relay/s':>8} {'vs relay':>8} "
        f"{'MiB/s':>7} {'p50 ms':>7} {'p99 ms':>7} {'raw p50':>7} {'raw p99':>7} "
        f"{'enc ms':>6} {'dec ms':>6}"
    )
    lines = [head, "-" * len(head)]
    for name, r in result["payloads"].items():
        lines.append(
            f"{name:<10} {r['bytes_per_group'] / 1024:>6.0f} {r['groups_per_s']:>9.0f} "
            f"{r['raw_groups_per_s']:>9.0f} {r['ratio']:>6.2f} {r['relay_groups_per_s']:>8.0f} "
            f"{r['ratio_vs_relay']:>8.2f} {r['mb_per_s']:>7.0f} "
            f"{r['p50_ms']:>7.2f} {r['p99_ms']:>7.2f} {r['raw_p50_ms']:>7.2f} "
            f"{r['raw_p99_ms']:>7.2f} {r['encode_ms']:>6.2f} {r['decode_ms']:>6.2f}"
        )
    lines.append(
        f"({result['cpu_count']} CPUs, {result['date']}; ratio = buffer/raw groups/s; relay = "
        "raw bytes through a Python PULL->PUSH forwarder process, the floor of any 2-hop broker)"
    )
    return "\n".join(lines)
