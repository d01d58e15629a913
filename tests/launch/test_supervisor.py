"""The control requests of a live run, both sides (launch/run/supervisor.py): `send_request` writes a
request file, the supervisor's `ControlInbox` reads it and `apply_control` answers it. The run
and its pools are stand-ins (no Ray): these tests are about the file protocol and the reply."""

from __future__ import annotations

import threading
from types import SimpleNamespace

from microcoder.launch.run.supervisor import ControlInbox, apply_control, send_request


class FakePool:
    def __init__(self, n: int):
        self.n = n

    def __len__(self) -> int:
        return self.n

    def scale_to(self, n: int, before_loop=None) -> tuple[list[str], list[str]]:
        added = [f"r{i}" for i in range(self.n, n)]
        removed = [f"r{i}" for i in range(n, self.n)]
        self.n = n
        return added, removed


def fake_run(tmp_path):
    events = []
    return SimpleNamespace(
        run_dir=tmp_path,
        generators=FakePool(2),
        executors=FakePool(1),
        prepare_generator=None,
        log=lambda msg: None,
        metrics=SimpleNamespace(log=lambda kind, **f: events.append(f)),
        events=events,
    )


def answer_once(run, inbox: ControlInbox) -> threading.Thread:
    """Apply requests (as the supervisor's tick does) until one was answered."""

    def loop():
        for _ in range(200):
            if any(inbox.folder.glob("req-*.json")):
                apply_control(run, inbox)
                return
            threading.Event().wait(0.05)

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    return thread


def test_a_scale_request_is_applied_and_answered_with_before_and_after(tmp_path):
    run = fake_run(tmp_path)
    thread = answer_once(run, ControlInbox(tmp_path))
    result = send_request(tmp_path, {"action": "scale", "pool": "generators", "n": 4}, 10.0)
    thread.join()
    assert result == {"ok": True, "before": 2, "after": 4, "added": ["r2", "r3"], "removed": []}
    assert len(run.generators) == 4 and run.events == [{"event": "scaled generators 2 -> 4"}]


def test_a_request_it_cannot_do_is_answered_with_an_error_and_changes_nothing(tmp_path):
    run = fake_run(tmp_path)
    thread = answer_once(run, ControlInbox(tmp_path))
    result = send_request(tmp_path, {"action": "scale", "pool": "learners", "n": 2}, 10.0)
    thread.join()
    assert result["ok"] is False and "cannot do" in result["error"]
    assert (len(run.generators), len(run.executors)) == (2, 1)
    assert not list((tmp_path / "control").glob("req-*.json"))
