"""Processes of `microcoder bench buffer`: the road generator -> executor -> learner, through the
buffer and as raw PUSH/PULL, with the call patterns of actors/generator.py, executor.py and
learner_rank.py. Every function here runs in a spawned child (or the parent for the learner).
"""

from __future__ import annotations

import os
import time
from contextlib import contextmanager
from dataclasses import replace

import zmq

from microcoder.buffer.config import BufferConfig
from microcoder.protocol import Group, GroupScores, Response, Score

PROMPT_TOKENS = 256


@contextmanager
def released(ready, go, cpu):
    """A child's timed part: signal `ready`, wait for `go`, run the body; `cpu` gets the CPU
    seconds the body took (all threads of the process, zmq's included)."""
    ready.set()
    go.wait()
    t0 = time.process_time()
    yield
    cpu.value = time.process_time() - t0


@contextmanager
def zmq_child(ready, go, cpu, *ends: tuple[int, str, bool]):
    """A raw child's sockets, one per end (zmq socket type, address, bind?), opened before it
    signals `ready`; the body is timed as by `released`, and so is the close: PUSH sockets send
    all they hold first (a multiprocessing child ends with os._exit, dropping queued messages,
    and the sending is part of the cost)."""

    ctx = zmq.Context()
    socks = [ctx.socket(kind) for kind, _, _ in ends]
    for sock, (_, address, bind) in zip(socks, ends, strict=True):
        (sock.bind if bind else sock.connect)(address)
    with released(ready, go, cpu):
        yield socks
        for sock in socks:
            sock.close(linger=-1 if sock.type == zmq.PUSH else 0)
        ctx.term()


def received(pull, n: int, width: int, per_get: int):
    """The frames of `per_get` groups at a time (`width` frames a group) as they arrive on
    `pull`, until `n` groups came."""
    done = 0
    while done < n:
        frames = pull.recv_multipart(copy=False)
        for i in range(0, len(frames), width * per_get):
            yield frames[i : i + width * per_get]
        done += len(frames) // width


def make_group(group_id: int, problem_id: str, g: int, tokens: int):
    """G responses of `tokens` int32 ids + float32 log-probs + ~3 chars of text per token."""
    import numpy as np

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
    return Group(group_id, problem_id, "p" * 4 * PROMPT_TOKENS, prompt, responses, "gen")


def make_scores(group_id: int, g: int):
    """What an executor hands in: one Score per response (5 tests each)."""

    score = Score(0.0, "WA", 3, 5, "")
    return GroupScores(group_id, [score] * g, "ex")


def bench_server(n: int, batch_size: int, max_staleness: int, keys_dir: str | None):
    """A buffer server over `n` prompts p0..p<n-1> with the benches' settings: no high-water
    mark, 1 GiB frames, CurveZMQ when `keys_dir` is given."""
    from microcoder.buffer.prompts import DatasetPrompts
    from microcoder.buffer.server import BufferServer

    cfg = BufferConfig(
        max_staleness=max_staleness,
        high_water_groups=10**6,
        max_frame_mb=1024,
        curve=keys_dir is not None,
        keys_dir=keys_dir or "",
    )
    return BufferServer(cfg, DatasetPrompts([f"p{i}" for i in range(n)]), batch_size=batch_size)


def serve(
    conn, n: int, batch: int = 0, max_staleness: int = 10**6, keys_dir: str | None = None
) -> None:
    """The buffer server process, with admission control as in a run (`batch`, `max_staleness`:
    at most (max_staleness + 1) * batch groups issued and not yet trained); batch 0 = none.
    `keys_dir`: CurveZMQ keys (the default of a run); None = the plain socket (buffer.curve off).
    The clients find the keys through the address the server publishes."""
    from microcoder.buffer.server import dedicate_process

    server = bench_server(n, batch or n, max_staleness, keys_dir)
    conn.send(server.address)
    dedicate_process()
    server.serve_forever()


def lease(client, n: int) -> list:
    out = []
    while len(out) < n:
        out += client.get_prompts(n - len(out)).assignments
    return out


def buffer_generator(address: str, n: int, g: int, t: int, wave: int, window: int, ready, go, cpu):
    """Generator: leases a wave of prompts (as many as admission control allows), hands them in
    as groups sampled at the version they were issued at (encoded each time), with up to
    `window` puts in flight; leasing runs on a second client while puts are in flight."""
    from microcoder.buffer.client import BufferClient

    client = BufferClient(address, "gen", timeout_s=120)
    lessor = BufferClient(address, "gen", timeout_s=120)
    template = make_group(0, "", g, t)
    at_version: dict[int, list] = {}  # policy version -> the template's responses at it

    def waves():
        left = n
        while left > 0:
            got = lessor.get_prompts(min(wave, left), wait_s=5).assignments
            left -= len(got)
            for v in {a.issued_version for a in got} - at_version.keys():
                at_version[v] = [replace(r, policy_version=v) for r in template.responses]
            yield [
                replace(
                    template,
                    group_id=a.group_id,
                    problem_id=a.problem_id,
                    responses=at_version[a.issued_version],
                )
                for a in got
            ]

    with released(ready, go, cpu):
        if window > 1:
            client.put_unscored_many(waves(), window)
        else:
            for w in waves():
                if w:
                    client.put_unscored(w)
        client.close()
        lessor.close()


