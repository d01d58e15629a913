"""The one module of cross-process types (microcoder/protocol.py): light to import, every message
kind registered under its wire name, and the wire forms it fixes unchanged."""

from __future__ import annotations

import inspect
import json
import subprocess
import sys

import pytest

from microcoder import protocol as p
from microcoder.buffer.records import MessageError, from_wire
from microcoder.buffer.wire import decode_header, encode


def test_the_protocol_imports_only_the_standard_library():
    script = (
        "import sys; before = set(sys.modules); import microcoder.protocol; "
        "print('\\n'.join(sorted(set(sys.modules) - before)))"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    ).stdout.split()
    assert "microcoder.protocol" in out
    foreign = [
        m
        for m in out
        if m.split(".")[0] not in sys.stdlib_module_names
        and m not in ("microcoder", "microcoder.protocol")
    ]
    assert foreign == []  # no torch, vllm, numpy, zmq, msgpack, ray, nor another room


def test_every_message_kind_is_registered_under_its_wire_name():
    defined = [c for _, c in inspect.getmembers(p, inspect.isclass) if issubclass(c, p.Message)]
    kinds = {c for c in defined if c is not p.Message}
    assert set(p.KINDS.values()) == kinds and len(p.KINDS) == 20
    for kind, cls in p.KINDS.items():
        assert cls.KIND == kind and cls.__module__ == "microcoder.protocol"
        assert cls.__doc__ and cls.__doc__.strip()
        try:  # the generic codec reads every kind's fields
            assert isinstance(from_wire(cls, {}), cls)
        except MessageError as err:
            assert "missing field" in str(err)
    with pytest.raises(TypeError, match="'batch' is empty or taken"):
        type("Batch2", (p.Message,), {}, kind="batch")


def test_a_message_keeps_its_bytes_and_decodes_to_itself():
    msg = p.GetBatch(owner="learner-0", n=2, version=3, filtered=[7], text=True)
    frame = encode(msg, 5)[0]
    assert frame == (
        b"\x89\xa5owner\xa9learner-0\xa1n\x02\xa7version\x03\xa6wait_s\xcb\x00\x00\x00\x00\x00"
        b"\x00\x00\x00\xa8filtered\x91\x07\xa4text\xc3\xa1v\x04\xa4kind\xa9get_batch\xa3rid\x05"
    )
    assert decode_header(frame) == (5, msg)


def test_the_weight_sync_header_is_the_json_receivers_parse():
    header = p.WeightSyncHeader(
        7,
        [64, 12],
        [p.TensorEntry("w", "bfloat16", [2, 3], 0, 0), p.TensorEntry("b", "float32", [3], 1, 0)],
    )
    raw = header.to_json()
    assert json.loads(raw) == {
        "version": 7,
        "buckets": [{"nbytes": 64}, {"nbytes": 12}],
        "tensors": [["w", "bfloat16", [2, 3], 0, 0], ["b", "float32", [3], 1, 0]],
    }
    assert raw == json.dumps(json.loads(raw)).encode()  # json.dumps defaults, as before the type
    assert p.WeightSyncHeader.from_json(raw) == header


def test_a_training_prompt_is_still_the_pair_it_replaced():
    prompt = p.TrainingPrompt("p1", "text")
    assert prompt == ("p1", "text") and tuple(prompt) == ("p1", "text")
    assert (prompt.problem_id, prompt.prompt) == ("p1", "text")
