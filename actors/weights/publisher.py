"""Weight sync between learner rank 0 and the generators, pull-based, over learner/sync/transport.py.

Each generator owns a private broadcast group with learner rank 0 (a *channel*): the learner's
`WeightSender` hosts the store, and every worker of the generator's vLLM engine joins through
the worker extension (actors/engines/worker_ext.py) — in the worker's own process, so the same path
serves the in-process CPU engine and multi-process CUDA engines. A tensor-parallel engine of TP
workers makes a channel of 1 + TP ranks (`channel_rank`): worker w joins as rank 1 + w, every
worker receives the full tensors and its `reload_weights` (vLLM's checkpoint-format load path)
keeps only its own shard, as when it loads a checkpoint. The engine knows its worker count, the
learner does not: the sender takes the channel's size from the workers' declaration.

Why one channel per generator instead of one group of all generators: generators come and go
on a live run (`scale`), die and restart; a fixed-size group would have to be torn down and
rebuilt by everyone on each change, and one dead member would stall every sync. gloo's broadcast
sends to each peer anyway, so N channels cost the same bytes as one group of N+1.

Pull, not push: after each step the learner keeps the newest full weights (a CPU copy taken by
the collective gather) and never waits for generators; a generator asks rank 0's version every
`generator.weight_poll_s` and, when it is newer than its own, asks rank 0 to send and goes on
generating until rank 0 is ready to (actors/weights/pull.py: over NCCL rank 0 first waits for the
learner's step, `WorkLock`); only then does it pull the weights into its engine (`update_engine`:
pause, `PendingSync.receive`, relabel, reset the prefix cache, resume), so the pause lasts the
transfer, not the step. Timeouts on both sides name the peer.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, get_args

from microcoder.actors.config import InflightKV


def node_ip() -> str:
    """This process's node IP as Ray reports it; loopback in a process not connected to Ray."""
    import ray

    return ray.util.get_node_ip_address() if ray.is_initialized() else "127.0.0.1"


PAUSE_HOLD_S = 2.0
"""How long rank 0 holds `WorkLock` (an NCCL channel) after telling a generator it is ready to
send, waiting for the generator's workers to start receiving: its loop sees the signal at its
next tick, pauses the engine ("keep": at once) and calls its workers. A generator slower than
this (a `between_groups` drain, a busy host) or dead is waited for without the lock, so it
never holds the learner's next train for longer; a slow one then gets the broadcast once the
lock is free again (after that train's publish at worst, within `learner.sync_timeout_s`)."""


class _Channel:
    """One opening of generator `name`'s channel: the thread that builds its `WeightSender`, and
    then the sender or the error that build ended with. Each `open_channel` makes a new one, so
    whatever happens to an old opening (its build fails late, its send fails) stays with it."""

    def __init__(self, name: str, port: int):
        self.name = name
        self.port = port
        self.sender: Any = None
        self.error: BaseException | None = None
        self.thread: threading.Thread | None = None

    def close(self) -> None:
        sender = self.sender
        self.sender = None
        if sender is not None:
            try:
                sender.close()
            except Exception:
                pass


