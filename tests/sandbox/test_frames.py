"""The frames a stdin program's tests exchange without the json module (sandbox/frames.py):
the same bytes on the pipe as the general encoder, and decoded to the same headers."""

from __future__ import annotations

import json
import os

import pytest

from microcoder.sandbox.frames import (
    CONTROL_SIZE,
    NEXT,
    STOP,
    FrameError,
    FrameReader,
    done_frame,
    encode_frame,
    read_control,
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


def test_read_control_takes_next_or_stop_in_one_read_and_no_more():
    """The fork server reads CONTROL_SIZE bytes after a run: exactly a `next` or a `stop`, never
    into the frame the host sent after it; any other frame is finished by read_frame."""
    assert len(NEXT) == len(STOP) == CONTROL_SIZE
    for op in ("ping", "exit"):  # the shortest frames the host sends
        assert len(encode_frame({"op": op})) == CONTROL_SIZE
    r, w = os.pipe()
    try:
        request = encode_frame({"op": "stdin", "sizes": [3]}, b"1 2")
        write_all(w, STOP + request)  # a stop, then the next solution's request at once
        assert read_control(r) == STOP
        got = read_control(r)
        assert got == request[:CONTROL_SIZE]
        assert read_frame(r, got) == ({"op": "stdin", "sizes": [3]}, b"1 2")
        write_all(w, NEXT[:5])  # a control frame split across writes still reads whole
        got = read_control(r)
        write_all(w, NEXT[5:])
        assert read_frame(r, got) == ({"op": "next"}, b"")
        os.close(w)
        w = -1
        assert read_control(r) == b""
        with pytest.raises(FrameError):
            read_frame(r, b"")
    finally:
        os.close(r)
        if w >= 0:
            os.close(w)


def test_read_frame_refuses_bytes_read_past_its_frame():
    r, w = os.pipe()
    try:
        with pytest.raises(FrameError, match="read ahead"):
            read_frame(r, NEXT + b"x")
    finally:
        os.close(r)
        os.close(w)


def test_frame_reader_splits_frames_read_together_and_waits_for_split_ones():
    """The host reads what the pipe holds: several frames from one read come out one by one,
    a frame arriving in pieces (or larger than a read) comes out whole."""
    r, w = os.pipe()
    try:
        reader = FrameReader(r)
        assert not reader.complete()
        first = encode_frame({"op": "results"}, b"0\tOK\n")
        second = done_frame(0, 0, 0.5, 0.25, 10, None, 2, 0, "", "ok", b"ok")
        write_all(w, first + second + NEXT[:3])
        assert reader.read() == ({"op": "results"}, b"0\tOK\n")
        assert reader.complete()  # the second came with the first: no read needed
        header, payload = reader.read()
        assert (header["op"], header["cpu"], payload) == ("done", 0.5, b"ok")
        assert not reader.complete()  # 3 bytes of a frame
        write_all(w, NEXT[3:])
        assert reader.read() == ({"op": "next"}, b"")
        big = os.urandom(200_000)  # over the pipe's capacity: written while it is read
        pid = os.fork()
        if pid == 0:
            try:
                write_all(w, encode_frame({"op": "done", "i": 1}, big))
            finally:
                os._exit(0)
        assert reader.read() == ({"op": "done", "i": 1}, big)
        os.waitpid(pid, 0)
        assert reader.buf == b""
        write_all(w, NEXT[:10])
        os.close(w)
        w = -1
        with pytest.raises(FrameError, match="stream closed"):
            reader.read()
    finally:
        os.close(r)
        if w >= 0:
            os.close(w)
