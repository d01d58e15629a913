"""Multi-turn trajectories on rank 0's fetch (actors/learner_rank.py `fetch_batch`, no Ray, a
scripted buffer, groups built by hand per the trajectory layout and sent through the codec):
the step's trajectory metrics (turns, pass rate at each turn, feedback tokens) and the rollouts
rows with every turn; then those metrics in metrics.jsonl, on the Prometheus page and on the
dashboard. A single-turn batch has none of them."""

from __future__ import annotations

import json
import urllib.request
from types import SimpleNamespace

import numpy as np
import pytest
from buffer_testing import ScriptedBuffer

from microcoder.actors.convert import model_tokens, to_group_arrays
from microcoder.actors.learner_rank import LearnerRank
from microcoder.actors.rollouts import ROLLOUT_CHARS
from microcoder.buffer.codec import group_frames, read_group
from microcoder.launch.monitor.dashboard_server import DashboardServer
from microcoder.launch.monitor.dashboard_store import MetricsStore
from microcoder.launch.monitor.metrics_log import MetricsLogger, read_metrics
from microcoder.launch.monitor.prometheus import prometheus_text
from microcoder.launch.monitor.status_view import build_status
from microcoder.learner.algorithm.diversity import group_diversity
from microcoder.learner.config import AlgorithmConfig, LearnerConfig
from microcoder.learner.verdict_stats import trajectory_metrics
from microcoder.protocol import Group, GroupScores, LearnerBatch, Response, Score, ScoredGroup, Turn

FEEDBACK = "Your program failed a visible test.\nInput:\n1 2\nExpected:\n3\nGot:\n0"


def trajectory(turns: list[tuple[int, bool | None]], feedback_tokens: int = 4, long: bool = False):
    """A trajectory of len(turns) model turns, (model tokens, passed) each, with
    `feedback_tokens` feedback tokens between two turns (the layout of mt-common.md)."""
    ids, mask, out = [], [], []
    for k, (n, passed) in enumerate(turns):
        start = len(ids)
        ids += list(range(10, 10 + n))
        mask += [1] * n
        last = k == len(turns) - 1
        text = f"turn {k + 1} " + ("z" * (ROLLOUT_CHARS + 100) if long and k == 0 else "code")
        out.append(
            Turn(
                start,
                len(ids),
                text,
                "" if last else FEEDBACK,
                0 if last else feedback_tokens,
                2,
                False,
                passed,
                {"visible_passed": float(bool(passed))},
            )
        )
        if not last:
            ids += [5] * feedback_tokens
            mask += [0] * feedback_tokens
    logp = np.where(np.array(mask) == 1, -1.0, 0.0).astype(np.float32)
    return Response(
        np.array(ids, np.int32),
        logp,
        out[-1].text,
        policy_version=2,
        loss_mask=np.array(mask, np.uint8),
        turns=out,
    )


def through_the_wire(sg: ScoredGroup, text: bool) -> ScoredGroup:
    meta, txt, tensors = group_frames(sg.group)
    return ScoredGroup(read_group(meta, txt if text else None, tensors), sg.result)


def scored(group_id: int, responses: list[Response], rewards: list[float]) -> ScoredGroup:
    group = Group(group_id, f"prob-{group_id}", "prompt", np.arange(1, 4, dtype=np.int32))
    group.responses, group.generator = responses, "generator-0"
    scores = [Score(r, "AC" if r >= 1 else "WA") for r in rewards]
    return ScoredGroup(group, GroupScores(group_id, scores, "exec-0"))


def multi_turn_groups() -> list[ScoredGroup]:
    """Five trajectories: 2 turns (fail, pass), 1 turn (pass), 2 turns (fail, fail), 2 turns
    (fail, pass; a long first turn), 1 turn (pass)."""
    return [
        scored(
            1,
            [
                trajectory([(3, False), (2, True)]),
                trajectory([(4, True)]),
                trajectory([(3, False), (3, False)], feedback_tokens=6),
            ],
            [1.0, 1.0, 0.0],
        ),
        scored(
            2, [trajectory([(2, False), (5, True)], long=True), trajectory([(3, True)])], [1.0, 0.0]
        ),
    ]


def rank_with(groups: list[ScoredGroup], text: bool) -> LearnerRank:
    rank = LearnerRank(0, 1)
    rank.settings = SimpleNamespace(
        learner=LearnerConfig(batch_size=len(groups)),
        rollouts_every=1 if text else 0,
        rollouts_max=64,
    )
    rank.learner = SimpleNamespace(version=0, algo=AlgorithmConfig(), seed=5)
    rank.dynamic_filtering = False
    wire = [through_the_wire(sg, text) for sg in groups]
    rank.client = ScriptedBuffer([LearnerBatch(wire, 0, [0] * len(wire), False)])
    return rank


WANT = {"turn_pass": {"1": 2 / 5, "2": 2 / 3}}
"""Turn 1: 2 of 5 passed; turn 2, reached by 3: 2 passed. 8 turns, 4 + 6 + 4 feedback tokens."""


def test_the_fetch_reports_turns_pass_rate_per_turn_and_feedback_tokens():
    out = rank_with(multi_turn_groups(), text=False).fetch_batch(timeout_s=10)  # the learner's
    m = out["metrics"]  # view: meta + tensors, no text
    assert m["turn_pass"] == pytest.approx(WANT["turn_pass"])
    assert (m["turns_mean"], m["feedback_tokens_mean"]) == pytest.approx((8 / 5, 14 / 5))
    json.dumps(m)


