"""The buffer server: one ZeroMQ ROUTER socket in front of a BufferState.

Single-threaded loop: receive a request, validate it (size, msgpack, protocol version, kind,
fields, and the group records it carries), apply it to the state, reply. Get requests that find
nothing (prompts held back by admission control, no unscored groups, batch not complete) are
parked up to `wait_s` (capped at buffer.long_poll_s) and answered as soon as the state allows.
Any bad input gets an `error` reply and a counter in stats["errors"]; nothing kills the loop.
"""

from __future__ import annotations

import gc
import logging
import shutil
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import zmq

from microcoder import protocol as m
from microcoder.buffer.codec import check_group, check_scores
from microcoder.buffer.config import BufferConfig
from microcoder.buffer.keys import secure_server, throwaway_keys, with_keys
from microcoder.buffer.prompts import PromptSource
from microcoder.buffer.records import MessageError
from microcoder.buffer.snapshot import load_snapshot, save_snapshot
from microcoder.buffer.state import ACCEPTED, FULL, HOLDER_DIED, BufferState
from microcoder.buffer.wire import check_size, decode_header, encode, unpack

log = logging.getLogger("microcoder.buffer")


def dedicate_process() -> None:
    """Tune this process's garbage collector for serving the buffer; call it in a process that
    exists to host the buffer (the buffer actor, the benchmark's server), not in a shared one.

    Each request allocates a few short-lived dicts and lists, so the cyclic collector runs every
    few hundred requests and walks every long-lived object (measured: 10-20 % of the loop's CPU).
    This freezes what exists now and collects young objects less often; the records the buffer
    holds (bytes, frames, slots) form no reference cycles."""
    gc.freeze()
    gc.set_threshold(20_000, 50, 100)


@dataclass
class _Parked:
    identity: bytes
    rid: int
    msg: m.Message
    deadline: float


