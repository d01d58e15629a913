"""The CPU calibration of the weight-sync event model (bench/weight_sync_sim.py `Costs`).

Each per-chunk cost is timed on its own, on one intra-op thread as the sender packs
(learner/sync/transport.py `single_thread`), median of several repeats:
- pack: `torch.cat` of 8 bf16 pieces into a staging buffer, as `WeightSender._pack` does;
- load: one `copy_` of a chunk's bytes into a model tensor, as a receiver's load does;
  each at the chunk size and at 64 KiB, fitted as fixed + bytes / rate;
- post: half the round trip of a one-element gloo broadcast between this process and a peer
  process over loopback, answered by one from the peer (the per-message software cost;
  loopback has no wire latency);
- sync_fixed: today's per-sync protocol without its buckets (ready key, header size and a 32 KiB
  header broadcast, done key), round trips with the peer;
- store_op: one key set in the sender's TCPStore from the peer's client.
Loopback's own rate for a chunk is reported (`loopback_gb_s`) but not used: the link's
bandwidth is a parameter of the model.
"""

from __future__ import annotations

import datetime
import os
import platform
import subprocess
import sys
import time
from datetime import timedelta

_PIECES = 8
_SMALL = 64 << 10
_HEADER = 32 << 10
_PREFIX = "microcoder-calib"
_TIMEOUT_S = 120.0
_TRIALS = 5


def _median(xs: list[float]) -> float:
    xs = sorted(xs)
    mid = len(xs) // 2
    return xs[mid] if len(xs) % 2 else (xs[mid - 1] + xs[mid]) / 2


def _timed(fn, repeats: int) -> float:
    fn()  # warm-up: first-touch page faults belong to allocation, not to the copy
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return _median(times)


def _fit(small_s: float, big_s: float, big_bytes: int) -> tuple[float, float]:
    """(fixed seconds, GB/s) of a cost measured at _SMALL and big_bytes."""
    per_byte = max((big_s - small_s) / (big_bytes - _SMALL), 1e-15)
    return max(small_s - _SMALL * per_byte, 0.0), 1e-9 / per_byte


