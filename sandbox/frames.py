"""Length-prefixed frames between the judge (host) and its fork servers: JSON header + raw bytes.

Stdlib only: this file also runs inside the sandbox (the fork server imports it). A frame is
`struct("!II")` = (header length, payload length), the UTF-8 JSON header (a dict with an `op`),
then the payload bytes (program input or output, never pickled).
"""

from __future__ import annotations

import json
import os
import struct
from json.encoder import encode_basestring_ascii as _string

_HEAD = struct.Struct("!II")
MAX_HEADER = 64 << 20
"""Largest header accepted (bytes); larger means a corrupted stream."""
MAX_PAYLOAD = 1 << 30
"""Largest payload accepted (bytes)."""


class FrameError(EOFError):
    """The peer closed the stream or sent something that is not a frame."""


def encode_frame(header: dict, payload: bytes = b"") -> bytes:
    """One frame as bytes (header dict must be JSON-serialisable)."""
    head = json.dumps(header, separators=(",", ":")).encode()
    return _HEAD.pack(len(head), len(payload)) + head + payload


def write_frame(fd: int, header: dict, payload: bytes = b"") -> None:
    """Write one whole frame to a blocking file descriptor."""
    write_all(fd, encode_frame(header, payload))


def write_all(fd: int, frame: bytes) -> None:
    """Write bytes already encoded as a frame (encode_frame, NEXT, STOP, done_frame)."""
    data = memoryview(frame)
    while data:
        n = os.write(fd, data)
        data = data[n:]


# The frames of every test of a stdin program (the host's `next`, the fork server's `done`) are
# encoded and decoded below without the json module's Python layer: in the fork server, which
# has just forked, every page it writes costs a copy-on-write fault, and json.dumps/json.loads
# touched about 90 pages per test there. The bytes on the pipe are the same as encode_frame's
# (tests/sandbox/test_frames.py checks them against it).
NEXT = encode_frame({"op": "next"})
"""The host's `next` (the last run passed: run the next test), encoded once."""
STOP = encode_frame({"op": "stop"})
"""The host's `stop` (the last run failed: run no more tests), encoded once."""
_CONTROL = {NEXT[_HEAD.size :]: "next", STOP[_HEAD.size :]: "stop"}
_DONE = (
    '{"op":"done","i":%d,"exit":%d,"cpu":%r,"wall":%r,"maxrss_kb":%d,"reason":%s,'
    '"out_bytes":%d,"err_bytes":%d,"err_tail":%s,"out_head":%s}'
)


def done_frame(
    i: int,
    exit_code: int,
    cpu: float,
    wall: float,
    maxrss_kb: int,
    reason: str | None,
    out_bytes: int,
    err_bytes: int,
    err_tail: str,
    out_head: str,
    payload: bytes,
) -> bytes:
    """The fork server's `done` frame of one run: the same bytes as encode_frame of the dict
    with these keys in this order (`exit` for exit_code), by JSON's own string escaping and
    float repr."""
    head = (
        _DONE
        % (
            i,
            exit_code,
            float(cpu),
            float(wall),
            maxrss_kb,
            "null" if reason is None else _string(reason),
            out_bytes,
            err_bytes,
            _string(err_tail),
            _string(out_head),
        )
    ).encode()
    return _HEAD.pack(len(head), len(payload)) + head + payload


def _read_exact(fd: int, n: int, have: bytes = b"") -> bytes:
    """`n` bytes from `fd`, the first of them already read (`have`, at most `n` bytes)."""
    chunks = [have]
    left = n - len(have)
    while left:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            raise FrameError(f"stream closed with {left} of {n} bytes missing")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _decode_header(raw: bytes) -> dict:
    op = _CONTROL.get(raw)
    if op is not None:  # `next` or `stop`: no json (see NEXT)
        return {"op": op}
    try:
        header = json.loads(raw)
    except ValueError as e:
        raise FrameError(f"frame header is not JSON: {e}") from None
    if not isinstance(header, dict) or "op" not in header:
        raise FrameError("frame header has no 'op'")
    return header


def _sizes(head: bytes) -> tuple[int, int]:
    hlen, plen = _HEAD.unpack(head)
    if hlen > MAX_HEADER or plen > MAX_PAYLOAD:
        raise FrameError(f"implausible frame sizes header={hlen} payload={plen}")
    return hlen, plen


def read_frame(fd: int, have: bytes = b"") -> tuple[dict, bytes]:
    """Read one frame from a blocking file descriptor; FrameError on EOF or garbage. `have`:
    the frame's first bytes, already read (read_control), at most the whole frame."""
    head = _read_exact(fd, _HEAD.size, have[: _HEAD.size])
    hlen, plen = _sizes(head)
    if len(have) > _HEAD.size + hlen + plen:
        raise FrameError(f"{len(have)} bytes read ahead of a frame of {_HEAD.size + hlen + plen}")
    rest = have[_HEAD.size :]
    raw = _read_exact(fd, hlen, rest[:hlen])
    header = _decode_header(raw)
    if not plen:
        return header, b""
    return header, _read_exact(fd, plen, rest[hlen:])


CONTROL_SIZE = len(NEXT)
"""Bytes of `next` and `stop` (and of every other frame the host sends between two runs: none
is shorter, so reading this many never reads into the frame after it)."""


def read_control(fd: int) -> bytes:
    """What the host sent after a run of a stdin program: NEXT or STOP (the very bytes: one
    read, no dict), else the first bytes of another frame, to finish with read_frame(fd, them).
    b"" when the host closed the stream."""
    return os.read(fd, CONTROL_SIZE)


class FrameReader:
    """The host's reader of one fork server's frames: reads what the pipe holds (up to 64 KiB
    a read) and splits frames out of it, so a small frame costs one read, not three."""

    def __init__(self, fd: int):
        self.fd = fd
        self.buf = b""

    def complete(self) -> bool:
        """A whole frame is already buffered (read() needs no read from the pipe)."""
        buf = self.buf
        if len(buf) < _HEAD.size:
            return False
        hlen, plen = _HEAD.unpack_from(buf)
        return len(buf) >= _HEAD.size + hlen + plen

    def read(self) -> tuple[dict, bytes]:
        """The next frame (blocking until it is whole); FrameError on EOF or garbage."""
        buf = self.buf
        if len(buf) < _HEAD.size:
            buf = self._more(buf, _HEAD.size)
        hlen, plen = _sizes(buf[: _HEAD.size])
        end = _HEAD.size + hlen + plen
        if len(buf) < end:
            buf = self._more(buf, end)
        self.buf = buf[end:]
        header = _decode_header(buf[_HEAD.size : _HEAD.size + hlen])
        return header, buf[_HEAD.size + hlen : end] if plen else b""

    def _more(self, buf: bytes, n: int) -> bytes:
        chunks = [buf]
        have = len(buf)
        while have < n:
            chunk = os.read(self.fd, min(max(n - have, 1 << 16), 1 << 20))  # 64 KiB to 1 MiB
            if not chunk:
                self.buf = b""
                raise FrameError(f"stream closed with {n - have} of {n} bytes missing")
            chunks.append(chunk)
            have += len(chunk)
        return b"".join(chunks)
