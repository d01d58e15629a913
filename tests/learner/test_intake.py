"""The learner's intake (learner/intake.py): the codec's arrays packed into one PackedBatch, the
one dynamic filter, and the broadcast that gives every rank an equal record."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from learner_ranks import spawn_ranks

from microcoder.actors.convert import to_group_arrays
from microcoder.buffer.codec import group_frames, read_group, read_scores, scores_frame
from microcoder.learner.batch import build_batch, mask_generator
from microcoder.learner.config import AlgorithmConfig
from microcoder.learner.intake import IntakeStats, digest, pack, signal_filter
from microcoder.protocol import Group, GroupScores, Response, Score, ScoredGroup


def scored_group(
    group_id: int, rewards, lengths, seed: int = 0, last=None, masked: bool = False
) -> ScoredGroup:
    """A group as the learner receives it: through the codec (text left out), with scores.
    `masked`: the last response is a multi-turn trajectory, 3 feedback tokens from its 2nd."""
    rng = np.random.default_rng(seed)
    responses = [
        Response(
            response_ids=rng.integers(0, 1000, n).astype(np.int32),
            logprobs=-rng.random(n).astype(np.float32),
            temperature=0.5 + i / 10,
            policy_version=3 + i,
            truncated=i == 0,
            last_policy_version=None if last is None else last[i],
        )
        for i, n in enumerate(lengths)
    ]
    if masked:
        mask = np.ones(lengths[-1], np.uint8)
        mask[1:4] = 0
        responses[-1].loss_mask = mask
    prompt_ids = rng.integers(0, 1000, 5 + group_id).astype(np.int32)
    meta, _, tensors = group_frames(Group(group_id, "p", "", prompt_ids, responses))
    verdicts = ["WA", "AC", "CE", "TLE"]
    scores = GroupScores(
        group_id, [Score(r, verdicts[i % 4]) for i, r in enumerate(rewards)], "executor-0"
    )
    return ScoredGroup(read_group(meta, None, tensors), read_scores(scores_frame(scores)))


def test_pack_puts_every_codec_array_in_its_place():
    groups = [
        scored_group(7, [0.0, 1.0, 0.5], [4, 9, 2], seed=1, last=[3, 6, None]),
        scored_group(9, [1.0, 0.0], [6, 3], seed=2),
    ]
    b = pack([to_group_arrays(sg) for sg in groups])
    assert b.group_ids.tolist() == [7, 9] and b.group_index.tolist() == [0, 0, 0, 1, 1]
    lengths = (b.prompt_lens + b.response_lens).tolist()
    seqs = b.tokens.split(lengths)
    logprobs = b.behaviour_logprobs.split(b.response_lens.tolist())
    pairs = [(sg, r) for sg in groups for r in sg.group.responses]
    for k, (sg, r) in enumerate(pairs):
        expect = np.concatenate([sg.group.prompt_ids, r.response_ids])
        assert np.array_equal(seqs[k].numpy(), expect)
        assert np.array_equal(logprobs[k].numpy(), r.logprobs)
        assert b.prompt_lens[k] == len(sg.group.prompt_ids)
        assert b.temperatures[k] == np.float32(r.temperature)
        assert b.policy_versions[k] == r.policy_version
    assert b.rewards.tolist() == [0.0, 1.0, 0.5, 1.0, 0.0]
    assert b.truncated.tolist() == [True, False, False, True, False]
    assert b.non_incorrect.tolist() == [False, True, True, False, True]  # WA, AC, CE | WA, AC
    assert b.last_policy_versions.tolist() == [3, 6, 5, 3, 4]  # None: the first version
    assert b.tokens.dtype == torch.int32 and b.behaviour_logprobs.dtype == torch.float32


def test_pack_leaves_out_responses_with_no_tokens():
    b = pack([to_group_arrays(scored_group(1, [0.0, 1.0, 1.0], [3, 0, 2]))])
    assert b.response_lens.tolist() == [3, 2] and b.rewards.tolist() == [0.0, 1.0]


def test_the_dynamic_filter_drops_groups_with_equal_rewards():
    groups = [
        to_group_arrays(scored_group(1, [1.0, 1.0], [3, 3])),
        to_group_arrays(scored_group(2, [0.0, 1.0], [3, 3])),
    ]
    kept, dropped = signal_filter(groups, on=True)
    batch = build_batch(pack(kept), AlgorithmConfig(), mask_generator(0, 0))
    assert len(batch) == 2 and [g.group_id for g in dropped] == [1]


def test_the_dynamic_filter_switched_off_keeps_every_group():
    groups = [to_group_arrays(scored_group(1, [1.0, 1.0], [3, 3]))]
    assert signal_filter(groups, on=False) == (groups, [])


def test_building_the_batch_filters_nothing_again():
    """The filter runs once, before packing: build_batch keeps a zero-signal group it is given
    (advantage 0) even with dynamic filtering on."""
    packed = pack([to_group_arrays(scored_group(1, [1.0, 1.0], [3, 3]))])
    batch = build_batch(packed, AlgorithmConfig(dynamic_filtering=True), mask_generator(0, 0))
    assert len(batch) == 2 and torch.equal(batch.advantages, torch.zeros(2))


def test_intake_stats_leave_out_the_staleness_when_no_group_was_trained():
    stats = IntakeStats(3, 0.5, None, None, 0.2, 0.01)
    assert set(stats.metrics()) == {
        "filtered_groups",
        "reward_mean",
        "diversity",
        "pack_s",
        "nonfinite_dropped",
    }


BROADCAST_WORKER = """
import json, os, sys
import torch
from microcoder.learner.distributed import close_distributed, init_distributed
from microcoder.learner.intake import broadcast, digest, pack
sys.path.insert(0, sys.argv[2])
from test_intake import to_group_arrays, scored_group
rank, _ = init_distributed(torch.device("cpu"), 60)
mine = None
if rank == 0:
    mine = pack([to_group_arrays(scored_group(g, [0.0, 1.0], [5 + g, 300], seed=g, masked=g > 0)) for g in range(3)])
