"""Executor actor: a judge pool (sandbox/) wired to the buffer: unscored groups in, scores out."""

from __future__ import annotations

import os
import threading
from typing import Any

from microcoder.actors.timing import PoolTimer
from microcoder.launch.config import Config


class Executor:
    """Ray actor body: leases unscored groups, judges them, hands in the scores."""

    def __init__(
        self,
        name: str,
        cfg: Config,
        buffer_address: str | None,
        max_groups: int = 4,
        load_data: bool = True,
    ):
        """`buffer_address` None: no buffer client; `load_data` False: no run problems (an
        evaluation registers its own with `add_problems`)."""
        from microcoder.actors.logs import redirect_to_run_dir
        from microcoder.buffer.client import BufferClient
        from microcoder.launch.problems import load_run_problems
        from microcoder.sandbox import JudgePool

        self.name, self.cfg, self.max_groups = name, cfg, max_groups
        redirect_to_run_dir(name)
        problems = []
        if load_data:
            problems = load_run_problems(cfg.data, cfg.seed, "train")
            problems += load_run_problems(cfg.data, cfg.seed, "heldout")
        self.problems = {p.id: p for p in problems}
        self.pool = JudgePool(cfg.executor)
        self.client = (
            BufferClient.from_config(cfg.buffer, buffer_address, owner=name)
            if buffer_address
            else None
        )
        self._eval_judge = None  # microcoder.evaluation.judge_queue.SharedJudge, made on first use
        self._eval_init = threading.Lock()
        self.timer = PoolTimer()
        self.groups = self.responses = self.tests = self.failed = 0
        self.verdicts: dict[str, int] = {}
        self._stop = threading.Event()
        self._pool_lock = threading.Lock()  # the judge pool is used from one thread at a time

    def ready(self) -> dict[str, Any]:
        return {"name": self.name, "workers": self.pool.size, "problems": len(self.problems)}

    def stop(self) -> None:
        self._stop.set()

    def stats(self) -> dict[str, Any]:
        busy = self.timer.busy_s
        return {
            "name": self.name,
            "pid": os.getpid(),
            "groups": self.groups,
            "responses": self.responses,
            "tests": self.tests,
            "tests_per_s": self.tests / busy if busy else 0.0,
            "failed_groups": self.failed,
            "verdicts": dict(self.verdicts),
            **self.timer.summary(),
        }

    def run(self, max_waves: int | None = None) -> dict[str, Any]:
        """Judge until stopped or the run is over (`max_waves` bounds it for tests)."""
        from microcoder.actors.scoring import score_groups

        waves = 0
        while not self._stop.is_set() and (max_waves is None or waves < max_waves):
            with self.timer.idle():
                groups = self.client.get_unscored(self.max_groups, wait_s=0.5)
            if not groups:
                continue
            with self.timer.busy(), self._pool_lock:
                out = score_groups(self.pool, self.problems, groups, self.name)
            with self.timer.io():
                if out.scored:
                    self.client.put_scored(out.scored)
                for gid, reason in out.failed:
                    self.client.fail_group(gid, reason)
            self._count(out)
            waves += 1
        return self.stats()

    def _count(self, out) -> None:
        self.groups += len(out.scored)
        self.failed += len(out.failed)
        self.tests += out.tests_run
        for gs in out.scored:
            self.responses += len(gs.scores)
            for s in gs.scores:
                self.verdicts[s.verdict] = self.verdicts.get(s.verdict, 0) + 1

    # ------------------------------------------------------------ evaluation (microcoder eval)

    def add_problems(self, problems: list) -> int:
        """Register evaluation problems by id (beside the run's own); returns how many it knows."""
        for p in problems:
            self.problems[p.id] = p
        return len(self.problems)

    def judge_samples(self, jobs: list[tuple[str, str | None]]) -> list[dict[str, Any]]:
        """Judge (problem_id, code) pairs in the sandbox; one dict per job, in order: verdict,
        passed (bool: AC), tests_passed, total, first_failed, reward, message. Concurrent calls
        share the pool (microcoder.evaluation.judge_queue), so workers stay busy across calls."""
        from microcoder.evaluation.judge_queue import SharedJudge

        unknown = [pid for pid, _ in jobs if pid not in self.problems]
        if unknown:
            raise KeyError(
                f"{self.name}: problem {unknown[0]!r} is not registered here; call "
                "add_problems(problems) before judge_samples"
            )
        with self._eval_init:
            if self._eval_judge is None:
                self._eval_judge = SharedJudge(self.pool, self._pool_lock)
        verdicts = self._eval_judge.judge([(self.problems[pid], code) for pid, code in jobs])
        return [
            {
                "verdict": v.verdict,
                "passed": v.verdict == "AC",
                "tests_passed": v.passed,
                "total": v.total,
                "first_failed": v.first_failed,
                "reward": v.reward,
                "message": v.message[:200],
            }
            for v in verdicts
        ]

    def eval_stats(self) -> dict[str, Any]:
        """Programs judged through judge_samples so far."""
        return {"name": self.name, "judged": self._eval_judge.judged if self._eval_judge else 0}

    def shutdown(self) -> None:
        self.stop()
        if self.client is not None:
            try:
                self.client.release()
            except Exception:
                pass
            self.client.close()
        if self._eval_judge is not None:
            self._eval_judge.close()
        self.pool.close()