def test_a_single_turn_batch_has_no_trajectory_metrics():
    single = [
        scored(
            1,
            [Response(np.arange(3, dtype=np.int32), np.full(3, -1.0, np.float32))] * 2,
            [1.0, 0.0],
        )
    ]
    m = rank_with(single, text=False).fetch_batch(timeout_s=10)["metrics"]
    assert not {"turns_mean", "feedback_tokens_mean", "turn_pass"} & set(m)
    assert trajectory_metrics([]) == {}


def test_unchecked_turns_have_no_pass_rate():
    m = trajectory_metrics([([None, True], 3), ([None], 0)])
    assert m == {"turns_mean": 1.5, "feedback_tokens_mean": 1.5, "turn_pass": {"2": 1.0}}


def test_the_rollouts_rows_show_every_turn_with_its_feedback():
    out = rank_with(multi_turn_groups(), text=True).fetch_batch(timeout_s=10)
    rows = out["rollouts"]
    assert [len(r["turns"]) for r in rows] == [2, 1, 2, 2, 1]
    first = rows[0]["turns"]
    assert [t["turn"] for t in first] == [1, 2]
    assert first[0]["response"] == "turn 1 code" and first[0]["feedback"] == FEEDBACK
    assert (first[0]["passed"], first[1]["passed"]) == (False, True)
    assert (first[0]["response_tokens"], first[0]["feedback_tokens"]) == (3, 4)
    assert first[1]["feedback"] == "" and rows[0]["response"] == "turn 2 code"
    assert rows[0]["response_tokens"] == 3 + 4 + 2
    assert first[0]["metrics"] == {"visible_passed": 0.0}
    long = rows[3]["turns"][0]  # the long first turn: head and tail, the cut said
    assert long["response"].startswith("turn 1 zz") and "characters cut" in long["response"]
    assert long["response_chars"] == len("turn 1 ") + ROLLOUT_CHARS + 100
    assert len(long["response"]) < ROLLOUT_CHARS + 50
    json.dumps(rows)


def test_single_turn_rows_have_no_turns():
    single = [
        scored(
            1,
            [Response(np.arange(3, dtype=np.int32), np.full(3, -1.0, np.float32), "x")] * 2,
            [1.0, 0.0],
        )
    ]
    rows = rank_with(single, text=True).fetch_batch(timeout_s=10)["rollouts"]
    assert all("turns" not in r for r in rows)


def step_record(step: int) -> dict:
    metrics = trajectory_metrics([([False, True], 4), ([True], 0), ([False, step % 2 == 0], 6)])
    return {"step": step, "reward_mean": 0.5, **metrics}


def test_the_metrics_reach_metrics_jsonl_and_prometheus(tmp_path):
    logger = MetricsLogger(tmp_path)
    for step in (1, 2):
        logger.log("step", **step_record(step))
    logger.close()
    back = [r for r in read_metrics(tmp_path / "metrics.jsonl") if r.get("kind") == "step"]
    assert back[-1]["turn_pass"] == {"1": 1 / 3, "2": 1.0} and back[-1]["turns_mean"] == 5 / 3
    page = prometheus_text(back[-1])
    assert 'microcoder_turn_pass{turn="1"} 0.3333333333333333' in page
    assert 'microcoder_turn_pass{turn="2"} 1' in page
    assert "microcoder_turns_mean 1.6666666666666667" in page
    assert "microcoder_feedback_tokens_mean 3.3333333333333335" in page
    single = prometheus_text({"step": 1, "reward_mean": 0.5})
    assert "turn_pass" not in single and "turns_mean" not in single


def test_the_dashboard_charts_the_pass_rate_per_turn(tmp_path):
    chromium = pytest.importorskip("launch_testing.chromium")
    try:
        chromium.find_chromium()
    except FileNotFoundError as err:
        pytest.skip(str(err))
    store = MetricsStore()
    for step in range(1, 5):
        store.add({"kind": "step", **step_record(step)})
    meta = {"run": "turns", "state": "finished", "source": "files", "max_steps": 4}
    server = DashboardServer(store, lambda: build_status(store.latest_step, meta=meta)).start()
    try:
        with urllib.request.urlopen(server.url + "api/metrics?since=0", timeout=10) as res:
            api = json.loads(res.read())
        dom = chromium.page_dom(server.url + "?poll=500", budget_ms=3000)
    finally:
        server.stop()
    assert api["steps"][-1]["turn_pass.2"] == 1.0
    series = chromium.series_points(dom)
    assert series[("turns", "turn_pass.1")] == 4 and series[("turns", "turn_pass.2")] == 4
    assert 'data-turns-mean="' in dom and "feedback tokens per trajectory" in dom


def test_diversity_reads_the_model_tokens_only():
    """Two trajectories whose model tokens are all different share their feedback tokens: the
    step's diversity is that of the model tokens alone."""
    a = trajectory([(4, False), (4, True)], feedback_tokens=12)
    b = trajectory([(4, False), (4, True)], feedback_tokens=12)
    b.response_ids = np.where(b.loss_mask == 1, b.response_ids + 100, b.response_ids)
    arrays = to_group_arrays(scored(1, [a, b], [1.0, 0.0]))
    kept = model_tokens(arrays)
    assert [len(x) for x in kept] == [8, 8]
    assert group_diversity(kept) == 1.0 > group_diversity(list(arrays.response_ids))
    m = rank_with([scored(1, [a, b], [1.0, 0.0])], text=False).fetch_batch(timeout_s=10)
    assert m["metrics"]["diversity"] == 1.0
