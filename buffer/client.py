"""The buffer client every actor uses: one DEALER socket, request ids, timeouts, retries.

Each call sends one request and waits for the reply with the same request id; replies to earlier
requests that timed out are discarded. A call that gets no reply within `timeout_s` closes the
socket, opens a fresh one (new identity, so no stale reply can arrive later) and raises
BufferTimeout. Not thread-safe: one client per thread.
"""

from __future__ import annotations

import itertools
import os
import time
import uuid
from collections import deque
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import zmq

from microcoder import protocol as m
from microcoder.buffer.codec import group_frames, read_group, read_scores, scores_frame
from microcoder.buffer.keys import secure_client, split_address
from microcoder.buffer.records import MessageError
from microcoder.buffer.wire import decode_header, encode
from microcoder.protocol import Group, GroupScores, LearnerBatch, ScoredGroup


def _one_frame(result: GroupScores) -> tuple[bytes]:
    return (scores_frame(result),)


def _scored_groups(reply: m.Batch, frames: list[Any]) -> list[ScoredGroup]:
    """Decode a Batch reply: metas and scores from its header, per group [text,] tensors frames."""
    step = 2 if reply.text else 1
    out = []
    for i, (meta, scores) in enumerate(zip(reply.metas, reply.scores, strict=True)):
        text = frames[i * step] if reply.text else None
        out.append(
            ScoredGroup(read_group(meta, text, frames[i * step + step - 1]), read_scores(scores))
        )
    return out


class BufferError(RuntimeError):
    """The server answered with an error; `code` is the counter it was filed under."""

    def __init__(self, code: str, message: str):
        super().__init__(f"buffer error [{code}]: {message}")
        self.code = code


class BufferTimeout(TimeoutError):
    """No reply from the server in time (it is down, unreachable, or the keys do not match)."""


class BufferUnreachable(BufferTimeout):
    """The server sent no reply at all to a request within `timeout_s` (a stuck or dead buffer,
    not a legitimate wait for data); the message names its address and what to do."""


