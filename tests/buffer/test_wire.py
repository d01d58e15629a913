"""Header frames: protocol version, kind and size are checked, each with its own error code."""

from __future__ import annotations

import pytest

from microcoder import protocol as m
from microcoder.buffer.records import MessageError
from microcoder.buffer.wire import check_size, decode_header, encode, pack


def test_header_round_trips_kind_fields_and_request_id():
    frames = encode(m.GetBatch("learner", 8, 3, 0.5), rid=42)
    rid, msg = decode_header(frames[0])
    assert rid == 42 and msg == m.GetBatch("learner", 8, 3, 0.5)


@pytest.mark.parametrize(
    "header, code",
    [
        ({"v": 99, "kind": "get_stats", "rid": 1}, "bad_version"),
        ({"kind": "get_stats", "rid": 1}, "bad_version"),
        ({"v": m.PROTOCOL_VERSION, "kind": "launch_missiles", "rid": 1}, "unknown_kind"),
        ({"v": m.PROTOCOL_VERSION, "kind": "get_batch", "rid": 1}, "bad_field"),
        ({"v": m.PROTOCOL_VERSION, "kind": "get_stats", "rid": "x"}, "bad_field"),
        ([1, 2, 3], "malformed"),
    ],
)
def test_bad_headers_get_their_error_code(header, code):
    with pytest.raises(MessageError) as err:
        decode_header(pack(header))
    assert err.value.code == code


def test_garbage_bytes_are_malformed():
    with pytest.raises(MessageError) as err:
        decode_header(b"\xc1\xff\x00garbage")
    assert err.value.code == "malformed"


def test_oversized_message_is_refused_with_the_fix():
    with pytest.raises(MessageError, match="max_frame_mb") as err:
        check_size([b"x" * 100, b"y" * 100], max_bytes=150)
    assert err.value.code == "oversized"
