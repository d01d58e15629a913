"""Multi-turn trajectories on the wire: loss masks, turns and env rewards round-trip, each
consumer's view carries what it reads, and single-turn groups are byte for byte unchanged."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from microcoder.buffer.codec import check_group, group_frames, read_group
from microcoder.buffer.records import MessageError
from microcoder.buffer.wire import pack, unpack
from microcoder.protocol import Group, Response, Turn


def trajectory_group() -> Group:
    """Two trajectories: one of two turns (4 model tokens, 3 feedback tokens, 2 model tokens)
    with a loss mask, one of a single turn (no mask, no turns) and an env reward."""
    ids = np.arange(100, 109, dtype=np.int32)
    lps = np.array([-0.5, -0.25, -1.0, -2.0, 0, 0, 0, -0.125, -0.75], np.float32)
    mask = np.array([1, 1, 1, 1, 0, 0, 0, 1, 1], np.uint8)
    turns = [
        Turn(0, 4, "first try é", "WA on input 1 → expected 2", 3, 5, False, False, {"x": 1.5}),
        Turn(7, 9, "second try", "", 0, 6, True, True, {}),
    ]
    two = Response(ids, lps, "second try", 1.0, 5, True, "length", 0.5, 6, mask, turns, None)
    one = Response(
        np.array([7, 8], np.int32),
        np.array([-0.1, -0.2], np.float32),
        "only",
        1.0,
        5,
        env_reward=0.75,
    )
    return Group(3, "p3", "the prompt", np.arange(4, dtype=np.int32), [two, one], "g1")


def test_a_trajectory_round_trips_with_its_mask_turns_and_env_reward():
    group = trajectory_group()
    back = read_group(*group_frames(group))
    two, one = back.responses
    want = group.responses[0]
    assert two.loss_mask.dtype == np.uint8
    np.testing.assert_array_equal(two.loss_mask, want.loss_mask)
    np.testing.assert_array_equal(two.response_ids, want.response_ids)
    np.testing.assert_array_equal(two.logprobs, want.logprobs)
    assert two.turns == want.turns
    assert two.env_reward is None and one.env_reward == 0.75
    assert one.loss_mask is None and one.turns == []
    assert (two.text, one.text, back.prompt) == ("second try", "only", "the prompt")


def test_the_learner_view_has_mask_and_turn_numbers_without_text():
    meta, _, tensors = group_frames(trajectory_group())
    two = read_group(meta, None, tensors).responses[0]
    np.testing.assert_array_equal(two.loss_mask, [1, 1, 1, 1, 0, 0, 0, 1, 1])
    assert [(t.start, t.end, t.feedback_tokens, t.passed) for t in two.turns] == [
        (0, 4, 3, False),
        (7, 9, 0, True),
    ]
    assert [(t.text, t.feedback) for t in two.turns] == [("", ""), ("", "")]


def test_the_executor_view_has_texts_and_env_reward_without_tokens():
    meta, text, _ = group_frames(trajectory_group())
    two, one = read_group(meta, text).responses
    assert two.loss_mask is None and two.response_ids is None
    assert [(t.text, t.feedback) for t in two.turns] == [
        ("first try é", "WA on input 1 → expected 2"),
        ("second try", ""),
    ]
    assert one.env_reward == 0.75


def test_single_turn_groups_are_byte_for_byte_what_they_were():
    group = trajectory_group()
    single = replace(
        group,
        responses=[replace(r, loss_mask=None, turns=[], env_reward=None) for r in group.responses],
    )
    meta, text, tensors = group_frames(single)
    d = unpack(meta)
    assert not {"masked", "turns", "env_reward"} & set(d)
    # the frames without the multi-turn columns: exactly the old layout
    assert len(tensors) == 4 * 4 + 8 * (9 + 2)
    assert bytes(text) == b"the prompt" + b"second try" + b"only"
    old_keys = [
        "group_id",
        "problem_id",
        "generator",
        "source",
        "prompt_len",
        "prompt_bytes",
        "lengths",
        "text_bytes",
        "temperature",
        "policy_version",
        "truncated",
        "finish_reason",
        "gen_time_s",
        "last_policy_version",
    ]
    assert list(d) == old_keys
    back = read_group(meta, text, tensors)
    assert [(r.loss_mask, r.turns, r.env_reward) for r in back.responses] == [
        (None, [], None),
        (None, [], None),
    ]


def test_a_mask_of_the_wrong_length_is_refused_at_the_producer():
    group = trajectory_group()
    group.responses[0].loss_mask = np.ones(3, np.uint8)
    with pytest.raises(ValueError, match="loss mask"):
        group_frames(group)


def test_a_tensor_frame_without_its_mask_bytes_is_rejected():
    meta, text, tensors = group_frames(trajectory_group())
    with pytest.raises(MessageError, match="loss-mask"):
        read_group(meta, text, tensors[:-9])


def test_a_turn_outside_its_response_is_rejected():
    meta, text, tensors = group_frames(trajectory_group())
    d = unpack(meta)
    d["turns"][0][1]["end"] = 10
    with pytest.raises(MessageError, match=r"turns\[0\]\[1\]"):
        check_group(d, None, None)


def test_a_turn_with_a_wrong_type_or_missing_field_is_rejected():
    d = unpack(group_frames(trajectory_group())[0])
    d["turns"][0][0]["passed"] = "yes"
    with pytest.raises(MessageError, match="passed"):
        check_group(d, None, None)
    d = unpack(group_frames(trajectory_group())[0])
    del d["turns"][0][0]["feedback_bytes"]
    with pytest.raises(MessageError, match="feedback_bytes"):
        check_group(d, None, None)


def test_a_text_frame_that_misses_the_turns_texts_is_rejected():
    meta, text, tensors = group_frames(trajectory_group())
    with pytest.raises(MessageError, match="turns' bytes"):
        read_group(meta, text[:-3], tensors)


def test_an_env_reward_that_is_not_a_number_is_rejected():
    d = unpack(group_frames(trajectory_group())[0])
    d["env_reward"] = [None, "1"]
    with pytest.raises(MessageError, match="env_reward"):
        check_group(pack(d) and d, None, None)
