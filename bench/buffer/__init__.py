"""`microcoder bench buffer`: the replay buffer vs raw pyzmq PUSH/PULL, side by side.

Unit of work: one group (G responses of T tokens: int32 token ids, float32 log-probs, ~3 chars
of text per token, plus a 256-token prompt) travelling generator -> executor -> learner, with
the call patterns of the actors (bench/buffer/road.py):
- buffer: a generator process hands in one wave of --wave groups per put_unscored (encoded each
  time, as actors/generator.py does; --window puts in flight), an executor process leases
  --per-get groups per get_unscored (decoded to Group records: text and metadata, what a judge
  needs, as actors/executor.py does) and hands in their scores, and the learner (this process)
  takes batches of --batch with get_batch (decoded, token arrays included);
- raw: the same encoded frames PUSHed generator -> executor (one wave per message) and
  executor -> learner (--per-get groups + their score frames per message), no broker and no
  encoding or decoding at all;
- raw+codec: the raw road with every endpoint encoding and decoding its records as the
  actors do (generator encodes, executor decodes meta + text and encodes scores, learner
  decodes); its rate over raw's is the "ceiling": the best ratio any broker between these
  endpoints could reach, even one that cost nothing;
- "+tok": the buffer road again with the executor fetching the token arrays too, so the group's
  bytes make every hop raw makes plus one (3 socket crossings instead of 2);
- latency: one group at a time, put then get (two round trips through the server), vs one
  PUSH -> PULL hop of the same bytes;
- curve: the buffer road and its latency again with CurveZMQ on (buffer.curve, a run's default:
  every client authenticated, every frame encrypted); its rate over the plain buffer road's is
  what the default costs. The other buffer figures are the plain socket's (buffer.curve off).
- proxy+codec: generator -> zmq.proxy -> executor / learner with the actors' encode/decode and
  no broker logic (bench/buffer/proxy.py): the bound for any brokered design (ratio_vs_proxy);
  --profile splits the server's loop (bench/buffer/profile.py).
--clients N runs the load test instead (bench/buffer/clients.py, load.py): N generators and N/4
executors through the real server with curve and admission control on.
Also reports encode/decode cost per group. Ratios, not absolute times: the machine is shared.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import socket
import statistics
import time
from dataclasses import replace

DESCRIPTION = "replay buffer groups/s (generator->executor->learner) and latency vs raw PUSH/PULL"
PAYLOADS = [(8, 512), (8, 4096), (16, 512), (16, 4096)]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--wave", type=int, default=16, help="groups per generator put")
    parser.add_argument("--per-get", type=int, default=4, help="groups per executor get")
    parser.add_argument("--batch", type=int, default=8, help="groups per learner get_batch")
    parser.add_argument("--window", type=int, default=4, help="generator puts in flight")
    parser.add_argument(
        "--in-flight",
        type=int,
        default=0,
        help="admission control as in a run: groups issued and not yet trained at most "
        "(max_staleness = in_flight / batch - 1); 0 = off, transport only (the bench's learner "
        "trains instantly, so admission stalls it where a real one would be training)",
    )
    parser.add_argument(
        "--mb", type=float, default=150.0, help="MiB moved per throughput run (sets N per payload)"
    )
    parser.add_argument("--latency-samples", type=int, default=200, help="round trips timed")
    parser.add_argument("--payloads", default="", help="e.g. G8x512,G16x4096 (default: all)")
    from microcoder.bench.buffer.clients import add_client_arguments

    add_client_arguments(parser)
    parser.add_argument("--profile", action="store_true", help="split the server's time (cProfile)")


def _pct(samples: list[float], q: int) -> float:
    return statistics.quantiles(samples, n=100)[q - 1] * 1000 if len(samples) > 1 else 0.0


def _raw_road(mp, frames, score_frame, n: int, args, group=None, scores=None) -> float:
    """Raw PUSH/PULL road; with `group` and `scores` (templates) every endpoint encodes and
    decodes its records as in the buffer road, else the same encoded frames are pushed."""
    import zmq

    from microcoder.bench.buffer import road

    pull = zmq.Context.instance().socket(zmq.PULL)
    learner = f"tcp://127.0.0.1:{pull.bind_to_random_port('tcp://127.0.0.1')}"
    with socket_port() as port:
        executor = f"tcp://127.0.0.1:{port}"
    elapsed, cpu = road.timed_road(
        mp,
        [
            (road.raw_executor, (executor, learner, score_frame, n, args.per_get, scores)),
            (road.raw_generator, (executor, frames, n, args.wave, group)),
        ],
        lambda: road.raw_learner(pull, n, group is not None),
    )
    pull.close(linger=0)
    return elapsed, cpu


def socket_port():
    """A free TCP port on loopback (context manager yielding it)."""

    @contextlib.contextmanager
    def free():
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        yield port

    return free()


def _curve_keys(curve: bool):
    """A context manager yielding a fresh keys folder (removed after) or None."""

    from microcoder.buffer.keys import throwaway_keys

    @contextlib.contextmanager
    def keys():
        if not curve:
            yield None
            return
        folder = throwaway_keys()
        try:
            yield str(folder)
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    return keys()


def _buffer_road(mp, n: int, g: int, t: int, tokens: bool, args, curve: bool = False) -> float:
    with _curve_keys(curve) as keys:
        return _serve_road(mp, n, g, t, tokens, args, keys)


def _serve_road(mp, n: int, g: int, t: int, tokens: bool, args, keys: str | None) -> float:
    from microcoder.bench.buffer import road

    parent, child = mp.Pipe()
    k = max(0, args.in_flight // args.batch - 1) if args.in_flight else 10**6
    server = mp.Process(target=road.serve, args=(child, n, args.batch, k, keys), daemon=True)
    server.start()
    address = parent.recv()
    elapsed, cpu = road.timed_road(
        mp,
        [
            (road.buffer_executor, (address, n, g, args.per_get, tokens)),
            (road.buffer_generator, (address, n, g, t, args.wave, args.window)),
        ],
        lambda: road.buffer_learner(address, n, args.batch, args.in_flight > 0),
        others={"server": server.pid},
    )
    server.terminate()
    server.join(10)
    return elapsed, cpu


def _raw_latency(frames, samples: int) -> list[float]:
    import zmq

    ctx = zmq.Context.instance()
    pull = ctx.socket(zmq.PULL)
    push = ctx.socket(zmq.PUSH)
    push.connect(f"tcp://127.0.0.1:{pull.bind_to_random_port('tcp://127.0.0.1')}")
    raw = []
    for _ in range(samples):
        s = time.perf_counter()
        push.send_multipart(frames, copy=False)
        pull.recv_multipart(copy=False)
        raw.append(time.perf_counter() - s)
    push.close(linger=0)
    pull.close(linger=0)
    return raw


def _latency(mp, group, samples: int, curve: bool = False) -> list[float]:
    with _curve_keys(curve) as keys:
        return _serve_latency(mp, group, samples, keys)


def _serve_latency(mp, group, samples: int, keys: str | None) -> list[float]:
    from microcoder.bench.buffer import road
    from microcoder.buffer.client import BufferClient

    parent, child = mp.Pipe()
    server = mp.Process(target=road.serve, args=(child, samples, 0, 10**6, keys), daemon=True)
    server.start()
    address = parent.recv()
    lat = []
    with BufferClient(address, "gen", timeout_s=60) as gen, BufferClient(address, "ex") as ex:
        for a in road.lease(gen, samples):
            grp = replace(group, group_id=a.group_id, problem_id=a.problem_id)
            s = time.perf_counter()
            gen.put_unscored(grp)
            ex.get_unscored(1)
            lat.append(time.perf_counter() - s)
    server.terminate()
    server.join(10)
    return lat


def bench_payload(mp, g: int, t: int, args: argparse.Namespace) -> dict:
    from microcoder.bench.buffer.proxy import proxy_road
    from microcoder.bench.buffer.road import make_group, make_scores
    from microcoder.buffer.codec import group_frames, read_group, scores_frame

    group = make_group(1, "p0", g, t)
    frames = list(group_frames(group))
    score_frame = scores_frame(make_scores(1, g))
    size = sum(len(f) for f in frames)
    n = max(200, min(4000, int(args.mb * 2**20 / size)))
    n -= n % args.wave
    reps = 20
    t0 = time.perf_counter()
    for _ in range(reps):
        group_frames(group)
    encode_ms = (time.perf_counter() - t0) / reps * 1000
    t0 = time.perf_counter()
    for _ in range(reps):
        read_group(*frames)
    decode_ms = (time.perf_counter() - t0) / reps * 1000

    raw_s, raw_cpu = _raw_road(mp, frames, score_frame, n, args)
    codec_s, codec_cpu = _raw_road(mp, frames, score_frame, n, args, group, make_scores(1, g))
    proxy_s, proxy_cpu = proxy_road(mp, group, make_scores(1, g), n, args.wave, args.per_get)
    buf_s, buf_cpu = _buffer_road(mp, n, g, t, False, args)
    full_s = _buffer_road(mp, n, g, t, True, args)[0]
    curve_s, curve_cpu = _buffer_road(mp, n, g, t, False, args, curve=True)
    per_group = {k: v / n * 1000 for k, v in buf_cpu.items()}
    raw_lat = _raw_latency(frames, args.latency_samples)
    lat = _latency(mp, group, args.latency_samples)
    curve_lat = _latency(mp, group, args.latency_samples, curve=True)
    row = {}
    if args.profile:
        from microcoder.bench.buffer.profile import profile_road

        row["server_split_ms_per_group"] = profile_road(mp, n, g, t, args)
    return row | {
        "G": g,
        "tokens": t,
        "bytes_per_group": size,
        "groups": n,
        "wave": args.wave,
        "per_get": args.per_get,
        "batch": args.batch,
        "window": args.window,
        "in_flight": args.in_flight,
        "groups_per_s": n / buf_s,
        "raw_groups_per_s": n / raw_s,
        "ratio": raw_s / buf_s,
        "raw_codec_groups_per_s": n / codec_s,
        "ratio_codec": codec_s / buf_s,
        "ceiling_ratio": raw_s / codec_s,
        "proxy_codec_groups_per_s": n / proxy_s,
        "ratio_vs_proxy": proxy_s / buf_s,
        "proxy_codec_cpu_ms_per_group": sum(proxy_cpu.values()) / n * 1000,
        "raw_codec_cpu_ms_per_group": sum(codec_cpu.values()) / n * 1000,
        "tokens_to_executor_groups_per_s": n / full_s,
        "ratio_tokens_to_executor": raw_s / full_s,
        "mb_per_s": n * size / buf_s / 2**20,
        "raw_mb_per_s": n * size / raw_s / 2**20,
        "p50_ms": _pct(lat, 50),
        "p99_ms": _pct(lat, 99),
        "raw_p50_ms": _pct(raw_lat, 50),
        "raw_p99_ms": _pct(raw_lat, 99),
        "encode_ms": encode_ms,
        "decode_ms": decode_ms,
        "cpu_ms_per_group": sum(buf_cpu.values()) / n * 1000,
        "raw_cpu_ms_per_group": sum(raw_cpu.values()) / n * 1000,
        "cpu_ratio": sum(raw_cpu.values()) / sum(buf_cpu.values()),
        "cpu_ms_per_group_by_process": per_group,
        "curve_groups_per_s": n / curve_s,
        "curve_ratio": buf_s / curve_s,
        "curve_cpu_ms_per_group": sum(curve_cpu.values()) / n * 1000,
        "curve_p50_ms": _pct(curve_lat, 50),
        "curve_p99_ms": _pct(curve_lat, 99),
    }


def run(args: argparse.Namespace) -> dict:
    import multiprocessing

    # numpy's OpenBLAS threads spin for a while after import in every spawned process (3 % of
    # all CPU samples each in perf, on 2 cores): nothing here uses BLAS, so keep them out.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    mp = multiprocessing.get_context("spawn")
    if args.clients:
        from microcoder.bench.buffer.load import run_clients

        return {"clients": run_clients(mp, args)}
    wanted = {x for x in args.payloads.split(",") if x}
    results = {
        f"G{g}x{t}": bench_payload(mp, g, t, args)
        for g, t in PAYLOADS
        if not wanted or f"G{g}x{t}" in wanted
    }
    return {
        "payloads": results,
        "cpu_count": os.cpu_count(),
        "load_avg": os.getloadavg()[0],
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "min_ratio": min(r["ratio"] for r in results.values()),
    }


def _split(cpu: dict) -> str:
    return "/".join(f"{cpu[k]:.2f}" for k in ("generator", "server", "executor", "learner"))


def _curve_table(result: dict) -> str:
    """What CurveZMQ (buffer.curve, a run's default) costs beside the plain socket."""
    columns = [
        ("plain/s", "groups_per_s", ">8.0f"),
        ("curve/s", "curve_groups_per_s", ">8.0f"),
        ("curve/plain", "curve_ratio", ">11.2f"),
        ("cpu ms", "cpu_ms_per_group", ">6.3f"),
        ("curve cpu", "curve_cpu_ms_per_group", ">9.3f"),
        ("p50 ms", "p50_ms", ">7.2f"),
        ("curve p50", "curve_p50_ms", ">9.2f"),
        ("p99 ms", "p99_ms", ">7.2f"),
        ("curve p99", "curve_p99_ms", ">9.2f"),
    ]
    return "\n".join(payload_table(result["payloads"], columns))


def payload_table(payloads: dict[str, dict], columns: list[tuple[str, str, str]]) -> list[str]:
    """A header, a rule and one row per payload (its name, then `columns`: title, the result's
    key, and its format spec, whose width the title is right-aligned to)."""
    titles = [f"{title:>{spec[1:].split('.')[0]}}" for title, _, spec in columns]
    head = " ".join([f"{'payload':<10}", *titles])
    rows = [
        " ".join([f"{name:<10}"] + [format(r[key], spec) for _, key, spec in columns])
        for name, r in payloads.items()
    ]
    return [head, "-" * len(head), *rows]


def format_table(result: dict) -> str:
    if "clients" in result:
        from microcoder.bench.buffer.load import clients_table

        return clients_table(result["clients"])
    head = (
        f"{'payload':<10} {'KiB':>5} {'groups/s':>9} {'raw/s':>8} {'ratio':>6} {'+tok/s':>8} "
        f"{'ratio +tok':>10} {'vs codec':>8} {'ceiling':>7} {'MiB/s':>6} {'p50 ms':>7} "
        f"{'p99 ms':>7} {'raw p50':>7} {'raw p99':>7} {'cpu ms':>6} {'raw cpu':>7} "
        f"{'gen/srv/ex/lrn cpu ms':>22}"
    )
    lines = [head, "-" * len(head)]
    for name, r in result["payloads"].items():
        lines.append(
            f"{name:<10} {r['bytes_per_group'] / 1024:>5.0f} {r['groups_per_s']:>9.0f} "
            f"{r['raw_groups_per_s']:>8.0f} {r['ratio']:>6.2f} {r['tokens_to_executor_groups_per_s']:>8.0f} "
            f"{r['ratio_tokens_to_executor']:>10.2f} {r['ratio_codec']:>8.2f} "
            f"{r['ceiling_ratio']:>7.2f} {r['mb_per_s']:>6.0f} {r['p50_ms']:>7.2f} "
            f"{r['p99_ms']:>7.2f} {r['raw_p50_ms']:>7.2f} {r['raw_p99_ms']:>7.2f} "
            f"{r['cpu_ms_per_group']:>6.3f} {r['raw_cpu_ms_per_group']:>7.3f} "
            + f"{_split(r['cpu_ms_per_group_by_process']):>22}"
        )
    from microcoder.bench.buffer.proxy import proxy_table

    lines += ["", _curve_table(result), "", proxy_table(result)]
    r = next(iter(result["payloads"].values()))
    lines.append(
        f"(unit: one group generator -> executor -> learner; waves of {r['wave']} per put, "
        f"{r['window']} puts in flight, {r['per_get']} groups per executor get (text and "
        "metadata; +tok: with the token arrays, as raw moves them), "
        f"batches of {r['batch']}; raw = same frames PUSHed gen -> exec -> learner; vs codec = "
        "ratio to raw with every endpoint encoding/decoding as the actors do; ceiling = that "
        "road's rate / raw's: the best ratio any broker can reach, even a free one; cpu = CPU ms "
        "per group, all processes and their zmq threads; "
        f"{result['cpu_count']} CPUs, load {result['load_avg']:.1f}, {result['date']})"
    )
    return "\n".join(lines)
