"""Length-prefixed frames between the judge (host) and its fork servers: JSON header + raw bytes.

Stdlib only: this file also runs inside the sandbox (the fork server imports it). A frame is
`struct("!II")` = (header length, payload length), the UTF-8 JSON header (a dict with an `op`),
then the payload bytes (program input or output, never pickled).
"""

from __future__ import annotations

import json
import os
import struct

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
    data = memoryview(encode_frame(header, payload))
    while data:
        n = os.write(fd, data)
        data = data[n:]


def _read_exact(fd: int, n: int) -> bytes:
    chunks = []
    left = n
    while left:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            raise FrameError(f"stream closed with {left} of {n} bytes missing")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def read_frame(fd: int) -> tuple[dict, bytes]:
    """Read one frame from a blocking file descriptor; FrameError on EOF or garbage."""
    hlen, plen = _HEAD.unpack(_read_exact(fd, _HEAD.size))
    if hlen > MAX_HEADER or plen > MAX_PAYLOAD:
        raise FrameError(f"implausible frame sizes header={hlen} payload={plen}")
    try:
        header = json.loads(_read_exact(fd, hlen))
    except ValueError as e:
        raise FrameError(f"frame header is not JSON: {e}") from None
    if not isinstance(header, dict) or "op" not in header:
        raise FrameError("frame header has no 'op'")
    return header, _read_exact(fd, plen) if plen else b""
