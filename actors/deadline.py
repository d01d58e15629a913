"""Every cross-actor wait has a deadline: `get_within` is `ray.get` with one, and the error it
raises when the deadline passes names the actors that did not answer and says what to do.

Used by the driver (launch/run/learner_group.py, launch/run/pools.py, launch/run/cluster.py) and by the
generator's weight pull (actors/weights/publisher.py), so it lives where both may import it. It waits
on several calls at once (one per learner rank, say) and fails as soon as one of them fails:
a collective whose peer is stuck fails on the ranks that wait for it, and the error then names
the ranks still running, the ones to look at. `actor_by_name` is the generator's look-up of
learner rank 0 by its Ray name, with a deadline too.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any


class PeerTimeout(TimeoutError):
    """A peer did not answer within its deadline; the message names it and the remedy.
    `peers`: the names of the peers that had not answered."""

    def __init__(self, message: str, peers: Sequence[str] = ()):
        super().__init__(message)
        self.peers = list(peers)


def get_within(refs: Any, timeout_s: float, what: str, peers: Any, remedy: str) -> Any:
    """`ray.get(refs)` within `timeout_s` seconds.

    `refs`: one object ref or a list; `peers`: the name of the actor behind each (a string for
    one ref), as the error should say it ("learner rank 1 on 10.0.0.2 pid 4242"); `what`: the
    call ("train", "setup"); `remedy`: what to do, e.g. which config field to raise.
    Raises PeerTimeout "<peers> did not finish <what> within S s: <remedy>" when the deadline
    passes; a call that failed raises its own error at once (the ones still running are added
    to the message of a PeerFailed wrapping it)."""
    import ray

    single = not isinstance(refs, (list, tuple))
    refs = [refs] if single else list(refs)
    names = [peers] if isinstance(peers, str) else list(peers)
    if len(names) != len(refs):
        raise ValueError(f"get_within: {len(refs)} refs but {len(names)} peer names")
    name_of = {ref: name for ref, name in zip(refs, names, strict=True)}
    deadline = time.monotonic() + timeout_s
    pending = list(refs)
    while pending:
        left = deadline - time.monotonic()
        if left <= 0:
            stuck = [name_of[r] for r in pending]
            raise PeerTimeout(
                f"{', '.join(stuck)} did not finish {what} within {timeout_s:.0f} s: {remedy}",
                stuck,
            )
        done, pending = ray.wait(pending, num_returns=1, timeout=left)
        for ref in done:
            try:
                ray.get(ref)
            except Exception as err:
                if not pending:
                    raise
                running = ", ".join(name_of[r] for r in pending)
                raise PeerFailed(
                    f"{name_of[ref]} failed {what} while {running} had not finished it (a "
                    f"collective waiting for a stuck or dead peer fails like this: look at "
                    f"those first): {_first_line(err)}",
                    [name_of[r] for r in pending],
                ) from err
    values = ray.get(refs)
    return values[0] if single else values


def actor_by_name(name: str, timeout_s: float, peer: str, remedy: str) -> Any:
    """The handle of the Ray actor named `name` (`ray.get_actor`, in this job's namespace),
    asked again every half second until `timeout_s`: an actor found by name is not a
    constructor argument, so a restartable actor (max_restarts) keeps no handle in Ray's object
    store (Ray warns about those, ray-project/ray#53727).

    `peer`: the actor as the error should name it; `remedy`: what to do. Raises PeerTimeout
    "<peer> (Ray actor <name>) was not found within S s: <remedy>" when the deadline passes."""
    import ray

    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return ray.get_actor(name)
        except ValueError as err:  # no live actor of that name (yet)
            left = deadline - time.monotonic()
            if left <= 0:
                raise PeerTimeout(
                    f"{peer} (Ray actor {name!r}) was not found within {timeout_s:.0f} s: {remedy}",
                    [peer],
                ) from err
            time.sleep(min(0.5, left))


class PeerFailed(RuntimeError):
    """One of several calls failed while others were still running; `running` names those."""

    def __init__(self, message: str, running: Sequence[str] = ()):
        super().__init__(message)
        self.running = list(running)


def _first_line(err: BaseException, limit: int = 300) -> str:
    """The cause in one line: the last `XxxError: ...` line of Ray's text, else its first."""
    lines = [ln.strip() for ln in str(err).splitlines() if ln.strip()]
    for line in reversed(lines):
        head = line.split(":", 1)[0]
        if head.endswith(("Error", "Exception", "Timeout")) and not line.startswith("ray::"):
            return line[:limit]
    return (lines[0] if lines else type(err).__name__)[:limit]
