"""Records survive the wire exactly, arrays travel as compact typed bytes, bad input is named."""

from __future__ import annotations

import numpy as np
import pytest

from microcoder.buffer import messages as m
from microcoder.buffer.records import MessageError
from microcoder.buffer.wire import pack_record, unpack_record


def test_group_round_trips_with_identical_arrays_and_fields(make_group):
    group = make_group(7, "p7", versions=(3, 2, 5), tokens=11)
    back = unpack_record(m.Group, *pack_record(group))
    assert back.group_id == 7 and back.problem_id == "p7" and back.timings == group.timings
    np.testing.assert_array_equal(back.prompt_ids, group.prompt_ids)
    for a, b in zip(back.responses, group.responses, strict=True):
        np.testing.assert_array_equal(a.response_ids, b.response_ids)
        np.testing.assert_array_equal(a.logprobs, b.logprobs)
        assert (a.policy_version, a.temperature, a.text) == (
            b.policy_version,
            b.temperature,
            b.text,
        )
    assert back.min_policy_version == 2


def test_token_ids_and_logprobs_travel_as_four_byte_values_in_the_payload_frame(make_group):
    group = make_group(1, "p", versions=(0,), tokens=1000, prompt_tokens=4)
    meta, payload = pack_record(group)
    assert len(payload) == 4 * 4 + 1000 * 4 * 2  # prompt ids, response ids, logprobs
    assert len(meta) < 400  # only references and small fields are msgpack-encoded


def test_inline_arrays_are_raw_bytes_too(make_group):
    raw = make_group(1, "p", tokens=10).to_wire()["responses"][0]
    assert isinstance(raw["response_ids"], bytes) and len(raw["response_ids"]) == 40
    back = m.Group.from_wire(make_group(1, "p", tokens=10).to_wire())
    assert back.responses[0].response_ids.dtype == np.int32


def test_array_reference_outside_the_payload_is_rejected(make_group):
    meta, payload = pack_record(make_group(1, "p", tokens=100))
    with pytest.raises(MessageError, match="does not fit"):
        unpack_record(m.Group, meta, payload[:-100])


def test_scores_round_trip(make_group, make_scores):
    scores = make_scores(make_group(3, "p", versions=(0, 0)), reward=0.0)
    back = unpack_record(m.GroupScores, *pack_record(scores))
    assert [s.verdict for s in back.scores] == ["WA", "WA"] and back.group_id == 3


def test_missing_field_is_named():
    with pytest.raises(MessageError, match="Group: missing field 'problem_id'"):
        m.Group.from_wire({"group_id": 1})


def test_wrong_type_is_named():
    with pytest.raises(MessageError, match="Group.group_id"):
        m.Group.from_wire({"group_id": "one", "problem_id": "p"})


def test_bool_is_not_accepted_as_an_integer():
    with pytest.raises(MessageError, match="group_id"):
        m.Group.from_wire({"group_id": True, "problem_id": "p"})


def test_array_with_partial_element_is_rejected():
    bad = {"response_ids": b"\x00" * 5, "logprobs": b""}
    with pytest.raises(MessageError, match="not a multiple"):
        m.Response.from_wire(bad)


def test_nested_record_errors_name_the_inner_record():
    with pytest.raises(MessageError, match="Response"):
        m.Group.from_wire({"group_id": 1, "problem_id": "p", "responses": [{"text": "x"}]})
