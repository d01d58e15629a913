"""learner.keep_checkpoints: after a checkpoint is COMPLETE, only the newest N complete ones stay
(launch/run/checkpoint_retention.py, called by Run.checkpoint)."""

from __future__ import annotations

from microcoder.launch.config import load_config
from microcoder.launch.monitor.metrics_log import MetricsLogger
from microcoder.launch.run.checkpoint_retention import heldout_scores, prune_checkpoints


def make(ckpts, step: int, complete: bool = True):
    path = ckpts / f"step_{step}"
    (path / "optimizer").mkdir(parents=True)
    (path / "model.safetensors").write_bytes(b"x")
    if complete:
        (path / "COMPLETE").write_text(str(step))
    return path


def test_keep_two_leaves_the_two_newest_complete_checkpoints(tmp_path):
    for step in (2, 4, 10, 6, 8):  # numeric order, not name order (step_10 < step_2 as text)
        make(tmp_path, step)
    deleted = prune_checkpoints(tmp_path, 2)
    assert [p.name for p in deleted] == ["step_2", "step_4", "step_6"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step_10", "step_8"]


def test_an_incomplete_save_never_counts_and_goes_when_older(tmp_path):
    make(tmp_path, 1)
    make(tmp_path, 2, complete=False)  # a save that died
    make(tmp_path, 3)
    make(tmp_path, 4, complete=False)  # newer than every complete one: left alone
    prune_checkpoints(tmp_path, 1)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step_3", "step_4"]


def test_zero_keeps_every_checkpoint_and_is_the_default(tmp_path):
    for step in (1, 2, 3):
        make(tmp_path, step)
    assert prune_checkpoints(tmp_path, 0) == []
    assert len(list(tmp_path.iterdir())) == 3
    assert load_config(None, []).learner.keep_checkpoints == 0


def test_keep_best_also_keeps_the_best_evaluated_checkpoint_from_the_metrics(tmp_path):
    ckpts = tmp_path / "checkpoints"
    for step in (2, 4, 6, 8):
        make(ckpts, step)
    metrics = MetricsLogger(tmp_path)
    for step, rate in ((2, 0.3), (4, 0.5), (6, 0.2), (8, 0.1)):
        metrics.log("eval", step=step, heldout_pass_rate=rate)
    metrics.log("eval", step=10, heldout_pass_rate=0.9)  # no such checkpoint: does not count
    scores = heldout_scores(metrics.path)
    assert scores[4] == 0.5
    prune_checkpoints(ckpts, 1, scores)
    assert sorted(p.name for p in ckpts.iterdir()) == ["step_4", "step_8"]


def test_keep_best_keeps_a_checkpoint_whose_eval_is_pending_until_its_score_lands(tmp_path):
    ckpts = tmp_path / "checkpoints"
    for step in (0, 2, 3, 4):
        make(ckpts, step)
    scores = {0: 0.5}  # the eval of step 2 is still running beside training
    prune_checkpoints(ckpts, 1, scores, pending={2})
    assert sorted(p.name for p in ckpts.iterdir()) == ["step_0", "step_2", "step_4"]
    make(ckpts, 5)
    prune_checkpoints(ckpts, 1, {0: 0.5, 2: 0.1})  # landed, and not the best: it goes
    assert sorted(p.name for p in ckpts.iterdir()) == ["step_0", "step_5"]
    make(ckpts, 6)
    prune_checkpoints(ckpts, 1, None, pending={5})  # without keep_best, pending changes nothing
    assert sorted(p.name for p in ckpts.iterdir()) == ["step_6"]
