"""Executor actor: a judge pool (sandbox/) wired to the buffer: unscored groups in, scores out."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from microcoder.actors.environments.executor_sandbox import (
    problem_from_wire,
    program_run_of,
    run_to_wire,
)
from microcoder.actors.judge_loop import judging_loop
from microcoder.actors.logs import redirect_to_run_dir, replica_identity
from microcoder.actors.memory import measure
from microcoder.actors.niceness import PriorityControl
from microcoder.actors.scoring import score_groups
from microcoder.actors.timing import PoolTimer
from microcoder.evaluation.judge_queue import SharedJudge
from microcoder.protocol import ActorMemory
from microcoder.sandbox.backends import make_judge
from microcoder.sandbox.languages import check_compilers
from microcoder.sandbox.rewards.plugin import resolve_reward, score_reply
from microcoder.sandbox.verdict import Verdict

if TYPE_CHECKING:
    from microcoder.actors.scoring import ScoringOutcome
    from microcoder.buffer.config import BufferConfig
    from microcoder.data.problem import Problem
    from microcoder.data.store import ProblemStore
    from microcoder.sandbox.config import ExecutorConfig


class RunProblemLookup(Mapping):
    """The problems an executor judges, by id: those registered with `add_problems` (`extra`)
    first, then the run's problem store (read by id on demand; its count is the store's
    recorded one, nothing is loaded to count)."""

    def __init__(self, store_path: str | None):
        self.extra: dict[str, Problem] = {}
        self.store: ProblemStore | None = None
        if store_path is not None:
            from microcoder.data.store import ProblemStore

            self.store = ProblemStore(store_path)

    def __getitem__(self, problem_id: str) -> Problem:
        if problem_id in self.extra:
            return self.extra[problem_id]
        if self.store is None:
            raise KeyError(problem_id)
        return self.store.get(problem_id)

    def __contains__(self, problem_id: object) -> bool:
        return problem_id in self.extra or (self.store is not None and problem_id in self.store)

    def __len__(self) -> int:
        return len(self.extra) + (len(self.store) if self.store is not None else 0)

    def __iter__(self) -> Iterator[str]:
        yield from self.extra
        if self.store is not None:
            for p in self.store.problems():
                if p.id not in self.extra:
                    yield p.id


class Executor(PriorityControl):
    """Ray actor body: leases unscored groups, judges them, hands in the scores."""

    def __init__(
        self,
        name: str,
        executor: ExecutorConfig,
        buffer: BufferConfig | None = None,
        buffer_address: str | None = None,
        store: str | None = None,
        reasoning: str = "none",
    ):
        """`buffer_address` None: no buffer client (then `buffer` is not read); `store` None: no
        run problems (an evaluation registers its own with `add_problems`), else the path of the
        run's problem store (data/store.py, RUN_DIR/problems.sqlite: every split of every
        source), opened read-only and read by id as groups arrive, so a start or restart costs
        milliseconds whatever the data's size.
        `reasoning`: the run's resolved `prompt.reasoning` (launch/run/cluster.py resolves `auto`
        from the model's chat template), which tells extraction where the final answer starts."""
        from microcoder.buffer.client import BufferClient

        self.reward_fn = resolve_reward(executor.reward)  # ValueError naming the fix, at start
        self.name = name
        self.reasoning = reasoning
        redirect_to_run_dir(name)
        self.problems = RunProblemLookup(store)
        if store is not None and executor.backend == "local":  # names the compiler to install
            check_compilers(self.problems.store.languages(), f"the problem store {store}")
        self.pool = make_judge(executor)  # local: workers = 0 is the CPUs Ray granted this actor
        self.client = (
            BufferClient.from_config(buffer, buffer_address, owner=name) if buffer_address else None
        )
        self._eval_judge = None  # microcoder.evaluation.judge_queue.SharedJudge, made on first use
        self._eval_init = threading.Lock()
        self.timer = PoolTimer()
        self.groups = self.responses = self.tests = self.failed = self.reward_errors = 0
        self.env_runs = 0
        self.eval_reward_errors = 0
        self.verdicts: dict[str, int] = {}
        self._stop = threading.Event()
        self._pool_lock = threading.Lock()  # guards the pool's own submit/as_completed (eval)
        self.stream = None  # the last run's JudgeStats (actors/judge_loop.py)

    def ready(self) -> dict[str, Any]:
        return {"name": self.name, "workers": self.pool.size, "problems": len(self.problems)}

    def stop(self) -> None:
        self._stop.set()

    def memory(self) -> ActorMemory:
        """This replica's memory: RSS of the actor and its sandbox workers (actors/memory.py)."""
        return measure(self.name, "executor")

    def stats(self) -> dict[str, Any]:
        return {
            **replica_identity(self.name),
            "groups": self.groups,
            "responses": self.responses,
            "tests": self.tests,
            "tests_per_s": self.timer.per_busy_s(self.tests),
            "failed_groups": self.failed,
            "reward_errors": self.reward_errors,
            "verdicts": dict(self.verdicts),
            "workers": self.pool.size,
            "env_runs": self.env_runs,
            "max_inflight_responses": self.stream.max_inflight_responses if self.stream else 0,
            **self.timer.summary(),
        }

    def run(self, max_groups: int | None = None) -> dict[str, Any]:
        """Judge as a stream (actors/judge_loop.py) until stopped (`max_groups`: after that
        many groups, for tests), one program per sandbox worker at a time."""

        self.stream = judging_loop(
            self.client,
            self._judge,
            self._count,
            self.timer,
            self._stop,
            slots=self.pool.size,
            max_groups=max_groups,
        )
        return self.stats()

    def _judge(self, groups: list) -> ScoringOutcome:
        """Judge `groups` on a channel of the pool (called from several threads at once)."""

        return score_groups(
            self.pool.channel(), self.problems, groups, self.name, self.reasoning, self.reward_fn
        )

    def _count(self, out: ScoringOutcome) -> None:  # the loop's thread only
        self.groups += len(out.scored)
        self.failed += len(out.failed)
        self.tests += out.tests_run
        self.reward_errors += out.reward_errors
        for gs in out.scored:
            self.responses += len(gs.scores)
            for s in gs.scores:
                self.verdicts[s.verdict] = self.verdicts.get(s.verdict, 0) + 1

    # ------------------------------------------------------------ evaluation (microcoder eval)

    def add_problems(self, problems: list) -> int:
        """Register evaluation problems by id (beside the run's own); returns how many it knows."""
        for p in problems:
            self.problems.extra[p.id] = p
        return len(self.problems)

    def judge_samples(self, jobs: list[tuple[str, str | None]]) -> list[dict[str, Any]]:
        """Judge (problem_id, code) pairs in the sandbox; one dict per job, in order: verdict,
        passed (bool: AC), tests_passed, total, first_failed, reward, message. Concurrent calls
        share the pool (microcoder.evaluation.judge_queue), so workers stay busy across calls."""

        problems = [self._registered(pid) for pid, _ in jobs]
        verdicts = self._shared_judge().judge(
            [(p, code) for p, (_, code) in zip(problems, jobs, strict=True)]
        )
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

    def _shared_judge(self) -> SharedJudge:
        """The queue on the pool that calls from several Ray threads share (made on first use)."""
        with self._eval_init:
            if self._eval_judge is None:
                self._eval_judge = SharedJudge(self.pool, self._pool_lock)
            return self._eval_judge

    def run_program(
        self, problem: dict[str, Any], code: str | None, timeout_s: float | None = None
    ) -> dict[str, Any]:
        """An environment's sandbox call (actors/environments/executor_sandbox.py
        `ExecutorSandbox`): judge `code` (None: no code, WA) on `problem` (`problem_to_wire`'s
        dict; its `tests` are the ones to run, e.g. a repair environment's visible tests) on
        this executor's pool, queued with `judge_samples`' jobs and beside the training groups.
        Returns the ProgramRun as a dict (`run_to_wire`); past `timeout_s` its verdict is SE."""

        p = problem_from_wire(problem)
        try:
            (verdict,) = self._shared_judge().judge([(p, code)], timeout_s)
        except TimeoutError as err:
            verdict = Verdict("SE", 0, len(p.tests), message=f"{self.name}: {err}")
        self.env_runs += 1
        return run_to_wire(program_run_of(verdict))

    def score_replies(self, jobs: list[tuple[str, str | None]]) -> list[dict[str, Any]]:
        """Score (problem_id, reply text) pairs of a kind the sandbox does not run (`answer`)
        with the run's reward function, as training scores them (sandbox/rewards/plugin.py
        `score_reply`): one dict per job, in order, shaped like `judge_samples`'s (verdict AC for
        a reward >= 1, else WA; `components`). Nothing is run. A reward function that raises
        gives that reply verdict SE, named in its message and counted in `eval_stats`
        (`reward_errors`), as a training group fails; the evaluation goes on."""

        out = []
        for pid, text in jobs:
            problem = self._registered(pid)
            try:
                reward, components, verdict = score_reply(self.reward_fn, problem, text or "")
            except Exception as err:
                name = getattr(self.reward_fn, "__qualname__", repr(self.reward_fn))
                message = f"reward function {name} raised {type(err).__name__}: {err}"[:200]
                print(f"{self.name}: eval reply to problem {pid}: {message}", file=sys.stderr)
                self.eval_reward_errors += 1
                reward = 0.0
                components = {}
                verdict = "SE"
            else:
                parts = "".join(f", {k} {v:g}" for k, v in components.items())
                message = f"reward {reward:g}{parts}"
            ok = verdict == "AC"
            out.append(
                {
                    "verdict": verdict,
                    "passed": ok,
                    "tests_passed": int(ok),
                    "total": 1,
                    "first_failed": None if ok else 0,
                    "reward": reward,
                    "components": components,
                    "message": message,
                }
            )
        return out

    def _registered(self, pid: str):
        """The problem `pid` registered here (KeyError naming the fix otherwise)."""
        if pid not in self.problems:
            raise KeyError(
                f"{self.name}: problem {pid!r} is not registered here; call "
                "add_problems(problems) before judge_samples / score_replies"
            )
        return self.problems[pid]

    def eval_stats(self) -> dict[str, Any]:
        """Programs judged through judge_samples so far, and replies whose reward function raised
        in score_replies."""
        return {
            "name": self.name,
            "judged": self._eval_judge.judged if self._eval_judge else 0,
            "reward_errors": self.eval_reward_errors,
        }

    def shutdown(self) -> None:
        self.stop()
        if self.client is not None:
            self.client.release_and_close()
        if self._eval_judge is not None:
            self._eval_judge.close()
        self.pool.close()