class WeightPublisher:
    """Learner rank 0: the newest weights, and one WeightSender channel per generator.

    `host`: the address the channels bind and publish to the generators; None = the IP of the
    node this process runs on, as Ray reports it (127.0.0.1 on a local run, loopback outside Ray).

    A generator whose sync failed reopens its channel while rank 0's old send may still be
    waiting on the old one: every opening is its own `_Channel`, and a send that fails closes
    and forgets only the channel it used, never a newer one opened meanwhile."""

    def __init__(self, timeout_s: float, host: str | None = None, device: str = "cpu"):
        self.timeout_s = timeout_s
        self.host = host or node_ip()
        self.device = device
        self.version = -1
        self._state: dict = {}
        self._channels: dict[str, _Channel] = {}
        self._lock = threading.Lock()
        self.listeners: list[Callable[[int], None]] = []
        """Called with each version `publish` keeps (the relay's hub: actors/weights/relay_hub.py)."""

    def publish(self, version: int, state: dict) -> None:
        """Keep `state` (full CPU weights) as the weights of `version`. One tensor under two
        names (a tied head: `lm_head.weight` is `model.embed_tokens.weight`) is kept once, under
        its first name (`served_names`)."""
        state = served_names(state)
        with self._lock:
            self._state = state
            self.version = version
        for listener in self.listeners:
            listener(version)

    def newest(self) -> tuple[dict, int]:
        """(the newest weights, their version), as `publish` kept them."""
        with self._lock:
            return self._state, self.version

    def open_channel(self, name: str, receivers: int | None = None) -> dict[str, Any]:
        """Start a sender for generator `name` (it completes when the generator's workers join);
        the channel it replaces, if any, is closed.

        `receivers`: the engine's worker count when known; None lets the workers declare it."""
        from microcoder.learner.distributed import free_port
        from microcoder.learner.sync.transport import WeightSender

        channel = _Channel(name, free_port(self.host))

        def build() -> None:
            try:
                sender = WeightSender(
                    self.host, channel.port, receivers, timeout_s=self.timeout_s, device=self.device
                )
            except BaseException as err:  # reported to the generator on send
                channel.error = err
                return
            with self._lock:
                current = self._channels.get(name) is channel
                if current:
                    channel.sender = sender
            if not current:  # replaced while it was built: nobody will send on it
                sender.close()

        channel.thread = threading.Thread(target=build, name=f"weights-{name}", daemon=True)
        with self._lock:
            old = self._channels.get(name)
            self._channels[name] = channel
        if old is not None:
            old.close()
        channel.thread.start()
        return {
            "host": self.host,
            "port": channel.port,
            "first_rank": 1,
            "world_size": None if receivers is None else receivers + 1,
            "name": name,
            "timeout_s": self.timeout_s,
            "device": self.device,
        }

    def _built(self, name: str) -> _Channel | None:
        """Generator `name`'s current channel once its build ended (waits up to timeout_s)."""
        with self._lock:
            channel = self._channels.get(name)
        if channel is not None and channel.thread is not None:
            channel.thread.join(self.timeout_s)
        return channel

    def sends_from_device(self, name: str) -> bool:
        """Whether generator `name`'s channel broadcasts from the learner's GPU (NCCL), i.e. is a
        collective on the device FSDP2's own NCCL group uses. A gloo channel sends the CPU copy
        `publish` keeps and touches no device. Waits for the channel to be built, as `send` does."""
        channel = self._built(name)
        sender = None if channel is None else channel.sender
        return sender is not None and sender.device.type != "cpu"

    def send(
        self,
        name: str,
        ticket: str | None = None,
        port: int | None = None,
        exclusive: Callable[[], AbstractContextManager[float]] | None = None,
    ) -> dict:
        """Broadcast the newest weights to generator `name` over its current channel. When the
        send fails, that channel (and only that one) is closed and forgotten: the generator
        reopens; a channel opened while this send ran is left alone.

        `ticket`: the generator waits for this send's ready signal before it pauses its engine
        (actors/weights/pull.py); it is given just before the broadcast. `port`: the channel the
        generator asked on; a send asked on a channel since replaced is refused (the generator
        gave up on it and reopened), so it never takes a newer channel's round.

        `exclusive` (an NCCL channel: rank 0's `WorkLock.send`, yielding the seconds it waited)
        is held from the ready signal to the end of the broadcast. A generator that has not
        started receiving within `PAUSE_HOLD_S` of the signal (a slow pause, a drain, or a
        generator that died) is then waited for without it, up to `timeout_s`, and the lock is
        taken again for the broadcast: one generator never holds the learner's next step longer
        than that."""
        channel = self._built(name)
        if port is not None and (channel is None or channel.port != port):
            raise RuntimeError(
                f"weights for generator {name}: asked on channel port {port}, which it has "
                "replaced since (it gave up on that send and reopened); nothing was sent"
            )
        if channel is not None and channel.error is not None:
            self._forget(channel)
            raise RuntimeError(f"weight channel to generator {name} failed: {channel.error}")
        sender = None if channel is None else channel.sender
        if sender is None:
            raise RuntimeError(
                f"no weight channel to generator {name}: it did not join within "
                f"{self.timeout_s:.0f} s (raise learner.sync_timeout_s if engines start slowly)"
            )
        try:
            if exclusive is None:
                if ticket is not None:
                    sender.signal_ready(ticket)
                stats = self._send_newest(sender)
                waited = 0.0
            else:
                stats, waited = self._send_held(sender, ticket, exclusive)
        except TimeoutError:  # `exclusive` was not free in time: nothing went on the channel
            raise
        except Exception:
            self._forget(channel)
            raise
        out = {"version": stats.version, "bytes": stats.bytes, "send_s": stats.seconds}
        return out if exclusive is None else {**out, "lock_wait_s": waited}

    def _send_newest(self, sender):
        with self._lock:
            state = self._state
            version = self.version
        return sender.send(state.items(), version)

    def _send_held(self, sender, ticket: str | None, exclusive) -> tuple[Any, float]:
        """`send` over a channel that needs `exclusive`: signal, give the receivers
        PAUSE_HOLD_S to start, else wait for them without the lock and take it again."""
        with exclusive() as waited:
            if ticket is not None:
                sender.signal_ready(ticket)
            if sender.receivers_ready(PAUSE_HOLD_S):
                return self._send_newest(sender), waited
        sender.wait_receivers(max(1.0, self.timeout_s - PAUSE_HOLD_S))  # raises naming them
        with exclusive() as again:
            return self._send_newest(sender), waited + again

    def _forget(self, channel: _Channel) -> None:
        """Close `channel`; drop it from the table only while it is still its generator's
        current one."""
        with self._lock:
            if self._channels.get(channel.name) is channel:
                del self._channels[channel.name]
        channel.close()


