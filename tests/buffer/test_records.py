"""Records survive the wire exactly, arrays travel as compact typed bytes, bad input is named.

Groups and scores through their one codec (buffer/codec.py), messages through the generic one
(buffer/records.py)."""

from __future__ import annotations

import numpy as np
import pytest

from microcoder import protocol as m
from microcoder.buffer.codec import (
    check_group,
    group_frames,
    read_group,
    read_scores,
    scores_frame,
)
from microcoder.buffer.records import MessageError, from_wire
from microcoder.buffer.wire import pack, unpack


def test_group_round_trips_with_identical_arrays_and_fields(make_group):
    group = make_group(7, "p7", versions=(3, 2, 5), tokens=11)
    group.responses[1].response_ids = group.responses[1].response_ids[:4]  # uneven lengths
    group.responses[1].logprobs = group.responses[1].logprobs[:4]
    back = read_group(*group_frames(group))
    assert (back.group_id, back.problem_id, back.generator) == (7, "p7", group.generator)
    np.testing.assert_array_equal(back.prompt_ids, group.prompt_ids)
    for a, b in zip(back.responses, group.responses, strict=True):
        np.testing.assert_array_equal(a.response_ids, b.response_ids)
        np.testing.assert_array_equal(a.logprobs, b.logprobs)
        assert (a.policy_version, a.temperature, a.text, a.truncated, a.finish_reason) == (
            b.policy_version,
            b.temperature,
            b.text,
            b.truncated,
            b.finish_reason,
        )
    assert back.min_policy_version == 2


def test_token_ids_and_logprobs_travel_as_four_byte_values_in_the_tensor_frame(make_group):
    group = make_group(1, "p", versions=(0,), tokens=1000, prompt_tokens=4)
    meta, text, tensors = group_frames(group)
    assert len(tensors) == 4 * 4 + 1000 * 4 * 2  # prompt ids, response ids, logprobs
    assert text == b"solve itprint(1)"  # prompt, then each response, as UTF-8
    assert len(meta) < 300  # only small fields and per-response columns are msgpack-encoded


def test_executor_view_has_text_and_no_token_arrays(make_group):
    group = make_group(2, "p", versions=(0, 1), tokens=5)
    group.responses[1].text = "naïve ✓"
    meta, text, _ = group_frames(group)
    back = read_group(meta, text)
    assert [r.text for r in back.responses] == ["print(1)", "naïve ✓"]
    assert back.prompt == "solve it"
    assert back.prompt_ids is None and back.responses[0].response_ids is None


def test_learner_view_has_tokens_and_no_text(make_group):
    group = make_group(2, "p", versions=(0, 1), tokens=5)
    meta, _, tensors = group_frames(group)
    back = read_group(meta, None, tensors)
    np.testing.assert_array_equal(back.responses[1].logprobs, group.responses[1].logprobs)
    assert back.prompt is None and back.responses[0].text is None


def test_invalid_utf8_text_decodes_with_replacement_characters(make_group):
    meta, text, _ = group_frames(make_group(2, "p", versions=(0,), tokens=5))
    back = read_group(meta, text[:-1] + b"\xff")
    assert back.responses[0].text == "print(1\ufffd"


def test_tensor_frame_of_the_wrong_size_is_rejected(make_group):
    meta, text, tensors = group_frames(make_group(1, "p", tokens=100))
    with pytest.raises(MessageError, match="tensor frame of"):
        read_group(meta, text, tensors[:-8])


def test_text_frame_of_the_wrong_size_is_rejected(make_group):
    meta, text, tensors = group_frames(make_group(1, "p", tokens=100))
    with pytest.raises(MessageError, match="text frame of"):
        read_group(meta, text + b"x", tensors)


def test_response_with_more_ids_than_logprobs_is_refused_when_encoding(make_group):
    group = make_group(1, "p", tokens=10)
    group.responses[0].logprobs = group.responses[0].logprobs[:9]
    with pytest.raises(ValueError, match="one behaviour log-prob per generated token"):
        group_frames(group)


def test_scores_round_trip(make_group, make_scores):
    scores = make_scores(make_group(3, "p", versions=(0, 0)), reward=0.0)
    scores.scores[0].detail = "line 2: expected 5, got 4"
    back = read_scores(scores_frame(scores))
    assert back == scores


def head_of(make_group, **changes):
    d = unpack(group_frames(make_group(1, "p", versions=(0, 0)))[0])
    d.update(changes)
    return d


def test_missing_field_is_named(make_group):
    d = head_of(make_group)
    del d["problem_id"]
    with pytest.raises(MessageError, match="Group: missing field 'problem_id'"):
        check_group(d, None, None)


def test_wrong_type_is_named(make_group):
    with pytest.raises(MessageError, match="Group.group_id"):
        check_group(head_of(make_group, group_id="one"), None, None)


def test_bool_is_not_accepted_as_an_integer(make_group):
    with pytest.raises(MessageError, match="group_id"):
        check_group(head_of(make_group, group_id=True), None, None)


def test_response_columns_of_different_lengths_are_rejected(make_group):
    with pytest.raises(MessageError, match="Group.text_bytes: 1 entries"):
        check_group(head_of(make_group, text_bytes=[3]), None, None)


def test_wrong_element_type_in_a_column_is_named(make_group):
    with pytest.raises(MessageError, match="Group.policy_version"):
        check_group(head_of(make_group, policy_version=[0, "1"]), None, None)


def test_scores_with_a_non_string_verdict_are_rejected(make_group, make_scores):
    d = unpack(scores_frame(make_scores(make_group(3, "p", versions=(0, 0)))))
    d["verdict"] = ["AC", 1]
    with pytest.raises(MessageError, match="GroupScores.verdict"):
        read_scores(pack(d))


def test_tensor_frame_with_a_partial_element_is_rejected(make_group):
    meta, text, tensors = group_frames(make_group(1, "p", tokens=10))
    with pytest.raises(MessageError, match="tensor frame of"):
        read_group(meta, text, tensors[:-1])


def test_nested_record_errors_name_the_inner_record():
    with pytest.raises(MessageError, match="PromptAssignment"):
        from_wire(m.Prompts, {"assignments": [{"group_id": 1}]})
