"""Whether a weight channel's receivers are still alive, asked without their help (issue 33: a
receiver that died after a sync must make rank 0's next send fail at once, naming it, not at
the deadline of a key it will never set).

Each receiver keeps one plain TCP connection to its sender for its life (`connect`, at join).
The kernel closes it when the receiver's process exits, however it exits (SIGKILL, OOM), and
the sender sees the end of that stream with a non-blocking peek (`Links.dead`). A receiver that
is alive but stuck keeps it open: the deadlines cover that. Best effort: a receiver whose link
did not come up within the join is never called dead (its deadlines still hold). Only the
standard library is used (a vLLM worker imports it)."""

from __future__ import annotations

import socket
import time


class Links:
    """The sender's end: a listening socket, then one connection per receiver rank."""

    def __init__(self, host: str) -> None:
        self.server = socket.create_server((host, 0))
        self.port = self.server.getsockname()[1]
        self.peers: dict[int, socket.socket] = {}

    def accept(self, ranks, timeout_s: float) -> None:
        """Take the connections of `ranks` (each sends its rank first), within `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        while set(ranks) - self.peers.keys():
            left = deadline - time.monotonic()
            if left <= 0:
                return
            self.server.settimeout(left)
            try:
                conn, _ = self.server.accept()
                conn.settimeout(left)
                rank = int.from_bytes(conn.recv(4), "big")
            except OSError:
                return
            conn.setblocking(False)
            self.peers[rank] = conn

    def dead(self, ranks) -> list[int]:
        """The ranks among `ranks` whose connection has closed (their process is gone)."""
        out = []
        for r in ranks:
            conn = self.peers.get(r)
            if conn is None:
                continue
            try:
                if conn.recv(1, socket.MSG_PEEK) == b"":
                    out.append(r)
            except BlockingIOError:
                pass
            except OSError:
                out.append(r)
        return out

    def close(self) -> None:
        for conn in [self.server, *self.peers.values()]:
            try:
                conn.close()
            except OSError:
                pass
        self.peers = {}


def connect(host: str, port: int, rank: int, timeout_s: float) -> socket.socket:
    """The receiver's end: connect and say which rank it is; keep the socket for its life."""
    conn = socket.create_connection((host, port), timeout=timeout_s)
    conn.sendall(int(rank).to_bytes(4, "big"))
    return conn