class BufferClient:
    """Talk to the buffer at `address` as actor `owner` (the name leases are held under).

    The CurveZMQ keys come from `keys_dir`, else from the address (`...?curve=FOLDER`, as the
    server publishes it); a plain `tcp://HOST:PORT` with no keys_dir connects without keys."""

    def __init__(
        self,
        address: str,
        owner: str = "",
        timeout_s: float = 30.0,
        long_poll_s: float = 1.0,
        keys_dir: str | Path | None = None,
    ):
        self.address = address
        self.timeout_s = timeout_s
        self.long_poll_s = long_poll_s
        self.owner = owner or f"{os.uname().nodename}-{os.getpid()}"
        self.endpoint, published_keys = split_address(address)
        self.keys_dir = keys_dir or published_keys
        self._ctx = zmq.Context.instance()
        self._rids = itertools.count(1)
        self._sock: zmq.Socket | None = None
        self._filtered: dict[int, None] = {}  # reported filtered ids not yet acknowledged
        self._connect()

    @classmethod
    def from_config(cls, config: Any, address: str, owner: str = "", keys_dir: str | None = None):
        """A client with the timeouts and keys of a BufferConfig (keys: `keys_dir`, else
        buffer.keys_dir, else the folder the address names)."""
        keys = (keys_dir or config.keys_dir or None) if config.curve else None
        return cls(address, owner, config.request_timeout_s, config.long_poll_s, keys)

    def _connect(self) -> None:
        sock = self._ctx.socket(zmq.DEALER)
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.IDENTITY, f"{self.owner}/{uuid.uuid4().hex[:8]}".encode())
        if self.keys_dir:
            secure_client(sock, self.keys_dir)
        sock.connect(self.endpoint)
        self._sock = sock

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close(linger=0)
            self._sock = None

    def __enter__(self) -> BufferClient:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ------------------------------------------------------------ transport

    def call(self, msg: m.Message, blobs: Iterable[Any] = (), timeout_s: float | None = None):
        """Send `msg` (+ blob frames) and return (reply message, reply blob frames)."""
        if self._sock is None:
            self._connect()
        rid = next(self._rids)
        timeout = self.timeout_s if timeout_s is None else timeout_s
        deadline = time.monotonic() + timeout
        # a DEALER with no live connection (a refused CurveZMQ handshake drops the pipe) blocks
        # on send: the send waits for room within the request's deadline too. The pipe can drop
        # between the poll and the send (zmq.Again): then it waits again, to the same deadline.
        frames = encode(msg, rid, list(blobs))
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not self._sock.poll(max(1, int(left * 1000)), zmq.POLLOUT):
                raise self._unreachable(msg, timeout)
            try:
                self._sock.send_multipart(frames, flags=zmq.NOBLOCK, copy=False)
                break
            except zmq.Again:
                continue
        _, reply, frames = self._reply(msg, {rid}, deadline, timeout)
        return reply, frames

    def _unreachable(self, msg: m.Message, timeout: float) -> BufferUnreachable:
        """The error of a request the buffer did not take or answer in time; the socket is
        replaced, so a late reply can never be read as the answer to the next request."""
        self.close()
        self._connect()
        return BufferUnreachable(
            f"no reply from the buffer at {self.address} to '{msg.KIND}' within "
            f"{timeout:.1f} s: is the buffer server running and reachable "
            "(and, with buffer.curve, does this client hold the run's keys: "
            "RUN_DIR/keys or buffer.keys_dir)? Its log is RUN_DIR/logs/buffer.log; "
            "raise buffer.request_timeout_s if it is only slow"
        )

    def _wait_call(self, msg: Any, until: float | None):
        """A long-poll request: its wait is bounded by long_poll_s and by `until`."""
        wait = self.long_poll_s
        if until is not None:
            wait = max(0.0, min(wait, until - time.monotonic()))
        msg.wait_s = wait
        return self.call(msg, timeout_s=self.timeout_s + wait)

    # ------------------------------------------------------------ generators

    def get_prompts(self, n: int, wait_s: float = 0.0) -> m.Prompts:
        """Lease up to `n` prompts (admission control may give fewer). Waits up to `wait_s` for
        at least one; `reply.done` means the prompt source is exhausted for good."""
        until = time.monotonic() + wait_s
        while True:
            reply, _ = self._wait_call(m.GetPrompts(self.owner, n), until)
            if reply.assignments or reply.done or time.monotonic() >= until:
                return reply

    def put_unscored(self, groups: Group | list[Group]) -> m.PutReply:
        """Hand in groups for prompts this owner holds; retries while the queue is full."""
        return self._put(self._unscored_request, groups, group_frames)

    # ------------------------------------------------------------ executors

    def get_unscored(self, n: int, wait_s: float = 0.0, tokens: bool = False) -> list[Group]:
        """Lease up to `n` unscored groups; waits up to `wait_s` for at least one. Without
        `tokens` (a judge reads text) the groups' token arrays are not sent and are None."""
        until = time.monotonic() + wait_s
        while True:
            reply, frames = self._wait_call(m.GetUnscored(self.owner, n, tokens=tokens), until)
            if frames or reply.done or time.monotonic() >= until:
                step = 2 if reply.tokens else 1  # text[, tensors] per group
                return [
                    read_group(meta, *frames[i * step : (i + 1) * step])
                    for i, meta in enumerate(reply.metas)
                ]

    def put_scored(self, results: GroupScores | list[GroupScores]) -> m.PutReply:
        """Hand in scores for groups this owner holds (only the scores travel)."""
        if not isinstance(results, list):
            results = [results]
        results = [r.result if isinstance(r, ScoredGroup) else r for r in results]
        return self._put(self._scored_request, results, _one_frame)

    def fail_group(self, group_id: int, reason: str) -> None:
        """Give up on a prompt or group this owner holds (counted as failed, not re-queued)."""
        self.call(m.FailGroup(self.owner, group_id, reason))

    def release(self, owner: str | None = None, died: bool = False) -> m.Released:
        """Return every lease of `owner` (default: this client's): prompts are re-queued, groups
        go back to the unscored queue. The launcher calls this with died=True when an actor died
        (its prompts then count towards quarantine)."""
        reply, _ = self.call(m.Release(owner or self.owner, died))
        return reply

    def release_and_close(self) -> None:
        """An actor's shutdown: return this client's leases if the buffer still answers (at the
        end of a run it may be gone first: nothing is owed then), and close the socket."""
        try:
            self.release()
        except Exception:
            pass
        self.close()

    def put_unscored_many(self, waves: Iterable[list[Group]], window: int = 4) -> m.PutReply:
        """Hand in several waves of groups, one request each, with up to `window` requests in
        flight (replies matched by request id): the next wave is encoded and sent while the
        server still checks the previous one, so the producer never idles a round trip."""
        return self._put(self._unscored_request, waves, group_frames, window)

    def _unscored_request(self, parts: list[tuple]) -> tuple[m.Message, list]:
        """Groups' metas ride in the header; their text and tensors frames follow."""
        return m.PutUnscored(self.owner, [p[0] for p in parts]), [f for p in parts for f in p[1:]]

    def _scored_request(self, parts: list[tuple]) -> tuple[m.Message, list]:
        """GroupScores are small: they all ride in the header."""
        return m.PutScored(self.owner, [p[0] for p in parts]), []

    def _put(self, request: Any, batches: Any, frames_of: Any, window: int = 1) -> m.PutReply:
        """Put records (`batches`: one record, a list = one request, or an iterable of lists
        with window > 1), each encoded by `frames_of`, requests built by `request`; records
        refused as `full` are resent with backoff."""
        if isinstance(batches, (Group, GroupScores)):
            batches = [[batches]]
        elif isinstance(batches, list) and (not batches or not isinstance(batches[0], list)):
            batches = [batches]
        if self._sock is None:
            self._connect()
        todo = iter(batches)
        retry = deque()
        pending: dict[int, dict[int, tuple]] = {}  # rid -> {group id: its frames}
        total = m.PutReply()
        delay = 0.01
        deadline = time.monotonic() + self.timeout_s
        while True:
            while len(pending) < max(1, window):
                blobs = retry.popleft() if retry else None
                if blobs is None:
                    records = next(todo, None)
                    if records is None:
                        break
                    if not records:
                        continue
                    blobs = {r.group_id: frames_of(r) for r in records}
                rid = next(self._rids)
                msg, frames = request(list(blobs.values()))
                self._sock.send_multipart(encode(msg, rid, frames), copy=False)
                pending[rid] = blobs
            if not pending:
                return total
            rid, reply, _ = self._reply(msg, pending, deadline, self.timeout_s)
            blobs = pending.pop(rid)
            total.accepted += reply.accepted
            total.rejected += reply.rejected
            if reply.full:
                if time.monotonic() + delay > deadline:
                    raise BufferTimeout(
                        f"buffer queue stayed at its high-water mark for {self.timeout_s:.0f} s; "
                        "consumers are stalled (check executors/learner) or raise "
                        "buffer.high_water_groups"
                    )
                time.sleep(delay)
                delay = min(delay * 2, 0.5)
                retry.append({gid: blobs[gid] for gid in reply.full})
            else:
                deadline = time.monotonic() + self.timeout_s

    def _reply(self, msg: m.Message, pending: Any, deadline: float, timeout: float):
        """(rid, reply, blob frames) of the next reply to one of the `pending` request ids;
        replies to other ids (late answers to timed-out requests) are skipped."""
        while True:
            left_ms = int((deadline - time.monotonic()) * 1000)
            if left_ms <= 0 or not self._sock.poll(left_ms, zmq.POLLIN):
                raise self._unreachable(msg, timeout)
            frames = self._sock.recv_multipart(copy=False)
            try:
                rid, reply = decode_header(frames[0])
            except MessageError as err:
                raise BufferError("malformed_reply", str(err)) from None
            if rid not in pending:
                continue
            if isinstance(reply, m.Error):
                raise BufferError(reply.code, reply.message)
            return rid, reply, frames[1:]

    # ------------------------------------------------------------ learner

    def get_batch(
        self, n: int, version: int, timeout_s: float | None = None, text: bool = False
    ) -> LearnerBatch:
        """Block until `n` scored groups within the staleness bound of `version` are there
        (fewer only when the run is finished: batch.done). BufferTimeout after `timeout_s`
        (None = wait forever, polling the server every long_poll_s). Without `text` (training
        reads token ids) the groups' prompt and response texts are not sent and are None."""
        until = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            sent = list(self._filtered)
            reply, frames = self._wait_call(
                m.GetBatch(self.owner, n, version, 0.0, sent, text), until
            )
            for gid in sent:  # the server has them now (a timeout above keeps them for a resend)
                self._filtered.pop(gid, None)
            if frames or reply.done:
                groups = _scored_groups(reply, frames)
                return LearnerBatch(groups, reply.version, reply.staleness, reply.done)
            if until is not None and time.monotonic() >= until:
                raise BufferTimeout(
                    f"no batch of {n} groups from the buffer at {self.address} within "
                    f"{timeout_s:.1f} s (it answers, but has not enough scored groups)"
                )

    def report_filtered(self, group_ids: Iterable[int]) -> None:
        """Dynamic filtering: the learner consumed these delivered groups but will not train on
        them. They travel with the next `get_batch` (no round trip of their own), which gives
        their admission capacity back before the learner waits for more; resent until a reply
        acknowledges them (the server counts each id once)."""
        self._filtered.update(dict.fromkeys(group_ids))

    def announce_version(self, version: int) -> None:
        """Tell the buffer the learner finished optimizer step `version`."""
        self.call(m.AnnounceVersion(version))

    # ------------------------------------------------------------ launcher

    def stats(self) -> dict[str, Any]:
        """Counters, depths, rates, staleness histogram, invariant check."""
        reply, _ = self.call(m.GetStats())
        return reply.stats

    def snapshot(self, path: str | Path) -> m.SnapshotDone:
        """Ask the server to write its snapshot to `path` (a path on the server's machine)."""
        reply, _ = self.call(m.Snapshot(str(path)))
        return reply

    def restore(self, path: str | Path) -> m.SnapshotDone:
        """Ask the server to replace its state by the snapshot at `path`."""
        reply, _ = self.call(m.Restore(str(path)))
        return reply