def buffer_executor(
    address: str, n: int, g: int, per_get: int, tokens: bool, ready, go, cpu
) -> None:
    """Executor: leases `per_get` groups per get (decoded to Group records; with `tokens` their
    token arrays too, as raw moves them), hands in scores."""
    from microcoder.buffer.client import BufferClient

    client = BufferClient(address, "ex", timeout_s=120)
    template = make_scores(0, g)
    with released(ready, go, cpu):
        done = 0
        while done < n:
            groups = client.get_unscored(per_get, wait_s=5, tokens=tokens)
            assert all(len(x.responses) == g for x in groups)
            if groups:
                client.put_scored([replace(template, group_id=x.group_id) for x in groups])
            done += len(groups)
        client.close()


def buffer_learner(address: str, n: int, batch: int, announce: bool) -> int:
    """Learner: batches of `batch` scored groups (decoded) until `n` groups arrived; with
    `announce` (admission control on) it announces the next version after each batch, as after
    an optimizer step."""
    from microcoder.buffer.client import BufferClient

    got = version = 0
    with BufferClient(address, "learner", timeout_s=120) as client:
        while got < n:
            b = client.get_batch(min(batch, n - got), version=version, timeout_s=30)
            got += len(b.groups)
            if announce:
                version += 1
                client.announce_version(version)
        stats = client.stats()
    assert stats["invariant_ok"] and stats["dropped_stale"] == 0, stats
    return got


def raw_generator(address: str, frames: list, n: int, wave: int, codec, ready, go, cpu) -> None:
    """Raw: PUSH one wave of groups per multipart message: the same encoded frames every time,
    or with `codec` (a template Group) each group encoded as it is sent, like the buffer road."""

    from microcoder.buffer.codec import group_frames

    groups = [replace(codec, group_id=i) for i in range(n)] if codec is not None else None
    with zmq_child(ready, go, cpu, (zmq.PUSH, address, False)) as (sock,):
        for i in range(0, n, wave):
            k = min(wave, n - i)
            if groups is None:
                sock.send_multipart(frames * k, copy=False)
            else:
                encoded = [f for g in groups[i : i + k] for f in group_frames(g)]
                sock.send_multipart(encoded, copy=False)


def raw_executor(
    pull_addr: str, push_addr: str, scores: bytes, n: int, per_get: int, codec, ready, go, cpu
):
    """Raw: PULL waves, PUSH `per_get` groups per message to the learner, each as its meta and
    tensors frames + a scores frame (the learner does not read the text). With `codec` (a
    template GroupScores) each group is decoded (meta + text, as a judge reads it) and its
    scores encoded, like the buffer road's executor."""

    from microcoder.buffer.codec import read_group, scores_frame

    ends = (zmq.PULL, pull_addr, True), (zmq.PUSH, push_addr, False)
    with zmq_child(ready, go, cpu, *ends) as (pull, push):
        for part in received(pull, n, 3, per_get):
            out = []
            for j in range(0, len(part), 3):
                meta, text, tensors = part[j : j + 3]
                if codec is not None:
                    group = read_group(meta, text)
                    scores = scores_frame(replace(codec, group_id=group.group_id))
                out += (meta, tensors, scores)
            push.send_multipart(out, copy=False)


def raw_learner(pull, n: int, codec: bool) -> int:
    """Raw: PULL until `n` groups arrived (with `codec`: each decoded, as get_batch does)."""
    from microcoder.buffer.codec import read_group, read_scores

    got = 0
    while got < n:
        frames = pull.recv_multipart(copy=False)
        if codec:
            for j in range(0, len(frames), 3):
                read_group(frames[j], None, frames[j + 1])
                read_scores(frames[j + 2])
        got += len(frames) // 3  # meta, tensors, scores per group
    return got


def start(mp, target, args) -> tuple:
    """Start a child that signals `ready`, starts on `go` and reports its CPU seconds from then
    (all its threads, zmq's included) in `cpu`; returns (process, go, cpu)."""
    ready = mp.Event()
    go = mp.Event()
    cpu = mp.Value("d", float("nan"))
    proc = mp.Process(target=target, args=(*args, ready, go, cpu), daemon=True)
    proc.start()
    while not ready.wait(0.5):
        if not proc.is_alive():
            raise RuntimeError(f"benchmark process {target.__name__} died (exit {proc.exitcode})")
    return proc, go, cpu


def cpu_s(pid: int) -> float:
    """CPU seconds (user + system, all threads) used so far by process `pid` (Linux /proc)."""

    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def timed_road(mp, children: list[tuple], learn, others: dict | None = None) -> tuple[float, dict]:
    """Start every child, release them at once, time `learn()` (the learner in this process).
    Returns (seconds, CPU seconds per role during the run: each child by function name, each of
    `others` (name -> pid of a process already running, e.g. the server) and `learner`)."""
    started = [(t.__name__, *start(mp, t, args)) for t, args in children]
    before = {name: cpu_s(pid) for name, pid in (others or {}).items()}
    me = time.process_time()
    t0 = time.perf_counter()
    for _, _, go, _ in started:
        go.set()
    learn()
    elapsed = time.perf_counter() - t0
    cpu = {"learner": time.process_time() - me}
    cpu |= {name: cpu_s(pid) - before[name] for name, pid in (others or {}).items()}
    for name, proc, _, value in started:
        proc.join(60)
        cpu[name.split("_", 1)[1]] = value.value
    return elapsed, cpu
