"""The driver's side of asynchronous checkpoints (launch/run/checkpoint_retention.py:
AsyncCheckpoints) with stand-ins for the learner group and the buffer (the real ones: the
launched runs of tests/launch/test_resume_auto.py): one save in flight, the wait it costs
recorded, a checkpoint visible only when complete, retention of complete ones only."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from microcoder.launch.run.checkpoint_retention import AsyncCheckpoints
from microcoder.launch.run_dirs import latest_checkpoint


class Writers:
    """Learner ranks whose writers each take `polls` save_done calls to finish."""

    def __init__(self, polls: int):
        self.polls, self.left, self.started = polls, 0, []

    def start_save(self, path: str) -> None:
        assert self.left == 0, "a second save started while one was in flight"
        Path(path).mkdir(parents=True, exist_ok=True)
        (Path(path) / "trainer_state.json").write_text("{}")
        self.started.append(Path(path).name)
        self.left = self.polls

    def save_done(self) -> bool:
        self.left = max(0, self.left - 1)
        return self.left == 0


def fake_run(tmp_path: Path, polls: int, keep: int = 1):
    events, lines = [], []
    learner = SimpleNamespace(step_timeout_s=60.0, keep_checkpoints=keep, keep_best=False)
    return SimpleNamespace(
        cfg=SimpleNamespace(learner=learner),
        learners=Writers(polls),
        client=SimpleNamespace(
            snapshot=lambda p: Path(p).parent.mkdir(parents=True, exist_ok=True)
        ),
        controller=None,
        metrics=SimpleNamespace(log=lambda kind, **f: events.append(f), path=tmp_path / "m.jsonl"),
        log=lines.append,
        events=events,
        lines=lines,
    )


def test_a_save_due_while_one_writes_waits_for_it_and_records_the_wait(tmp_path):
    run = fake_run(tmp_path, polls=4)
    saves = AsyncCheckpoints(run)
    ckpts = tmp_path / "checkpoints"
    saves.start(2, ckpts / "step_2")
    assert latest_checkpoint(tmp_path) is None  # written, not yet complete: invisible
    assert (ckpts / "step_2.partial").is_dir() and not (ckpts / "step_2").exists()
    saves.start(4, ckpts / "step_4")  # due while step 2 still writes
    assert run.learners.started == ["step_2.partial", "step_4.partial"]
    assert run.events[0]["checkpoint_wait_s"] == 0.0
    assert run.events[1]["checkpoint_wait_s"] > 0.3  # 2 polls of POLL_S, at least
    assert any(line.startswith("waited ") for line in run.lines)
    assert (ckpts / "step_2" / "COMPLETE").read_text() == "2"
    saves.wait()
    assert latest_checkpoint(tmp_path) == ckpts / "step_4"
    assert sorted(p.name for p in ckpts.iterdir()) == ["step_4"]  # keep_checkpoints = 1


def test_retention_keeps_complete_ones_and_deletes_a_killed_saves_partial(tmp_path):
    ckpts = tmp_path / "checkpoints"
    (ckpts / "step_3.partial").mkdir(parents=True)  # a launcher killed mid-save
    run = fake_run(tmp_path, polls=1, keep=2)
    saves = AsyncCheckpoints(run)
    saves.start(1, ckpts / "step_1")
    assert (ckpts / "step_3.partial").is_dir()  # never touched while a save is in flight
    saves.wait()
    assert sorted(p.name for p in ckpts.iterdir()) == ["step_1"]
    assert "deleted step_3.partial" in " ".join(run.lines)
