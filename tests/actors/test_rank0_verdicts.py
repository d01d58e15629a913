"""Every verdict visible, on rank 0's fetch (actors/learner_rank.py: `fetch_batch`, no Ray, a
scripted buffer): the step's verdict metrics over the groups trained on, and on a
`monitor.rollouts_every` step the rollouts rows (actors/rollouts.py) with the advantages and
mask decisions the step trains with; the rows' bound and the file the driver writes."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import torch
from buffer_testing import ScriptedBuffer

from microcoder.actors.learner_rank import LearnerRank
from microcoder.actors.rollouts import ROLLOUT_CHARS, rollout_rows, write_rollouts
from microcoder.learner.batch import build_batch, mask_generator
from microcoder.learner.config import AlgorithmConfig, LearnerConfig
from microcoder.protocol import Group, GroupScores, LearnerBatch, Response, Score, ScoredGroup

ROW_KEYS = {
    "step", "prompt_id", "group_id", "index", "response", "response_chars", "response_tokens",
    "verdict", "reward", "advantage", "mask", "truncated", "policy_version", "generator",
    "source",
}  # fmt: skip


def scored(group_id: int, outcomes: list[tuple[str, str, float, int, bool]]) -> ScoredGroup:
    """One group; per response (verdict, extraction, reward, tokens, truncated)."""
    responses = [
        Response(
            np.arange(1, n + 1, dtype=np.int32) % 7,
            np.full(n, -1.0, np.float32),
            text=f"g{group_id} r{i} " + "x" * 10,
            policy_version=2,
            truncated=cut,
        )
        for i, (_, _, _, n, cut) in enumerate(outcomes)
    ]
    group = Group(group_id, f"prob-{group_id}", "prompt", np.arange(1, 3, dtype=np.int32))
    group.responses, group.generator = responses, "generator-0"
    group.source = "B" if group_id == 3 else "A"
    scores = [Score(r, v, extraction=x) for v, x, r, _, _ in outcomes]
    return ScoredGroup(group, GroupScores(group_id, scores, "exec-0"))


AC = ("AC", "ok", 1.0, 5, False)
WA = ("WA", "ok", 0.0, 9, False)
NO_CODE = ("WA", "no_code", 0.0, 0, False)  # empty: never trained, still counted
CUT = ("unfinished", "unfinished", 0.0, 30, True)


def rank_at(version: int, every: int, rows: int = 64) -> LearnerRank:
    rank = LearnerRank(0, 1)
    rank.settings = SimpleNamespace(
        learner=LearnerConfig(batch_size=2, max_filtered_batches=4),
        rollouts_every=every,
        rollouts_max=rows,
    )
    algo = AlgorithmConfig(truncation_mask="all")  # every truncated response is masked
    rank.learner = SimpleNamespace(version=version, algo=algo, seed=5)
    rank.dynamic_filtering = True
    rank.client = ScriptedBuffer(
        [
            LearnerBatch([scored(1, [AC, AC])], version, [0], False),  # no signal: filtered
            LearnerBatch(
                [scored(2, [AC, WA, NO_CODE]), scored(3, [CUT, AC])], version, [0, 1], False
            ),
        ]
    )
    return rank


def test_the_fetch_counts_the_verdicts_of_the_groups_trained_on():
    out = rank_at(version=0, every=0).fetch_batch(timeout_s=10)
    m = out["metrics"]
    assert out["n_groups"] == 2 and "rollouts" not in out
    counts = m["verdict_counts"]
    assert (counts["AC"], counts["WA"], counts["no_code"], counts["unfinished"]) == (2, 1, 1, 1)
    assert sum(counts.values()) == 5 and counts["TLE"] == 0  # group 1 (filtered) not counted
    assert m["verdict_rates"]["AC"] == 2 / 5 and m["extraction_failed"] == 2
    assert m["response_len_max"] == 30 and m["response_len_p50"] == 5
    assert m["group_pass_hist"] == [0, 0, 2, 0, 0, 0]  # 1/3 and 1/2: both in (25%,50%]
    # per data source: every fetched group, the filtered one (1, source A) too
    assert m["data"] == {
        "A": {"share": 2 / 3, "groups": 2, "reward": 3 / 5, "pass_rate": 3 / 5},
        "B": {"share": 1 / 3, "groups": 1, "reward": 0.5, "pass_rate": 0.5},
    }
    json.dumps(m)  # goes into the step record as it is


def test_a_rollouts_step_asks_for_texts_and_returns_what_the_step_trains_with():
    rank = rank_at(version=3, every=2)  # the batch trains step 4
    out = rank.fetch_batch(timeout_s=10)
    assert rank.client.texts == [True, True]
    rows = out["rollouts"]
    assert [(r["group_id"], r["index"]) for r in rows] == [(2, 0), (2, 1), (2, 2), (3, 0), (3, 1)]
    assert all(set(r) == ROW_KEYS for r in rows) and {r["step"] for r in rows} == {4}
    assert [r["verdict"] for r in rows] == ["AC", "WA", "no_code", "unfinished", "AC"]
    assert [r["mask"] for r in rows] == ["kept", "kept", "not_trained", "masked", "kept"]
    assert rows[2]["advantage"] is None and rows[3]["advantage"] == 0.0
    built = build_batch(rank._batch, rank.learner.algo, mask_generator(5, 3))
    trained = [r["advantage"] for r in rows if r["mask"] != "not_trained"]
    assert trained == built.advantages.tolist() and rows[0]["advantage"] > 0 > rows[1]["advantage"]
    assert rows[0]["response"] == "g2 r0 xxxxxxxxxx" and rows[3]["truncated"] is True
    assert rows[0]["prompt_id"] == "prob-2" and rows[0]["generator"] == "generator-0"
    assert [r["source"] for r in rows] == ["A", "A", "A", "B", "B"]
    assert rows[0]["policy_version"] == 2 and rows[3]["response_tokens"] == 30


def test_other_steps_fetch_without_texts_and_rows_are_bounded():
    rank = rank_at(version=2, every=2)  # step 3: not due
    assert "rollouts" not in rank.fetch_batch(timeout_s=10) and rank.client.texts == [False] * 2
    rows = rank_at(version=1, every=2, rows=3).fetch_batch(timeout_s=10)["rollouts"]
    assert len(rows) == 3


def test_rows_clip_the_text_and_the_file_holds_one_json_line_each(tmp_path):
    group = scored(9, [AC, WA])
    program = "```python\nprint(input())\n```"
    group.group.responses[0].text = "think " + "y" * (ROLLOUT_CHARS + 500) + program
    trained = {(9, 0): (0.7, False), (9, 1): (-0.7, True)}
    rows = rollout_rows(12, [group], trained, max_rows=10)
    kept = rows[0]["response"]
    assert kept.startswith("think ") and kept.endswith(program)  # the head and the final program
    assert f"[... {ROLLOUT_CHARS + 506 + len(program) - ROLLOUT_CHARS} characters cut ...]" in kept
    assert len(kept) < ROLLOUT_CHARS + 50
    assert rows[0]["response_chars"] == ROLLOUT_CHARS + 506 + len(program)
    assert [r["mask"] for r in rows] == ["kept", "masked"]
    assert rollout_rows(12, [group], trained, max_rows=1) == rows[:1]
    path = write_rollouts(tmp_path, 12, rows)
    assert path == tmp_path / "rollouts" / "step-12.jsonl"
    back = [json.loads(line) for line in path.read_text().splitlines()]
    assert back == rows and not list(path.parent.glob("*.tmp"))
    assert torch.tensor([r["reward"] for r in back]).tolist() == [1.0, 0.0]


def test_the_reward_functions_components_reach_the_step_metrics_as_means():
    """Each name's mean over the trained responses that report it (executor.reward)."""
    rank = rank_at(version=0, every=0)
    groups = rank.client.batches[1].groups  # the batch trained on (the first is filtered)
    each = ([{"fmt": 1.0}, {"fmt": 0.0}, {}], [{"fmt": 1.0}, {"len": 4.0}])
    for sg, comps in zip(groups, each, strict=True):
        for s, c in zip(sg.result.scores, comps, strict=True):
            s.components = c
    m = rank.fetch_batch(timeout_s=10)["metrics"]
    assert m["reward_components"] == {"fmt": 2 / 3, "len": 4.0}
