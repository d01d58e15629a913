"""The generator's side of a weight sync (issue 33, fault 3): ask learner rank 0 to send, keep
the engine generating until rank 0 is ready to, then pause it for the transfer alone.

Over an NCCL channel rank 0 sends only under `WorkLock` (actors/weights/work_lock.py), so a send asked
for during a train waits for that train and its publish. A generator that paused its engine
before asking stayed paused for the whole step. Now:
1. `request_weights` asks rank 0's version and, when newer, asks it to send (`send_weights` with
   a ticket and the channel's port); it returns a `PendingSync` at once.
2. `PendingSync.ready()` checks, without blocking, whether rank 0 set the ticket's key in the
   channel's TCPStore (`WeightSender.signal_ready`, just before its broadcast). The generator's
   loop checks it at every tick, so it goes on handing in the groups that finish meanwhile (it
   leases none until the weights are loaded: new groups start on the newest weights); rank 0's
   error, if its send failed before it signalled, is raised at once; past
   `learner.sync_timeout_s` + `READY_MARGIN_S` the error names rank 0.
3. Then the caller pauses the engine and calls `PendingSync.receive()` (actors/weights/publisher.py
   `update_engine`)."""

from __future__ import annotations

import time
import uuid
from datetime import timedelta

from microcoder.actors.deadline import get_within
from microcoder.actors.weights.publisher import LEARNER0, LEARNER0_REMEDY, WeightsMixedError
from microcoder.learner.config import LearnerConfig

READY_MARGIN_S = 5.0
"""How much longer than `learner.sync_timeout_s` a generator waits for rank 0 to be ready to
send: rank 0 may wait that long for `WorkLock` and then signal, and a generator that gave up just
before would leave rank 0 holding the lock for a receiver that is not coming."""

READY_POLL_S = 0.02
"""How often a blocking wait (`PendingSync.wait_ready`) checks rank 0's ready key."""


def pull_weights(llm, learner0, my_version: int, name: str, cfg: LearnerConfig, channel: dict):
    """Generator side, in one go: `request_weights`, wait until rank 0 is ready, receive (no
    engine to pause). Returns the sync's timings and new version, or None when current."""
    pending = request_weights(llm, learner0, my_version, name, cfg, channel)
    if pending is None:
        return None
    pending.wait_ready()
    return pending.receive()


def request_weights(llm, learner0, my_version: int, name: str, cfg: LearnerConfig, channel: dict):
    """If rank 0 has newer weights than `my_version`, ask it to send them (opening the channel
    first when `channel`, this generator's dict of channel state kept across calls, has none);
    returns the `PendingSync` at once, or None when already current. Every call to rank 0 has
    `sync_timeout_s` and names it."""

    def ask(ref, what: str):
        return get_within(ref, cfg.sync_timeout_s, what, LEARNER0, LEARNER0_REMEDY)

    latest = ask(learner0.latest_version.remote(), "latest_version")
    if latest <= my_version:
        return None
    t0 = time.perf_counter()
    if not channel.get("open"):
        spec = ask(learner0.open_weight_channel.remote(name), "open_weight_channel")
        llm.collective_rpc("mc_open_channel", args=(spec,))
        channel.update(open=True, spec=spec, store=None)
    ticket = uuid.uuid4().hex
    sent = learner0.send_weights.remote(name, ticket, channel["spec"]["port"])
    deadline = time.monotonic() + cfg.sync_timeout_s + READY_MARGIN_S
    return PendingSync(llm, name, latest, sent, ask, channel, ticket, t0, deadline)