got = broadcast(mine, torch.device("cpu"))
fields = {k: [str(v.dtype), v.tolist()] for k, v in vars(got).items()}
with open(os.path.join(sys.argv[1], f"rank{rank}.json"), "w") as f:
    json.dump({"digest": digest(got), "fields": fields}, f)
close_distributed()
"""


@pytest.mark.timeout(120)
def test_broadcast_gives_every_rank_the_record_rank_0_packed(tmp_path):
    spawn_ranks(2, ["-c", BROADCAST_WORKER, str(tmp_path), str(Path(__file__).parent)], 110)
    r0, r1 = (json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1))
    assert r0 == r1
    expect = pack(
        [
            to_group_arrays(scored_group(g, [0.0, 1.0], [5 + g, 300], seed=g, masked=g > 0))
            for g in range(3)
        ]
    )
    assert r1["digest"] == digest(expect) and r1["digest"]["sequences"] == 6
    assert r1["fields"]["truncated"] == ["torch.bool", expect.truncated.tolist()]
    # the multi-turn loss mask: 3 feedback tokens in each of groups 1 and 2's long trajectory
    assert r1["fields"]["response_mask"] == ["torch.bool", expect.response_mask.tolist()]
    assert r1["fields"]["response_mask"][1].count(False) == 6


def test_pack_carries_the_loss_masks_into_the_response_mask():
    groups = [scored_group(1, [0.0, 1.0], [4, 6], masked=True), scored_group(2, [1.0, 0.0], [3, 2])]
    b = pack([to_group_arrays(sg) for sg in groups])
    assert (
        b.response_mask.tolist()
        == [True] * 4 + [True, False, False, False, True, True] + [True] * 5
    )