def copy_costs(chunk_bytes: int, repeats: int = 7) -> dict[str, float]:
    """pack_fixed_s, pack_gb_s, load_fixed_s, load_gb_s measured in this process."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        out = {}
        for what in ("pack", "load"):
            times = []
            for nbytes in (_SMALL, chunk_bytes):
                elems = nbytes // 2 // _PIECES
                pieces = [torch.full((elems,), 0.5, dtype=torch.bfloat16) for _ in range(_PIECES)]
                dst = torch.empty(elems * _PIECES, dtype=torch.bfloat16)
                src = torch.cat(pieces)
                if what == "pack":
                    times.append(_timed(lambda p=pieces, d=dst: torch.cat(p, out=d), repeats))
                else:
                    times.append(_timed(lambda s=src, d=dst: d.copy_(s), repeats))
            fixed, rate = _fit(times[0], times[1], chunk_bytes)
            out[f"{what}_fixed_s"] = fixed
            out[f"{what}_gb_s"] = rate
        return out
    finally:
        torch.set_num_threads(before)


def _group(store, rank: int):
    import torch.distributed as dist

    prefixed = dist.PrefixStore(f"{_PREFIX}/pg", store)
    return dist.ProcessGroupGloo(prefixed, rank, 2, timedelta(seconds=_TIMEOUT_S))


def _broadcast(pg, tensor, root: int = 0):
    import torch.distributed as dist

    opts = dist.BroadcastOptions()
    opts.rootRank = root
    pg.broadcast([tensor], opts).wait()


def _pings(pg, one, pings: int) -> None:
    """`pings` round trips: a one-element broadcast from rank 0, answered by one from rank 1."""
    for _ in range(pings):
        _broadcast(pg, one, 0)
        _broadcast(pg, one, 1)


def link_costs(chunk_bytes: int, pings: int = 40, rounds: int = 20) -> dict[str, float]:
    """post_s, sync_fixed_s, store_op_s and loopback_gb_s, with a peer process over loopback."""

    import torch
    import torch.distributed as dist

    from microcoder.learner.distributed import free_port

    port = free_port()
    args = [str(port), str(chunk_bytes), str(pings), str(rounds)]
    proc = subprocess.Popen([sys.executable, "-m", "microcoder.bench.weight_sync_calib", *args])
    try:
        store = dist.TCPStore(
            "127.0.0.1", port, 2, is_master=True, timeout=timedelta(seconds=_TIMEOUT_S)
        )
        pg = _group(store, 0)
        one = torch.zeros(1, dtype=torch.int64)
        halves = []
        for _ in range(_TRIALS):
            start = time.perf_counter()
            _pings(pg, one, pings)
            halves.append((time.perf_counter() - start) / pings / 2)
        post_s = _median(halves)
        chunk = torch.ones(chunk_bytes, dtype=torch.uint8)
        wire = []
        for _ in range(5):
            start = time.perf_counter()
            _broadcast(pg, chunk, 0)
            _broadcast(pg, one, 1)
            wire.append(time.perf_counter() - start - 2 * post_s)
        header = torch.ones(_HEADER, dtype=torch.uint8)
        sync = []
        for n in range(rounds):
            start = time.perf_counter()
            store.wait([f"{_PREFIX}/ready/{n}"])
            _broadcast(pg, torch.tensor([_HEADER], dtype=torch.int64))
            _broadcast(pg, header)
            store.wait([f"{_PREFIX}/done/{n}"])
            sync.append(time.perf_counter() - start)
        store.wait([f"{_PREFIX}/store_op"])
        store_op_s = float(store.get(f"{_PREFIX}/store_op").decode())
        proc.wait(timeout=_TIMEOUT_S)
    except Exception as err:
        proc.kill()
        raise RuntimeError(
            f"weight-sync calibration: the peer process (pid {proc.pid}) did not complete its "
            f"round trips within {_TIMEOUT_S:.0f} s ({err}); rerun, or pass --calibration FILE "
            "with a saved calibration"
        ) from err
    return {
        "post_s": post_s,
        "sync_fixed_s": _median(sync),
        "store_op_s": store_op_s,
        "loopback_gb_s": chunk_bytes / max(_median(wire), 1e-9) / 1e9,
    }


def calibrate(chunk_bytes: int) -> dict:
    """The `calibration` block of the bench's JSON: values and where each came from."""

    import torch

    values = {**copy_costs(chunk_bytes), **link_costs(chunk_bytes)}
    when = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    return {
        "values": values,
        "source": f"CPU measurement on {platform.node()} ({os.cpu_count()} cores), {when}",
        "chunk_bytes": chunk_bytes,
        "torch": torch.__version__,
        "how": {
            "pack_fixed_s, pack_gb_s": f"torch.cat of {_PIECES} bf16 pieces into a staging "
            f"buffer, one thread, at {_SMALL >> 10} KiB and the chunk size, median of 7: "
            "fixed + bytes / rate",
            "load_fixed_s, load_gb_s": "copy_ of a chunk into a bf16 tensor, one thread, the "
            "same two sizes and fit",
            "post_s": "half the round trip of a one-element gloo broadcast over loopback between "
            f"two processes, answered by the peer's, median of {_TRIALS} means of 40",
            "sync_fixed_s": f"ready key, header size and a {_HEADER >> 10} KiB header broadcast, "
            "done key (today's per-sync protocol without buckets), median of 20",
            "store_op_s": "one TCPStore set from the peer's client, mean of 200",
            "loopback_gb_s": "a chunk over a gloo broadcast on loopback (not used: bandwidth is --gbps)",
        },
    }


def peer(port: int, chunk_bytes: int, pings: int, rounds: int) -> None:
    """The peer process: answer the sender's round trips in the same order."""

    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    store = dist.TCPStore(
        "127.0.0.1", port, 2, is_master=False, timeout=timedelta(seconds=_TIMEOUT_S)
    )
    pg = _group(store, 1)
    one = torch.zeros(1, dtype=torch.int64)
    for _ in range(_TRIALS):
        _pings(pg, one, pings)
    chunk = torch.empty(chunk_bytes, dtype=torch.uint8)
    for _ in range(5):
        _broadcast(pg, chunk, 0)
        _broadcast(pg, one, 1)
    header = torch.empty(_HEADER, dtype=torch.uint8)
    for n in range(rounds):
        store.set(f"{_PREFIX}/ready/{n}", "1")
        _broadcast(pg, one)
        _broadcast(pg, header)
        store.set(f"{_PREFIX}/done/{n}", "1")
    start = time.perf_counter()
    for i in range(200):
        store.set(f"{_PREFIX}/op/{i}", "1")
    store.set(f"{_PREFIX}/store_op", repr((time.perf_counter() - start) / 200))


if __name__ == "__main__" and len(sys.argv) == 5:
    peer(*(int(a) for a in sys.argv[1:]))