class BufferServer:
    """Serve a BufferState on `tcp://{config.host}:{config.port}` (port 0 = a free one).

    With buffer.curve (the default) only clients holding the keys in `keys_dir` (or
    config.keys_dir; neither: throwaway keys made here) get an answer; `address` names the keys
    folder for the clients. Snapshot and Restore requests may only name files under
    `snapshot_root` (the run directory; None: every such request is refused).
    `retire_solved_after` / `skip_unsolved_after`: online difficulty, the run's
    `data.retire_solved_after` / `data.skip_unsolved_after` (buffer/difficulty.py; 0 = off)."""

    def __init__(
        self,
        config: BufferConfig,
        prompts: PromptSource,
        batch_size: int,
        keys_dir: str | Path | None = None,
        restore_from: str | Path | None = None,
        snapshot_root: str | Path | None = None,
        retire_solved_after: int = 0,
        skip_unsolved_after: int = 0,
    ):
        self.config = config
        self.snapshot_root = Path(snapshot_root).resolve() if snapshot_root else None
        self.state = BufferState(
            prompts,
            batch_size,
            config.max_staleness,
            config.high_water_groups,
            config.lease_timeout_s,
            config.quarantine_after,
            retire_solved_after,
            skip_unsolved_after,
        )
        if restore_from is not None:
            load_snapshot(self.state, restore_from)
        self.max_bytes = int(config.max_frame_mb * 2**20)
        self.handed_out = False
        """Whether any prompt was handed out yet (the first is logged once, with its time)."""
        self.ctx = zmq.Context()
        self.sock = self.ctx.socket(zmq.ROUTER)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.sock.setsockopt(zmq.MAXMSGSIZE, self.max_bytes * 2 + 2**20)  # far beyond: disconnect
        self._auth = self.keys_dir = self._own_keys = None
        if config.curve:
            keys = keys_dir or config.keys_dir
            if not keys:
                keys = self._own_keys = throwaway_keys()
                log.info("no keys folder given: throwaway CurveZMQ keys in %s", keys)
            self.keys_dir = Path(keys).resolve()
            self._auth = secure_server(self.ctx, self.sock, self.keys_dir)
        host = config.bind_host()  # "auto" outside a buffer actor: loopback
        if config.port:
            self.sock.bind(f"tcp://{host}:{config.port}")
            port = config.port
        else:
            port = self.sock.bind_to_random_port(f"tcp://{host}")
        self.endpoint = f"tcp://{host}:{port}"
        self.address = with_keys(self.endpoint, self.keys_dir)
        self._parked: list[_Parked] = []
        self._next_expiry = 0.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._handlers = {
            m.GetPrompts: self._get_prompts,
            m.PutUnscored: self._put_unscored,
            m.GetUnscored: self._get_unscored,
            m.PutScored: self._put_scored,
            m.FailGroup: self._fail_group,
            m.Release: self._release,
            m.GetBatch: self._get_batch,
            m.AnnounceVersion: self._announce,
            m.GetStats: self._stats,
            m.Snapshot: self._snapshot,
            m.Restore: self._restore,
        }
        log.info("buffer serving on %s", self.address)

    # ------------------------------------------------------------ loop

    def start(self) -> str:
        """Serve in a background thread; returns the address clients connect to."""
        self._thread = threading.Thread(target=self.serve_forever, name="buffer", daemon=True)
        self._thread.start()
        return self.address

    def stop(self) -> None:
        """Stop the loop and close the socket."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        else:
            self.close()

    def close(self) -> None:
        self.sock.close(linger=0)
        if self._auth is not None:
            self._auth.stop()
        self.ctx.term()
        if self._own_keys is not None:
            shutil.rmtree(self._own_keys, ignore_errors=True)

    def serve_forever(self) -> None:
        try:
            while not self._stop.is_set():
                self.step(timeout_ms=100)
        finally:
            self.close()

    def step(self, timeout_ms: int) -> None:
        """Handle every waiting request (at most `timeout_ms` of waiting), then parked ones
        (once per step, not after each request: a burst of puts wakes a waiting get once)."""
        now = time.monotonic()
        if self._parked:
            soonest = min(p.deadline for p in self._parked)
            timeout_ms = max(0, min(timeout_ms, int((soonest - now) * 1000) + 1))
        if self.sock.poll(timeout_ms, zmq.POLLIN):
            for _ in range(1000):
                try:
                    frames = self.sock.recv_multipart(zmq.NOBLOCK, copy=False)
                except zmq.Again:
                    break
                self._handle(frames)
        now = time.monotonic()
        if now >= self._next_expiry:  # a scan of every slot: once a second is plenty
            self.state.expire(now)
            self._next_expiry = now + 1.0
        self._serve_parked(now)

    # ------------------------------------------------------------ dispatch

    def _send(self, identity: bytes, rid: int, msg: m.Message, records: list[Any] = ()) -> None:
        frames = encode(msg, rid, records)
        self.state.counters.bytes_out += sum(len(f) for f in frames)
        self.sock.send_multipart([identity, *frames], copy=False)

    def _error(self, identity: bytes, rid: int, code: str, message: str) -> None:
        self.state.counters.errors[code] += 1
        self._send(identity, rid, m.Error(code, message))

    def _handle(self, frames: list[Any]) -> None:
        identity = frames[0].bytes
        body = frames[1:]
        c = self.state.counters
        c.requests += 1
        rid = 0
        try:
            if not body:
                raise MessageError("empty message", code="malformed")
            check_size(body[:1], self.max_bytes)
            rid, msg = decode_header(body[0])
            c.bytes_in += check_size(body, self.max_bytes)
            handler = self._handlers.get(type(msg))
            if handler is None:
                raise MessageError(f"'{msg.KIND}' is a reply kind, not a request", "unknown_kind")
            reply = handler(msg, body[1:], time.monotonic())
        except MessageError as err:
            log.debug("bad request: %s", err)
            return self._error(identity, err.rid or rid, err.code, str(err))
        except Exception as err:  # a bug must not take the buffer down; report it
            log.exception("buffer request failed")
            return self._error(identity, rid, "internal", f"{type(err).__name__}: {err}")
        if reply is None:  # nothing yet: park until the state allows or the wait runs out
            wait = min(getattr(msg, "wait_s", 0.0), self.config.long_poll_s)
            self._parked.append(_Parked(identity, rid, msg, time.monotonic() + wait))
        else:
            self._send(identity, rid, *reply)

    def _serve_parked(self, now: float) -> None:
        keep = []
        for p in self._parked:
            reply = self._handlers[type(p.msg)](p.msg, [], now, final=now >= p.deadline)
            if reply is None:
                keep.append(p)
            else:
                self._send(p.identity, p.rid, *reply)
        self._parked = keep

    # ------------------------------------------------------------ handlers
    # Each returns (reply, blobs) or None to park (waiting kinds with wait_s > 0 only).

    def _get_prompts(self, msg: m.GetPrompts, blobs, now, final=False):
        got = self.state.get_prompts(msg.owner, max(0, msg.n), now)
        if got and not self.handed_out:  # `microcoder bench data` reads this line (bench/data)
            self.handed_out = True
            log.warning(
                "first prompts handed out: %d to '%s' (unix time %.3f)",
                len(got),
                msg.owner,
                time.time(),
            )
        done = self.state.prompts_done
        if not got and not done and not final and msg.wait_s > 0:
            return None
        retry = 0.0 if got else self.config.long_poll_s
        return m.Prompts(got, done, retry, self.state.version), []

    def _put(self, msg, records, put, now):
        """Apply `put` to each (checked info, stored frames) of `records`; all were checked
        before any is applied, so a bad record refuses the whole request."""
        reply = m.PutReply()
        for info, frames in records:
            outcome = put(msg.owner, info, frames, now)
            if outcome == ACCEPTED:
                reply.accepted.append(info.group_id)
            elif outcome == FULL:
                reply.full.append(info.group_id)
            else:
                self.state.counters.errors["rejected_group"] += 1
                reply.rejected.append(outcome)
        return reply, []

    def _put_unscored(self, msg: m.PutUnscored, blobs, now, final=False):
        if not msg.metas or len(blobs) != 2 * len(msg.metas):
            raise MessageError(
                f"put_unscored needs one meta per Group in the header and its text and tensors "
                f"frames after it; got {len(msg.metas)} metas and {len(blobs)} frames",
                code="bad_field",
            )
        records = []
        for i, meta in enumerate(msg.metas):
            text = blobs[2 * i]
            tensors = blobs[2 * i + 1]
            info = check_group(unpack(meta), len(text), len(tensors))
            records.append((info, (meta, text, tensors)))
        return self._put(msg, records, self.state.put_unscored, now)

    def _put_scored(self, msg: m.PutScored, blobs, now, final=False):
        if not msg.scores or blobs:
            raise MessageError(
                f"put_scored carries its GroupScores in the header; got {len(msg.scores)} and "
                f"{len(blobs)} frames",
                code="bad_field",
            )
        records = [(check_scores(unpack(frame)), frame) for frame in msg.scores]
        return self._put(msg, records, self.state.put_scored, now)

    def _get_unscored(self, msg: m.GetUnscored, blobs, now, final=False):
        got = self.state.get_unscored(msg.owner, max(0, msg.n), now)
        done = self.state.finished and not self.state.unscored
        if not got and not done and not final and msg.wait_s > 0:
            return None
        parts = (1, 2) if msg.tokens else (1,)  # text[, tensors]
        metas = [group[0] for _, group in got]
        return m.Groups(done, msg.tokens, metas), [group[i] for _, group in got for i in parts]

    def _get_batch(self, msg: m.GetBatch, blobs, now, final=False):
        if msg.n < 1:
            raise MessageError("get_batch needs n >= 1", code="bad_field")
        if msg.filtered:
            if not all(type(g) is int for g in msg.filtered):
                raise MessageError("get_batch.filtered must list group ids (int)", "bad_field")
            self.state.report_filtered(msg.filtered)  # before waiting: frees admission capacity
            msg.filtered = []  # a parked request is re-evaluated: report once
        got = self.state.get_batch(msg.n, msg.version)
        if got is None:
            if not final and msg.wait_s > 0:
                return None
            return m.Batch(msg.version), []
        delivered, done = got
        parts = (1, 2) if msg.text else (2,)  # [text,] tensors
        frames = [d.group[i] for d in delivered for i in parts]
        staleness = [d.staleness for d in delivered]
        metas = [d.group[0] for d in delivered]
        scores = [d.scores for d in delivered]
        return m.Batch(msg.version, staleness, done, msg.text, metas, scores), frames

    def _fail_group(self, msg: m.FailGroup, blobs, now, final=False):
        outcome = self.state.fail_group(msg.owner, msg.group_id, msg.reason)
        if outcome != ACCEPTED:
            raise MessageError(outcome, code="unknown_group")
        return m.Ok(), []

    def _release(self, msg: m.Release, blobs, now, final=False):
        reason = HOLDER_DIED if msg.died else "lease_released"
        prompts, groups = self.state.release(msg.owner, reason)
        if prompts or groups:
            log.warning(
                "released leases of '%s': %d prompts re-queued, %d groups back to the "
                "unscored queue",
                msg.owner,
                prompts,
                groups,
            )
        return m.Released(prompts, groups), []

    def _announce(self, msg: m.AnnounceVersion, blobs, now, final=False):
        self.state.advance(msg.version)
        return m.Ok(f"version {self.state.version}"), []

    def _stats(self, msg: m.GetStats, blobs, now, final=False):
        return m.Stats(self.state.stats(now)), []

    def _confined(self, path: str, kind: str) -> Path:
        """`path` resolved (symlinks and `..` followed) if it lies under snapshot_root; else
        the request is refused with code `path_refused` (counted in stats["errors"])."""
        if self.snapshot_root is None:
            raise MessageError(
                f"{kind} refused: this buffer server was started without a snapshot root "
                "(the launcher passes the run directory), so it writes and reads no files",
                "path_refused",
            )
        resolved = Path(self.snapshot_root, path).resolve()
        if not resolved.is_relative_to(self.snapshot_root):
            log.warning("refused %s of %s: outside %s", kind, path, self.snapshot_root)
            raise MessageError(
                f"{kind} refused: {path} resolves to {resolved}, outside the run directory "
                f"{self.snapshot_root}; only paths under it are allowed",
                "path_refused",
            )
        return resolved

    def _snapshot(self, msg: m.Snapshot, blobs, now, final=False):
        path = self._confined(msg.path, "snapshot")
        try:
            groups, nbytes = save_snapshot(self.state, path)
        except OSError as err:
            raise MessageError(
                f"cannot write snapshot {msg.path}: {err}", "snapshot_failed"
            ) from None
        log.info("buffer snapshot %s: %d groups, %d bytes", msg.path, groups, nbytes)
        return m.SnapshotDone(msg.path, groups, nbytes), []

    def _restore(self, msg: m.Restore, blobs, now, final=False):
        path = self._confined(msg.path, "restore")
        try:
            groups = load_snapshot(self.state, path)
        except (OSError, ValueError, KeyError, TypeError) as err:
            raise MessageError(f"cannot restore {msg.path}: {err}", "bad_snapshot") from None
        log.info("buffer restored from %s: %d groups", msg.path, groups)
        return m.SnapshotDone(msg.path, groups, 0), []
