"""The `--clients N` run of `microcoder bench buffer`: server, worker processes of simulated
clients (bench/buffer/clients.py), the learner thread, the RSS sampler, the accounting checks."""

from __future__ import annotations

import math
import os
import pstats
import shutil
import statistics
import threading
import time

from microcoder.bench.buffer import clients, road
from microcoder.bench.buffer.profile import split
from microcoder.buffer.keys import throwaway_keys

RSS_EVERY_S = 0.25


def rss_mb(pid: int) -> float:
    """Resident set size of process `pid` in MiB (VmRSS of /proc/PID/status)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


def _pcts(samples: list[float]) -> dict:
    if len(samples) < 2:
        return {"n": len(samples), "p50_ms": math.nan, "p99_ms": math.nan, "max_ms": math.nan}
    q = statistics.quantiles(samples, n=100, method="inclusive")  # never beyond the max
    return {"n": len(samples), "p50_ms": q[49], "p99_ms": q[98], "max_ms": max(samples)}


def _learner(address: str, batch: int, stop: float, out: dict) -> None:
    """get_batch + announce_version until `stop` (admission control live), as learner rank 0."""
    from microcoder.buffer.client import BufferClient, BufferTimeout

    version = got = 0
    with BufferClient(address, "learner", timeout_s=30) as client:
        while time.monotonic() < stop:
            try:
                b = client.get_batch(batch, version=version, timeout_s=stop - time.monotonic())
            except BufferTimeout:
                break
            got += len(b.groups)
            version += 1
            client.announce_version(version)
        out["stats"] = client.stats()
    out.update(consumed_by_learner=got, versions=version)


def run_clients(mp, args) -> dict:
    """One load run; returns the figures and the accounting (see clients.py)."""

    n = args.clients
    exes = max(1, n // 4)
    procs = max(1, min(args.client_procs, n))
    batch = args.batch
    in_flight = args.in_flight or math.ceil(1.5 * n / batch) * batch
    k = max(0, in_flight // batch - 1)
    soft, hard = clients.raise_nofile()
    keys = throwaway_keys()
    parent, child = mp.Pipe()
    profile_path = f"{keys}.prof"
    target = clients.serve_loaded
    targs = (child, 4096, batch, k, str(keys))
    if args.profile:
        target = clients.serve_profiled
        targs = (child, 4096, batch, k, profile_path, str(keys))
    server = mp.Process(target=target, args=targs, daemon=True)
    server.start()
    address = parent.recv()
    time.sleep(0.5)
    rss = {"start": rss_mb(server.pid)}
    cpu0 = road.cpu_s(server.pid)
    wall0 = time.monotonic()
    plan = _timeline(args, time.monotonic() + 2.0, clients.SETTLE_S)  # + 2 s: workers connect
    t0 = plan["t0"]
    stop = plan["stop"]
    drain = plan["drain"]
    queue = mp.Queue()
    workers = [
        mp.Process(
            target=clients.worker,
            args=(address, i, len(range(i, n, procs)), len(range(i, exes, procs)), plan, queue),
            daemon=True,
        )
        for i in range(procs)
    ]
    for w in workers:
        w.start()
    learned: dict = {}
    learner = threading.Thread(
        target=_learner, args=(address, batch, drain + 1.0, learned), daemon=True
    )
    learner.start()
    load = [os.getloadavg()[0]]
    samples = _rss_samples(server.pid, learner, until=drain + 40)
    load.append(os.getloadavg()[0])
    server_cpu = road.cpu_s(server.pid) - cpu0
    server_wall = time.monotonic() - wall0
    split = _profile_split(server, parent, profile_path) if args.profile else None
    server_timings = None if args.profile else _server_timings(server, parent)
    tallies = []
    for _ in workers:
        try:
            tallies.append(queue.get(timeout=max(1.0, drain + 45 - time.monotonic())))
        except Exception:  # a missing worker is reported as such
            break
    _stop_all([*workers, server])
    begin = t0 + args.ramp_s + clients.SETTLE_S
    rss |= _rss_figures(samples, begin, stop)
    shutil.rmtree(keys, ignore_errors=True)
    extra = {"server_cpu_fraction": server_cpu / server_wall, "server_split_s": split}
    if server_timings is not None:  # in the server: wall (preemption included) and thread CPU
        extra["server_ms"] = _server_ms(server_timings, begin, stop)
    return extra | _report(
        args,
        n,
        exes,
        procs,
        batch,
        in_flight,
        tallies,
        learned,
        rss,
        load,
        (begin, stop),
        (soft, hard),
    )


def _timeline(args, t0: float, settle_s: float) -> dict:
    """The clients' plan: start at `t0`, ramp, settle, run `duration_s` until `stop`, then drain
    (what is in flight is sampled and scored) until `drain`."""
    stop = t0 + args.ramp_s + settle_s + args.duration_s
    drain = stop + 4 * args.sample_s + args.score_s * args.per_get + 1.5
    return {
        "t0": t0,
        "ramp_s": args.ramp_s,
        "stop": stop,
        "drain": drain,
        "sample_s": args.sample_s,
        "score_s": args.score_s,
        "per_get": args.per_get,
    }


def _server_ms(server_timings: dict, begin: float, stop: float) -> dict:
    """Percentiles of the server's handle and parked times (wall, preemption included, and thread
    CPU) over the steady window [begin, stop]."""
    return {
        f"{kind}_{i}": _pcts([x[j] for x in server_timings[kind] if begin <= x[0] <= stop])
        for kind in ("handle", "parked")
        for j, i in ((1, "wall"), (2, "cpu"))
    }


def _rss_samples(pid: int, learner: threading.Thread, until: float) -> list[tuple[float, float]]:
    """(time, resident MB) of process `pid` every RSS_EVERY_S while the learner thread runs."""
    samples = []
    while learner.is_alive() and time.monotonic() < until:
        samples.append((time.monotonic(), rss_mb(pid)))
        time.sleep(RSS_EVERY_S)
    return samples


def _stop_all(procs: list) -> None:
    """Join each process, terminating the ones still alive after 5 s."""
    for p in procs:
        p.join(5)
        if p.is_alive():
            p.terminate()
            p.join(5)


def _rss_figures(samples: list[tuple[float, float]], begin: float, stop: float) -> dict:
    """The server's resident set (MB) from its (time, rss) samples: at the end, at the most, and
    over the steady window [begin, stop] (first, last, every 5 s: a plateau = bounded)."""
    steady = [s for t, s in samples if begin <= t <= stop]
    every = round(5.0 / RSS_EVERY_S)
    return {
        "end": samples[-1][1] if samples else math.nan,
        "max": max(s for _, s in samples) if samples else math.nan,
        "steady_first": steady[0] if steady else math.nan,
        "steady_last": steady[-1] if steady else math.nan,
        "steady_every_5s": [round(x, 1) for x in steady[::every]],
    }


def _report(args, n, exes, procs, batch, in_flight, tallies, learned, rss, load, window, nofile):
    lo, hi = window
    lat = {
        kind: _pcts([ms for tl in tallies for t, ms in tl["lat"][kind] if lo <= t <= hi])
        for kind in ("lease", "put", "ex_lease", "ex_put", "loop_lag")
    }
    counts = (
        {k: sum(tl["counts"][k] for tl in tallies) for k in tallies[0]["counts"]} if tallies else {}
    )
    stats = learned.get("stats", {})
    depths = stats.get("depths", {})
    lost = {
        "workers_missing": procs - len(tallies),
        "timeouts": counts.get("timeouts", 0),
        "errors": counts.get("errors", 0),
        "rejected": counts.get("rejected", 0),
        "failed": stats.get("failed", -1),
        "leased_not_put": counts.get("leased", 0)
        - counts.get("put_accepted", 0)
        - counts.get("dropped_on_put", 0),
        "issued_not_leased": stats.get("issued", 0) - counts.get("leased", 0),
        "held_by_actors_at_end": depths.get("leased", 0) + depths.get("scoring", 0),
        "unscored_at_end": depths.get("unscored", 0),
    }
    return {
        "clients": n,
        "executors": exes,
        "client_procs": procs,
        "batch": batch,
        "in_flight": in_flight,
        "duration_s": hi - lo,
        "groups_per_s": sum(1 for tl in tallies for t, _ in tl["lat"]["put"] if lo <= t <= hi)
        / max(1e-9, hi - lo),
        "latency": lat,
        "counts": counts,
        "invariant_ok": stats.get("invariant_ok", False),
        "invariant_violations": stats.get("invariant_violations", ["no stats"]),
        "issued": stats.get("issued", 0),
        "consumed": stats.get("consumed", 0),
        "in_flight_at_end": stats.get("in_flight", -1),
        "dropped_stale": stats.get("dropped_stale", -1),
        "lost": lost,
        "nothing_lost": stats.get("invariant_ok", False) and not any(lost.values()),
        "versions": learned.get("versions", 0),
        "client_proc_cpu_fraction": [tl["cpu_fraction"] for tl in tallies],
        "server_rss_mb": rss,
        "nofile": list(nofile),
        "load_avg": load,
        "cpu_count": os.cpu_count(),
        "date": time.strftime("%Y-%m-%d %H:%M"),
    }


def clients_table(r: dict) -> str:
    head = f"{'call':<22} {'n':>7} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8}"
    names = {
        "lease": "generator get_prompts",
        "put": "generator put_unscored",
        "ex_lease": "executor get_unscored",
        "ex_put": "executor put_scored",
        "loop_lag": "client loop lag (10ms)",
    }
    lines = [head, "-" * len(head)]
    for kind, name in names.items():
        x = r["latency"][kind]
        lines.append(
            f"{name:<22} {x['n']:>7} {x['p50_ms']:>8.2f} {x['p99_ms']:>8.2f} {x['max_ms']:>8.1f}"
        )
    m = r["server_rss_mb"]
    lines += [
        "",
        f"clients {r['clients']} generators + {r['executors']} executors in "
        f"{r['client_procs']} processes, batch {r['batch']}, in flight <= {r['in_flight']}, "
        f"{r['duration_s']:.0f} s steady: {r['groups_per_s']:.0f} groups/s, "
        f"{r['versions']} versions",
        f"accounting: invariant {'ok' if r['invariant_ok'] else r['invariant_violations']}, "
        f"issued {r['issued']} = consumed {r['consumed']} + in flight {r['in_flight_at_end']} "
        f"+ dropped stale {r['dropped_stale']} + failed {r['lost']['failed']}; "
        f"nothing lost: {r['nothing_lost']} {r['lost']}",
        f"held back (empty leases): {r['counts'].get('held_back', 0)}, puts refused full: "
        f"{r['counts'].get('put_full', 0)}",
        f"server RSS MiB: start {m['start']:.0f}, steady {m['steady_first']:.0f} -> "
        f"{m['steady_last']:.0f}, max {m['max']:.0f}, end {m['end']:.0f}; steady every 5 s: "
        + " ".join(f"{x:.0f}" for x in m["steady_every_5s"]),
        f"server CPU {r['server_cpu_fraction']:.0%} of one core over the run, each client "
        "process "
        + "/".join(f"{x:.0%}" for x in r["client_proc_cpu_fraction"])
        + (_split_line(r["server_split_s"]) if r.get("server_split_s") else ""),
        _server_line(r.get("server_ms")),
        f"(RLIMIT_NOFILE {r['nofile'][0]}/{r['nofile'][1]}, {r['cpu_count']} CPUs, load "
        f"{r['load_avg'][0]:.1f} -> {r['load_avg'][1]:.1f}, {r['date']}; executor get_unscored "
        "includes the long-poll wait for work)",
    ]
    return "\n".join(lines)


def _profile_split(server, conn, path: str) -> dict | None:
    """Stop the profiled server (SIGTERM), read its profile: ms per consumed group by part."""

    server.terminate()
    if not conn.poll(30):
        return None
    conn.recv()
    parts = split(pstats.Stats(path))
    os.unlink(path)
    return parts


def _split_line(x: dict) -> str:
    total = x["total"] or 1.0
    parts = ", ".join(
        f"{k} {x[k] / total:.0%}" for k in ("recv", "decode", "state", "send", "other")
    )
    return f"; its loop (cProfile): {parts}; re-tried long polls {x['of_which_parked'] / total:.0%}"


def _server_timings(server, conn) -> dict | None:
    """Stop the server (SIGTERM) and receive its per-request timings (clients.serve_loaded)."""
    server.terminate()
    return conn.recv() if conn.poll(30) else None


def _server_line(x: dict | None) -> str:
    if not x:
        return "in the server: not timed (--profile)"
    h = x["handle_wall"]
    hc = x["handle_cpu"]
    p = x["parked_wall"]
    return (
        f"in the server, per request: p50 {h['p50_ms']:.2f} / p99 {h['p99_ms']:.2f} / max "
        f"{h['max_ms']:.1f} ms wall, p99 {hc['p99_ms']:.2f} ms CPU; re-trying parked polls per "
        f"step: p50 {p['p50_ms']:.2f} / p99 {p['p99_ms']:.2f} ms wall"
    )
