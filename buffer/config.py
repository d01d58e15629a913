"""Config of the replay buffer server (section `[buffer]`). No torch import."""

from __future__ import annotations

from pydantic import Field

from microcoder.config import Section


class BufferConfig(Section):
    host: str = "auto"
    """Address the ZeroMQ server binds to and publishes to the other actors. "auto": the IP of the
    node that hosts the buffer actor, as Ray reports it (127.0.0.1 on a local run; a server
    started outside Ray, as by a benchmark, binds loopback). Or an explicit address of that node
    (one interface of several, say); it must be one the other nodes can reach."""
    port: int = Field(0, ge=0, le=65535)
    """TCP port; 0 picks a free one (the address is published to the other actors)."""
    max_staleness: int = Field(1, ge=0)
    """k: the learner never trains on a group older than k policy versions; 0 = synchronous GRPO."""
    max_frame_mb: float = Field(64.0, gt=0)
    """Largest accepted message in MiB; bigger frames get an error reply and are counted."""
    high_water_groups: int = Field(1024, ge=1)
    """Bound on groups held in any one queue; producers are refused (and retry) beyond it."""
    curve: bool = True
    """Only the run's own actors talk to the buffer: CurveZMQ keys (RUN_DIR/keys, made at
    bring-up) authenticate every client and encrypt the traffic. false = anyone who can reach the
    port can read and inject groups (benchmarks and tests that need the plain socket only)."""
    request_timeout_s: float = Field(30.0, gt=0)
    """A client call that gets no reply within this many seconds raises a timeout error."""
    keys_dir: str = ""
    """Folder of the CurveZMQ keys; empty = RUN_DIR/keys. Every actor reads it: on several nodes
    use a path they all share (the launcher makes the keys there unless present)."""
    lease_timeout_s: float = Field(1800.0, ge=0)
    """A prompt or group held longer than this many seconds by one actor is returned (0 = never)."""
    long_poll_s: float = Field(1.0, gt=0)
    """How long the server holds a get request that has nothing to return yet, in seconds."""
    quarantine_after: int = Field(2, ge=0)
    """A problem whose prompt failed this many times (a generator's wave raised on it, or the
    generator holding it died) is quarantined: never handed out again in the run (0 = never)."""

    def bind_host(self, node_ip: str = "127.0.0.1") -> str:
        """The address to bind: `host`, or `node_ip` (the hosting node's) when it is "auto"."""
        return node_ip if self.host == "auto" else self.host
