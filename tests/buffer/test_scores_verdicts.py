"""Each score's verdict and extraction outcome travel with it through the scores frame
(buffer/codec.py): short strings per response, msgpack, checked by the buffer."""

from __future__ import annotations

import pytest

from microcoder.buffer.codec import check_scores, read_scores, scores_frame
from microcoder.buffer.records import MessageError
from microcoder.buffer.wire import pack, unpack
from microcoder.protocol import GroupScores, Score

SCORES = GroupScores(
    group_id=4,
    executor="exec-0",
    scores=[
        Score(1.0, "AC", 3, 3, "", "ok"),
        Score(0.0, "WA", 0, 3, "no code found in the response", "no_code"),
        Score(
            0.0, "unfinished", 0, 3, "unfinished: the final code block is not closed", "unfinished"
        ),
        Score(0.0, "TLE", 1, 3, "time limit", "ok"),
    ],
)


def test_verdicts_and_extraction_round_trip_through_the_scores_frame():
    frame = scores_frame(SCORES)
    d = unpack(frame)
    assert d["verdict"] == ["AC", "WA", "unfinished", "TLE"]
    assert d["extraction"] == ["ok", "no_code", "unfinished", "ok"]
    assert check_scores(d).n_scores == 4  # the buffer's check accepts the column
    assert read_scores(frame) == SCORES


def test_a_frame_without_the_extraction_column_decodes_with_empty_outcomes():
    d = unpack(scores_frame(SCORES))
    del d["extraction"]  # an older executor's frame
    back = read_scores(pack(d))
    assert [s.extraction for s in back.scores] == [""] * 4
    assert [s.verdict for s in back.scores] == ["AC", "WA", "unfinished", "TLE"]


@pytest.mark.parametrize(
    "bad, match",
    [(["ok", "ok", "ok", 1], "GroupScores.extraction: entries must be str"), (["ok"], "1 entries")],
)
def test_a_bad_extraction_column_is_refused_by_name(bad, match):
    d = unpack(scores_frame(SCORES))
    d["extraction"] = bad
    with pytest.raises(MessageError, match=match):
        read_scores(pack(d))
