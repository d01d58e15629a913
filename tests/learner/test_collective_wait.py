"""learner/sync/collective_wait.py `wait_work`: every wait of a weight-sync collective is bounded by
its deadline, on NCCL (whose `work.wait()` does not block with one) as on gloo. The work
objects are stand-ins with `is_completed`/`wait`, and the clock is the test's."""

from __future__ import annotations

import pytest

from microcoder.learner.sync.collective_wait import CollectiveTimeout, wait_work


class FakeWork:
    """A collective that completes after `polls` polls (never when None)."""

    def __init__(self, polls: int | None) -> None:
        self.polls, self.asked, self.waited = polls, 0, False

    def is_completed(self) -> bool:
        self.asked += 1
        return self.polls is not None and self.asked > self.polls

    def wait(self) -> bool:
        self.waited = True
        return True


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, s: float) -> None:
        self.now += s


def test_an_nccl_collective_that_never_completes_aborts_the_group_and_names_the_peer():
    work, clock, aborted = FakeWork(None), Clock(), []
    with pytest.raises(CollectiveTimeout) as info:
        wait_work(
            work,
            2.0,
            blocking=False,
            what="the bucket 3 of round 0 to rank 1 (gen-0)",
            abort=lambda: aborted.append(True),
            sleep=clock.sleep,
            clock=clock,
        )
    assert str(info.value) == (
        "the bucket 3 of round 0 to rank 1 (gen-0) did not complete within 2 s"
    )
    assert aborted == [True] and not work.waited  # never blocks in NCCL's own wait
    assert 2.0 <= clock.now < 2.1  # the deadline, not the polls, ends it
    assert work.asked < 100  # the polls back off


def test_an_nccl_collective_that_completes_is_waited_for_once_done_without_an_abort():
    work, clock, aborted = FakeWork(5), Clock(), []
    wait_work(
        work,
        2.0,
        blocking=False,
        what="x",
        abort=lambda: aborted.append(1),
        sleep=clock.sleep,
        clock=clock,
    )
    assert work.waited and not aborted and work.asked == 6 and clock.now < 0.1


def test_a_failing_abort_does_not_hide_the_timeout():
    def abort() -> None:
        raise RuntimeError("abort failed")

    clock = Clock()
    with pytest.raises(CollectiveTimeout):
        wait_work(
            FakeWork(None),
            1.0,
            blocking=False,
            what="x",
            abort=abort,
            sleep=clock.sleep,
            clock=clock,
        )


def test_gloo_uses_its_own_blocking_wait_which_honours_the_group_timeout():
    work = FakeWork(None)  # would never complete if polled
    wait_work(work, 1.0, blocking=True, what="x")
    assert work.waited and work.asked == 0


def test_the_channel_waits_on_a_device_group_by_polling_and_aborts_it_at_the_deadline():
    """learner/sync/transport.py `wait_peer`, which every broadcast of a sender and a receiver goes
    through: a channel on a GPU (NCCL) polls, and past its timeout aborts its group."""
    from types import SimpleNamespace

    import torch

    from microcoder.learner.sync.transport import wait_peer

    aborted: list = []
    peer = SimpleNamespace(
        device=torch.device("cuda"),
        timeout_s=1.0,
        pg=SimpleNamespace(abort=lambda: aborted.append(1)),
    )
    with pytest.raises(CollectiveTimeout, match="rank 1 \\(gen-0\\) did not complete within 1 s"):
        wait_peer(FakeWork(None), peer, "the header of round 0 to rank 1 (gen-0)")
    assert aborted == [1]
