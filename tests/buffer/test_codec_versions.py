"""The wire column `last_policy_version`: it round-trips, and messages without it still decode."""

from __future__ import annotations

from dataclasses import replace

import pytest

from microcoder.buffer.codec import check_group, group_frames, read_group
from microcoder.buffer.records import MessageError
from microcoder.buffer.wire import pack, unpack


def test_first_and_last_policy_versions_round_trip(make_group):
    group = make_group(1, "p", versions=(3, 4))
    group.responses = [replace(r, last_policy_version=5) for r in group.responses]
    back = read_group(*group_frames(group))
    assert [(r.policy_version, r.last_policy_version) for r in back.responses] == [(3, 5), (4, 5)]
    assert back.min_policy_version == 3


def test_unknown_last_version_round_trips_as_none(make_group):
    back = read_group(*group_frames(make_group(1, "p", versions=(2, 2))))
    assert [r.last_policy_version for r in back.responses] == [None, None]


def test_a_message_without_the_column_decodes_with_none(make_group):
    meta, text, tensors = group_frames(make_group(1, "p", versions=(2, 2)))
    old = unpack(meta)
    del old["last_policy_version"]
    back = read_group(pack(old), text, tensors)
    assert [(r.policy_version, r.last_policy_version) for r in back.responses] == [
        (2, None),
        (2, None),
    ]


def test_a_last_version_column_of_the_wrong_length_is_rejected(make_group):
    meta = unpack(group_frames(make_group(1, "p", versions=(2, 2)))[0])
    meta["last_policy_version"] = [3]
    with pytest.raises(MessageError, match="last_policy_version"):
        check_group(meta, None, None)


def test_a_non_integer_last_version_is_rejected(make_group):
    meta = unpack(group_frames(make_group(1, "p", versions=(2, 2)))[0])
    meta["last_policy_version"] = [3, "4"]
    with pytest.raises(MessageError, match="last_policy_version"):
        check_group(meta, None, None)