def channel_rank(spec: dict[str, Any], worker_rank: int, engine_workers: int) -> tuple[int, int]:
    """(rank, world size) on the channel `spec` for engine worker `worker_rank` of
    `engine_workers` (tensor x pipeline parallel): rank first_rank + worker_rank, world
    first_rank + engine_workers; the learner is rank 0."""
    if not 0 <= worker_rank < engine_workers:
        raise ValueError(f"engine worker rank {worker_rank} is outside 0..{engine_workers - 1}")
    first = int(spec.get("first_rank", 1))
    world = first + engine_workers
    if spec.get("world_size") not in (None, world):
        raise ValueError(
            f"weight channel {spec.get('name', '?')} was opened for {spec['world_size']} ranks "
            f"but this engine has {engine_workers} workers (a channel of {world}); open it with "
            f"receivers={engine_workers} or None"
        )
    return first + worker_rank, world


LEARNER0 = "learner rank 0 (log RUN_DIR/logs/learner-0.log)"
LEARNER0_REMEDY = (
    "it is stuck or its steps keep it busy: raise learner.sync_timeout_s above the longest step"
)
"""What to do when learner rank 0 does not answer a weight-sync call in time."""


class WeightsMixedError(RuntimeError):
    """A weight load failed after it may have begun: the worker loads bucket by bucket as they
    arrive (actors/engines/worker_ext.py), so the engine may hold some tensors of the new version and the
    rest of the old. Nothing may be sampled on such weights: the generator's loop ends (its
    groups in flight are handed back to the buffer) and only a completed sync clears it."""


def update_engine(
    engine, mode: str, load: Callable[[], dict | None], what: str, kv: str = "recompute"
):
    """Load new weights into a running AsyncEngine (actors/engines/async_llm.py): `pause(mode)` ->
    `load()` (`PendingSync.receive`; None when already current) -> `set_version(v)` ->
    `reset_prefix_cache()` (must be True) -> `resume()`. `mode` "keep": the requests in flight
    stay and continue on the new weights; "wait": vLLM finishes them on the old weights first.
    `kv` (`generator.inflight_kv`) "recompute": the pause clears the caches, the kept requests
    are recomputed under the new weights (their tokens so far kept); "reuse": the kept requests
    go on with the KV they have, the engine's `cache_salt` changes instead of the reset (no
    later request reads an old block). The engine resumes even when a step fails; the error
    names `what` (e.g. "gen-0: weight update to version 3") and the step. Returns (load's result
    with `reset_prefix_cache_s`, seconds from pause to resume)."""
    if kv not in get_args(InflightKV):
        raise ValueError(f"inflight_kv {kv!r}: use one of {', '.join(get_args(InflightKV))}")
    clear = mode != "keep" or kv == "recompute"
    step = f"pause({mode!r})"
    t0 = time.perf_counter()
    try:
        engine.pause(mode, clear_cache=clear)
        step = "pull_weights"
        result = load()
        if result is not None:
            step = f"set_version({result['version']})"
            engine.set_version(result["version"])
            t1 = time.perf_counter()
            if clear:
                step = "reset_prefix_cache"
                if not engine.reset_prefix_cache():
                    raise RuntimeError(
                        "the prefix cache could not be reset: a request still holds KV blocks, "
                        "so new prompts could reuse KV of the old weights (the pause must clear "
                        "the caches: AsyncEngine.pause(clear_cache=True))"
                    )
            result = {**result, "reset_prefix_cache_s": time.perf_counter() - t1}
    except Exception as err:
        raise RuntimeError(f"{what} failed at {step}: {type(err).__name__}: {err}") from err
    finally:
        engine.resume()
    return result, time.perf_counter() - t0


def update_adapter(engine, load: Callable[[], dict | None], what: str):
    """Under `learner.lora`: load a new adapter version into a running AsyncEngine without
    pausing it. `load()` (`PendingSync.receive`) writes the adapter's folder; it is registered
    as a new vLLM adapter (actors/engines/adapters.py `AdapterSet.add`, which then drops the
    versions `learner.lora.versions_kept` no longer covers and no request uses), and the
    version label set. Requests running go on with the adapter they started with, new ones take
    this one; nothing old is left in any KV a new request reads (vLLM keys cached blocks by
    adapter), so there is no prefix-cache reset and no KV floor. A failure leaves the engine
    serving the versions it had (nothing is mixed). Returns (load's result, 0.0: no pause)."""
    step = "receive"
    try:
        result = load()
        if result is not None:
            step = f"add adapter v{result['version']}"
            engine.adapters.add(result["version"], result["adapter_folder"])
            engine.set_version(result["version"])
    except Exception as err:
        raise RuntimeError(f"{what} failed at {step}: {type(err).__name__}: {err}") from err
    return result, 0.0


def served_names(state: dict) -> dict:
    """`state` without the names that alias an earlier name's tensor (the same storage, shape
    and dtype): a tied head travels once, as the embedding, which is what vLLM's loaders read
    for a tied model. Some have no `lm_head` parameter at all and refuse the name (vLLM 0.32's
    Gemma2ForCausalLM: "There is no module or parameter named 'lm_head'", every sync of a gemma2
    run failed); the others tie their head to the embedding they load."""
    seen: set[tuple] = set()
    out = {}
    for name, t in state.items():
        key = (t.untyped_storage().data_ptr(), t.storage_offset(), tuple(t.shape), t.dtype)
        if t.numel() and key in seen:
            continue
        seen.add(key)
        out[name] = t
    return out