class PendingSync:
    """A send asked of rank 0: `ready()` / `wait_ready()` until rank 0 is about to send, then
    `receive()` with the engine paused. Any failure marks the channel closed, so the next try
    opens a new one (rank 0 forgets a channel whose send failed, and refuses a send asked for on
    a channel it has replaced)."""

    def __init__(self, llm, name, latest, sent, ask, channel, ticket, t0, deadline):
        self.llm = llm
        self.name = name
        self.latest = latest
        self.sent = sent
        self.ask = ask
        self.channel = channel
        self.ticket = ticket
        self.t0 = t0
        self.deadline = deadline
        self.ready_s = None
        self.timeout_s = deadline - time.monotonic()

    def ready(self) -> bool:
        """Whether rank 0 is ready to send (does not block); raises rank 0's error when its send
        failed before that, or when the deadline passed."""
        try:
            return self._check()
        except BaseException:
            self.channel["open"] = False
            raise

    def wait_ready(self) -> None:
        while not self.ready():
            time.sleep(READY_POLL_S)

    def _check(self) -> bool:
        import ray

        from microcoder.learner.sync.transport import ready_key

        if self.ready_s is not None:
            return True
        if self._store().check([ready_key(self.ticket)]):
            self.ready_s = time.perf_counter() - self.t0
            return True
        done, _ = ray.wait([self.sent], timeout=0)
        if done:  # rank 0's send ended before it signalled: its error says why
            ray.get(self.sent)
            raise RuntimeError(f"{self.name}: learner rank 0 answered the send without sending")
        if time.monotonic() >= self.deadline:
            raise TimeoutError(
                f"{self.name}: {LEARNER0} was not ready to send the weights within "
                f"{self.timeout_s:.0f} s (its steps hold the weight lock); {LEARNER0_REMEDY}"
            )
        return False

    def _store(self):
        """A client of the channel's store (rank 0 hosts it), kept with the channel."""
        if self.channel.get("store") is None:
            import torch.distributed as dist

            spec = self.channel["spec"]
            self.channel["store"] = dist.TCPStore(
                spec["host"],
                spec["port"],
                is_master=False,
                timeout=timedelta(seconds=max(1.0, self.timeout_s)),
            )
        return self.channel["store"]

    def receive(self) -> dict:
        """Receive and load the round (the engine paused). Returns its timings and new version.
        A failure once the workers started receiving raises `WeightsMixedError` (the load
        streams, so the engine's weights may be mixed)."""
        t1 = time.perf_counter()
        try:
            (version, count, receive_s, reload_s), folder = receive_round(self.llm)
        except Exception as err:
            self.channel["open"] = False
            if getattr(self.llm, "adapters", None) is not None:  # the served adapters stand
                raise RuntimeError(
                    f"{self.name}: receiving the adapter failed: {type(err).__name__}: {err}"
                ) from err
            raise WeightsMixedError(
                f"{self.name}: the weight load failed after it may have begun, so the engine may "
                f"hold part of the new weights: {type(err).__name__}: {err}"
            ) from err
        try:  # the workers received and loaded all of `version`: the load stands
            info = self.ask(self.sent, f"send_weights for {self.name}")
        except Exception as err:
            self.channel["open"] = False
            info = {"bytes": 0, "send_s": 0.0, "send_error": f"{type(err).__name__}: {err}"}
        t2 = time.perf_counter()
        return {
            "version": int(version),
            "tensors": int(count),
            "bytes": info["bytes"],
            "send_s": info["send_s"],  # learner rank 0's side of the broadcast
            **({"send_error": info["send_error"]} if "send_error" in info else {}),
            "ready_s": self.ready_s,  # asked, until rank 0 was ready (the engine generating)
            "receive_s": receive_s,
            "reload_s": reload_s,
            "transfer_s": t2 - t1,
            "sync_s": t2 - self.t0,
            **({} if folder is None else {"adapter_folder": folder}),
        }


def receive_round(llm) -> tuple[tuple[int, int, float, float], str | None]:
    """Receive one round on the engine's open channel: full weights, loaded in place
    (`mc_receive_and_load`), or under `learner.lora` (the engine has `adapters`) the adapter,
    written to a new folder of the engine's `AdapterSet` (`mc_receive_adapter`), which the
    caller registers (actors/weights/publisher.py `update_adapter`). Returns the first worker's
    (version, tensors, wire seconds, other seconds) and the adapter's folder (None: weights)."""
    adapters = getattr(llm, "adapters", None)
    if adapters is None:
        return tuple(llm.collective_rpc("mc_receive_and_load")[0]), None
    folder = adapters.new_folder()
    return tuple(
        llm.collective_rpc("mc_receive_adapter", args=(folder, adapters.config))[0]
    ), folder
