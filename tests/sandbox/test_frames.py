"""The frames a stdin program's tests exchange without the json module (sandbox/frames.py):
the same bytes on the pipe as the general encoder, and decoded to the same headers."""

from __future__ import annotations

import json
import os

import pytest

from microcoder.sandbox.frames import (
    NEXT,
    STOP,
    done_frame,
    encode_frame,
    read_frame,
    write_all,
    write_frame,
)

DONE_CASES = [
    (0, 0, 0.012345678901234, 0.0301, 9876, None, 3, 0, "", "15\n", b"15\n"),
    (4, -9, 1e-06, 12.5, 0, "tle", 0, 0, "", "", b""),
    (
        2,
        1,
        0.1 + 0.2,
        1 / 3,
        123456,
        "ole",
        1 << 20,
        5000,
        "Traceback\n  x\nValueError: é\u2603",
        "",
        b"",
    ),
    (
        -1,
        120,
        0.0,
        0.0,
        1,
        "stopped",
        7,
        2,
        'quote " back \\ tab \t nul \x00 \ud800',
        "\x7f",
        b"\x00\xff",
    ),
    (1, 0, 3.0, 2e-05, 44, None, 300, 0, "", "a" * 300, b"a" * 300),
]


@pytest.mark.parametrize("case", DONE_CASES)
def test_done_frame_is_the_general_encoding(case):
    *fields, payload = case
    keys = ("i", "exit", "cpu", "wall", "maxrss_kb", "reason", "out_bytes", "err_bytes")
    keys += ("err_tail", "out_head")
    header = {"op": "done", **dict(zip(keys, fields, strict=True))}
    assert done_frame(*case) == encode_frame(header, payload)


def test_done_frame_reads_back_as_its_header():
    r, w = os.pipe()
    try:
        for case in DONE_CASES:
            write_all(w, done_frame(*case))
            header, payload = read_frame(r)
            assert header["op"] == "done"
            assert header["i"] == case[0]
            assert header["cpu"] == case[2]  # floats round-trip exactly (repr)
            assert header["reason"] == case[5]
            assert header["err_tail"] == case[8]
            assert payload == case[10]
    finally:
        os.close(r)
        os.close(w)


def test_next_and_stop_are_the_general_encoding_and_decode_alike():
    assert NEXT == encode_frame({"op": "next"})
    assert STOP == encode_frame({"op": "stop"})
    r, w = os.pipe()
    try:
        for frame, op in ((NEXT, "next"), (STOP, "stop")):
            write_all(w, frame)
            assert read_frame(r) == ({"op": op}, b"")
        # other frames still go through json, extra keys and payload included
        write_frame(w, {"op": "next", "extra": 1}, b"xy")
        assert read_frame(r) == ({"op": "next", "extra": 1}, b"xy")
        write_frame(w, {"op": "stdin", "sizes": [1, 2]}, b"abc")
        assert read_frame(r) == ({"op": "stdin", "sizes": [1, 2]}, b"abc")
        header = json.dumps({"op": "x"}).encode()  # spaces: not the compact control bytes
        os.write(w, len(header).to_bytes(4, "big") + (0).to_bytes(4, "big") + header)
        assert read_frame(r) == ({"op": "x"}, b"")
    finally:
        os.close(r)
        os.close(w)
