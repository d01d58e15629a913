"""Frames <-> messages (microcoder/protocol.py): a msgpack header frame plus the data frames of
the records it carries.

    [header]   {"v": PROTOCOL_VERSION, "kind": ..., "rid": int, <message fields>}
    [data] ...  per Group, in the order of the header's `metas`, the data frames it carries:
                  put_unscored (generator -> buffer)  text, tensors
                  groups       (reply to an executor) text [, tensors if `tokens`]
                  batch        (reply to the learner) [text if `text`,] tensors
                  every other kind (put_scored too)   none

A Group is three frames (codec.py): meta, text, tensors. Its meta frame, and each GroupScores'
one frame (small), ride inside the header as msgpack bin values (`metas`, `scores`); only the
bulk text and tensors frames follow the header. So the server checks a group once on the way in
(codec.check_group on the meta, sizes of the other frames) and forwards the frames it received
on the way out, each consumer only the parts it reads, without copying or re-encoding tokens.
Every decode failure is a MessageError whose `code` is one of: malformed, bad_version,
unknown_kind, bad_field, oversized.
"""

from __future__ import annotations

import threading
from typing import Any

import msgpack

from microcoder.buffer.records import MessageError, from_wire, to_wire
from microcoder.protocol import KINDS, PROTOCOL_VERSION, Message

Buffer = Any  # bytes, memoryview or zmq.Frame


_local = threading.local()


def pack(obj: Any) -> bytes:
    """msgpack-encode plain values (bin type for bytes, str type for str).

    One Packer per thread is reused: its buffer stays allocated, where a fresh `packb` per call
    pays for a new large buffer (page faults) on every group — 10x slower for 700 KB groups."""
    packer = getattr(_local, "packer", None)
    if packer is None:
        packer = _local.packer = msgpack.Packer(use_bin_type=True, autoreset=True)
    try:
        return packer.pack(obj)
    except BaseException:
        packer.reset()
        raise


def unpack(data: Buffer) -> Any:
    """msgpack-decode one complete frame; any problem becomes MessageError('malformed')."""
    try:
        return msgpack.unpackb(data, raw=False, strict_map_key=True)
    except Exception as err:  # msgpack raises several unrelated types on garbage
        raise MessageError(f"not a valid msgpack frame: {err}", code="malformed") from None


def encode(msg: Message, rid: int, blobs: list[Buffer] | tuple = ()) -> list[Buffer]:
    """The frames of `msg` with request id `rid`, followed by already-encoded blob frames."""
    header = to_wire(msg)
    header["v"] = PROTOCOL_VERSION
    header["kind"] = msg.KIND
    header["rid"] = rid
    return [pack(header), *blobs]


def decode_header(frame: Buffer) -> tuple[int, Message]:
    """(request id, message) from a header frame; checks protocol version and kind. A
    MessageError raised after the request id was read carries it as `err.rid` (else 0)."""
    data = unpack(frame)
    if not isinstance(data, dict):
        raise MessageError("header frame is not a msgpack map", code="malformed")
    rid = data.get("rid", 0)
    if not isinstance(rid, int) or isinstance(rid, bool) or not 0 <= rid < 2**63:
        raise MessageError("header field 'rid' must be an integer request id", code="bad_field")
    try:
        return rid, _message_of(data)
    except MessageError as err:
        err.rid = rid
        raise


def _message_of(data: dict) -> Message:
    version = data.get("v")
    if version != PROTOCOL_VERSION:
        raise MessageError(
            f"protocol version {version!r}, this buffer speaks {PROTOCOL_VERSION}: "
            "run the same microcoder version on every node",
            code="bad_version",
        )
    kind = data.get("kind")
    cls = KINDS.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise MessageError(
            f"unknown message kind {kind!r}; known: {', '.join(sorted(KINDS))}",
            code="unknown_kind",
        )
    return from_wire(cls, data)


def check_size(frames: list[Buffer], max_bytes: int) -> int:
    """Total size of `frames`; MessageError('oversized') above `max_bytes`."""
    total = sum(len(f) for f in frames)
    if total > max_bytes:
        raise MessageError(
            f"message of {total / 2**20:.1f} MiB exceeds buffer.max_frame_mb = "
            f"{max_bytes / 2**20:.1f} MiB; raise it or send fewer groups per message",
            code="oversized",
        )
    return total
